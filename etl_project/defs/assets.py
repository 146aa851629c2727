"""Assets: each one calls a stage function and describes its output for the UI."""

import dagster as dg
import polars as pl

from etl_project import dedup, ingest, normalize, publish
from etl_project.defs.metadata import markdown_table, table_metadata
from etl_project.defs.resources import EtlSettings

PUBLISHED_TABLES = (
    "source_files", "raw_records", "rejected_records", "records",
    "papers", "paper_occurrences", "source_overlap",
)


@dg.multi_asset(
    outs={
        "source_files": dg.AssetOut(
            description="One row per file seen in the landing folder: sha256, size, encoding, "
            "title, record count, status ('ok', 'empty', 'rejected') and why it was rejected.",
            kinds={"polars"},
        ),
        "raw_records": dg.AssetOut(
            description="One row per paragraph after the title, exactly as decoded (LF line "
            "endings), with its file, 1-based ordinal and line span.",
            kinds={"polars"},
        ),
        "rejected_records": dg.AssetOut(
            description="Paragraphs that decoded but are not plausible records, with the reason.",
            kinds={"polars"},
        ),
    },
    group_name="ingest",
)
def landing_files(context: dg.AssetExecutionContext, etl: EtlSettings):
    """Read every file of the landing folder, decode it and split it into paragraphs."""
    files = ingest.read_landing_folder(etl.seeds, etl.max_file_bytes)
    parsed = ingest.parse_files(files, etl.max_record_chars)
    refused = parsed.source_files.filter(pl.col("status") == "rejected")
    for row in refused.iter_rows(named=True):
        context.log.warning(f"refused {row['source_file']!r}: {row['error']}")
    by_status = dict(parsed.source_files.group_by("status").len().iter_rows())
    yield dg.Output(
        parsed.source_files,
        "source_files",
        metadata={
            **table_metadata(parsed.source_files),
            **{f"files_{status}": by_status.get(status, 0) for status in ("ok", "empty", "rejected")},
            "refused": dg.MetadataValue.md(markdown_table(refused.select("source_file", "error"))),
            "landing_folder": dg.MetadataValue.path(str(etl.seeds)),
        },
    )
    yield dg.Output(parsed.raw_records, "raw_records", metadata=table_metadata(parsed.raw_records))
    yield dg.Output(
        parsed.rejected_records,
        "rejected_records",
        metadata={
            **table_metadata(parsed.rejected_records),
            "by_reason": dg.MetadataValue.md(markdown_table(parsed.rejected_records.group_by("reason").len().sort("reason"))),
        },
    )


@dg.asset(group_name="transform", kinds={"polars"})
def records(raw_records: pl.DataFrame) -> dg.Output[pl.DataFrame]:
    """One row per raw record: display text (NFKC, invisible characters removed, whitespace
    folded) and the dedup key (also case, quotes and dashes folded). raw_text stays as it was."""
    frame = normalize.normalize_records(raw_records)
    changed = frame.join(raw_records.select("record_id", "raw_text"), on="record_id").filter(
        pl.col("text") != pl.col("raw_text")
    )
    return dg.Output(frame, metadata={**table_metadata(frame), "records_with_changed_text": changed.height})


@dg.multi_asset(
    outs={
        "papers": dg.AssetOut(
            description="One row per distinct abstract (exact and near duplicates merged); paper_id is "
            "XXH3-64 of the canonical record's dedup key. Canonical record: the first by (source_file, ordinal).",
            kinds={"polars"},
        ),
        "paper_occurrences": dg.AssetOut(
            description="One row per raw record: the paper it belongs to and how it matched "
            "('canonical', 'exact', or 'near' with its verified Jaccard similarity to the canonical).",
            kinds={"polars"},
        ),
    },
    group_name="transform",
)
def deduplicated(records: pl.DataFrame):
    """Exact, then near-duplicate deduplication of records into papers (etl_project.near_dedup)."""
    papers, occurrences = dedup.deduplicate(records)
    duplicates = occurrences.height - papers.height
    summary = {
        "records": occurrences.height,
        "papers": papers.height,
        "duplicate_records": duplicates,
        "duplicate_rate": round(duplicates / occurrences.height, 4) if occurrences.height else 0.0,
        "papers_in_several_files": papers.filter(pl.col("source_count") > 1).height,
        "largest_group": int(papers["occurrence_count"].max() or 0),
        "near_clusters": papers.filter(pl.col("variant_count") > 1).height,
        "near_records": occurrences.filter(pl.col("match_kind") == "near").height,
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


@dg.asset(group_name="transform", kinds={"polars"})
def source_overlap(paper_occurrences: pl.DataFrame) -> dg.Output[pl.DataFrame]:
    """For each pair of files sharing papers: how many, and the Jaccard index of their paper sets."""
    frame = dedup.source_overlap(paper_occurrences)
    return dg.Output(frame, metadata=table_metadata(frame))


@dg.asset(
    group_name="publish",
    kinds={"duckdb", "parquet"},
    ins={name: dg.AssetIn(name) for name in PUBLISHED_TABLES},
)
def warehouse(context: dg.AssetExecutionContext, etl: EtlSettings, **tables: pl.DataFrame) -> dg.MaterializeResult:
    """Publish every table as zstd Parquet (warehouse/parquet/) and into warehouse/warehouse.duckdb,
    atomically: readers see the previous release or this one. Runs only when no blocking check failed."""
    release = publish.publish(dict(tables), etl.warehouse, publish.new_release_id())
    context.log.info(f"published release {release.release_id} to {etl.warehouse}")
    return dg.MaterializeResult(
        metadata={
            "release_id": release.release_id,
            "duckdb": dg.MetadataValue.path(str(release.duckdb_path)),
            "parquet": dg.MetadataValue.path(str(release.parquet_dir)),
            **{f"rows/{name}": count for name, count in release.row_counts.items()},
        }
    )
