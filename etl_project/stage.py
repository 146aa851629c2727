"""The stage: assets' frames kept between steps and runs, under ``<warehouse>/.stage/``.

- the per-file asset holds several tables per landing file, shared by every run:
  ``.stage/<asset>@<version>/<table>/<id>.parquet``, where ``<id>`` is the XXH3-64 hex of the
  partition key (file names may hold anything; ids are safe) and ``<version>`` hashes the tables'
  schemas, so tables staged by an older release of the code are parsed again, never mixed in;
- an unpartitioned asset is written per run, ``.stage/runs/<run_id>/<asset>.parquet``: a run reads
  what it produced itself (or, for an asset it does not produce, its latest materialization), so
  two runs taking turns step by step never read each other's half-finished work.
Every write goes to a temporary name first and is renamed into place, so a reader (or a run
killed mid-write) never sees half a file. Files are zstd Parquet with statistics, what the lake
keeps: publishing links a staged table into the lake's data path instead of writing it again.
The stage is private to the pipeline; analysts read the published warehouse.
"""

import functools
import shutil
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import polars as pl
import xxhash

from etl_project import ingest, landing

STAGE = ".stage"
RUNS = "runs"
# Landing bytes parsed together before they are staged: bounds a parse step's memory, whatever
# the number of files, at a few tens of times this (short one-line records cost the most per
# byte). Smaller batches than this cost parse speed; larger ones memory for no speed.
BATCH_BYTES = 16 << 20


@functools.cache
def _version() -> str:
    return ingest.file_tables_version()


def partition_id(key: str) -> str:
    return xxhash.xxh3_64_hexdigest(key.encode("utf-8", "surrogatepass"))


def _partitions_folder(warehouse: Path, asset: str) -> Path:
    return warehouse / STAGE / f"{asset}@{_version()}"


def partition_path(warehouse: Path, asset: str, table: str, key: str) -> Path:
    return _partitions_folder(warehouse, asset) / table / f"{partition_id(key)}.parquet"


def run_path(warehouse: Path, run_id: str, asset: str) -> Path:
    return warehouse / STAGE / RUNS / run_id / f"{asset}.parquet"


def write(frame: pl.DataFrame | pl.LazyFrame, path: Path) -> None:
    """Stage one frame; a LazyFrame is streamed to disk, never held whole in memory."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    if isinstance(frame, pl.LazyFrame):
        frame.sink_parquet(partial, compression="zstd", statistics=True)
    else:
        frame.write_parquet(partial, compression="zstd", statistics=True)
    partial.replace(path)


def write_partition(warehouse: Path, asset: str, key: str, tables: dict[str, pl.DataFrame]) -> None:
    for table, frame in tables.items():
        write(frame, partition_path(warehouse, asset, table, key))


def batches(paths: Iterable[Path], batch_bytes: int | None = None) -> Iterator[list[int]]:
    """Indexes into ``paths`` in runs of files totalling about ``batch_bytes`` (default
    BATCH_BYTES): what to parse together before staging. A file that cannot be stat'ed counts as
    empty here; reading it reports why."""
    limit = BATCH_BYTES if batch_bytes is None else batch_bytes
    batch, size = [], 0
    for index, path in enumerate(paths):
        try:
            size += path.stat().st_size
        except OSError:
            pass
        batch.append(index)
        if size >= limit:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


def scan_partitions(warehouse: Path, asset: str, keys: list[str]) -> dict[str, pl.LazyFrame]:
    """Each table of the per-file asset, all partitions stacked lazily in the order of their
    ``source_file`` (code point order, as Polars sorts strings): each file's rows are already in
    order, so the stack is sorted without a sort that would hold every row in memory.

    Raises FileNotFoundError naming the partitions that were never materialized.
    """
    folder = _partitions_folder(warehouse, asset)
    tables = sorted(p.name for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []
    if not tables:
        raise FileNotFoundError(f"no partition of {asset!r} was ever materialized in {warehouse}")
    ordered = sorted(keys, key=lambda key: ingest.source_file_name(landing.file_name(key)))
    stacked = {}
    for table in tables:
        paths = [partition_path(warehouse, asset, table, key) for key in ordered]
        missing = [key for key, path in zip(ordered, paths) if not path.exists()]
        if missing:
            shown = ", ".join(repr(k) for k in missing[:5]) + (" ..." if len(missing) > 5 else "")
            raise FileNotFoundError(
                f"{len(missing)} partition(s) of {asset!r} were never materialized: {shown}; "
                "materialize them (or run a full refresh) before the cross-file assets"
            )
        stacked[table] = pl.scan_parquet(paths)
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
    """Delete staged partitions of files no longer in the landing folder, and whole folders of
    other versions; returns how many files went."""
    keep = {f"{partition_id(key)}.parquet" for key in keep_keys}
    current = _partitions_folder(warehouse, asset)
    removed = 0
    for folder in (warehouse / STAGE).glob(f"{asset}@*"):
        for path in folder.glob("*/*.parquet"):
            if folder != current or path.name not in keep:
                path.unlink(missing_ok=True)
                removed += 1
        if folder != current:
            shutil.rmtree(folder, ignore_errors=True)
    return removed


def prune_runs(warehouse: Path, keep_run: Callable[[str], bool]) -> int:
    """Delete the staged outputs of runs ``keep_run`` lets go; returns how many folders."""
    folder = warehouse / STAGE / RUNS
    gone = [run for run in (folder.iterdir() if folder.is_dir() else ()) if not keep_run(run.name)]
    for run in gone:
        shutil.rmtree(run, ignore_errors=True)
    return len(gone)


def existing(paths: Iterable[Path]) -> Path | None:
    return next((p for p in paths if p.exists()), None)
