"""The stage: assets' frames kept between steps and runs, under ``<warehouse>/.stage/``.

- the parse step stages the files it parses as one *batch*, shared by every later run:
  ``.stage/parsed_files@<version>/batches/<batch>/<table>/<part>.parquet`` (a part per
  BATCH_BYTES of landing bytes, each file's rows within one part, files in source_file order).
  ``<version>`` hashes the tables' schemas, so tables staged by an older release of the code are
  parsed again, never mixed in. Which batch holds the current rows of each landing file is the
  parse step's output, the *manifest* (each file's key, source_file, sha256, size and mtime, batch
  and parse version): a changed file's old rows
  stay in their batch, unread, until no manifest kept points at that batch any more;
- every other asset's value is written per run, ``.stage/runs/<run_id>/<asset>.parquet`` (for the
  landing tables a folder of parts linked from the batches, see stage_landing_tables; for papers,
  the enrichment tables and paper_terms a folder of parts linked from the previous run's where
  unchanged, see stage_parts): a run reads
  what it produced itself (or, for an asset it does not produce, its latest materialization), so
  two runs taking turns step by step never read each other's half-finished work.
Every write goes to a temporary name first and is renamed into place, so a reader (or a run
killed mid-write) never sees half a file. Files are zstd Parquet with statistics, what the lake
keeps: publishing links a staged table into the lake's data path instead of writing it again.
The stage is private to the pipeline; analysts read the published warehouse.
"""

import errno
import functools
import json
import os
import shutil
import time
import uuid
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import xxhash

from etl_project import ingest, landing

STAGE = ".stage"
RUNS = "runs"
PARSED = "parsed_files"
BATCHES = "batches"
RACY_SECONDS = 3.0
LANDING_MANIFEST = "landing_tables.manifest"  # beside a run's landing tables: the manifest they hold
# Landing bytes parsed together before they are staged: bounds a parse step's memory, whatever
# the number of files, at a few tens of times this (short one-line records cost the most per
# byte). Smaller batches than this cost parse speed; larger ones memory for no speed.
BATCH_BYTES = 16 << 20
WRITERS = 2  # parts a table staged as parts rewrites at once (write_each)


@functools.cache
def _version() -> str:
    return ingest.file_tables_version()


def _parsed_folder(warehouse: Path) -> Path:
    return warehouse / STAGE / f"{PARSED}@{_version()}"


def batch_folder(warehouse: Path, batch: str) -> Path:
    return _parsed_folder(warehouse) / BATCHES / batch


def part_path(warehouse: Path, batch: str, table: str, part: int) -> Path:
    return batch_folder(warehouse, batch) / table / f"{part:06d}.parquet"


def new_batch_id() -> str:
    """Sortable by creation time, unique across runs and machines."""
    return f"{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{uuid.uuid4().hex[:12]}"


def run_path(warehouse: Path, run_id: str, asset: str) -> Path:
    return warehouse / STAGE / RUNS / run_id / f"{asset}.parquet"


def write(frame: pl.DataFrame | pl.LazyFrame, path: Path, metadata: dict[str, str] | None = None) -> None:
    """Stage one frame (with the file's key-value ``metadata``); a LazyFrame is streamed to disk,
    never held whole in memory."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    if isinstance(frame, pl.LazyFrame):
        frame.sink_parquet(partial, compression="zstd", statistics=True, metadata=metadata)
    else:
        frame.write_parquet(partial, compression="zstd", statistics=True, metadata=metadata)
    partial.replace(path)


def write_each(frames: Iterable[tuple[pl.LazyFrame, Path]]) -> None:
    """``write`` each (frame, path), WRITERS at a time: one part's decode and zstd encode leave a
    core idle, two keep both busy (16 parts of papers rewritten: 2.45 s against 3.04 s)."""
    with ThreadPoolExecutor(WRITERS) as pool:
        for done in [pool.submit(write, frame, path) for frame, path in frames]:
            done.result()


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


MANIFEST_SCHEMA = {
    "key": pl.String, "source_file": pl.String, "sha256": pl.String, "batch": pl.String, "parsed_by": pl.String,
    "size": pl.Int64, "mtime_ns": pl.Int64,  # the file as the plan looked at it before it was parsed
}
# What shapes one file's parsed tables besides its bytes and the settings: these modules of the
# package, Python (its codecs decode), and the libraries that decode and normalize.
PARSING_MODULES = ("ingest.py", "normalize.py", "landing.py", "stage.py", "settings.py")
PARSING_LIBRARIES = ("polars", "charset-normalizer", "xxhash")


def parse_version(max_file_bytes: int = ingest.DEFAULT_MAX_FILE_BYTES,
                  max_record_chars: int = ingest.DEFAULT_MAX_RECORD_CHARS) -> str:
    """What parsed a batch (the manifest's ``parsed_by``): a file parsed by another version of the
    parsing code or with other limits is parsed again, never reused."""
    from etl_project import build_info

    return build_info.files_version(PARSING_MODULES, PARSING_LIBRARIES, {
        "schema": _version(), "max_file_bytes": max_file_bytes, "max_record_chars": max_record_chars,
    })


def parse_batch(warehouse: Path, root: Path, keys: list[str], batch: str,
                max_file_bytes: int = ingest.DEFAULT_MAX_FILE_BYTES,
                max_record_chars: int = ingest.DEFAULT_MAX_RECORD_CHARS) -> pl.DataFrame:
    """Parse the landing files ``keys`` (landing.file_key names) into the stage's batch
    ``batch``, BATCH_BYTES of files at a time, each part staged before the next is read: a run of
    any number of files holds one part in memory. Returns the files' ``source_files`` rows."""
    names = {key: ingest.source_file_name(landing.file_name(key)) for key in keys}
    ordered = sorted(keys, key=names.__getitem__)  # parts in source_file order, as the tables are
    paths = [root / landing.file_name(key) for key in ordered]
    parsed = []
    for part, indexes in enumerate(batches(paths)):
        files = [ingest.read_landing_file(paths[i], root, max_file_bytes) for i in indexes]
        tables = ingest.file_tables(files, max_record_chars)
        del files
        for table, frame in tables.items():
            write(frame, part_path(warehouse, batch, table, part))
        parsed.append(tables["source_files"])
    return pl.concat(parsed) if parsed else ingest.file_tables([])["source_files"]


def manifest(keys: list[str], batch: str, parsed: pl.DataFrame, looked: Mapping[str, landing.FileState],
             parsed_by: str, max_file_bytes: int) -> pl.DataFrame:
    """The manifest rows of the files ``keys`` just parsed into ``batch`` (``parsed``: their
    source_files rows), in source_file order. Each file's sha256 is that of the bytes parsed, so
    a file that changed after the plan looked at it is looked at again next time; a file refused
    before it was read gets none (it is tried again), except one refused for its size, which
    keeps the sha256 the plan saw (the same bytes would be refused again)."""
    # Git's "racy clean" rule: a file modified within RACY_SECONDS of now may be rewritten again,
    # same size, within the same mtime tick (2 s on some file systems) after it was read, so its
    # size and mtime are not kept: the next plan reads it again.
    racy = time.time_ns() - int(RACY_SECONDS * 1e9)
    states = [looked.get(k) for k in keys]
    stats = [s if s is not None and s.mtime_ns < racy else None for s in states]
    names = pl.DataFrame(
        {"key": keys, "source_file": [ingest.source_file_name(landing.file_name(k)) for k in keys],
         "looked": [s.sha256 if s else None for s in states],
         "size": [s.size if s else None for s in stats], "mtime_ns": [s.mtime_ns if s else None for s in stats]},
        schema={"key": pl.String, "source_file": pl.String, "looked": pl.String, "size": pl.Int64, "mtime_ns": pl.Int64},
    )
    return (
        names.join(parsed.select("source_file", "sha256", "size_bytes"), on="source_file", how="left", validate="1:1")
        .select(
            "key", "source_file",
            sha256=pl.coalesce("sha256", pl.when(pl.col("size_bytes") > max_file_bytes).then("looked")),
            batch=pl.lit(batch), parsed_by=pl.lit(parsed_by), size="size", mtime_ns="mtime_ns",
        )
        .sort("source_file")
    )


def parsed_states(manifest_frame: pl.DataFrame) -> dict[str, landing.FileState]:
    """Each file of a manifest as it was when it was parsed (landing.detect_changes' ``parsed``)."""
    rows = manifest_frame.select("key", "size", "mtime_ns", "sha256").rows()
    return {key: landing.FileState(size, mtime, sha) for key, size, mtime, sha in rows if size is not None and mtime is not None}


# Batches a landing file's rows may be spread over before a run folds the smallest ones into its
# own batch (by parsing their files again): keeps the merge of the stage's batches short.
MAX_BATCHES = 16


@dataclass(frozen=True)
class ParsedChanges:
    manifest: pl.DataFrame  # every landing file the plan keeps, and the batch holding its rows
    parsed: pl.DataFrame  # source_files rows of the files parsed now
    folded: list[str]  # keys parsed again only to fold small batches
    batch: str  # the batch the files parsed now went to


def parse_changes(warehouse: Path, root: Path, plan: landing.Plan, previous: pl.DataFrame, parsed_by: str,
                  max_file_bytes: int = ingest.DEFAULT_MAX_FILE_BYTES,
                  max_record_chars: int = ingest.DEFAULT_MAX_RECORD_CHARS) -> ParsedChanges:
    """What a run's parse step does once it has its plan (landing.Plan, made against the
    ``previous`` manifest): the plan's files parsed into a new batch, with the files of the
    smallest batches when the files kept would otherwise span more than MAX_BATCHES, and the
    new manifest: the files kept where they are, and those parsed now."""
    kept = previous.filter(pl.col("key").is_in(plan.changes.present) & ~pl.col("key").is_in(plan.to_parse))
    # The new batch counts too when the run parses anything (and it does when it folds any).
    new_batch = bool(plan.to_parse) or kept["batch"].n_unique() > MAX_BATCHES
    folded = fold_small_batches(kept, plan.changes.growing, MAX_BATCHES - new_batch)
    to_parse = sorted(plan.to_parse + folded)
    kept = kept.filter(~pl.col("key").is_in(to_parse))
    batch = new_batch_id()
    parsed = parse_batch(warehouse, root, to_parse, batch, max_file_bytes, max_record_chars)
    fresh = manifest(to_parse, batch, parsed, plan.looked, parsed_by, max_file_bytes)
    return ParsedChanges(pl.concat([kept, fresh]).sort("source_file"), parsed, folded, batch)


def fold_small_batches(kept: pl.DataFrame, growing: list[str], limit: int) -> list[str]:
    """The keys of the files of the smallest batches to parse again, so that what stays of
    ``kept`` spans at most ``limit`` batches. A batch holding a file still ``growing`` stays as it
    is: that file is never read half-written (the bound then waits for a later run)."""
    sizes = (
        kept.group_by("batch")
        .agg(pl.len(), pl.col("key"), busy=pl.col("key").is_in(growing).any())
        .sort("len", "batch")
    )
    excess = max(sizes.height - limit, 0)
    foldable = sizes.filter(~pl.col("busy")).head(excess)
    return sorted(key for keys in foldable["key"].to_list() for key in keys)


def manifest_digest(manifest_frame: pl.DataFrame) -> str:
    """What the manifest's files are (keys and sha256, not where they are staged): equal digests,
    equal landing folders as far as a run can tell."""
    rows = sorted(manifest_frame.select("key", "sha256").rows(), key=lambda row: row[0])
    return xxhash.xxh3_128_hexdigest(json.dumps(rows).encode())


def known_files(warehouse: Path, manifest_frame: pl.DataFrame | None, parsed_by: str) -> pl.DataFrame:
    """The rows of a manifest parsed by ``parsed_by`` (parse_version) whose batch is staged: the
    others must be parsed again. An empty manifest when there is none, or when it is another
    release's (other columns)."""
    if manifest_frame is None or set(manifest_frame.columns) != set(MANIFEST_SCHEMA):
        return pl.DataFrame(schema=MANIFEST_SCHEMA)
    staged = [b for b in manifest_frame["batch"].unique().to_list() if batch_folder(warehouse, b).is_dir()]
    return manifest_frame.filter(pl.col("batch").is_in(staged) & (pl.col("parsed_by") == parsed_by))


def delta_path(table_path: Path, build: str) -> Path:
    """The rows of a staged landing table that its suite checks validate under ``build``
    (build_info.fingerprint), which chose them: ``<table>.delta-<build>.parquet``. Another
    build finds none, and validates the whole table."""
    return table_path.with_name(f"{table_path.name.removesuffix('.parquet')}.delta-{build[:16]}.parquet")


def scope_path(table_path: Path, build: str, papers: Path) -> Path:
    """The papers (paper_id) whose rows a staged per-paper table's checks validate: those the run
    worked out. The rows of every other paper are the previous table's, which met its checks'
    every expectation then (suites.SuiteCheck.per_paper). Under ``build`` and against the
    ``papers`` table it was computed from (named by the run that staged it):
    ``<table>.checked-<build>-<papers run>.parquet``; none: the whole table."""
    return table_path.with_name(f"{table_path.name.removesuffix('.parquet')}.checked-{build[:16]}-{papers.parent.name}.parquet")


def write_scope(table_path: Path, build: str, papers: Path, checked: pl.Series | None) -> None:
    """Stage ``scope_path``: the papers ``checked`` (None: the whole table is validated; a
    retried step's scope is removed)."""
    scope = scope_path(table_path, build, papers)
    scope.unlink(missing_ok=True)
    if checked is not None:
        write(checked.unique().to_frame("paper_id"), scope)


def passed_path(table_path: Path, check: str, build: str, papers: Path) -> Path:
    """Beside a staged table: its every row met every expectation of ``check`` under ``build``,
    against the ``papers`` table (named by the run that staged it)."""
    return table_path.with_name(f"{table_path.name.removesuffix('.parquet')}.passed-{check}-{build[:16]}-{papers.parent.name}")


def stage_landing_tables(warehouse: Path, manifest_frame: pl.DataFrame, folder: Path, build: str,
                         to_validate: Collection[str] | None = None) -> dict[str, Path]:
    """Each parsed table with the rows of exactly the manifest's files, each from the batch the
    manifest names, staged in ``folder`` as a folder of Parquet parts, ``<table>.parquet.partial/``
    (the IO manager moves it to ``<table>.parquet/``, the layout Polars, Spark and DuckDB's globs
    read as one table). A batch part whose files all stay is hard-linked, never read or written
    again; one that also holds files since changed or removed is rewritten without them. So a run
    after a small change costs its own batch, not the whole table. Rows come batch by batch, each
    in source_file order: a table has no order (ORDER BY when it matters).

    Beside each table, ``delta_path(table, build)`` holds the same way the rows of the files
    ``to_validate`` (None: every file), which ``build`` chose: what its suite checks validate.

    Raises FileNotFoundError naming a batch that is not staged."""
    schemas = {table: frame.schema for table, frame in ingest.file_tables([]).items()}
    out = {table: folder / f"{table}.parquet.partial" for table in schemas}
    deltas = {table: delta_path(folder / f"{table}.parquet", build).with_suffix(".parquet.partial") for table in schemas}
    for path in [*out.values(), *deltas.values()]:
        shutil.rmtree(path, ignore_errors=True)
        path.mkdir(parents=True)
    count = delta_count = 0
    for batch, files in manifest_frame.group_by("batch").agg("source_file").sort("batch").rows():
        source = batch_folder(warehouse, batch)
        parts = sorted((source / "source_files").glob("*.parquet"))
        if not parts:
            raise FileNotFoundError(f"batch {batch} of the parsed files is not staged in {warehouse}: "
                                    "run again (a full refresh if it persists)")
        for part in parts:  # a part's files are those of its source_files rows, in every table
            held = set(pl.read_parquet(part, columns=["source_file"])["source_file"])
            kept = held.intersection(files)
            fresh = kept if to_validate is None else kept.intersection(to_validate)
            for table in schemas:
                _select_part(source / table / part.name, held, kept, out[table] / f"{count:06d}.parquet")
                _select_part(source / table / part.name, held, fresh, deltas[table] / f"{delta_count:06d}.parquet")
            count += bool(kept)
            delta_count += bool(fresh)
    for table, schema in schemas.items():  # an empty table is still a table: one part with its columns
        for target, parts_written in ((out[table], count), (deltas[table], delta_count)):
            if not parts_written:
                write(pl.DataFrame(schema=schema), target / f"{0:06d}.parquet")
        final = delta_path(folder / f"{table}.parquet", build)
        shutil.rmtree(final, ignore_errors=True)
        deltas[table].replace(final)
    return out


def _select_part(source: Path, held: set[str], wanted: set[str], target: Path) -> None:
    """The rows of the files ``wanted`` of the part ``source`` (holding the files ``held``) at
    ``target``: the part itself, linked, when it holds nothing else; nothing when none."""
    if wanted == held:
        link_or_copy(source, target)
    elif wanted:
        write(pl.scan_parquet(source).filter(pl.col("source_file").is_in(wanted)), target)


@dataclass(frozen=True)
class PartsStaged:
    """What ``stage_parts`` did with the parts of the previous table, and how many it wrote."""

    linked: int
    rewritten: int
    written: int


def placement_path(table: Path) -> Path:
    """Beside a table staged as parts (``stage_parts``): which part holds the rows of each key."""
    return table.with_name(f"{table.name.removesuffix('.parquet')}.placement.parquet")


def placement(table: Path, key: str) -> pl.DataFrame | None:
    """``(key, part)`` of every key of the table staged as parts in the folder ``table``, each
    part by its file name, when ``stage_parts`` left that beside it for exactly these parts
    (None: otherwise, as for a table of an older release or one file). What makes a placement
    that names only parts the folder holds right: a part's name is never given to other bytes
    (every part written gets a new batch id; a linked part keeps its name and bytes)."""
    path = placement_path(table)
    if not table.is_dir() or not path.exists():
        return None
    placed = pl.read_parquet(path)
    names, placed_names = {part.name for part in table.glob("*.parquet")}, set(placed["part"].unique())
    # Every part it names is there, and every other part is empty (the one part of an empty table).
    if key not in placed.columns or placed_names - names or any(
            pl.scan_parquet(table / name).select(pl.len()).collect().item() for name in names - placed_names):
        return None
    return placed.select(key, "part")


def rows_of(table: Path, key: str, keys: pl.Series | None, *columns: str) -> pl.DataFrame:
    """``columns`` of the rows of the staged ``table`` (a file, or a folder of parts) whose
    ``key`` is in ``keys`` (None: every row), in the table's order; of a table staged as parts,
    only the parts that hold them are read, by its placement."""
    if keys is None:
        return pl.scan_parquet(table).select(columns).collect()
    placed = placement(table, key)
    if placed is None:
        return pl.scan_parquet(table).filter(pl.col(key).is_in(keys.implode())).select(columns).collect()
    names = placed.filter(pl.col(key).is_in(keys.implode()))["part"].unique().sort().to_list()
    if not names:  # the columns, from any one part
        return pl.scan_parquet(table / placed["part"][0] if placed.height else table).select(columns).clear().collect()
    return pl.scan_parquet([table / name for name in names]).filter(pl.col(key).is_in(keys.implode())).select(columns).collect()


def stage_parts(folder: Path, before: Path | None, key: str, kept: pl.Series | None, fresh: pl.DataFrame,
                rows_per_part: int, max_parts: int, placed: Path | None = None, dropped: pl.Series | None = None) -> PartsStaged:
    """A table staged in ``folder`` as Parquet parts: the rows of ``before`` (a staged table,
    one file or a folder of parts; None: none) whose ``key`` is in ``kept``, or, with ``kept``
    None, not in ``dropped`` (the fewer when a run changes little; None: no key), then
    ``fresh``, all of ``fresh``'s columns. A part of ``before`` whose rows all stay is hard-linked, never
    decoded (at most its key column is read, when ``before`` has no placement); one that keeps
    some is rewritten without the others, streamed; ``fresh`` goes to new parts of
    ``rows_per_part`` rows, in order. So a run that changes a few rows writes those and the
    parts they leave, not the table. Beyond ``max_parts`` parts, the smallest are merged into
    one, so a run's few fresh rows do not make a part each forever. The table's rows have no
    order (ORDER BY when it matters).

    Which part holds each key is staged at ``placed`` (default: placement_path(folder); give
    the table's final name when ``folder`` is moved there later): the next run reads that
    instead of every part's keys, and ``rows_of`` reads only the parts it needs."""
    shutil.rmtree(folder, ignore_errors=True)  # a retried step's parts
    folder.mkdir(parents=True)
    key_type = fresh.schema[key]
    held = pl.DataFrame(schema={key: key_type, "part": pl.String})
    parts: dict[str, Path] = {}
    if before is not None and (kept is None or not kept.is_empty()):
        parts = {path.name: path for path in (sorted(before.glob("*.parquet")) if before.is_dir() else [before])}
        found = placement(before, key)
        held = found.cast({key: key_type}) if found is not None else pl.concat(
            [held, *(pl.read_parquet(path, columns=[key]).cast(key_type).unique().with_columns(part=pl.lit(name))
                     for name, path in parts.items())])
    # What each part loses (few rows, against all it keeps), by one lookup of every key.
    stays = pl.col(key).is_in(kept.implode()) if kept is not None else ~pl.col(key).is_in(
        (pl.Series(dtype=key_type) if dropped is None else dropped).implode())
    held = held.with_columns(stays=stays)
    losing = held.group_by("part").agg(all_go=~pl.col("stays").any(), gone=pl.col(key).filter(~pl.col("stays")))
    linked = 0
    renamed: dict[str, str] = {}
    rewrites = []
    for name, all_go, gone in losing.sort("part").iter_rows():
        if all_go:
            continue
        if not gone and pl.read_parquet_schema(parts[name]) == fresh.schema:
            link_or_copy(parts[name], folder / name)
            linked += 1
        else:
            renamed[name] = f"{new_batch_id()}.parquet"
            rewrites.append((pl.scan_parquet(parts[name]).filter(~pl.col(key).is_in(pl.Series(gone, dtype=key_type).implode()))
                             .select(fresh.columns).cast(fresh.schema), folder / renamed[name]))
    write_each(rewrites)
    rewritten = len(rewrites)
    prefix = new_batch_id()
    starts = range(0, fresh.height, rows_per_part)
    fresh_parts = [pl.DataFrame(schema={key: key_type, "part": pl.String})]
    for number, start in enumerate(starts):
        name, rows = f"{prefix}-{number:05d}.parquet", fresh.slice(start, rows_per_part)
        write(rows, folder / name)
        fresh_parts.append(rows.select(key).unique(maintain_order=True).with_columns(part=pl.lit(name)))
    merged = _merge_smallest(folder, rows_per_part, max_parts)
    if not any(folder.glob("*.parquet")):  # an empty table is still a table, with its columns
        write(fresh.clear(), folder / f"{prefix}.parquet")
    now = pl.concat([held.filter("stays").select(key, "part").with_columns(pl.col("part").replace(renamed)), *fresh_parts])
    if merged:  # a key whose rows lay in two of the parts merged: one row
        now = now.with_columns(pl.col("part").replace(merged)).unique(maintain_order=True)
    write(now, placed or placement_path(folder))
    return PartsStaged(linked, rewritten, len(starts) + bool(merged))


def _merge_smallest(folder: Path, rows_per_part: int, max_parts: int) -> dict[str, str]:
    """Beyond ``max_parts`` parts in ``folder``, the smallest ones holding at most
    ``rows_per_part`` rows together as one new part (never a part larger than a fresh one: a big
    table has more parts instead); returns the new part's name by the name of each it merged."""
    parts = sorted(folder.glob("*.parquet"))
    if len(parts) <= max_parts:
        return {}
    rows = pl.DataFrame({"part": range(len(parts)), "rows": [pl.scan_parquet(path).select(pl.len()).collect().item() for path in parts]})
    chosen = rows.sort("rows", "part").filter(pl.col("rows").cum_sum() <= rows_per_part)["part"].sort()
    if chosen.len() < 2:
        return {}
    smallest = [parts[number] for number in chosen]
    name = f"{new_batch_id()}.parquet"
    write(pl.concat([pl.scan_parquet(path) for path in smallest]), folder / name)
    for path in smallest:
        path.unlink()
    return {path.name: name for path in smallest}


def link_or_copy(source: Path, target: Path) -> None:
    """A second name for ``source``'s bytes: later removing either name leaves the other whole.
    Never writes into an existing ``target`` (it may be another name of a published file)."""
    try:
        os.link(source, target)
    except OSError as exc:
        if exc.errno not in _NO_HARD_LINK:
            raise
        partial = target.with_name(target.name + ".partial")
        shutil.copyfile(source, partial)
        partial.replace(target)


# Why a hard link cannot be made where a copy can: another device, a file system without them.
_NO_HARD_LINK = {errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP, errno.EOPNOTSUPP}


def prune_batches(warehouse: Path, keep: set[str]) -> int:
    """Delete the staged batches not in ``keep``, the folders of other table schemas, and anything
    else in the current one (what older releases staged per file); returns how many batches went."""
    current = _parsed_folder(warehouse)
    removed = 0
    for folder in (warehouse / STAGE).glob(f"{PARSED}@*"):
        if folder != current:
            shutil.rmtree(folder, ignore_errors=True)
            continue
        for path in folder.iterdir():
            if path.name == BATCHES:
                continue
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
        for batch in (folder / BATCHES).glob("*"):
            if batch.name not in keep:
                shutil.rmtree(batch, ignore_errors=True)
                removed += 1
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
