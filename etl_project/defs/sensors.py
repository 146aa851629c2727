"""The landing sensor: new, changed and removed files lead to one run.

Each tick compares the landing folder with the last parse's manifest (sha256, so files the CLI
already parsed are not parsed again):
- new or changed files (by sha256), once settled (size and mtime unchanged since the previous
  tick and older than ``settle_seconds``), and removed files: one run, whose parse step parses
  every settled new and changed file and whose publish leaves the removed ones out;
- a file still growing waits for a later tick;
- while a run the sensor asked for is queued or running, the tick asks for nothing: that run
  parses what settled by its start, and the next tick sees what is left;
- nothing new, but the published snapshot lags behind the last parse (a run killed after its
  parse, a publish that failed, an upgrade of the code): one run to catch up, asked for once per
  parse and build, so that a run failing a check is not asked for again at every tick.
The cursor (JSON, stored by the instance) survives restarts of the daemon.

A tick asks for nothing, and says why in its skip reason, when the landing folder is missing or
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
from etl_project.defs.resources import EtlSettings

INTERVAL_ENV = "ETL_SENSOR_INTERVAL_SECONDS"
SENSOR_TRIGGER = "landing_sensor"


def _load_cursor(raw: str | None) -> tuple[int, dict[str, landing.FileState], str | None]:
    """``(tick number, what each file looked like, the catch-up run last asked for)``."""
    data = json.loads(raw) if raw else {}
    return data.get("tick", 0), {k: landing.FileState(*v) for k, v in data.get("seen", {}).items()}, data.get("caught_up")


def _dump_cursor(tick: int, seen: dict[str, landing.FileState], caught_up: str | None) -> str:
    states = {k: [s.size, s.mtime_ns, s.sha256] for k, s in sorted(seen.items())}
    return json.dumps({"tick": tick, "seen": states, "caught_up": caught_up})


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
    tick, seen, caught_up = _load_cursor(context.cursor)
    manifest = launch.last_manifest(context.instance, etl.warehouse, etl.parse_version())
    try:
        plan = launch.plan_run(context.instance, etl.seeds, etl.warehouse, settle_seconds=etl.settle_seconds,
                               manifest=manifest, previous=seen)
    except ingest.LandingFolderError as exc:
        return dg.SensorResult(skip_reason=f"skipped: {exc}", cursor=context.cursor)
    changes = plan.changes
    cursor = _dump_cursor(tick + 1, plan.looked, caught_up)
    if not (plan.to_parse or plan.removed):
        waiting = f"; waiting for {len(changes.growing)} file(s) to settle" if changes.growing else ""
        if changes.growing or _sensor_runs_in_flight(context.instance):
            return dg.SensorResult(skip_reason=f"no new, changed or removed files{waiting}", cursor=cursor)
        # Nothing new since the last parse, but the snapshot may lag behind it (a run killed after
        # its parse, a publish that failed, new code): one run to catch up, asked for once per
        # (parse, build), so a run that keeps failing is not asked for at every tick.
        behind = launch.unchanged_snapshot(plan, etl.warehouse, etl.build_fingerprint(), manifest) is None
        marker = f"{stage.manifest_digest(manifest)}:{etl.build_fingerprint()}"
        if not behind or marker == caught_up:
            return dg.SensorResult(skip_reason="no new, changed or removed files", cursor=cursor)
        context.log.info("the published snapshot lags behind the landing folder: one run to catch up")
        run = dg.RunRequest(run_key=_run_key(tick, plan), run_config=launch.parse_config(settle_seconds=etl.settle_seconds),
                            tags={launch.TRIGGER_TAG: SENSOR_TRIGGER})
        return dg.SensorResult(run_requests=[run], cursor=_dump_cursor(tick + 1, plan.looked, marker))
    refusal = launch.removal_refusal(plan, etl.warehouse)
    if refusal and not settings.allow_removals():
        reason = (f"skipped: {refusal}. If those files really are gone, run `etl-project run --allow-removals` "
                  f"once, or set {settings.ALLOW_REMOVALS_ENV}=1 for the code location")
        context.log.warning(reason)
        return dg.SensorResult(skip_reason=reason, cursor=cursor)
    if _sensor_runs_in_flight(context.instance):
        return dg.SensorResult(skip_reason="a run this sensor asked for is still queued or running", cursor=cursor)
    run = dg.RunRequest(
        run_key=_run_key(tick, plan),
        run_config=launch.parse_config(allow_removals=settings.allow_removals(), settle_seconds=etl.settle_seconds),
        tags={launch.TRIGGER_TAG: SENSOR_TRIGGER},
    )
    context.log.info(
        f"new {len(changes.new)}, changed {len(changes.changed)}, removed {len(plan.removed)}, "
        f"growing {len(changes.growing)}"
    )
    return dg.SensorResult(run_requests=[run], cursor=cursor)


def _sensor_runs_in_flight(instance: dg.DagsterInstance) -> bool:
    in_flight = [dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED]
    runs = instance.get_runs(dg.RunsFilter(statuses=in_flight, tags={launch.TRIGGER_TAG: SENSOR_TRIGGER}), limit=1)
    return bool(runs)


def _run_key(tick: int, plan: landing.Plan) -> str:
    """Stable for a retried evaluation of the same tick, different for every later tick."""
    digest = hashlib.sha256(json.dumps([tick, plan.to_parse, plan.removed]).encode()).hexdigest()[:16]
    return f"landing-{tick}-{digest}"
