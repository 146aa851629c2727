"""Asset checks: one Great Expectations suite per table (etl_project/quality/suites.py,
SUITE_CHECKS), validated in the background as soon as a run has staged the tables a suite reads
(etl_project/quality/background.py). A failed ERROR expectation stops the publish: the
``warehouse`` asset publishes only when every suite passes at ERROR on the files it publishes.
A check whose only failed expectations are WARN ones (``mostly`` ranges) fails at WARN severity:
shown as failed, not blocking. Plus one report on near-duplicate clusters (near_duplicate_clusters).

The checks' steps come after every asset step that is ready (Dagster's step priority): by then
the worker has validated while the run's next stages ran, so a check step mostly reports."""

import json
from urllib.parse import unquote, urlparse

import dagster as dg
import polars as pl

from etl_project import dedup
from etl_project.defs.metadata import non_empty, table_value
from etl_project.defs.resources import EtlSettings, GxValidation
from etl_project.quality import suites
from etl_project.quality.runner import SuiteResult

# Run after the asset steps that are ready (a step's priority: higher first, 0 by default).
AFTER_ASSETS = {"dagster/priority": "-1"}


def check_result(result: SuiteResult, validated: str = "whole table") -> dg.AssetCheckResult:
    """The check's verdict and, in its own metadata, what the UI needs without the Data Docs
    (which the UI cannot open: they are local files): every expectation with its severity, outcome,
    unexpected count and samples as a table, the failed ones again as their own table, and the path
    of the validation's Data Docs page.

    Any failed expectation fails the check; with only WARN expectations failed it fails at WARN
    severity, which does not stop the publish (SuiteResult.blocks: only a failed ERROR rule does).
    ``validated``: which rows were validated (background.validated_rows), which the description
    and metadata say."""
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
        + ("" if validated == "whole table" else f" ({validated})")
        + (f"; failed: {len(failures)} ({', '.join(failed_severities)})" if failures else ""),
        metadata=non_empty({
            "suite": result.suite.name,
            "rows_validated": result.row_count,
            "validated": validated,
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


def suite_check(check: suites.SuiteCheck) -> dg.AssetChecksDefinition:
    """The Dagster check of one row of suites.SUITE_CHECKS."""

    @dg.asset_check(
        asset=check.asset, name=check.name, description=check.description,
        additional_deps=check.extra, op_tags=AFTER_ASSETS,
    )
    def _suite_check(context: dg.AssetCheckExecutionContext, etl: EtlSettings, gx: GxValidation) -> dg.AssetCheckResult:
        return check_result(*gx.verdict(context, etl.warehouse, check, etl.build_fingerprint()))

    return _suite_check


# A near cluster holding more distinct texts than this is more likely boilerplate or a template
# than one paper: worth a look before trusting it.
MAX_NEAR_VARIANTS = 20


@dg.asset_check(
    asset="paper_occurrences", op_tags=AFTER_ASSETS,
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


ALL_CHECKS = [*(suite_check(check) for check in suites.SUITE_CHECKS.values()), near_duplicate_clusters]
