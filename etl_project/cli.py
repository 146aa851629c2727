"""``etl-project run``: materialize the whole asset graph as a real run in the Dagster instance."""

import argparse
import os
import shutil
import sys
from pathlib import Path

from etl_project import settings

# Step-by-step events stay in the run's log in the UI; the terminal gets warnings and the summary.
QUIET_LOGS = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="etl-project", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser(
        "run",
        help="parse new and changed landing files, then rebuild and publish the warehouse",
        description="Parse the landing files that are new or changed since the warehouse last "
        "parsed them (all of them with --full), then rebuild and publish every cross-file table.",
    )
    run.add_argument("--seeds", type=Path, help=f"landing folder (default: ${settings.SEEDS_ENV} or ./seeds of the project)")
    run.add_argument("--warehouse", type=Path, help=f"output folder (default: ${settings.WAREHOUSE_ENV} or ./warehouse of the project)")
    run.add_argument("--full", action="store_true", help="re-parse every file, changed or not (e.g. after an upgrade)")
    commands.add_parser(
        "install-fts", help="install DuckDB's full-text-search extension from its package, so search_papers works offline"
    )
    args = parser.parse_args(argv)
    if args.command == "install-fts":
        from etl_project.warehouse_sql import install_fts

        print(install_fts())
        return 0
    return run_pipeline(args.seeds, args.warehouse, args.full)


def run_pipeline(seeds: Path | None, warehouse: Path | None, full: bool = False) -> int:
    # The flags set the same variables every entry point reads, before the definitions load.
    os.environ[settings.SEEDS_ENV] = str(settings.seeds_dir(seeds))
    os.environ[settings.WAREHOUSE_ENV] = str(settings.warehouse_dir(warehouse))
    home = Path(os.environ.setdefault("DAGSTER_HOME", str(settings.default_dagster_home())))
    # One "planned" event per asset for a run over many files instead of one per file and asset
    # (SQLite writes them one by one: minutes for thousands of files). The cost: when such a run
    # fails, its files show as missing rather than failed in the UI.
    os.environ.setdefault("DAGSTER_EMIT_PARTITION_SUBSET_IN_PLANNED_EVENTS", "1")
    home.mkdir(parents=True, exist_ok=True)
    if not (home / "dagster.yaml").exists():
        # The project's settings: the run queue and run monitoring.
        shutil.copyfile(settings.instance_settings(), home / "dagster.yaml")

    import dagster as dg

    from etl_project.defs import launch
    from etl_project.definitions import ETL_JOB, defs

    with launch.home_lock(home):  # the first use of a new home creates its database
        instance = dg.DagsterInstance.get()
    with instance:
        try:
            plan, result = launch.run_in_process(
                defs.resolve_job_def(ETL_JOB), instance,
                settings.seeds_dir(), settings.warehouse_dir(), full=full, run_config=QUIET_LOGS,
            )
        except FileNotFoundError as exc:
            print(f"run FAILED before it started: {exc}\nwarehouse:  NOT published; the previous release stays")
            return 1
    print(summarize(result, plan, instance_home=str(home)))
    return 0 if result.success else 1


def summarize(result, plan, instance_home: str) -> str:
    metadata = {}
    for event in result.get_asset_materialization_events():
        materialization = event.step_materialization_data.materialization
        metadata[materialization.asset_key.to_user_string()] = {k: v.value for k, v in materialization.metadata.items()}
    checks = result.get_asset_check_evaluations()
    failed = [c for c in checks if not c.passed]
    papers = metadata.get("papers", {})
    published = metadata.get("warehouse")
    changes = plan.changes
    lines = [
        f"run {result.run_id} {'succeeded' if result.success else 'FAILED'} (DAGSTER_HOME={instance_home})",
        f"this run:   parsed {len(plan.to_parse)} file(s) "
        f"({len(changes.new)} new, {len(changes.changed)} changed), {len(plan.removed)} removed, "
        f"{len(changes.unchanged)} unchanged",
    ]
    if published:
        lines += [
            f"files:      {published['rows/source_files']} ({published['files_ok']} ok, "
            f"{published['files_empty']} empty, {published['files_rejected']} rejected)",
            f"records:    {published['rows/raw_records']} ({published['rows/rejected_records']} rejected paragraphs)",
        ]
    lines += [
        f"papers:     {papers.get('papers', '?')} ({papers.get('duplicate_records', '?')} duplicate records, "
        f"{papers.get('near_records', '?')} of them near duplicates; "
        f"{papers.get('papers_in_several_files', '?')} papers in several files)",
        f"checks:     {len(checks) - len(failed)} passed, {len(failed)} failed",
    ]
    for check in failed:
        lines.append(f"  FAILED {check.asset_key.to_user_string()}:{check.check_name} ({check.severity.value})")
    for event in result.get_step_failure_events():
        error = event.step_failure_data.error
        while error and error.cause:  # the root cause says what went wrong, not Dagster's wrapper
            error = error.cause
        lines.append(f"error in step {event.step_key}: {error.message.strip() if error else 'unknown'}")
    if published and published["files_rejected"]:
        lines.append("refused files:\n" + str(published["refused"]))
    if published:
        lines.append(f"warehouse:  {published['duckdb']}  and  {published['parquet']}/<table>.parquet")
    else:
        lines.append("warehouse:  NOT published (a blocking check failed or a step errored); the previous release stays")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
