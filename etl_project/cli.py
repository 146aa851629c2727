"""etl-project: run the pipeline (a real run in the Dagster instance) and install its helpers."""

import argparse
import errno
import logging
import os
import shutil
import sys
import tempfile
from pathlib import Path

from etl_project import settings, warehouse_cli

# The run's event log (the UI) keeps every step's events and tracebacks; the terminal gets the
# summary (each failed step's cause in one line) and the warnings the steps logged, one line each.
QUIET_LOGS = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}
MAX_WARNINGS = 10
_SKIPPED_STEP = "Dependencies for step "  # Dagster's note on each step after a failed one


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="etl-project", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser(
        "run",
        help="parse new and changed landing files, then rebuild and publish the warehouse",
        description="Parse the landing files that are new or changed since the warehouse last "
        "parsed them (all of them with --full), then rebuild and publish every cross-file table. "
        "A run that would remove every published file, or more than half of them, is refused "
        "unless --allow-removals is given.",
    )
    run.add_argument("--seeds", type=Path, help=f"landing folder (default: ${settings.SEEDS_ENV} or ./seeds of the project)")
    run.add_argument("--warehouse", type=Path, help=f"output folder (default: ${settings.WAREHOUSE_ENV} or ./warehouse of the project)")
    run.add_argument("--full", action="store_true", help="re-parse every file, changed or not (e.g. after an upgrade)")
    run.add_argument(
        "--allow-removals", action="store_true",
        help="apply the removal of every published file or of more than half of them (refused otherwise: "
        "an empty or wrong landing folder must not empty the warehouse)",
    )
    warehouse_cli.add_commands(commands)
    args = parser.parse_args(argv)
    if args.command != "run":
        return args.handler(args)
    return run_pipeline(args.seeds, args.warehouse, args.full, args.allow_removals)


def run_pipeline(seeds: Path | None, warehouse: Path | None, full: bool = False, allow_removals: bool = False) -> int:
    # The flags set the same variables every entry point reads, before the definitions load.
    seeds, warehouse = settings.seeds_dir(seeds), settings.warehouse_dir(warehouse)
    os.environ[settings.SEEDS_ENV] = str(seeds)
    os.environ[settings.WAREHOUSE_ENV] = str(warehouse)
    # The instance belongs to the warehouse: DAGSTER_HOME when set, else the project's home for the
    # project's warehouse and <warehouse>/.dagster_home for any other (settings.dagster_home).
    home = settings.dagster_home(warehouse)
    os.environ["DAGSTER_HOME"] = str(home)

    from etl_project import ingest

    try:
        ingest.check_landing_folder(seeds)
    except ingest.LandingFolderError as exc:
        return not_started(str(exc), warehouse)
    problem = (
        writable_folder(warehouse, "warehouse", f"choose another with --warehouse or ${settings.WAREHOUSE_ENV}")
        or writable_folder(home, "Dagster instance folder (DAGSTER_HOME)", "set DAGSTER_HOME to a writable folder")
    )
    if problem:
        return not_started(problem, warehouse)
    if not (home / "dagster.yaml").exists():
        # Without the project's settings the instance lacks its run queue and run monitoring.
        shutil.copyfile(settings.instance_settings(), home / "dagster.yaml")

    from etl_project.quality import runner

    runner.GxWorker.shared()  # imports Great Expectations in its own process while Dagster starts

    import dagster as dg

    from etl_project.definitions import ETL_JOB, defs
    from etl_project.defs import launch

    with launch.home_lock(home):  # the first use of a new home creates its database
        instance = dg.DagsterInstance.get()
    with instance:
        try:
            plan, result = launch.run_in_process(
                defs.resolve_job_def(ETL_JOB), instance, seeds, warehouse,
                full=full, run_config=QUIET_LOGS, allow_removals=allow_removals or settings.allow_removals(),
                etl=defs.resources["etl"],
            )
        except launch.NothingChanged as exc:
            runner.GxWorker.discard_shared()
            print(exc)
            return 0
        except (launch.RunRefused, ingest.LandingFolderError) as exc:
            runner.GxWorker.discard_shared()
            return not_started(str(exc), warehouse)
        warnings = logged_warnings(instance, result.run_id)
    # The steps' own warnings (release notes, refused files) on stderr, one line each, as the
    # console logger printed them; the summary on stdout stays the same short account.
    for line in warnings[:MAX_WARNINGS]:
        print(f"warning: {line}", file=sys.stderr)
    if len(warnings) > MAX_WARNINGS:
        print(f"warning: ... {len(warnings) - MAX_WARNINGS} more in the run's log", file=sys.stderr)
    # Whether an earlier snapshot stays current matters only when this run published nothing; a run
    # that fails commits nothing, so asking after it gives the answer from before it.
    published = any(e.asset_key == dg.AssetKey("warehouse") for e in result.get_asset_materialization_events())
    previous = None if published else previous_snapshot(warehouse)
    print(summarize(result, plan, instance_home=str(home), previous=previous))
    return 0 if result.success else 1


def not_started(reason: str, warehouse: Path) -> int:
    print(f"run NOT started: {reason}")
    previous = previous_snapshot(warehouse)
    if previous is False:
        print("warehouse:  nothing was published (the warehouse has no earlier snapshot)")
    else:
        print(f"warehouse:  not changed; {_previous_note(previous)}")
    return 1


def writable_folder(folder: Path, what: str, advice: str) -> str | None:
    """None when ``folder`` exists (created if need be) and a file can be written in it; else one
    line naming the folder, the cause and what to do. A write probe, not a permission check: it
    also catches read-only mounts, a full disk and running as root where modes do not apply."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return f"cannot create the {what} {folder}: {exc.strerror or exc}; {advice}"
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".write-probe-") as probe:
            probe.write(b"\0" * 4096)
            probe.flush()
            os.fsync(probe.fileno())
        full = shutil.disk_usage(folder).free == 0
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            return f"the disk holding the {what} {folder} is full ({exc.strerror}); free some space or {advice}"
        return f"cannot write in the {what} {folder}: {exc.strerror or exc}; {advice}"
    if full:
        return f"the disk holding the {what} {folder} is full (0 bytes free); free some space or {advice}"
    return None


def previous_snapshot(warehouse: Path) -> bool | None:
    """Whether the warehouse holds an earlier publish: True, False, or None when the catalog is
    not a local file (ETL_CATALOG names a server) and so cannot be looked at cheaply."""
    import polars as pl

    from etl_project import lake, publish

    target = lake.Lake.of(warehouse)
    if target.catalog_file is None:
        return None
    if not target.exists():
        return False
    try:
        with lake.attach(target, read_only=True) as con:
            return not publish.history(con).filter(pl.col("run_id").is_not_null()).is_empty()
    except Exception:  # a catalog that does not open: whatever it holds stays as it is
        return None


def _previous_note(previous: bool | None) -> str:
    if previous is None:
        return "the previous snapshot, if any, stays current"
    return "the previous snapshot stays current" if previous else "the warehouse has no earlier snapshot"


def logged_warnings(instance, run_id: str) -> list[str]:
    """The WARNING and ERROR lines the run's steps logged themselves (not Dagster's events)."""
    try:
        entries = instance.all_logs(run_id)
    except Exception:  # noqa: BLE001 - the summary must not fail on the event log
        return []
    return [
        f"{entry.step_key or 'run'}: {entry.user_message}" for entry in entries
        if entry.dagster_event is None and entry.level >= logging.WARNING and entry.user_message
        and not entry.user_message.startswith(_SKIPPED_STEP)
    ]


def summarize(result, plan, instance_home: str, previous: bool | None = None) -> str:
    """The terminal's account of a run: what it parsed, what it published (from the ``warehouse``
    asset's metadata, any key of which may be missing), and one line per failed check or step."""
    import dagster as dg

    metadata = {}
    for event in result.get_asset_materialization_events():
        materialization = event.step_materialization_data.materialization
        metadata[materialization.asset_key.to_user_string()] = {k: v.value for k, v in materialization.metadata.items()}
    checks = result.get_asset_check_evaluations()
    failed = [c for c in checks if not c.passed]
    step_failures = list(result.get_step_failure_events())
    papers = metadata.get("papers")
    published = metadata.get("warehouse")
    # What the parse step did (it planned again when it started); the plan made before the run
    # when the step did not get that far.
    done = metadata.get("parsed_files")
    if done:
        files, parsed_count = done.get("files", 0), done.get("files_parsed", 0)
        new, changed, removed = done.get("files_new", 0), done.get("files_changed", 0), done.get("files_removed", 0)
        unchanged, full = files - new - changed, done.get("full_refresh", False)
    else:
        changes = plan.changes
        parsed_count, new, changed, removed = len(plan.to_parse), len(changes.new), len(changes.changed), len(plan.removed)
        unchanged, full = len(changes.unchanged), getattr(plan, "full", False)
    parsed = "parsed" if done or not parsed_count or result.success else "did not parse its"
    counts = f"{new} new, {changed} changed"
    if full:
        this_run = f"{parsed} {parsed_count} file(s) (full refresh: {counts}, {unchanged} unchanged), {removed} removed"
    else:
        this_run = f"{parsed} {parsed_count} file(s) ({counts}), {removed} removed, {unchanged} unchanged"
    lines = [
        f"run {result.run_id} {'succeeded' if result.success else 'FAILED'} (DAGSTER_HOME={instance_home})",
        f"this run:   {this_run}",
    ]
    if published:
        lines += [
            f"files:      {published.get('rows/source_files', '?')} ({published.get('files_ok', '?')} ok, "
            f"{published.get('files_empty', '?')} empty, {published.get('files_rejected', '?')} rejected)",
            f"records:    {published.get('rows/raw_records', '?')} ({published.get('rows/rejected_records', '?')} rejected paragraphs)",
        ]
    if papers:
        lines.append(
            f"papers:     {papers.get('papers', '?')} ({papers.get('duplicate_records', '?')} duplicate records, "
            f"{papers.get('near_records', '?')} of them near duplicates; "
            f"{papers.get('papers_in_several_files', '?')} papers in several files)"
        )
    blocking = [c for c in failed if c.severity == dg.AssetCheckSeverity.ERROR]
    if checks or result.success:
        warned = len(failed) - len(blocking)
        lines.append(f"checks:     {len(checks) - len(failed)} passed, {len(failed)} failed"
                     + (f" ({warned} WARN, not blocking)" if warned else ""))
    else:
        lines.append("checks:     none ran (the run stopped before them)")
    for check in failed:
        severity = "ERROR, blocks the publish" if check in blocking else "WARN, not blocking"
        lines.append(f"  FAILED {check.asset_key.to_user_string()}:{check.check_name} ({severity})")
    for event in step_failures:
        error = event.step_failure_data.error
        while error and error.cause:  # the root cause says what went wrong, not Dagster's wrapper
            error = error.cause
        message = next((line.strip() for line in (error.message if error else "").splitlines() if line.strip()), "unknown error")
        lines.append(f"error in step {event.step_key}: {message}")
    if step_failures:
        lines.append(f"  the traceback is in the run's log in the Dagster UI (run {result.run_id}; "
                     f"DAGSTER_HOME={instance_home} dg dev)")
    refused = published.get("refused") if published else None
    if refused is not None:
        lines.append("refused files:")
        lines += [f"  {row.data['source_file']}: {row.data['error']}" for row in refused.records]
    if published:
        lines.append("warehouse:  " + _published_line(published))
    else:
        why = "a blocking check failed" if blocking else "a step failed" if step_failures else "the run failed"
        lines.append(f"warehouse:  NOT published ({why}); {_previous_note(previous)}")
    return "\n".join(lines)


def _published_line(published: dict) -> str:
    line = f"snapshot {published.get('snapshot_id', '?')} of {published.get('catalog', '?')}"
    if published.get("open_sql"):  # open.sql's paths are relative to the warehouse's parent folder
        script = Path(published["open_sql"])
        line += f' (etl-project sql "FROM papers", or cd {script.parent.parent} && duckdb -init {script.parent.name}/{script.name})'
    return line


if __name__ == "__main__":
    sys.exit(main())
