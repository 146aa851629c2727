"""Publish: every table of a run into the DuckLake (etl_project.lake) as one snapshot.

Each table's rows are written once, by Polars, as zstd Parquet files under the lake's data path
(``<data>/main/<table>/etl-<run>-<uuid>.parquet``) and registered in place with
``ducklake_add_data_files``. A table handed over as a file or a folder of parts (the run's stage
writes zstd) is hard-linked there, part by part, not rewritten; only a file in another codec, or a
data path on another device or in object storage, costs a copy. A part the table already holds
(a file the stage linked from the previous run's parts, which the lake then linked too) is not
linked or registered again, and the table's files that are no part of it now are deleted from
it whole, which DuckLake records without a delete file. One DuckLake transaction makes every
table's rows the new ones, creates search_papers and the views, and commits with a message naming the
Dagster run: a reader sees the previous snapshot or this one, never half of each, and a run that
fails or is killed before the commit leaves the previous snapshot current. Data files that no
snapshot lists (a killed run's) are deleted by the next publish, which holds the run lock; files
that some kept snapshot lists are never touched. A publish that finished leaves a marker saying
so (LISTED_MARKER), and the next one skips that search of the data path.

History: snapshots are kept for ``ETL_KEEP_SNAPSHOTS`` runs (default 10) or
``ETL_KEEP_SNAPSHOT_DAYS`` days (default 7), whichever keeps more, then expired and their files
removed. ``rollback`` makes an earlier snapshot's tables current again as a new snapshot.
"""

import json
import os
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import polars as pl
import pyarrow.parquet as pq

from etl_project import contract, lake, settings, stage, warehouse_sql
from etl_project.lake import ALIAS, Lake, literal, quote

AUTHOR = "etl_project"
KEEP_SNAPSHOTS_ENV = "ETL_KEEP_SNAPSHOTS"
KEEP_DAYS_ENV = "ETL_KEEP_SNAPSHOT_DAYS"
DEFAULT_KEEP_SNAPSHOTS = 10
DEFAULT_KEEP_DAYS = 7.0
# A commit another writer of the catalog got in the way of (SQLite: "database is locked", which
# DuckLake does not retry; PostgreSQL: a conflict its own retries could not resolve) is redone.
RETRYABLE = ("database is locked", "Transaction conflict")
COMMIT_ATTEMPTS = 5
COMMIT_BACKOFF_SECONDS = 0.2
# What the folder held before the warehouse was a DuckLake: refused, never deleted.
OLD_LAYOUT = (".releases", "current", "warehouse.duckdb", "parquet")
ROLLBACK_PREFIX = "__rollback_"  # an earlier snapshot's table while rollback puts it back
KEPT_FILE_ROWS = 20_000  # rows a table's kept data files may each let a publish drop by DELETE (_replace_rows)
# In the warehouse folder while every data file is listed by a snapshot: the last publish finished
# and deleted what it wrote but did not register. A publish or rollback removes it before it
# writes, so after one that was killed the next publish looks for orphans.
LISTED_MARKER = ".data-files-listed"


class PublishError(RuntimeError):
    """Publishing could not proceed; the message says why and what to do."""


@dataclass(frozen=True)
class Published:
    snapshot_id: int
    row_counts: dict[str, int]
    notes: list[str] = field(default_factory=list)  # things worth a warning in the run's log


@dataclass(frozen=True)
class Retention:
    snapshots: int = DEFAULT_KEEP_SNAPSHOTS
    days: float = DEFAULT_KEEP_DAYS

    @classmethod
    def from_env(cls) -> "Retention":
        return cls(_env_number(KEEP_SNAPSHOTS_ENV, DEFAULT_KEEP_SNAPSHOTS, int), _env_number(KEEP_DAYS_ENV, DEFAULT_KEEP_DAYS, float))


def refuse_old_layout(warehouse: Path) -> None:
    """A warehouse folder from before DuckLake (releases and links) is refused, not migrated:
    its files are the user's to keep or delete."""
    found = [name for name in OLD_LAYOUT if (warehouse / name).exists() or (warehouse / name).is_symlink()]
    if found:
        listed = " ".join(str(warehouse / name) for name in found)
        raise PublishError(
            f"{warehouse} still holds the pre-DuckLake layout ({', '.join(found)}); move it out of the way "
            f"(mkdir old-warehouse && mv {listed} old-warehouse/) and run again: the lake is rebuilt from the landing folder"
        )


@dataclass(frozen=True)
class SnapshotState:
    """What the current snapshot was published from, as its commit recorded it (None: not
    recorded, as by a rollback or an older release)."""

    snapshot_id: int
    build: str | None  # build_info.fingerprint of the code and settings
    landing: str | None  # stage.manifest_digest of the landing files


def publish(tables: Mapping[str, pl.DataFrame | pl.LazyFrame | Path], target: Lake, run_id: str,
            retention: Retention | None = None, built_from: Mapping[str, str] | None = None) -> Published:
    """Write ``tables`` (frames, or Parquet files to take as they are) as data files and make
    them, with search_papers and the views, the lake's new snapshot in one commit, recording
    ``built_from`` in it (SnapshotState's ``build`` and ``landing``). The caller holds the run lock (etl_project/run_lock.py)."""
    refuse_old_layout(target.warehouse)
    retention = retention or Retention.from_env()
    con = lake.attach(target, read_only=False, memory_limit=settings.duckdb_memory_limit())
    written: list[str] = []  # the data files this publish wrote
    attempt: set[str] = set()  # those the latest attempt at the commit registered
    registered: set[str] = set()  # those the committed snapshot lists
    row_counts: dict[str, int] = {}
    listed = target.warehouse / LISTED_MARKER
    committed = False
    try:
        _prepare(con)
        notes = [] if listed.exists() else _delete_orphans(con)
        listed.unlink(missing_ok=True)

        def snapshot() -> None:
            attempt.clear()
            for name, frame in tables.items():
                added, row_counts[name], columns = _replace_rows(con, target, name, _parts(frame), run_id, written)
                attempt.update(added)
                for statement in contract.comment_statements(name, columns):
                    con.execute(statement)
            warehouse_sql.publish_analysis_layer(con)
            _commit_message(con, f"run {run_id}", {"run_id": run_id, "tables": row_counts, **(built_from or {})})

        notes += _in_transaction(con, snapshot)
        registered = attempt
        snapshot_id = _snapshot_of_run(con, run_id)
        notes += expire_snapshots(con, retention)
        lake.write_open_sql(target)
        committed = True
    finally:
        for path in written:  # never registered (empty, or an attempt that did not commit): nothing lists them
            if path not in registered and "://" not in path:
                Path(path).unlink(missing_ok=True)
        con.close()
    if committed:  # a failed commit may leave files DuckLake wrote itself (the search index's)
        listed.touch()
    return Published(snapshot_id, row_counts, notes)


def _prepare(con: duckdb.DuckDBPyConnection) -> None:
    """DuckLake's own writes (the stop words, rollbacks) in zstd, like Polars'; set once."""
    options = dict(con.execute(f"SELECT option_name, value FROM ducklake_options({literal(ALIAS)})").fetchall())
    if options.get("parquet_compression") != "zstd":
        con.execute(f"CALL {ALIAS}.set_option('parquet_compression', 'zstd')")


def _parts(table_rows: pl.DataFrame | pl.LazyFrame | Path) -> list[pl.DataFrame | pl.LazyFrame | Path]:
    """A table handed over as a folder of Parquet parts (the landing tables, papers, the
    enrichment tables, paper_terms) is each of its parts, in order; anything else is one part."""
    if isinstance(table_rows, Path) and table_rows.is_dir():
        return sorted(table_rows.glob("*.parquet"))
    return [table_rows]


def _write_data_file(table_rows: pl.DataFrame | pl.LazyFrame | Path,
                     data_path: str, table: str, run_id: str) -> tuple[str, int]:
    """One zstd Parquet file holding ``table_rows``, at a name no other run or table uses: a zstd
    Parquet file is hard-linked (or, across devices, copied), anything else is streamed through
    Polars (a scan of the stage is never held whole). Returns its path and row count."""
    name = f"main/{table}/etl-{run_id}-{uuid.uuid4().hex}.parquet"
    remote = "://" in data_path  # object storage: Polars writes the URL itself
    path = data_path + name if remote else str(Path(data_path) / name)
    if not remote:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    if isinstance(table_rows, Path) and not remote and _is_zstd(footer := pq.read_metadata(table_rows)):
        stage.link_or_copy(table_rows, Path(path))
        return path, footer.num_rows
    frame = pl.scan_parquet(table_rows) if isinstance(table_rows, Path) else table_rows.lazy()
    frame.sink_parquet(path, compression="zstd", statistics=True)
    return path, pl.scan_parquet(path).select(pl.len()).collect().item()


def _is_zstd(footer: pq.FileMetaData) -> bool:
    """Whether every column chunk of a Parquet file (its footer) is zstd (a stage of an older
    release was not)."""
    return all(footer.row_group(g).column(c).compression == "ZSTD"
               for g in range(footer.num_row_groups) for c in range(footer.num_columns))


def _replace_rows(con: duckdb.DuckDBPyConnection, target: Lake, table: str, parts: list[pl.DataFrame | pl.LazyFrame | Path],
                  run_id: str, written: list[str]) -> tuple[list[str], int, list[str]]:
    """``table`` gets exactly the rows of ``parts``, all of one schema. When it has that schema
    and already holds some of the parts as they are (_held), it keeps those, the files it holds
    that are no part now are deleted from it whole, and the other parts are written (``written``)
    and registered. Otherwise it is dropped and created again from that schema (columns may
    change with a new release of the code) with every part: earlier snapshots keep the dropped
    table's rows (time travel and rollback reach them), where a DELETE of every row would write a
    delete file as long as the table (16 s for the 45M rows of paper_terms at a million records).
    Returns the data files registered, the table's row count and its column names."""
    held = _held(con, target, table, parts)
    kept = {_file_id(part) for part in parts} & set(held.values())
    gone, seen = [], set()
    for path, file in held.items():  # a part the table lists twice (never so far) keeps one
        if file not in kept or file in seen:
            gone.append(path)
        seen.add(file)
    # A DELETE reads the row ids of the files it drops (~10M rows a second); registering a file
    # costs ~2 ms: beyond KEPT_FILE_ROWS rows dropped per file kept, making the table again is cheaper.
    if kept and sum(pq.read_metadata(path).num_rows for path in gone) > KEPT_FILE_ROWS * len(kept):
        kept = set()
    rows, added = 0, []
    for part in parts:
        if _file_id(part) in kept:
            rows += pq.read_metadata(part).num_rows
            continue
        path, count = _write_data_file(part, target.data_path, table, run_id)
        written.append(path)
        rows += count
        added.append((path, count))
    if kept:
        if gone:
            con.execute(f"DELETE FROM {quote(table)} WHERE filename IN ({', '.join(literal(path) for path in gone)})")
    else:
        con.execute(f"DROP TABLE IF EXISTS {quote(table)}")
        con.execute(f"CREATE TABLE {quote(table)} AS SELECT * FROM read_parquet({literal(added[0][0])}) LIMIT 0")
    for path, count in added:
        if count:
            con.execute(f"CALL ducklake_add_data_files({literal(ALIAS)}, {literal(table)}, {literal(path)})")
    return [path for path, count in added if count], rows, _columns(con, table)


def _file_id(part: pl.DataFrame | pl.LazyFrame | Path) -> tuple[int, int] | None:
    """What tells a file apart from every other, whatever its name (a hard link shares it)."""
    if not isinstance(part, Path):
        return None
    stat = part.stat()
    return stat.st_dev, stat.st_ino


def _held(con: duckdb.DuckDBPyConnection, target: Lake, table: str,
          parts: list[pl.DataFrame | pl.LazyFrame | Path]) -> dict[str, tuple[int, int]]:
    """Every data file of the lake's ``table`` with its _file_id, when the table's columns are
    those of ``parts`` (files, on this machine) and each file is there with all its rows (no
    DELETE of some made a delete file); empty otherwise."""
    if "://" in target.data_path or not parts or not all(isinstance(part, Path) for part in parts):
        return {}
    columns = con.execute(
        f"SELECT column_name, data_type FROM duckdb_columns() WHERE database_name = {literal(ALIAS)} "
        f"AND schema_name = 'main' AND table_name = {literal(table)} ORDER BY column_index"
    ).fetchall()
    described = con.execute(f"DESCRIBE SELECT * FROM read_parquet({literal(str(parts[0]))})").fetchall()
    if not columns or columns != [(name, kind) for name, kind, *_ in described]:
        return {}
    listed = con.execute(f"SELECT data_file, delete_file FROM ducklake_list_files({literal(ALIAS)}, {literal(table)})").fetchall()
    if any(deletes is not None or not os.path.exists(path) for path, deletes in listed):
        return {}
    return {path: _file_id(Path(path)) for path, _ in listed}


def _columns(con: duckdb.DuckDBPyConnection, table: str) -> list[str]:
    """The columns of the lake's main table ``table``, in order."""
    rows = con.execute(
        f"SELECT column_name FROM duckdb_columns() WHERE database_name = {literal(ALIAS)} "
        f"AND schema_name = 'main' AND table_name = {literal(table)} ORDER BY column_index"
    ).fetchall()
    return [name for (name,) in rows]


def _commit_message(con: duckdb.DuckDBPyConnection, message: str, extra: dict) -> None:
    con.execute(f"CALL {ALIAS}.set_commit_message({literal(AUTHOR)}, {literal(message)}, extra_info => {literal(json.dumps(extra))})")


def _in_transaction(con: duckdb.DuckDBPyConnection, body, attempts: int = COMMIT_ATTEMPTS) -> list[str]:
    """Run ``body`` in one transaction and commit it. A commit that collides with another
    writer of the catalog (another tool: runs of this project take turns by the run lock) is
    redone from the start, a few times with backoff; the failed attempt left nothing behind.
    Returns notes on the retries."""
    notes = []
    for attempt in range(1, attempts + 1):
        con.execute("BEGIN")
        try:
            body()
            con.execute("COMMIT")
            return notes
        except duckdb.TransactionException as exc:
            _rollback(con)
            if attempt == attempts or not any(text in str(exc) for text in RETRYABLE):
                raise PublishError(f"the commit to the catalog failed {attempt} time(s): {exc}") from exc
            notes.append(f"commit attempt {attempt} collided with another writer of the catalog; retried")
            time.sleep(COMMIT_BACKOFF_SECONDS * 2 ** (attempt - 1))
        except BaseException:
            _rollback(con)
            raise
    return notes


def _rollback(con: duckdb.DuckDBPyConnection) -> None:
    try:
        con.execute("ROLLBACK")
    except duckdb.Error:
        pass  # the failed commit already ended the transaction


def _snapshot_of_run(con: duckdb.DuckDBPyConnection, run_id: str) -> int:
    row = con.execute(
        f"SELECT max(snapshot_id) FROM {ALIAS}.snapshots() WHERE commit_extra_info::JSON->>'run_id' = {literal(run_id)}"
    ).fetchone()
    return int(row[0])


def current_state(con: duckdb.DuckDBPyConnection) -> SnapshotState:
    """What the current snapshot's commit says it was published from."""
    snapshot_id, extra = con.execute(
        f"SELECT snapshot_id, commit_extra_info FROM {ALIAS}.snapshots() ORDER BY snapshot_id DESC LIMIT 1"
    ).fetchone()
    info = json.loads(extra) if extra else {}
    return SnapshotState(int(snapshot_id), info.get("build"), info.get("landing"))


def _delete_orphans(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Data files under the data path that no snapshot lists: those of a run killed before its
    commit. Safe under the run lock: no other publish of this lake is writing."""
    gone = con.execute(f"CALL ducklake_delete_orphaned_files({literal(ALIAS)}, cleanup_all => true)").fetchall()
    return [f"removed {len(gone)} data file(s) left by an interrupted run"] if gone else []


def expire_snapshots(con: duckdb.DuckDBPyConnection, retention: Retention) -> list[str]:
    """Expire the snapshots neither among the newest ``retention.snapshots`` nor younger than
    ``retention.days``, and delete the files only they listed. The current one always stays."""
    snapshots = con.execute(f"SELECT snapshot_id, snapshot_time FROM {ALIAS}.snapshots() ORDER BY snapshot_id").fetchall()
    newest = {sid for sid, _ in snapshots[-max(retention.snapshots, 1):]}
    cutoff = datetime.now(UTC) - timedelta(days=retention.days)
    expired = [sid for sid, at in snapshots if sid not in newest and at < cutoff]
    if not expired:
        return []
    versions = "[" + ", ".join(str(int(sid)) for sid in expired) + "]"
    con.execute(f"CALL ducklake_expire_snapshots({literal(ALIAS)}, versions => {versions})")
    con.execute(f"CALL ducklake_cleanup_old_files({literal(ALIAS)}, cleanup_all => true)")
    return [f"expired {len(expired)} snapshot(s) older than {retention.days:g} days beyond the newest {retention.snapshots}"]


def history(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """One row per kept snapshot, newest first: id, time, run id, message, tables' row counts."""
    rows = con.execute(
        f"SELECT snapshot_id, snapshot_time, commit_message, commit_extra_info FROM {ALIAS}.snapshots() ORDER BY snapshot_id DESC"
    ).fetchall()
    records = []
    for sid, at, message, extra in rows:
        info = json.loads(extra) if extra else {}
        counts = info.get("tables", {})
        records.append({
            "snapshot_id": sid, "time": at, "run_id": info.get("run_id"), "message": message,
            "papers": counts.get("papers"), "records": counts.get("raw_records"), "files": counts.get("source_files"),
        })
    schema = {"snapshot_id": pl.Int64, "time": pl.Datetime("us", "UTC"), "run_id": pl.String, "message": pl.String,
              "papers": pl.Int64, "records": pl.Int64, "files": pl.Int64}
    return pl.DataFrame(records, schema=schema)


def rollback(target: Lake, snapshot_id: int, run_id: str) -> Published:
    """Make ``snapshot_id``'s tables current again, as a new snapshot (the rolled-back state
    stays in the history too). The caller holds the run lock."""
    con = lake.attach(target, read_only=False, memory_limit=settings.duckdb_memory_limit())
    (target.warehouse / LISTED_MARKER).unlink(missing_ok=True)  # it writes data files (the next publish tidies)
    try:
        kept = {sid for (sid,) in con.execute(f"SELECT snapshot_id FROM {ALIAS}.snapshots()").fetchall()}
        if snapshot_id not in kept:
            raise PublishError(f"snapshot {snapshot_id} is not in the history (kept: {_ranges(sorted(kept))}); see `etl-project history`")
        then = _tables_at(con, snapshot_id)
        now = _tables_at(con, None)
        con.execute("BEGIN")
        try:
            # The old rows are copied under a passing name before any table is dropped: once
            # dropped in this transaction, a name no longer resolves ``AT (VERSION => ...)``.
            for schema, table in sorted(then):
                con.execute(f"CREATE SCHEMA IF NOT EXISTS {quote(schema)}")
                con.execute(f"CREATE TABLE {quote(schema)}.{quote(ROLLBACK_PREFIX + table)} AS "
                            f"SELECT * FROM {quote(schema)}.{quote(table)} AT (VERSION => {int(snapshot_id)})")
            for schema, table in sorted(now):
                con.execute(f"DROP TABLE {quote(schema)}.{quote(table)}")
            counts = {}
            for schema, table in sorted(then):
                name = f"{quote(schema)}.{quote(table)}"
                con.execute(f"ALTER TABLE {quote(schema)}.{quote(ROLLBACK_PREFIX + table)} RENAME TO {quote(table)}")
                if schema == "main":
                    counts[table] = con.execute(f"SELECT count(*) FROM {name}").fetchone()[0]
                    for statement in contract.comment_statements(table, _columns(con, table)):
                        con.execute(statement)
            warehouse_sql.create_views(con)
            _commit_message(con, f"rollback to snapshot {snapshot_id}", {"run_id": run_id, "rollback_of": snapshot_id, "tables": counts})
            con.execute("COMMIT")
        except BaseException:
            _rollback(con)
            raise
        new_id = _snapshot_of_run(con, run_id)
        lake.write_open_sql(target)
    finally:
        con.close()
    return Published(new_id, counts)


def _tables_at(con: duckdb.DuckDBPyConnection, snapshot_id: int | None) -> set[tuple[str, str]]:
    """(schema, table) of every table at ``snapshot_id`` (None: now)."""
    at = f" AT (VERSION => {int(snapshot_id)})" if snapshot_id is not None else ""
    names = con.execute(
        f"SELECT schema_name, table_name FROM duckdb_tables() WHERE database_name = {literal(ALIAS)} "
        f"AND schema_name IN ('main', {literal(warehouse_sql.SEARCH_SCHEMA)})"
    ).fetchall()
    if not at:
        return set(names)
    present = set()
    for schema, table in _all_tables_ever(con) | set(names):
        try:
            con.execute(f"SELECT 1 FROM {quote(schema)}.{quote(table)}{at} LIMIT 0")
        except duckdb.Error:
            continue
        present.add((schema, table))
    return present


def _all_tables_ever(con: duckdb.DuckDBPyConnection) -> set[tuple[str, str]]:
    """Every (schema, table) some kept snapshot may hold: the names the catalog ever recorded."""
    rows = con.execute(
        f"SELECT s.schema_name, t.table_name FROM __ducklake_metadata_{ALIAS}.ducklake_table AS t "
        f"JOIN __ducklake_metadata_{ALIAS}.ducklake_schema AS s USING (schema_id)"
    ).fetchall()
    return {(s, t) for s, t in rows if s in ("main", warehouse_sql.SEARCH_SCHEMA)}


def export(con: duckdb.DuckDBPyConnection, folder: Path, tables: Iterable[str] | None = None, snapshot_id: int | None = None) -> dict[str, Path]:
    """One zstd Parquet file per table, all from one snapshot (the current one unless given):
    flat files for tools that do not read DuckLake. Returns the files written."""
    if snapshot_id is None:
        snapshot_id = con.execute(f"SELECT id FROM {ALIAS}.current_snapshot()").fetchone()[0]
    names = sorted(t for s, t in _tables_at(con, snapshot_id) if s == "main")
    chosen = list(tables) if tables else names
    unknown = sorted(set(chosen) - set(names))
    if unknown:
        raise PublishError(f"no table {', '.join(unknown)} in snapshot {snapshot_id} (tables: {', '.join(names)})")
    folder.mkdir(parents=True, exist_ok=True)
    out = {}
    for table in chosen:
        path = folder / f"{table}.parquet"
        con.execute(
            f"COPY (SELECT * FROM {quote(table)} AT (VERSION => {int(snapshot_id)})) TO {literal(str(path))} "
            "(FORMAT parquet, COMPRESSION zstd)"
        )
        out[table] = path
    return out


def _ranges(ids: list[int]) -> str:
    return f"{ids[0]}..{ids[-1]}" if ids else "none"


def _env_number(name: str, default, kind):
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    try:
        number = kind(value)
    except ValueError:
        raise PublishError(f"{name} must be a number, not {value!r}") from None
    if number < 0:
        raise PublishError(f"{name} must not be negative, got {value!r}")
    return number
