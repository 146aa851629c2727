"""Assets: each one calls a stage function and describes its output for the UI."""

from pathlib import Path

import dagster as dg
import polars as pl

from etl_project import dedup, ingest, integrity, landing, publish, stage
from etl_project.defs import launch
from etl_project import contract
from etl_project.defs.metadata import OWNERS, non_empty, status_counts, table_metadata, table_value
from etl_project.defs.partitions import LANDING_FILES, ONE_RUN_PER_BATCH
from etl_project.defs.resources import EtlSettings, GxValidation
from etl_project.enrich.markup import with_plain_text

PUBLISHED_TABLES = (
    "source_files", "raw_records", "rejected_records", "records",
    "papers", "paper_occurrences", "source_overlap",
    "paper_links", "paper_names", "paper_topics",
)
# Per-partition metadata costs Dagster a lookup of every partition per call: give it to the runs
# of a few files (what the sensor launches), not to a full refresh of thousands.
PER_PARTITION_METADATA_LIMIT = 50


@dg.asset(
    group_name="ingest",
    kinds={"polars"},
    owners=OWNERS,
    partitions_def=LANDING_FILES,
    backfill_policy=ONE_RUN_PER_BATCH,
)
def parsed_files(context: dg.AssetExecutionContext, etl: EtlSettings) -> dg.Output[None]:
    """Each landing file (one partition per file) read, decoded, split into title and paragraphs,
    and its paragraphs normalized; kept per file so a run parses only new and changed files.
    A file that cannot be read becomes a 'rejected' row with the reason, never a failed step.
    Files are parsed in batches of about stage.BATCH_BYTES, each staged before the next is read, so a
    run of any number of files holds one batch in memory."""
    launch.tag_run_with_process(context)
    keys = list(context.partition_keys)
    paths = [etl.seeds / landing.file_name(key) for key in keys]
    names: dict[str, str] = {}  # partition key -> source_file, as the tables name it
    parts = []
    for indexes in stage.batches(paths):
        files = [ingest.read_landing_file(paths[i], etl.seeds, etl.max_file_bytes) for i in indexes]
        batch = {keys[i]: file.source_file for i, file in zip(indexes, files)}
        tables = ingest.file_tables(files, etl.max_record_chars)
        del files
        for key, per_file in split_by_file(tables, batch).items():
            stage.write_partition(etl.warehouse, launch.PER_FILE_ASSET, key, per_file)
        names |= batch
        parts.append(tables["source_files"])
    source_files = pl.concat(parts) if parts else ingest.file_tables([])["source_files"]
    refused = source_files.filter(pl.col("status") == "rejected")
    for row in refused.iter_rows(named=True):
        context.log.warning(f"refused {row['source_file']!r}: {row['error']}")
    if len(keys) <= PER_PARTITION_METADATA_LIMIT:
        rows = {row["source_file"]: row for row in source_files.iter_rows(named=True)}
        for key, name in names.items():
            row = rows[name]
            context.add_asset_metadata(
                non_empty({"source_file": name, "sha256": row["sha256"], "status": row["status"],
                           "encoding": row["encoding"], "error": row["error"],
                           "records": row["record_count"], "rejected_records": row["rejected_count"]}),
                partition_key=key,
            )
    return dg.Output(
        None,  # the partitions are staged above, batch by batch
        metadata=non_empty({
            "files_in_run": len(keys),
            **status_counts(source_files),
            "records_in_run": int(source_files["record_count"].sum()),
            "rejected_records_in_run": int(source_files["rejected_count"].sum()),
            "refused": table_value(refused.select("source_file", "error")),
            "landing_folder": dg.MetadataValue.path(str(etl.seeds)),
        }),
    )


def split_by_file(tables: dict[str, pl.DataFrame], names: dict[str, str]) -> dict[str, dict[str, pl.DataFrame]]:
    """``{partition_key: {table: that file's rows}}``; a file with no rows gets empty frames."""
    parts = {
        table: {name: rows for (name,), rows in frame.partition_by("source_file", as_dict=True).items()}
        for table, frame in tables.items()
    }
    return {
        key: {table: parts[table].get(name, frame.clear()) for table, frame in tables.items()}
        for key, name in names.items()
    }


@dg.multi_asset(
    outs={
        "source_files": dg.AssetOut(
            description=contract.TABLES["source_files"].summary,
            kinds={"polars"}, owners=OWNERS, group_name="ingest",
        ),
        "raw_records": dg.AssetOut(
            description=contract.TABLES["raw_records"].summary,
            kinds={"polars"}, owners=OWNERS, group_name="ingest",
        ),
        "rejected_records": dg.AssetOut(
            description=contract.TABLES["rejected_records"].summary,
            kinds={"polars"}, owners=OWNERS, group_name="ingest",
        ),
        "records": dg.AssetOut(
            description=contract.TABLES["records"].summary,
            kinds={"polars"}, owners=OWNERS, group_name="transform",
        ),
    },
)
def landing_tables(parsed_files: dict[str, pl.LazyFrame]):
    """Every file's tables, from every partition of parsed_files (the files this run did not
    parse come from earlier runs), stacked into one table each, in file and paragraph order
    (the stage scans the partitions in file order), streamed from stage to stage."""
    for table in ("source_files", "raw_records", "rejected_records", "records"):
        frame = parsed_files[table]
        metadata = table_metadata(frame, table)
        if table == "source_files":
            metadata |= status_counts(frame.collect())
        elif table == "rejected_records":
            metadata |= non_empty({"by_reason": table_value(frame.group_by("reason").len().sort("reason").collect())})
        yield dg.Output(frame, table, metadata=metadata)


@dg.multi_asset(
    outs={
        "papers": dg.AssetOut(
            description=contract.TABLES["papers"].summary,
            kinds={"polars"},
            owners=OWNERS,
        ),
        "paper_occurrences": dg.AssetOut(
            description=contract.TABLES["paper_occurrences"].summary,
            kinds={"polars"},
            owners=OWNERS,
        ),
    },
    group_name="transform",
)
def deduplicated(context: dg.AssetExecutionContext, etl: EtlSettings, records: pl.LazyFrame):
    """Exact, then near-duplicate deduplication of records into papers (etl_project.near_dedup;
    the etl resource's near_duplicates and near_threshold settings)."""
    launch.tag_run_with_process(context)
    papers, occurrences = dedup.deduplicate(records, etl.near_config())
    papers = with_plain_text(papers, "abstract", "abstract_plain")  # for display and search
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
    yield dg.Output(papers, "papers", metadata={**table_metadata(papers, "papers"), **summary})
    yield dg.Output(
        occurrences,
        "paper_occurrences",
        metadata=non_empty({
            **table_metadata(occurrences, "paper_occurrences"),
            "by_match_kind": table_value(occurrences.group_by("match_kind").len().sort("match_kind")),
        }),
    )


@dg.asset(group_name="transform", kinds={"polars"}, owners=OWNERS)
def source_overlap(paper_occurrences: pl.LazyFrame) -> dg.Output[pl.DataFrame]:
    """For each pair of files sharing papers: how many, and the Jaccard index of their paper sets."""
    frame = dedup.source_overlap(paper_occurrences)
    return dg.Output(frame, metadata=table_metadata(frame, "source_overlap"))


@dg.asset(
    group_name="publish",
    kinds={"duckdb", "parquet"},
    owners=OWNERS,
    # The staged files themselves: publish links them into the lake's data path.
    ins={name: dg.AssetIn(name, dagster_type=Path) for name in PUBLISHED_TABLES},
    # After the checks' steps (checks.AFTER_ASSETS), so their verdicts show before the publish.
    op_tags={"dagster/priority": "-2"},
)
def warehouse(context: dg.AssetExecutionContext, etl: EtlSettings, gx: GxValidation, **staged: Path) -> dg.MaterializeResult:
    """Publish every table into the DuckLake (warehouse/catalog.sqlite + warehouse/data/) as one
    snapshot whose commit message names this run: readers see the previous snapshot or this one.
    Publishes only when every suite check passes at ERROR severity on the very files published,
    whichever run staged them (a check failing only WARN expectations does not stop it). Every
    table comes from this run's own stage; tables taken from earlier runs (a run of only some
    assets) must still line up, or nothing is published."""
    failed = gx.blocking_failures(context, etl.warehouse, staged)
    if failed:
        raise dg.Failure(f"not publishing: {len(failed)} check(s) failed at ERROR severity: {', '.join(failed)}")
    tables = {name: pl.scan_parquet(path) for name, path in staged.items()}
    problems = integrity.cross_table_problems(tables)
    if problems:
        raise dg.Failure("not publishing inconsistent tables: " + "; ".join(problems))
    target = etl.lake
    published = publish.publish(staged, target, context.run_id, build=etl.build_fingerprint())
    context.log.info(f"published snapshot {published.snapshot_id} of {target.catalog}")
    for note in published.notes:
        context.log.warning(note)
    current = context.instance.get_dynamic_partitions(LANDING_FILES.name)
    removed = stage.prune_partitions(etl.warehouse, launch.PER_FILE_ASSET, current)
    pruned_runs = stage.prune_runs(etl.warehouse, _still_needed(context))
    source_files = tables["source_files"].collect()
    refused = source_files.filter(pl.col("status") == "rejected").select("source_file", "error")
    return dg.MaterializeResult(
        metadata=non_empty({
            "snapshot_id": published.snapshot_id,
            "catalog": target.catalog,
            "data_path": dg.MetadataValue.path(target.data_path),
            "open_sql": dg.MetadataValue.path(str(target.warehouse / "open.sql")),
            **{f"rows/{name}": count for name, count in published.row_counts.items()},
            **status_counts(source_files),
            "refused": table_value(refused),
            "stage_files_pruned": removed,
            "stage_runs_pruned": pruned_runs,
        })
    )


def _still_needed(context: dg.AssetExecutionContext):
    """Which runs' staged outputs to keep: this run's, any run still going, and the runs that hold
    the latest materialization of a staged asset (what a later run of only some assets reads)."""
    latest = {
        event.run_id
        for key in context.assets_def.keys_by_input_name.values()
        if (event := context.instance.get_latest_materialization_event(key)) is not None
    }

    def keep(run_id: str) -> bool:
        if run_id == context.run_id or run_id in latest:
            return True
        run = context.instance.get_run_by_id(run_id)
        return run is not None and not run.is_finished

    return keep
