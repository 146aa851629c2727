"""``etl-project run``: materialize the whole asset graph as a real run in the Dagster instance."""

import argparse
import os
import sys
from pathlib import Path

from etl_project import settings

# Step-by-step events stay in the run's log in the UI; the terminal gets warnings and the summary.
QUIET_LOGS = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="etl-project", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="run the whole pipeline once and publish the warehouse")
    run.add_argument("--seeds", type=Path, help=f"landing folder (default: ${settings.SEEDS_ENV} or ./seeds of the project)")
    run.add_argument("--warehouse", type=Path, help=f"output folder (default: ${settings.WAREHOUSE_ENV} or ./warehouse of the project)")
    args = parser.parse_args(argv)
    return run_pipeline(args.seeds, args.warehouse)


def run_pipeline(seeds: Path | None, warehouse: Path | None) -> int:
    # The flags set the same variables every entry point reads, before the definitions load.
    os.environ[settings.SEEDS_ENV] = str(settings.seeds_dir(seeds))
    os.environ[settings.WAREHOUSE_ENV] = str(settings.warehouse_dir(warehouse))
    os.environ.setdefault("DAGSTER_HOME", str(settings.default_dagster_home()))
    Path(os.environ["DAGSTER_HOME"]).mkdir(parents=True, exist_ok=True)

    import dagster as dg

    from etl_project.definitions import ETL_JOB, defs

    with dg.DagsterInstance.get() as instance:
        result = defs.resolve_job_def(ETL_JOB).execute_in_process(
            instance=instance, raise_on_error=False, run_config=QUIET_LOGS
        )
    print(summarize(result, instance_home=os.environ["DAGSTER_HOME"]))
    return 0 if result.success else 1


def summarize(result, instance_home: str) -> str:
    metadata = {}
    for event in result.get_asset_materialization_events():
        materialization = event.step_materialization_data.materialization
        metadata[materialization.asset_key.to_user_string()] = {k: v.value for k, v in materialization.metadata.items()}
    checks = result.get_asset_check_evaluations()
    failed = [c for c in checks if not c.passed]
    files = metadata.get("source_files", {})
    papers = metadata.get("papers", {})
    published = metadata.get("warehouse")
    lines = [
        f"run {result.run_id} {'succeeded' if result.success else 'FAILED'} (DAGSTER_HOME={instance_home})",
        f"files:      {files.get('dagster/row_count', '?')} "
        f"({files.get('files_ok', '?')} ok, {files.get('files_empty', '?')} empty, {files.get('files_rejected', '?')} rejected)",
        f"records:    {metadata.get('raw_records', {}).get('dagster/row_count', '?')} "
        f"({metadata.get('rejected_records', {}).get('dagster/row_count', '?')} rejected paragraphs)",
        f"papers:     {papers.get('papers', '?')} ({papers.get('duplicate_records', '?')} duplicate records, "
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
    if files.get("files_rejected"):
        lines.append("refused files:\n" + str(files.get("refused", "")))
    if published:
        lines.append(f"warehouse:  {published['duckdb']}  and  {published['parquet']}/<table>.parquet")
    else:
        lines.append("warehouse:  NOT published (a blocking check failed or a step errored); the previous release stays")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
