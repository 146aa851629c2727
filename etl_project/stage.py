"""The stage: each asset's frames kept between steps and runs, under ``<warehouse>/.stage/``.

- an unpartitioned asset is ``.stage/<asset>.parquet``;
- a per-file (partitioned) asset holds several tables per file:
  ``.stage/<asset>/<table>/<id>.parquet``, where ``<id>`` is the XXH3-64 hex of the partition key
  (file names may hold anything; ids are safe).
Every write goes to a temporary name first and is renamed into place, so a reader (or a run
killed mid-write) never sees half a file. The stage is private to the pipeline; analysts read
the published warehouse.
"""

from pathlib import Path

import polars as pl
import xxhash

STAGE = ".stage"


def asset_path(warehouse: Path, asset: str) -> Path:
    return warehouse / STAGE / f"{asset}.parquet"


def partition_id(key: str) -> str:
    return xxhash.xxh3_64_hexdigest(key.encode("utf-8", "surrogatepass"))


def partition_path(warehouse: Path, asset: str, table: str, key: str) -> Path:
    return warehouse / STAGE / asset / table / f"{partition_id(key)}.parquet"


def write(frame: pl.DataFrame, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    frame.write_parquet(partial, compression="lz4")  # fast to write and read; never published
    partial.replace(path)


def write_partition(warehouse: Path, asset: str, key: str, tables: dict[str, pl.DataFrame]) -> None:
    for table, frame in tables.items():
        write(frame, partition_path(warehouse, asset, table, key))


def read_partitions(warehouse: Path, asset: str, keys: list[str]) -> dict[str, pl.DataFrame]:
    """Each table of a per-file asset, all partitions stacked in key order; ``{}`` without keys.

    Raises FileNotFoundError naming the partitions that were never materialized.
    """
    folder = warehouse / STAGE / asset
    tables = sorted(p.name for p in folder.iterdir() if p.is_dir()) if keys and folder.is_dir() else []
    stacked = {}
    for table in tables:
        paths = [partition_path(warehouse, asset, table, key) for key in keys]
        missing = [key for key, path in zip(keys, paths) if not path.exists()]
        if missing:
            shown = ", ".join(repr(k) for k in missing[:5]) + (" ..." if len(missing) > 5 else "")
            raise FileNotFoundError(
                f"{len(missing)} partition(s) of {asset!r} were never materialized: {shown}; "
                "materialize them (or run a full refresh) before the cross-file assets"
            )
        stacked[table] = pl.read_parquet(paths)
    if keys and not stacked:
        raise FileNotFoundError(f"no partition of {asset!r} was ever materialized in {warehouse}")
    return stacked


def staged_file_hashes(warehouse: Path, asset: str, keys: list[str]) -> dict[str, str | None]:
    """sha256 of each file as it was when its partition was last parsed (keys never parsed are
    left out): what a run compares the landing folder with to find new and changed files."""
    paths = {str(partition_path(warehouse, asset, "source_files", key)): key for key in keys}
    present = [path for path in paths if Path(path).exists()]
    if not present:
        return {}
    rows = pl.scan_parquet(present, include_file_paths="path").select("sha256", "path").collect().rows()
    return {paths[path]: sha for sha, path in rows}


def prune_partitions(warehouse: Path, asset: str, keep_keys: list[str]) -> int:
    """Delete the staged partitions of files no longer in the landing folder; returns how many."""
    keep = {f"{partition_id(key)}.parquet" for key in keep_keys}
    removed = 0
    for path in (warehouse / STAGE / asset).glob("*/*.parquet"):
        if path.name not in keep:
            path.unlink(missing_ok=True)
            removed += 1
    return removed
