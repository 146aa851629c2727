"""Assets: each one calls a stage function and describes its output for the UI."""

from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import polars as pl

from etl_project import contract, dedup, dedup_memo, integrity, publish, settings, stage
from etl_project.defs import launch
from etl_project.defs.metadata import (
    OWNERS,
    non_empty,
    status_counts,
    table_metadata,
    table_value,
)
from etl_project.defs.resources import (
    EtlSettings,
    GxValidation,
    staged_file,
    staged_output,
)
from etl_project.enrich import reuse
from etl_project.enrich.markup import with_plain_text
from etl_project.quality import background

PUBLISHED_TABLES = (
    "source_files", "raw_records", "rejected_records", "records",
    "papers", "paper_occurrences", "source_overlap",
    "paper_links", "paper_names", "paper_topics", "paper_terms",
)
LISTED_FILES = 100  # files listed by name in a run's metadata; the counts cover every file


class ParseConfig(dg.Config):
    """How the parse step plans (launch.plan_run); the CLI, the sensor and the schedule set it."""

    full: bool = False  # parse every landing file again
    # Apply the removal of every published file, or of more than half of them (refused otherwise:
    # an empty or wrong landing folder must not empty the warehouse). ETL_ALLOW_REMOVALS=1 too.
    allow_removals: bool = False
    # Files modified more recently than this wait for a later run (the sensor's runs).
    settle_seconds: float = 0.0


# Not required: a run with nothing to do yields no manifest, and every later step is skipped.
@dg.asset(group_name="ingest", kinds={"polars"}, owners=OWNERS, output_required=False)
def parsed_files(context: dg.AssetExecutionContext, config: ParseConfig, etl: EtlSettings) -> Iterator[dg.Output[pl.DataFrame]]:
    """The landing folder compared with the last parse (by sha256), and its new and changed files
    read, decoded, split into title and paragraphs and normalized, in one staged batch; the value
    is the manifest: every landing file and the batch holding its rows. Files are parsed
    stage.BATCH_BYTES at a time, each part staged before the next is read, so a run of any
    number of files holds one part in memory. A file that cannot be read becomes a 'rejected'
    row with the reason, never a failed step. When nothing changed since the current snapshot
    (launch.unchanged_snapshot) and the run is not a full refresh, nothing is parsed or
    published: the run says so and its later steps are skipped."""
    launch.tag_run_with_process(context)
    previous = launch.last_manifest(context.instance, etl.warehouse, etl.parse_version())
    plan = launch.plan_run(context.instance, etl.seeds, etl.warehouse, config.full, config.settle_seconds, previous)
    refusal = launch.removal_refusal(plan, etl.warehouse)
    if refusal and not (config.allow_removals or settings.allow_removals()):
        raise dg.Failure(f"not parsing: {refusal}. If those files really are gone, run `etl-project run "
                         f"--allow-removals`, or launch with parsed_files config allow_removals: true")
    snapshot = launch.unchanged_snapshot(plan, etl.warehouse, etl.build_fingerprint(), previous)
    if snapshot is not None:
        context.log.info(f"nothing changed; snapshot {snapshot} stays current (a full refresh rebuilds anyway)")
        return
    done = stage.parse_changes(etl.warehouse, etl.seeds, plan, previous, etl.parse_version(), etl.max_file_bytes,
                               etl.max_record_chars)
    manifest, parsed = done.manifest, done.parsed
    refused = parsed.filter(pl.col("status") == "rejected")
    for row in refused.iter_rows(named=True):
        context.log.warning(f"refused {row['source_file']!r}: {row['error']}")
    listed = parsed.select("source_file", "status", "record_count", "rejected_count", "encoding", "error")
    yield dg.Output(manifest, metadata=non_empty({
        "files": manifest.height,
        "files_parsed": len(plan.to_parse) + len(done.folded),
        "files_new": len(plan.changes.new),
        "files_changed": len(plan.changes.changed),
        "files_removed": len(plan.removed),
        "files_waiting": len(plan.changes.growing),
        "files_refolded": len(done.folded),
        "full_refresh": config.full,
        "batch": done.batch if plan.to_parse or done.folded else None,
        **status_counts(parsed),
        "records_parsed": int(parsed["record_count"].sum()),
        "rejected_records_parsed": int(parsed["rejected_count"].sum()),
        "parsed": table_value(listed.head(LISTED_FILES)),
        "removed": table_value(pl.DataFrame({"key": plan.removed[:LISTED_FILES]}, schema={"key": pl.String})),
        "refused": table_value(refused.select("source_file", "error")),
        "landing_folder": dg.MetadataValue.path(str(etl.seeds)),
    }))


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
def landing_tables(context: dg.AssetExecutionContext, etl: EtlSettings, parsed_files: pl.DataFrame):
    """Every landing file's tables, each file's rows from the stage batch the manifest
    (parsed_files) names: the batches' parts are linked, not copied, and only a part that also
    holds files since changed or removed is rewritten (stage.stage_landing_tables). Their suite
    checks validate the rows of the files the current snapshot does not hold as they are now
    (every file after a full refresh or a change of code or settings); the publish checks the
    invariants across files over the whole tables (etl_project/integrity.py). The manifest is
    kept beside them: the publish records what they hold."""
    folder = stage.run_path(etl.warehouse, context.run_id, stage.LANDING_MANIFEST).parent
    build = etl.build_fingerprint()
    validated = pl.DataFrame(schema={"source_file": pl.String, "sha256": pl.String})
    if not launch.full_refresh(context):
        validated = launch.files_validated(etl.lake, build)
    to_validate = parsed_files.join(validated, on=["source_file", "sha256"], how="anti")["source_file"]
    parts = stage.stage_landing_tables(etl.warehouse, parsed_files, folder, build, set(to_validate))
    stage.write(parsed_files, folder / f"{stage.LANDING_MANIFEST}.parquet")
    for table, path in parts.items():
        frame = pl.scan_parquet(path)
        metadata = table_metadata(frame, table)
        if table == "source_files":
            metadata |= status_counts(frame.collect()) | {"files_validated": to_validate.len()}
        elif table == "rejected_records":
            metadata |= non_empty({"by_reason": table_value(frame.group_by("reason").len().sort("reason").collect())})
        yield dg.Output(path, table, metadata=metadata)


# The plain text (for display and search) of an unchanged canonical record is carried over.
PLAIN_TEXT = dedup.Derived(("abstract_plain",), lambda papers: with_plain_text(papers, "abstract", "abstract_plain"))


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
def deduplicated(context: dg.AssetExecutionContext, etl: EtlSettings, records: pl.LazyFrame, source_files: pl.DataFrame):
    """Exact, then near-duplicate deduplication of records into papers (etl_project.near_dedup;
    the etl resource's near_duplicates and near_threshold settings). What the previous run of the
    same build worked out for files that did not change is looked up, not worked out again; of
    the near clusters, only those the change can reach are worked out (etl_project.dedup_memo).
    papers is staged as parts: the rows of papers that changed are written, the parts of the
    previous run's table that keep all their rows are linked and those that lose some rewritten
    without them (etl_project.stage.stage_parts).
    A full refresh works out everything."""
    launch.tag_run_with_process(context)
    build = etl.build_fingerprint()
    previous = None if launch.full_refresh(context) else _staged_papers(context, etl)
    memo = dedup_memo.Memo.read(previous, build, etl.near_config()) if previous else None
    done = dedup.deduplicate_with_memo(records, etl.near_config(), source_files.select("source_file", "sha256"), memo, PLAIN_TEXT)
    out = stage.run_path(etl.warehouse, context.run_id, "papers")
    done = done.stage_memo(out.parent, build)
    before = dedup_memo.paper_fingerprints(previous, build) if memo else None
    fingerprints = reuse.text_fingerprints(done.variants, before, done.untouched)
    dedup_memo.write_variants(out.parent, done.variants, fingerprints)
    # Which papers' texts changed since the previous papers: what enrichment computes again.
    dedup_memo.write_changes(out.parent, previous, before, fingerprints)
    folder = out.with_name(f"{out.name}.partial")  # a folder of parts, moved into place by the IO manager
    parts = stage.stage_parts(folder, previous if memo else None, "paper_id", done.kept, done.fresh,
                              dedup.PART_PAPERS, dedup.MAX_PARTS, stage.placement_path(out))
    # Its checks validate the papers whose rows changed, when the rows kept met them all before.
    passed = memo is not None and background.passed_before(previous, "papers", build, previous)
    stage.write_scope(out, build, out, done.fresh["paper_id"] if passed else None)
    occurrences = done.occurrences
    occurrences_out = stage.run_path(etl.warehouse, context.run_id, "paper_occurrences")
    stage.write_scope(occurrences_out, build, out, _occurrences_checked(previous, memo, done, build))
    papers = pl.scan_parquet(folder)
    counts = papers.select("occurrence_count", "source_count", "variant_count").collect()
    duplicates = occurrences.height - counts.height
    summary = {
        "records": occurrences.height,
        "papers": counts.height,
        "duplicate_records": duplicates,
        "duplicate_rate": round(duplicates / occurrences.height, 4) if occurrences.height else 0.0,
        "papers_in_several_files": counts.filter(pl.col("source_count") > 1).height,
        "largest_group": int(counts["occurrence_count"].max() or 0),
        "near_clusters": counts.filter(pl.col("variant_count") > 1).height,
        "near_records": occurrences.filter(pl.col("match_kind") == "near").height,
        "papers_looked_up": done.papers_reused,
        "papers_worked_out": counts.height - done.papers_reused,
        "papers_rewritten": done.fresh.height,
        "near_keys_worked_out": done.near_worked_out,
        "parts_linked": parts.linked,
        "parts_written": parts.rewritten + parts.written,
    }
    yield dg.Output(folder, "papers", metadata={**table_metadata(papers, "papers"), **summary})
    yield dg.Output(
        staged_output(context, etl, occurrences, "paper_occurrences"),
        "paper_occurrences",
        metadata=non_empty({
            **table_metadata(occurrences, "paper_occurrences"),
            "by_match_kind": table_value(occurrences.group_by("match_kind").len().sort("match_kind")),
        }),
    )


def _occurrences_checked(previous: Path | None, memo: dedup_memo.Memo | None, done: dedup.Deduplicated,
                         build: str) -> pl.Series | None:
    """The papers whose occurrences the checks of paper_occurrences validate (None: all): those
    a change could reach (dedup.Deduplicated.reworked). Every other paper's occurrences are as
    the previous run had them. Only when the previous occurrences, staged with those papers, met
    every expectation."""
    if memo is None:
        return None
    before = previous.with_name("paper_occurrences.parquet")
    if not before.exists() or not background.passed_before(before, "paper_occurrences", build, previous):
        return None
    return done.reworked


def _staged_papers(context: dg.AssetExecutionContext, etl: EtlSettings) -> Path | None:
    try:
        return staged_file(context.instance, etl.warehouse, dg.AssetKey("papers"), None)
    except FileNotFoundError:
        return None


@dg.asset(group_name="transform", kinds={"polars"}, owners=OWNERS)
def source_overlap(context: dg.AssetExecutionContext, etl: EtlSettings, papers: pl.LazyFrame) -> dg.Output[Path]:
    """For each pair of files sharing papers: how many, and the Jaccard index of their paper sets
    (from each paper's sources)."""
    frame = dedup.source_overlap(papers)
    return dg.Output(staged_output(context, etl, frame), metadata=table_metadata(frame, "source_overlap"))


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
    # The manifest the landing tables were stacked from, whichever run stacked them.
    manifest = pl.read_parquet(staged["source_files"].with_name(f"{stage.LANDING_MANIFEST}.parquet"))
    failed = gx.blocking_failures(context, etl.warehouse, staged, etl.build_fingerprint())
    if failed:
        raise dg.Failure(f"not publishing: {len(failed)} check(s) failed at ERROR severity: {', '.join(failed)}")
    tables = {name: pl.scan_parquet(path) for name, path in staged.items()}
    problems = integrity.cross_table_problems(tables)
    if problems:
        raise dg.Failure("not publishing inconsistent tables: " + "; ".join(problems))
    target = etl.lake
    built_from = {"build": etl.build_fingerprint(), "landing": stage.manifest_digest(manifest)}
    published = publish.publish(staged, target, context.run_id, built_from=built_from)
    context.log.info(f"published snapshot {published.snapshot_id} of {target.catalog}")
    for note in published.notes:
        context.log.warning(note)
    latest = launch.last_manifest(context.instance, etl.warehouse, etl.parse_version())  # what the next run reuses
    removed = stage.prune_batches(etl.warehouse, {*manifest["batch"], *latest["batch"]})
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
            "stage_batches_pruned": removed,
            "stage_runs_pruned": pruned_runs,
        })
    )


def _still_needed(context: dg.AssetExecutionContext):
    """Which runs' staged outputs to keep: this run's, any run still going, and the runs that hold
    the latest materialization of a staged asset (what a later run of only some assets reads, and
    the manifest the next parse starts from)."""
    staged_assets = [*context.assets_def.keys_by_input_name.values(), dg.AssetKey(launch.PARSE_ASSET)]
    latest = {
        event.run_id
        for key in staged_assets
        if (event := context.instance.get_latest_materialization_event(key)) is not None
    }

    def keep(run_id: str) -> bool:
        if run_id == context.run_id or run_id in latest:
            return True
        run = context.instance.get_run_by_id(run_id)
        return run is not None and not run.is_finished

    return keep
