"""Publish: write every table as zstd Parquet and into one DuckDB file, atomically.

A release is built aside in ``.releases/<release_id>.partial/`` and moved into place with renames:
- ``parquet`` is a symlink to ``.releases/<release_id>/parquet``, swapped with one ``rename``;
- ``warehouse.duckdb`` is replaced by the release's file with one ``rename``.
A reader sees the old release or the new one, never half of each; a client that holds the old
DuckDB file open keeps reading that file (its inode) until it reconnects. A crash before the
renames leaves only a ``.partial`` folder, removed by the next publish.
"""

import json
import os
import shutil
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import duckdb
import polars as pl

from etl_project import warehouse_sql

DUCKDB_FILE = "warehouse.duckdb"
PARQUET_LINK = "parquet"
RELEASES = ".releases"
KEEP_RELEASES = 3


@dataclass(frozen=True)
class Release:
    release_id: str
    duckdb_path: Path
    parquet_dir: Path
    row_counts: dict[str, int]


def publish(tables: dict[str, pl.DataFrame], warehouse: Path, release_id: str) -> Release:
    releases = warehouse / RELEASES
    releases.mkdir(parents=True, exist_ok=True)
    _remove_partials(releases)
    partial = releases / f"{release_id}.partial"
    (partial / "parquet").mkdir(parents=True)

    for name, frame in tables.items():
        frame.write_parquet(partial / "parquet" / f"{name}.parquet", compression="zstd")
    _write_duckdb(tables, partial / DUCKDB_FILE)
    row_counts = {name: frame.height for name, frame in tables.items()}
    manifest = {
        "release_id": release_id,
        "published_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "tables": row_counts,
    }
    (partial / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    _fsync_tree(partial)

    final = releases / release_id
    os.replace(partial, final)
    _swap_symlink(warehouse / PARQUET_LINK, Path(RELEASES) / release_id / "parquet")
    os.replace(final / DUCKDB_FILE, warehouse / DUCKDB_FILE)
    _fsync_dir(warehouse)
    _prune(releases, keep=KEEP_RELEASES)
    return Release(release_id, warehouse / DUCKDB_FILE, warehouse / PARQUET_LINK, row_counts)


def _write_duckdb(tables: dict[str, pl.DataFrame], path: Path) -> None:
    with duckdb.connect(str(path)) as con:
        for name, frame in tables.items():
            arrow = frame.to_arrow()  # zero-copy hand-over to DuckDB
            con.register("incoming", arrow)
            con.execute(f"CREATE TABLE {_quote(name)} AS SELECT * FROM incoming")
            con.unregister("incoming")
        warehouse_sql.create_analysis_layer(con)  # search index, macro and views, inside this release
        con.execute("CHECKPOINT")


def _quote(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


def _swap_symlink(link: Path, target: Path) -> None:
    if link.exists() and not link.is_symlink():
        raise RuntimeError(f"{link} is a real folder, not the release symlink; move it away and publish again")
    staging = link.with_name(f".{link.name}.new")
    staging.unlink(missing_ok=True)
    staging.symlink_to(target, target_is_directory=True)
    os.replace(staging, link)


def _remove_partials(releases: Path) -> None:
    for leftover in releases.glob("*.partial"):
        shutil.rmtree(leftover, ignore_errors=True)


def _prune(releases: Path, keep: int) -> None:
    done = sorted((p for p in releases.iterdir() if p.is_dir() and not p.name.endswith(".partial")), key=lambda p: p.name)
    for old in done[:-keep]:
        shutil.rmtree(old, ignore_errors=True)


def _fsync_tree(root: Path) -> None:
    for path in root.rglob("*"):
        if path.is_file():
            with open(path, "rb") as handle:
                os.fsync(handle.fileno())
    _fsync_dir(root)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def new_release_id() -> str:
    """Sortable by time: ``YYYYMMDDTHHMMSSffffffZ``."""
    return datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
