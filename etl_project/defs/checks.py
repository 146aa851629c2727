"""Asset checks: one Great Expectations suite per table. All are blocking, so a failed ERROR
expectation stops the publish; a check whose only failed expectations are WARN ones (``mostly``
ranges) fails at WARN severity: shown as failed, not blocking.
Plus one non-blocking report on near-duplicate clusters (near_duplicate_clusters)."""

import functools
import json
import os
import shutil
from pathlib import Path
from urllib.parse import unquote, urlparse

import dagster as dg
import polars as pl

from etl_project import dedup
from etl_project.defs.metadata import non_empty, row_count, table_value
from etl_project.defs.resources import EtlSettings, GxValidation
from etl_project.quality import suites
from etl_project.quality.runner import SuiteResult


# Data Docs of this many runs are kept (each run's site is its own folder; check links stay valid).
KEEP_DOCS_RUNS = 20


def docs_dir(etl: EtlSettings, context: dg.AssetCheckExecutionContext) -> Path:
    """This run's Great Expectations Data Docs site, ``<warehouse>/data_docs/runs/<run_id>/``;
    ``data_docs/latest`` points at the newest run's."""
    return _run_docs(etl.warehouse / "data_docs", context.run.run_id)


@functools.cache
def _run_docs(root: Path, run_id: str) -> Path:
    """Made once per run: the folder, the ``latest`` link, and old runs' sites pruned."""
    folder = root / "runs" / run_id
    folder.mkdir(parents=True, exist_ok=True)
    _point_link(root / "latest", Path("runs") / run_id)
    older = sorted((p for p in folder.parent.iterdir() if p != folder), key=lambda p: p.stat().st_mtime)
    for old in older[: max(0, len(older) - (KEEP_DOCS_RUNS - 1))]:
        shutil.rmtree(old, ignore_errors=True)
    return folder


def _point_link(link: Path, target: Path) -> None:
    """Make ``link`` a symlink to ``target`` with one rename (a reader never sees it missing)."""
    staging = link.with_name(f".{link.name}.new")
    staging.unlink(missing_ok=True)
    staging.symlink_to(target)
    os.replace(staging, link)


def check_result(result: SuiteResult) -> dg.AssetCheckResult:
    """The check's verdict and, in its own metadata, what the UI needs without the Data Docs
    (which the UI cannot open: they are local files): every expectation with its severity, outcome,
    unexpected count and samples as a table, the failed ones again as their own table, and the path
    of the validation's Data Docs page.

    Any failed expectation fails the check; with only WARN expectations failed it fails at WARN
    severity, which Dagster does not block on (a blocking check stops what depends on it only on a
    failed ERROR severity)."""
    expectations = [_expectation_row(r) for r in result.results]
    failures = [row for row, r in zip(expectations, result.results) if not r.success]
    failed_severities = sorted({r.rule.severity for r in result.failed})
    docs = {}
    if result.docs_page:
        docs = {"data_docs": dg.MetadataValue.path(_local_path(result.docs_page)),
                "data_docs_index": dg.MetadataValue.path(_local_path(result.docs_index))}
    return dg.AssetCheckResult(
        passed=result.passed,
        severity=dg.AssetCheckSeverity(result.severity),
        description=f"{len(result.results) - len(failures)}/{len(result.results)} expectations met on {result.row_count} rows"
        + (f"; failed: {len(failures)} ({', '.join(failed_severities)})" if failures else ""),
        metadata=non_empty({
            "suite": result.suite.name,
            "rows_validated": result.row_count,
            "expectations_evaluated": len(result.results),
            "expectations_failed": len(failures),
            "failures": table_value(_without_empty_columns(failures)),
            "expectations": table_value(_without_empty_columns(expectations)),
            **docs,
        }),
    )


def _expectation_row(r) -> dict:
    """One expectation's result as a table row (the UI's view of a Data Docs line)."""
    if r.unexpected_count is not None:
        unexpected = r.unexpected_count
        percent = round(r.unexpected_percent or 0.0, 4)
    else:
        unexpected, percent = None, None
    return {
        "expectation": r.rule.describe(),
        "severity": r.rule.severity,
        "ok": bool(r.success),
        "unexpected": unexpected,
        "unexpected_percent": percent,
        "observed": None if r.observed_value is None else json.dumps(r.observed_value, ensure_ascii=False, default=str),
        "samples": json.dumps(r.samples, ensure_ascii=False, default=str) if r.samples else None,
        "exception": r.exception,
    }


def _without_empty_columns(rows: list[dict]) -> pl.DataFrame:
    """The rows as a frame, less the columns no row has a value in (exceptions, usually)."""
    frame = pl.DataFrame(rows, infer_schema_length=None)
    return frame.select(c for c in frame.columns if frame[c].null_count() < frame.height)


def _local_path(url: str) -> str:
    """A file:// URL as the local path it names."""
    return unquote(urlparse(url).path)


@dg.asset_check(
    asset="source_files", blocking=True,
    additional_ins={"raw_records": dg.AssetIn("raw_records"), "rejected_records": dg.AssetIn("rejected_records")},
)
def source_files_suite(context: dg.AssetCheckExecutionContext, etl: EtlSettings, gx: GxValidation, source_files: pl.LazyFrame, raw_records: pl.LazyFrame, rejected_records: pl.LazyFrame):
    """Files unique, statuses valid, rejected files say why, and no character lost: each file's
    decoded text is fully accounted for by its title, raw records and rejected records."""
    return check_result(gx.run_suite(suites.SOURCE_FILES, suites.source_files_frame(source_files, raw_records, rejected_records), docs_dir(etl, context)))


@dg.asset_check(asset="raw_records", blocking=True)
def raw_records_suite(context: dg.AssetCheckExecutionContext, etl: EtlSettings, gx: GxValidation, raw_records: pl.LazyFrame):
    """record_id unique and not null, ordinals unique per file and >= 1, line spans ordered."""
    return check_result(gx.run_suite(suites.RAW_RECORDS, suites.raw_records_frame(raw_records), docs_dir(etl, context)))


@dg.asset_check(asset="records", blocking=True, additional_ins={"raw_records": dg.AssetIn("raw_records")})
def records_suite(context: dg.AssetCheckExecutionContext, etl: EtlSettings, gx: GxValidation, records: pl.LazyFrame, raw_records: pl.LazyFrame):
    """One normalized record per raw record, each with a non-empty text and dedup key."""
    return check_result(gx.run_suite(suites.records_suite(row_count(raw_records)), suites.records_frame(records), docs_dir(etl, context)))


@dg.asset_check(asset="papers", blocking=True)
def papers_suite(context: dg.AssetCheckExecutionContext, etl: EtlSettings, gx: GxValidation, papers: pl.LazyFrame):
    """paper_id unique, well-formed, one per key; counts consistent; abstract size sane (mostly)."""
    return check_result(gx.run_suite(suites.PAPERS, suites.papers_frame(papers), docs_dir(etl, context)))


@dg.asset_check(
    asset="paper_occurrences", blocking=True,
    additional_ins={"raw_records": dg.AssetIn("raw_records"), "papers": dg.AssetIn("papers")},
)
def paper_occurrences_suite(context: dg.AssetCheckExecutionContext, etl: EtlSettings, gx: GxValidation, paper_occurrences: pl.LazyFrame, raw_records: pl.LazyFrame, papers: pl.LazyFrame):
    """Every raw record maps to exactly one existing paper; one canonical occurrence per paper."""
    frame = suites.paper_occurrences_frame(paper_occurrences, raw_records, papers)
    return check_result(gx.run_suite(suites.PAPER_OCCURRENCES, frame, docs_dir(etl, context)))


@dg.asset_check(asset="source_overlap", blocking=True)
def source_overlap_suite(context: dg.AssetCheckExecutionContext, etl: EtlSettings, gx: GxValidation, source_overlap: pl.LazyFrame):
    """File pairs unique and ordered, shared counts positive, Jaccard within [0, 1]."""
    return check_result(gx.run_suite(suites.SOURCE_OVERLAP, source_overlap, docs_dir(etl, context)))


# A near cluster holding more distinct texts than this is more likely boilerplate or a template
# than one paper: worth a look before trusting it.
MAX_NEAR_VARIANTS = 20


@dg.asset_check(
    asset="paper_occurrences", blocking=False,
    additional_ins={"papers": dg.AssetIn("papers"), "records": dg.AssetIn("records")},
)
def near_duplicate_clusters(paper_occurrences: pl.LazyFrame, papers: pl.LazyFrame, records: pl.LazyFrame):
    """What near matching merged: cluster count, sizes, similarity spread and the least similar
    merges beside their canonical text. Warns (does not block) when a cluster holds more than
    MAX_NEAR_VARIANTS distinct texts."""
    report = dedup.near_clusters_report(papers, paper_occurrences, records)
    largest = report["largest_cluster_variants"]
    return dg.AssetCheckResult(
        passed=largest <= MAX_NEAR_VARIANTS,
        severity=dg.AssetCheckSeverity.WARN,
        description=f"{report['near_clusters']} near-duplicate clusters, {report['near_records']} near records; "
        f"largest holds {largest} distinct texts (limit {MAX_NEAR_VARIANTS})",
        metadata=non_empty({
            "near_clusters": report["near_clusters"],
            "near_records": report["near_records"],
            "largest_cluster_variants": largest,
            # No near duplicates, no similarities: left out rather than shown as 0.
            "min_similarity": report["min_similarity"],
            "median_similarity": report["median_similarity"],
            "cluster_sizes": table_value(report["sizes"]),
            "least_similar_pairs": table_value(report["samples"]),
        }),
    )


ALL_CHECKS = [
    source_files_suite, raw_records_suite, records_suite,
    papers_suite, paper_occurrences_suite, source_overlap_suite, near_duplicate_clusters,
]
