"""The nightly full refresh: every file parsed again, then everything republished.

Off by default: turn it on in the UI (Automation → nightly_full_refresh) or with
``dagster schedule start nightly_full_refresh``; the daemon must run. The cron comes from
``ETL_REFRESH_CRON`` (default ``0 3 * * *``) in ``ETL_REFRESH_TIMEZONE`` (default UTC).
"""

import os
from pathlib import Path

import dagster as dg

from etl_project import ingest, settings
from etl_project.defs import launch
from etl_project.defs.jobs import ETL_JOB
from etl_project.defs.resources import EtlSettings


@dg.schedule(
    job_name=ETL_JOB,
    cron_schedule=os.environ.get("ETL_REFRESH_CRON", "0 3 * * *"),
    execution_timezone=os.environ.get("ETL_REFRESH_TIMEZONE", "UTC"),
    default_status=dg.DefaultScheduleStatus.STOPPED,
    description="Full refresh: re-parse every landing file (new parsing rules apply to all), republish.",
)
def nightly_full_refresh(context: dg.ScheduleEvaluationContext, etl: EtlSettings):
    # The same refusals as the sensor's (other folders, a folder that vanished, too many removals),
    # said as the skip reason rather than as a failed run.
    with launch.home_lock(Path(context.instance.root_directory)):
        other = launch.serves_other_folders(context.instance, etl.seeds, etl.warehouse)
    if other:
        return dg.SkipReason(f"skipped: {other}")
    try:
        manifest = launch.last_manifest(context.instance, etl.warehouse, etl.parse_version())
        plan = launch.plan_run(context.instance, etl.seeds, etl.warehouse, full=True, manifest=manifest)
    except ingest.LandingFolderError as exc:
        return dg.SkipReason(f"skipped: {exc}")
    refusal = launch.removal_refusal(plan, etl.warehouse)
    if refusal and not settings.allow_removals():
        return dg.SkipReason(f"skipped: {refusal}. If those files really are gone, run `etl-project run "
                             f"--allow-removals` once, or set {settings.ALLOW_REMOVALS_ENV}=1 for the code location")
    return dg.RunRequest(
        run_config=launch.parse_config(full=True, allow_removals=settings.allow_removals()),
        tags={launch.TRIGGER_TAG: "nightly_full_refresh"},
    )
