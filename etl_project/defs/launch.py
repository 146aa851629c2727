"""Planning a run over the landing folder, and running it in this process.

Shared by ``etl-project run``, the landing sensor, the daily full refresh and the parse step
itself, so that they all decide the same way what a run parses: the landing folder compared with
the manifest of the last parse (the files the stage holds, by sha256). The run's parse step plans
again when it starts (the folder may have changed since), and parses every new and changed file
in one step, however many.
"""

import json
import os
import socket
from collections.abc import Mapping
from pathlib import Path

import dagster as dg
import polars as pl

from etl_project import ingest, landing, locks, settings, stage
from etl_project.defs.resources import EtlSettings, staged_file
from etl_project.lake import Lake

PARSE_ASSET = "parsed_files"
PID_TAG = "etl_project/pid"
HOST_TAG = "etl_project/host"
TRIGGER_TAG = "etl_project/trigger"  # the run queue (dagster.yaml) allows one run per trigger at a time
# In DAGSTER_HOME: the landing folder and warehouse this instance serves (its manifests,
# cursors and run history are theirs). Written by the first run or tick, under the home lock.
SERVES_FILE = "etl_project.json"


class RunRefused(Exception):
    """A run that must not start; the message is one line saying why and what to do."""


class NothingChanged(Exception):
    """No run is needed: the current snapshot already holds what a run would publish."""

    def __init__(self, snapshot_id: int, files: int):
        super().__init__(f"nothing changed; snapshot {snapshot_id} stays current ({files} file(s), each as published, "
                         "by the same code and settings; --full rebuilds anyway)")
        self.snapshot_id = snapshot_id


def last_manifest(instance: dg.DagsterInstance, warehouse: Path, parsed_by: str | None = None) -> pl.DataFrame:
    """The files the stage holds: the rows of the latest parse's manifest that ``parsed_by``
    (stage.parse_version; default: the default limits) parsed into batches still staged. The
    other files are parsed again."""
    parsed_by = parsed_by or stage.parse_version()
    try:
        path = staged_file(instance, warehouse, dg.AssetKey(PARSE_ASSET), None)
    except FileNotFoundError:
        return stage.known_files(warehouse, None, parsed_by)
    return stage.known_files(warehouse, pl.read_parquet(path), parsed_by)


def plan_run(instance: dg.DagsterInstance, seeds: Path, warehouse: Path, full: bool = False,
             settle_seconds: float = 0.0, manifest: pl.DataFrame | None = None,
             previous: Mapping[str, landing.FileState] | None = None) -> landing.Plan:
    """Compare the landing folder with ``manifest`` (default: last_manifest) by sha256; files whose
    mtime is younger than ``settle_seconds`` wait, and so do files that moved since the
    ``previous`` look (the sensor's). Raises ingest.LandingFolderError when the folder is missing
    or cannot be listed."""
    current = landing.scan(seeds)
    manifest = last_manifest(instance, warehouse) if manifest is None else manifest
    published = dict(zip(manifest["key"], manifest["sha256"]))
    changes, looked = landing.detect_changes(seeds, current, published, previous=previous, settle_seconds=settle_seconds,
                                             parsed=stage.parsed_states(manifest))
    return landing.make_plan(changes, full, published=published, looked=looked)


def parse_config(full: bool = False, allow_removals: bool = False, settle_seconds: float = 0.0) -> dict:
    """The run config that tells the parse step how to plan (see defs/assets.ParseConfig)."""
    return {"ops": {PARSE_ASSET: {"config": {"full": full, "allow_removals": allow_removals, "settle_seconds": settle_seconds}}}}


def unchanged_snapshot(plan: landing.Plan, warehouse: Path, build: str, manifest: pl.DataFrame) -> int | None:
    """The current snapshot's id when running would publish the same tables again, else None:
    the plan (made against ``manifest``, the last parse's) parses and removes nothing, and the
    snapshot was published from that manifest's files by the same code and settings (``build``,
    build_info.fingerprint). Decided against the snapshot, not the stage alone, so the files of a
    run that failed to publish are published by the next one."""
    from etl_project import lake, publish

    if plan.full or plan.to_parse or plan.removed or plan.changes.growing:
        return None
    target = lake.Lake.of(warehouse)
    if not target.exists():
        return None
    try:
        with lake.attach(target, read_only=True) as con:
            state = publish.current_state(con)
    except Exception:  # noqa: BLE001 - a lake that cannot be read is rebuilt by a run, not trusted
        return None
    if (state.build, state.landing) != (build, stage.manifest_digest(manifest)):
        return None
    return state.snapshot_id


def removal_refusal(plan: landing.Plan, warehouse: Path) -> str | None:
    """landing.removal_refusal against the files the lake's current snapshot holds (what readers
    see), read only when the plan removes any file. Before the first publish nothing is held,
    so nothing is refused; a lake that cannot be read falls back to the files the stage parsed."""
    if not plan.removed:
        return None
    return landing.removal_refusal(plan, published_keys(plan, warehouse))


def published_keys(plan: landing.Plan, warehouse: Path) -> frozenset[str]:
    """The file keys (among the plan's) of the files in ``source_files`` of the current snapshot."""
    from etl_project import lake

    target = lake.Lake.of(warehouse)
    if not target.exists():
        return frozenset()
    try:
        with lake.attach(target, read_only=True) as con:
            names = {name for (name,) in con.execute("SELECT source_file FROM source_files").fetchall()}
    except Exception:  # no table yet (a first publish that failed), or an unreadable catalog
        return plan.published
    candidates = set(plan.published) | set(plan.removed) | plan.changes.present
    return frozenset(k for k in candidates if ingest.source_file_name(landing.file_name(k)) in names)


def files_validated(target: Lake, build: str) -> pl.DataFrame:
    """(source_file, sha256) of the files the lake's current snapshot holds, when this ``build``
    published it: their rows passed this code's landing suites then. Empty when the snapshot was
    published by another build (the suites may have changed), by a rollback, or cannot be read."""
    from etl_project import lake, publish

    none = pl.DataFrame(schema={"source_file": pl.String, "sha256": pl.String})
    if not target.exists():
        return none
    try:
        with lake.attach(target, read_only=True) as con:
            if publish.current_state(con).build != build:
                return none
            return con.execute("SELECT source_file, sha256 FROM source_files WHERE sha256 IS NOT NULL").pl()
    except Exception:  # noqa: BLE001 - no table yet, or a lake that cannot be read: validate everything
        return none


def serves_other_folders(instance: dg.DagsterInstance, seeds: Path, warehouse: Path) -> str | None:
    """Why this instance must not run over ``seeds`` and ``warehouse`` (one line), or None.

    An instance's manifests, sensor cursor and run history describe one landing folder
    and one warehouse: a run over other folders would drop the first pair's files (and
    the sensor would re-add and re-parse them). The first run or tick records its pair in
    ``DAGSTER_HOME/etl_project.json``; any other pair is refused. Call under ``home_lock``.
    Ephemeral instances (tests) have no home and serve whatever they are given.
    """
    if instance.is_ephemeral:
        return None
    home = Path(instance.root_directory).resolve()
    record = home / SERVES_FILE
    wanted = {"landing_folder": str(seeds), "warehouse": str(warehouse)}
    try:
        served = json.loads(record.read_text(encoding="utf-8"))
    except FileNotFoundError:
        partial = record.with_name(record.name + ".partial")
        partial.write_text(json.dumps(wanted, indent=2) + "\n", encoding="utf-8")
        partial.replace(record)
        return None
    except (OSError, ValueError) as exc:
        return f"cannot read {record} ({exc}); delete it and run again"
    if served == wanted:
        return None
    own = settings.dagster_home(warehouse, environ={})
    other = (f"use the warehouse's own instance (DAGSTER_HOME={own}, the default for this warehouse when "
             f"DAGSTER_HOME is not set) or another DAGSTER_HOME") if own != home else "use another DAGSTER_HOME"
    return (f"the Dagster instance {home} serves landing folder {served.get('landing_folder')} and warehouse "
            f"{served.get('warehouse')}, not {seeds} and {warehouse}: {other}; if those folders moved, "
            f"delete {record}")


def process_tags() -> dict[str, str]:
    """Marks an in-process run with the process that executes it, so a later run can tell it
    was killed (see reap_dead_runs)."""
    return {PID_TAG: _process_id(os.getpid()) or str(os.getpid()), HOST_TAG: socket.gethostname()}


def full_refresh(context: dg.AssetExecutionContext) -> bool:
    """Whether the run was asked to parse and work out everything again (parsed_files config full)."""
    parse = context.run.run_config.get("ops", {}).get(PARSE_ASSET, {}).get("config", {})
    return bool(parse.get("full"))


def tag_run_with_process(context: dg.AssetExecutionContext) -> None:
    """Runs the daemon launches get the process tags from their first step (in-process executor:
    every step of the run is in this process)."""
    if PID_TAG not in context.run.tags:
        context.instance.add_run_tags(context.run_id, process_tags())


def reap_dead_runs(instance: dg.DagsterInstance) -> list[str]:
    """Mark as failed the in-process runs of this host whose process is gone (killed, crashed):
    otherwise they would show as running forever. (The run lock they held went with their
    process: see etl_project/run_lock.py.)"""
    reaped = []
    in_progress = instance.get_runs(dg.RunsFilter(statuses=[dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.STARTING]))
    for run in in_progress:
        tag, host = run.tags.get(PID_TAG), run.tags.get(HOST_TAG)
        if tag is None or host != socket.gethostname() or _process_id(int(tag.split(":")[0])) == tag:
            continue
        instance.report_run_failed(run, f"the process that ran it ({tag}) is gone: killed or crashed")
        reaped.append(run.run_id)
    return reaped


def run_in_process(
    job: dg.JobDefinition,
    instance: dg.DagsterInstance,
    seeds: Path,
    warehouse: Path,
    full: bool = False,
    run_config: dict | None = None,
    allow_removals: bool = False,
    etl: EtlSettings | None = None,
) -> tuple[landing.Plan, dg.ExecuteInProcessResult]:
    """Run ``job`` in this process: the parse step parses the new and changed files (all files
    when ``full``), then every cross-file asset is rebuilt and published. Returns the plan made
    before the run (what the summary reports) and the run's result.

    Raises RunRefused, before anything changed, when the instance serves other folders or the
    plan removes too many published files (landing.removal_refusal) and ``allow_removals`` is
    not set; NothingChanged, without starting a run, when the current snapshot was built from
    exactly this landing folder by the same code and settings (those of ``etl``, the job's
    resource; None: always run); ingest.LandingFolderError when the landing folder is missing or
    unreadable."""
    with home_lock(Path(instance.root_directory)):
        other = serves_other_folders(instance, seeds, warehouse)
        if other:
            raise RunRefused(other)
        reap_dead_runs(instance)
    manifest = last_manifest(instance, warehouse, etl.parse_version() if etl else None)
    plan = plan_run(instance, seeds, warehouse, full, manifest=manifest)
    refusal = removal_refusal(plan, warehouse)
    if refusal and not allow_removals:
        raise RunRefused(f"{refusal}; nothing was changed. If those files really are gone, run again "
                         "with --allow-removals")
    if etl is not None and (snapshot := unchanged_snapshot(plan, warehouse, etl.build_fingerprint(), manifest)) is not None:
        raise NothingChanged(snapshot, len(plan.looked))
    result = job.execute_in_process(
        instance=instance,
        tags=process_tags(),
        run_config={**(run_config or {}), **parse_config(full, allow_removals)},
        raise_on_error=False,
    )
    return plan, result


def home_lock(dagster_home: Path):
    """One process at a time creates the instance's database and records the folders it serves:
    two ``etl-project run`` started together must not migrate the same new database."""
    return locks.file_lock(dagster_home / ".etl_project.lock")


def _process_id(pid: int) -> str | None:
    """``pid:start-time`` of a live process (the start time tells a reused pid apart; Linux), or
    None when no such process exists."""
    if not Path("/proc/self/stat").exists():  # no procfs: the pid alone
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass
        return str(pid)
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return None
    return f"{pid}:{stat.rsplit(')', 1)[1].split()[19]}"
