"""The warehouse's commands: ``sql``, ``shell``, ``history``, ``rollback``, ``export`` and
``install-extensions``. Each opens the lake of ``--warehouse`` (or ETL_WAREHOUSE_DIR, or the
project's ``warehouse/``) and its catalog (ETL_CATALOG) as etl_project.lake describes."""

import argparse
import os
import shutil
import sys
import tempfile
import uuid
from pathlib import Path

from etl_project import settings


def add_commands(commands: argparse._SubParsersAction) -> None:
    def command(name: str, help: str, handler) -> argparse.ArgumentParser:
        parser = commands.add_parser(name, help=help, description=help[0].upper() + help[1:] + ".")
        parser.set_defaults(handler=handler)
        if name != "install-extensions":
            parser.add_argument("--warehouse", type=Path, help=f"warehouse folder (default: ${settings.WAREHOUSE_ENV} or ./warehouse of the project)")
        return parser

    sql = command("sql", "run SQL against the warehouse (read-only) and print the result as the duckdb CLI does", run_sql)
    sql.add_argument("query", help='e.g. "SELECT count(*) FROM papers"')
    command("shell", "open the duckdb CLI with the warehouse attached read-only and selected", run_shell)
    history = command("history", "list the warehouse's snapshots, newest first: id, time, run id, row counts", run_history)
    history.add_argument("--limit", type=int, default=20, help="at most this many (default 20)")
    rollback = command("rollback", "make an earlier snapshot's tables current again, as a new snapshot", run_rollback)
    rollback.add_argument("snapshot", type=int, help="the snapshot id (see etl-project history)")
    export = command("export", "write one zstd Parquet file per table, all from one snapshot, for tools that do not read DuckLake", run_export)
    export.add_argument("folder", type=Path, help="where the files go (<folder>/<table>.parquet)")
    export.add_argument("--tables", nargs="+", metavar="TABLE", help="only these tables (default: all)")
    export.add_argument("--snapshot", type=int, help="that snapshot instead of the current one")
    command("install-extensions", "install the DuckDB extensions the warehouse needs (ducklake, sqlite, postgres, fts) from their packages, for every DuckDB client of this user", run_install)


def _connect(args, read_only: bool = True):
    from etl_project import lake

    try:
        return lake.connect(args.warehouse, read_only=read_only)
    except lake.NoWarehouse as exc:
        raise SystemExit(f"etl-project {args.command}: {exc}") from None


def run_sql(args) -> int:
    import duckdb

    with _connect(args) as con:
        try:
            relation = con.sql(args.query)
        except duckdb.Error as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        if relation is not None:
            width = shutil.get_terminal_size((120, 24)).columns
            relation.show(max_width=width if sys.stdout.isatty() else 100_000, max_rows=10_000)
    return 0


def run_shell(args) -> int:
    from etl_project import lake

    cli = shutil.which("duckdb") or str(Path(sys.executable).with_name("duckdb"))
    if not Path(cli).exists():
        raise SystemExit("etl-project shell needs the duckdb CLI: pip install duckdb-cli==1.5.5 (in the dev extra)")
    target = lake.Lake.of(settings.warehouse_dir(args.warehouse))
    if not target.exists():
        raise SystemExit(f"etl-project shell: no warehouse has been published at {target.warehouse}: run `etl-project run` first")
    lake.install_extensions()  # the CLI loads them by name
    init = Path(tempfile.gettempdir()) / f"etl_project-open-{uuid.uuid4().hex}.sql"
    init.write_text(lake.open_sql(target, relative=False))
    try:
        return os.spawnv(os.P_WAIT, cli, [cli, "-init", str(init)])
    finally:
        init.unlink(missing_ok=True)


def run_history(args) -> int:
    import polars as pl

    from etl_project import publish

    with _connect(args) as con:
        frame = publish.history(con).head(args.limit)
    with pl.Config(tbl_rows=-1, tbl_hide_dataframe_shape=True, tbl_hide_column_data_types=True, fmt_str_lengths=60, tbl_width_chars=200):
        print(frame.with_columns(pl.col("time").dt.strftime("%Y-%m-%d %H:%M:%S UTC")))
    return 0


def run_rollback(args) -> int:
    from etl_project import lake, publish, run_lock

    target = lake.Lake.of(settings.warehouse_dir(args.warehouse))
    if not target.exists():
        raise SystemExit(f"etl-project rollback: no warehouse has been published at {target.warehouse}")
    operation = f"rollback-{uuid.uuid4().hex[:12]}"
    with run_lock.hold(target.catalog, target.warehouse, operation, log=_TerminalLog()):
        try:
            done = publish.rollback(target, args.snapshot, operation)
        except publish.PublishError as exc:
            print(f"etl-project rollback: {exc}", file=sys.stderr)
            return 1
    print(f"snapshot {done.snapshot_id} now holds the tables of snapshot {args.snapshot} "
          f"({done.row_counts.get('papers', 0)} papers); the next run rebuilds from the landing folder")
    return 0


class _TerminalLog:
    """The run lock's log lines (e.g. which run it waits for) on the terminal."""

    def info(self, msg: str) -> None:
        print(msg, file=sys.stderr)

    warning = info


def run_export(args) -> int:
    from etl_project import publish

    with _connect(args) as con:
        try:
            written = publish.export(con, args.folder, args.tables, args.snapshot)
        except publish.PublishError as exc:
            print(f"etl-project export: {exc}", file=sys.stderr)
            return 1
    for table, path in written.items():
        print(f"{table}: {path}")
    return 0


def run_install(args) -> int:
    from etl_project import lake

    for line in lake.install_extensions():
        print(line)
    print("DuckDB clients of this version now load them by themselves (ATTACH 'ducklake:...', search_papers).")
    return 0
