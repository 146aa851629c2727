"""Publish: write every table as zstd Parquet and into one DuckDB file, atomically.

Layout of the warehouse folder::

    current           -> .releases/<release_id>      the one switch
    warehouse.duckdb  -> current/warehouse.duckdb    stable paths for readers
    parquet           -> current/parquet
    .releases/<release_id>/   warehouse.duckdb, parquet/<table>.parquet, manifest.json

A release is built aside in ``.releases/<release_id>.partial/``, fsynced, renamed to
``.releases/<release_id>``, and published by replacing the ``current`` symlink with one atomic
rename. A reader that resolves a path sees the old release or the new one, DuckDB and Parquet
from the same release, never half of each. A process killed at any point leaves the previous
release current; leftovers (a ``.partial`` folder, a release that was never switched to) are
removed by the next publish.

Readers: a client holding ``warehouse.duckdb`` open keeps its file (and a consistent view) until it
reconnects; the next connection opens the new release. DuckDB resolves the symlinks, so each
release's file keeps its own lock and write-ahead log (``.releases/<id>/warehouse.duckdb.wal``): a
client that opened the file read-write, wrote and died never leaves a log that a newer file
would replay, and it never blocks a publish. Tables written into ``warehouse.duckdb`` by hand stay
in that release only; keep your own tables in your own database (``ATTACH`` the warehouse).

Publishes into one folder are serialized by an exclusive ``flock`` on ``.publish.lock`` (the OS
releases it when the process dies, even by SIGKILL); a publish waits up to ``wait_seconds``
(``ETL_PUBLISH_WAIT_SECONDS``, default 120) and then fails naming the holder's PID.
Pruning keeps the newest ``KEEP_RELEASES`` releases, always keeps the current one (whatever its
name), and skips a release whose DuckDB file another process still holds open read-write.
"""

import errno
import fcntl
import json
import os
import re
import shutil
import time
from collections.abc import Mapping
from concurrent.futures import Executor, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import duckdb
import polars as pl
import pyarrow.parquet as pq

from etl_project import settings, warehouse_sql

DUCKDB_FILE = "warehouse.duckdb"
PARQUET_LINK = "parquet"
CURRENT_LINK = "current"
RELEASES = ".releases"
LOCK_FILE = ".publish.lock"
KEEP_RELEASES = 3
WAIT_ENV = "ETL_PUBLISH_WAIT_SECONDS"
DEFAULT_WAIT_SECONDS = 120.0
_PARTIAL = ".partial"
# Rows per Parquet row group and per DuckDB append: what a publish holds in memory at once.
CHUNK_ROWS = 100_000


@dataclass(frozen=True)
class Release:
    release_id: str
    duckdb_path: Path
    parquet_dir: Path
    row_counts: dict[str, int]
    notes: list[str] = field(default_factory=list)  # things worth a warning in the run's log


class PublishError(RuntimeError):
    """Publishing could not proceed; the message says why and what to do."""


def publish(tables: Mapping[str, pl.DataFrame | pl.LazyFrame], warehouse: Path, release_id: str, wait_seconds: float | None = None) -> Release:
    """Write ``tables`` as a new release of ``warehouse`` and switch readers to it atomically."""
    warehouse.mkdir(parents=True, exist_ok=True)
    releases = warehouse / RELEASES
    releases.mkdir(exist_ok=True)
    with _publish_lock(warehouse / LOCK_FILE, _wait_seconds(wait_seconds)):
        parquet = warehouse / PARQUET_LINK
        if parquet.exists() and not parquet.is_symlink():  # refused before anything is switched
            raise PublishError(f"{parquet} is a real file or folder, not a link into the releases; move it away and publish again")
        notes = _remove_partials(releases)
        partial = releases / f"{release_id}{_PARTIAL}"
        (partial / "parquet").mkdir(parents=True)
        row_counts = _write_release(tables, partial)
        manifest = {
            "release_id": release_id,
            "published_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "tables": row_counts,
        }
        (partial / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
        _fsync_tree(partial)
        os.replace(partial, releases / release_id)
        _fsync_dir(releases)

        point_link(warehouse / CURRENT_LINK, Path(RELEASES) / release_id)  # the switch
        notes += _ensure_reader_links(warehouse)
        _fsync_dir(warehouse)
        notes += _prune(releases, keep=KEEP_RELEASES, current=release_id)
    return Release(release_id, warehouse / DUCKDB_FILE, warehouse / PARQUET_LINK, row_counts, notes)


def _write_release(tables: Mapping[str, pl.DataFrame | pl.LazyFrame], partial: Path) -> dict[str, int]:
    """Every table into ``partial``'s Parquet folder and DuckDB file, then the analysis layer;
    returns the row counts. Parquet is written on a second thread while DuckDB appends (both
    release the GIL), so the two writes of a chunk overlap."""
    with duckdb.connect(str(partial / DUCKDB_FILE)) as con, ThreadPoolExecutor(1, "parquet") as parquet:
        # Bounded; beyond it DuckDB spills to <file>.tmp beside the file and removes it on close.
        con.execute("SET memory_limit = ?", [settings.duckdb_memory_limit()])
        row_counts = {
            name: _write_table(con, parquet, name, frame.lazy(), partial / "parquet" / f"{name}.parquet")
            for name, frame in tables.items()
        }
        warehouse_sql.create_analysis_layer(con)  # search index, macro and views, inside this release
        con.execute("CHECKPOINT")
    return row_counts


def _write_table(con: duckdb.DuckDBPyConnection, parquet: Executor, name: str, frame: pl.LazyFrame, path: Path) -> int:
    """One table, ``CHUNK_ROWS`` rows at a time, so memory holds a chunk or two rather than the
    table (the stage hands over Parquet scans): each chunk becomes a zstd Parquet row group and is
    appended to DuckDB from the same Arrow buffers, without a copy. Returns the row count."""
    rows = frame.select(pl.len()).collect().item()
    writer, written = None, None
    try:
        for offset in range(0, max(rows, 1), CHUNK_ROWS):  # an empty table still gets its schema
            chunk = frame.slice(offset, CHUNK_ROWS).collect().to_arrow()
            if writer is None:
                writer = pq.ParquetWriter(path, chunk.schema, compression="zstd")
            if written is not None:
                written.result()  # at most one chunk waits for its Parquet write
            written = parquet.submit(writer.write_table, chunk, row_group_size=CHUNK_ROWS)
            con.register("incoming", chunk)
            verb = "CREATE TABLE {} AS" if offset == 0 else "INSERT INTO {}"
            con.execute(f"{verb.format(_quote(name))} SELECT * FROM incoming")
        con.unregister("incoming")
        written.result()
    finally:
        if written is not None:
            wait([written])  # never close the file under a write still running (after a failure)
        if writer is not None:
            writer.close()
    return rows


def _quote(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


def _wait_seconds(explicit: float | None) -> float:
    if explicit is not None:
        return explicit
    value = os.environ.get(WAIT_ENV, "").strip()
    try:
        return float(value) if value else DEFAULT_WAIT_SECONDS
    except ValueError:
        raise PublishError(f"{WAIT_ENV} must be a number of seconds, not {value!r}") from None


class _publish_lock:
    """Exclusive flock on ``path`` for the whole publish, waited for with backoff."""

    def __init__(self, path: Path, wait_seconds: float):
        self.path, self.wait_seconds = path, wait_seconds

    def __enter__(self):
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        deadline, delay = time.monotonic() + self.wait_seconds, 0.05
        while True:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
            if time.monotonic() >= deadline:
                holder = os.pread(self.fd, 200, 0).decode(errors="replace").strip() or "unknown"
                os.close(self.fd)
                raise PublishError(
                    f"another publish into {self.path.parent} is still running (process {holder}); "
                    f"waited {self.wait_seconds:g} s ({WAIT_ENV}). Let it finish and run again."
                )
            time.sleep(delay)
            delay = min(delay * 2, 2.0)
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, f"PID {os.getpid()}\n".encode(), 0)
        return self

    def __exit__(self, *exc_info):
        os.close(self.fd)  # closing releases the flock


def point_link(link: Path, target: Path, replace_file: bool = False) -> None:
    """Make ``link`` a symlink to ``target`` with one rename (readers never see it missing)."""
    if link.exists() and not link.is_symlink() and not (replace_file and link.is_file()):
        raise PublishError(f"{link} is a real file or folder, not a link into the releases; move it away and publish again")
    staging = link.with_name(f".{link.name}.new")
    staging.unlink(missing_ok=True)
    staging.symlink_to(target)
    os.replace(staging, link)


def _ensure_reader_links(warehouse: Path) -> list[str]:
    """``warehouse.duckdb`` and ``parquet`` point into ``current``: created once, then stable."""
    notes = []
    duckdb_path = warehouse / DUCKDB_FILE
    if duckdb_path.is_file() and not duckdb_path.is_symlink():
        # A warehouse from before releases kept their DuckDB file: the rename below replaces it
        # (clients holding it keep reading it), and a log beside it could only belong to it.
        Path(f"{duckdb_path}.wal").unlink(missing_ok=True)
        notes.append(f"replaced the plain file {duckdb_path} by a link into the current release")
    for link, target in ((duckdb_path, Path(CURRENT_LINK) / DUCKDB_FILE), (warehouse / PARQUET_LINK, Path(CURRENT_LINK) / "parquet")):
        if not (link.is_symlink() and Path(os.readlink(link)) == target):
            point_link(link, target, replace_file=True)
    return notes


def _remove_partials(releases: Path) -> list[str]:
    """Folders of publishes that died while writing; we hold the publish lock, so none is live."""
    notes = []
    for leftover in sorted(releases.glob(f"*{_PARTIAL}")):
        shutil.rmtree(leftover, ignore_errors=True)
        notes.append(f"removed {leftover.name}, left by an interrupted publish")
    return notes


def _prune(releases: Path, keep: int, current: str) -> list[str]:
    notes = []
    done = sorted(p.name for p in releases.iterdir() if p.is_dir() and not p.name.endswith(_PARTIAL))
    for name in done[:-keep]:
        if name == current:  # whatever the clock did to its name
            continue
        holder = _holder_of(releases / name / DUCKDB_FILE)
        if holder:
            notes.append(f"kept old release {name}: its warehouse.duckdb is still open read-write by {holder}")
            continue
        shutil.rmtree(releases / name, ignore_errors=True)
    return notes


_LOCK_HOLDER = re.compile(r"Conflicting lock is held in (.*?)(?:\. See also|$)", re.MULTILINE)


def _holder_of(path: Path) -> str | None:
    """Which process holds ``path`` open read-write (DuckDB's lock message names the program and
    PID), or None. The probe is a read-only open: it conflicts with read-write clients only.
    Read-only clients need no protection: a deleted file stays readable through an open handle."""
    if not path.exists():
        return None
    try:
        duckdb.connect(str(path), read_only=True).close()
    except duckdb.Error as exc:
        match = _LOCK_HOLDER.search(str(exc))
        if match is None:
            return None
        return match.group(1)
    return None


def _fsync_tree(root: Path) -> None:
    for path in root.rglob("*"):
        if path.is_file():
            with open(path, "rb") as handle:
                os.fsync(handle.fileno())
    for folder in [*(p for p in root.rglob("*") if p.is_dir()), root]:
        _fsync_dir(folder)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def new_release_id() -> str:
    """Sortable by time: ``YYYYMMDDTHHMMSSffffffZ``."""
    return datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
