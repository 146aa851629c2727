"""The landing sensor: new, changed and removed files become partition changes and one run.

Each tick compares the landing folder with what the warehouse's stage last parsed (sha256, so
files the CLI already parsed are not parsed again), and with what the sensor already asked for:
a file asked for is not asked again while a sensor run is in flight, and is asked again if that
run ended without parsing it (failed, cancelled).
- new or changed file (by sha256), once settled (size and mtime unchanged since the previous
  tick and older than ``settle_seconds``): its partition is (re-)added last, and one run parses
  every such file of the tick, then republishes;
- removed file: its partition is deleted and a run of the cross-file assets republishes without it;
- a file still growing waits for a later tick.
The cursor (JSON, stored by the instance) survives restarts of the daemon.

A tick changes nothing, and says why in its skip reason, when the landing folder is missing or
cannot be listed, when the instance serves another landing folder or warehouse
(launch.serves_other_folders), or when the files gone from the folder are every published file
or more than half of them (launch.removal_refusal) and ``ETL_ALLOW_REMOVALS`` is not set for
the code location: apply such a removal once with ``etl-project run --allow-removals``.
"""

import hashlib
import json
import os
from pathlib import Path

import dagster as dg

from etl_project import ingest, landing, settings, stage
from etl_project.defs import launch
from etl_project.defs.jobs import ETL_JOB
from etl_project.defs.partitions import LANDING_FILES
from etl_project.defs.resources import EtlSettings

INTERVAL_ENV = "ETL_SENSOR_INTERVAL_SECONDS"
SENSOR_TRIGGER = "landing_sensor"


def _load_cursor(raw: str | None) -> tuple[int, dict[str, landing.FileState], dict[str, str | None]]:
    """``(tick number, what each file looked like, sha256 each file was requested at)``."""
    data = json.loads(raw) if raw else {}
    seen = {k: landing.FileState(*v) for k, v in data.get("seen", {}).items()}
    return data.get("tick", 0), seen, data.get("requested", {})


def _dump_cursor(tick: int, seen: dict[str, landing.FileState], requested: dict[str, str | None]) -> str:
    states = {k: [s.size, s.mtime_ns, s.sha256] for k, s in sorted(seen.items())}
    return json.dumps({"tick": tick, "seen": states, "requested": dict(sorted(requested.items()))})


@dg.sensor(
    job_name=ETL_JOB,
    minimum_interval_seconds=int(os.environ.get(INTERVAL_ENV, "30")),
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Watches the landing folder: new or changed files are parsed and published, "
    "removed files disappear from the next publish. Half-copied files wait until they settle.",
)
def landing_sensor(context: dg.SensorEvaluationContext, etl: EtlSettings):
    if not context.instance.is_ephemeral:
        with launch.home_lock(Path(context.instance.root_directory)):
            other = launch.serves_other_folders(context.instance, etl.seeds, etl.warehouse)
        if other:
            context.log.warning(f"skipped: {other}")
            return dg.SensorResult(skip_reason=f"skipped: {other}", cursor=context.cursor)
    launch.reap_dead_runs(context.instance)
    tick, seen, requested = _load_cursor(context.cursor)
    try:
        current = landing.scan(etl.seeds)
    except ingest.LandingFolderError as exc:
        return dg.SensorResult(skip_reason=f"skipped: {exc}", cursor=context.cursor)
    existing = context.instance.get_dynamic_partitions(LANDING_FILES.name)
    present = set(existing)
    published = stage.staged_file_hashes(etl.warehouse, launch.PER_FILE_ASSET, existing)
    staged = {k: v for k, v in published.items() if k in current}
    # Asked for but not parsed yet: wait for the run while one of ours is in flight; with none in
    # flight, that run failed or was cancelled, so the file is asked for again.
    pending = {k: v for k, v in requested.items() if k in present and staged.get(k) != v}
    known = {**staged, **pending} if _sensor_runs_in_flight(context.instance) else staged
    changes, looked = landing.detect_changes(
        etl.seeds, current, known, previous=seen, settle_seconds=etl.settle_seconds
    )
    plan = landing.make_plan(changes, existing, published=published)
    requested = {k: v for k, v in pending.items() if k in changes.present}
    refusal = launch.removal_refusal(plan, etl.warehouse)
    if refusal and not settings.allow_removals():
        # Nothing asked for, nothing deleted; the files looked at need not be hashed again.
        reason = (f"skipped: {refusal}. If those files really are gone, run `etl-project run --allow-removals` "
                  f"once, or set {settings.ALLOW_REMOVALS_ENV}=1 for the code location")
        context.log.warning(reason)
        return dg.SensorResult(skip_reason=reason, cursor=_dump_cursor(tick + 1, looked, requested))
    requested.update({k: looked[k].sha256 for k in plan.to_parse})
    cursor = _dump_cursor(tick + 1, looked, requested)
    if not (plan.to_parse or plan.to_delete):
        waiting = f"; waiting for {len(changes.growing)} file(s) to settle" if changes.growing else ""
        return dg.SensorResult(skip_reason=f"no new, changed or removed files{waiting}", cursor=cursor)

    job = context.repository_def.get_job(ETL_JOB)
    run = dg.RunRequest(
        run_key=_run_key(tick, plan),
        tags={**launch.range_tags(plan), launch.TRIGGER_TAG: SENSOR_TRIGGER},
        asset_selection=None if plan.to_parse else launch.cross_file_assets(job),
    )
    context.log.info(
        f"new {len(changes.new)}, changed {len(changes.changed)}, removed {len(plan.removed)}, "
        f"growing {len(changes.growing)}"
    )
    return dg.SensorResult(
        run_requests=[run], dynamic_partitions_requests=launch.partition_requests(plan), cursor=cursor
    )


def _sensor_runs_in_flight(instance: dg.DagsterInstance) -> bool:
    in_flight = [dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED]
    runs = instance.get_runs(dg.RunsFilter(statuses=in_flight, tags={launch.TRIGGER_TAG: SENSOR_TRIGGER}), limit=1)
    return bool(runs)


def _run_key(tick: int, plan: landing.Plan) -> str:
    """Stable for a retried evaluation of the same tick, different for every later tick."""
    digest = hashlib.sha256(json.dumps([tick, plan.to_parse, plan.to_delete]).encode()).hexdigest()[:16]
    return f"landing-{tick}-{digest}"
