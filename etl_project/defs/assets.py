"""Assets: each one calls a stage function and describes its output for the UI."""

import dagster as dg
import polars as pl

from etl_project import dedup, ingest, integrity, landing, normalize, publish, stage
from etl_project.defs import launch
from etl_project.defs.metadata import OWNERS, markdown_table, run_metadata, table_metadata
from etl_project.enrich.markup import plain_text
from etl_project.defs.partitions import LANDING_FILES, ONE_RUN_PER_BATCH, WAREHOUSE_POOL
from etl_project.defs.resources import EtlSettings

PER_FILE_ASSETS = ("source_files", "raw_records", "rejected_records", "records")
PUBLISHED_TABLES = (
    "source_files", "raw_records", "rejected_records", "records",
    "papers", "paper_occurrences", "source_overlap",
    "paper_links", "paper_names", "paper_topics",
)


PER_FILE = {"partitions_def": LANDING_FILES, "backfill_policy": ONE_RUN_PER_BATCH, "pool": WAREHOUSE_POOL}
# Per-partition metadata costs Dagster a lookup of every partition per call: give it to the runs
# of a few files (what the sensor launches), not to a full refresh of thousands.
PER_PARTITION_METADATA_LIMIT = 50


def by_partition(frame: pl.DataFrame, names: dict[str, str]) -> dict[str, pl.DataFrame]:
    """Split a frame of several files into ``{partition_key: rows of that file}``, with an empty
    frame for a file that has no rows."""
    parts = {name: part for (name,), part in frame.partition_by("source_file", as_dict=True).items()}
    return {key: parts.get(name, frame.clear()) for key, name in names.items()}


@dg.multi_asset(
    outs={
        "source_files": dg.AssetOut(
            description="One row per file seen in the landing folder: sha256, size, encoding, "
            "title, record count, status ('ok', 'empty', 'rejected') and why it was rejected.",
            kinds={"polars"},
            owners=OWNERS,
        ),
        "raw_records": dg.AssetOut(
            description="One row per paragraph after the title, exactly as decoded (LF line "
            "endings), with its file, 1-based ordinal and line span.",
            kinds={"polars"},
            owners=OWNERS,
        ),
        "rejected_records": dg.AssetOut(
            description="Paragraphs that decoded but are not plausible records, with the reason.",
            kinds={"polars"},
            owners=OWNERS,
        ),
    },
    group_name="ingest",
    **PER_FILE,
)
def landing_files(context: dg.AssetExecutionContext, etl: EtlSettings):
    """Read the files of this run's partitions (one partition per landing file), decode them and
    split them into paragraphs. A file that cannot be read becomes a 'rejected' row with the
    reason, never a failed step."""
    launch.tag_run_with_process(context)
    names = {key: landing.file_name(key) for key in context.partition_keys}
    files = [ingest.read_landing_file(etl.seeds / name, etl.seeds, etl.max_file_bytes) for name in names.values()]
    parsed = ingest.parse_files(files, etl.max_record_chars)
    refused = parsed.source_files.filter(pl.col("status") == "rejected")
    for row in refused.iter_rows(named=True):
        context.log.warning(f"refused {row['source_file']!r}: {row['error']}")
    if len(names) <= PER_PARTITION_METADATA_LIMIT:
        rows = {row["source_file"]: row for row in parsed.source_files.iter_rows(named=True)}
        for key, name in names.items():
            row = rows[name]
            about = {"source_file": name, "sha256": row["sha256"] or "", "status": row["status"]}
            counts = {"source_files": 1, "raw_records": row["record_count"], "rejected_records": row["rejected_count"]}
            for asset, count in counts.items():
                context.add_asset_metadata({**about, "dagster/row_count": count}, asset_key=asset, partition_key=key)
    by_status = dict(parsed.source_files.group_by("status").len().iter_rows())
    yield dg.Output(
        by_partition(parsed.source_files, names),
        "source_files",
        metadata={
            **run_metadata(parsed.source_files),
            **{f"files_{status}": by_status.get(status, 0) for status in ("ok", "empty", "rejected")},
            "refused": dg.MetadataValue.md(markdown_table(refused.select("source_file", "error"))),
            "landing_folder": dg.MetadataValue.path(str(etl.seeds)),
        },
    )
    yield dg.Output(by_partition(parsed.raw_records, names), "raw_records", metadata=run_metadata(parsed.raw_records))
    yield dg.Output(
        by_partition(parsed.rejected_records, names),
        "rejected_records",
        metadata={
            **run_metadata(parsed.rejected_records),
            "by_reason": dg.MetadataValue.md(markdown_table(parsed.rejected_records.group_by("reason").len().sort("reason"))),
        },
    )


@dg.asset(group_name="transform", kinds={"polars"}, owners=OWNERS, **PER_FILE)
def records(context: dg.AssetExecutionContext, raw_records: pl.DataFrame) -> dg.Output[dict[str, pl.DataFrame]]:
    """One row per raw record: display text (NFKC, invisible characters removed, whitespace
    folded) and the dedup key (also case, quotes and dashes folded). raw_text stays as it was."""
    frame = normalize.normalize_records(raw_records)
    changed = frame.join(raw_records.select("record_id", "raw_text"), on="record_id").filter(
        pl.col("text") != pl.col("raw_text")
    )
    names = {key: landing.file_name(key) for key in context.partition_keys}
    return dg.Output(
        by_partition(frame, names),
        metadata={**run_metadata(frame), "records_with_changed_text": changed.height},
    )


@dg.multi_asset(
    outs={
        "papers": dg.AssetOut(
            description="One row per distinct abstract; paper_id is XXH3-64 of the dedup key. "
            "Canonical record: the first by (source_file, ordinal).",
            kinds={"polars"},
            owners=OWNERS,
        ),
        "paper_occurrences": dg.AssetOut(
            description="One row per raw record: the paper it belongs to and how it matched.",
            kinds={"polars"},
            owners=OWNERS,
        ),
    },
    group_name="transform",
    pool=WAREHOUSE_POOL,
)
def deduplicated(context: dg.AssetExecutionContext, records: pl.DataFrame):
    """Exact deduplication of records into papers."""
    launch.tag_run_with_process(context)
    papers, occurrences = dedup.deduplicate(records)
    papers = papers.with_columns(abstract_plain=plain_text(pl.col("abstract")))  # for display and search
    duplicates = occurrences.height - papers.height
    summary = {
        "records": occurrences.height,
        "papers": papers.height,
        "duplicate_records": duplicates,
        "duplicate_rate": round(duplicates / occurrences.height, 4) if occurrences.height else 0.0,
        "papers_in_several_files": papers.filter(pl.col("source_count") > 1).height,
        "largest_group": int(papers["occurrence_count"].max() or 0),
    }
    yield dg.Output(papers, "papers", metadata={**table_metadata(papers.drop("dedup_key")), **summary})
    yield dg.Output(
        occurrences,
        "paper_occurrences",
        metadata={
            **table_metadata(occurrences),
            "by_match_kind": dg.MetadataValue.md(markdown_table(occurrences.group_by("match_kind").len().sort("match_kind"))),
        },
    )


@dg.asset(group_name="transform", kinds={"polars"}, owners=OWNERS, pool=WAREHOUSE_POOL)
def source_overlap(paper_occurrences: pl.DataFrame) -> dg.Output[pl.DataFrame]:
    """For each pair of files sharing papers: how many, and the Jaccard index of their paper sets."""
    frame = dedup.source_overlap(paper_occurrences)
    return dg.Output(frame, metadata=table_metadata(frame))


@dg.asset(
    group_name="publish",
    kinds={"duckdb", "parquet"},
    owners=OWNERS,
    ins={name: dg.AssetIn(name) for name in PUBLISHED_TABLES},
    pool=WAREHOUSE_POOL,
)
def warehouse(context: dg.AssetExecutionContext, etl: EtlSettings, **tables: pl.DataFrame) -> dg.MaterializeResult:
    """Publish every table as zstd Parquet (warehouse/parquet/) and into warehouse/warehouse.duckdb,
    atomically: readers see the previous release or this one. Runs only when no blocking check
    failed, and refuses to publish tables that do not describe the same files (a newer run
    changed partitions while this one was in progress: that run publishes)."""
    problems = integrity.cross_table_problems(tables)
    if problems:
        raise dg.Failure("not publishing inconsistent tables: " + "; ".join(problems))
    release = publish.publish(dict(tables), etl.warehouse, publish.new_release_id())
    context.log.info(f"published release {release.release_id} to {etl.warehouse}")
    current = context.instance.get_dynamic_partitions(LANDING_FILES.name)
    removed = stage.prune_partitions(etl.warehouse, PER_FILE_ASSETS, current)
    files = tables["source_files"]
    by_status = dict(files.group_by("status").len().iter_rows())
    refused = files.filter(pl.col("status") == "rejected").select("source_file", "error")
    return dg.MaterializeResult(
        metadata={
            "release_id": release.release_id,
            "duckdb": dg.MetadataValue.path(str(release.duckdb_path)),
            "parquet": dg.MetadataValue.path(str(release.parquet_dir)),
            **{f"rows/{name}": count for name, count in release.row_counts.items()},
            **{f"files_{status}": by_status.get(status, 0) for status in ("ok", "empty", "rejected")},
            "refused": dg.MetadataValue.md(markdown_table(refused)),
            "stage_files_pruned": removed,
        }
    )
