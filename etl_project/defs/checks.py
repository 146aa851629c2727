"""Asset checks: one Great Expectations suite per table. All are blocking, so a failed ERROR
expectation stops the publish; failed WARN expectations (``mostly`` ranges) are reported only.
Plus one non-blocking report on near-duplicate clusters (near_duplicate_clusters)."""

import functools
import json
import os
import shutil
from pathlib import Path

import dagster as dg
import polars as pl

from etl_project import dedup
from etl_project.defs.metadata import markdown_table, row_count
from etl_project.defs.resources import EtlSettings
from etl_project.quality import suites
from etl_project.quality.runner import SuiteResult, run_suite


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
    lines = ["| expectation | severity | ok | unexpected | samples |", "|---|---|---|---|---|"]
    for r in result.results:
        samples = json.dumps(r.samples, ensure_ascii=False, default=str)[:200] if r.samples else ""
        unexpected = "" if r.unexpected_count is None else f"{r.unexpected_count} ({r.unexpected_percent or 0:.2f}%)"
        problem = r.exception or samples
        lines.append(f"| `{r.rule.describe()}` | {r.rule.severity} | {'✅' if r.success else '❌'} | {unexpected} | {problem.replace('|', '/')} |")
    failures = [
        {"expectation": r.rule.describe(), "severity": r.rule.severity, "unexpected_count": r.unexpected_count,
         "observed_value": r.observed_value, "samples": r.samples, "exception": r.exception}
        for r in result.failed
    ]
    docs = {}
    if result.docs_page:
        docs = {"data_docs": dg.MetadataValue.url(result.docs_page), "data_docs_index": dg.MetadataValue.url(result.docs_index)}
    return dg.AssetCheckResult(
        passed=result.passed,
        severity=dg.AssetCheckSeverity(result.severity),
        description=f"{len(result.results) - len(failures)}/{len(result.results)} expectations met on {result.row_count} rows",
        metadata={
            "suite": result.suite.name,
            "rows_validated": result.row_count,
            "expectations_evaluated": len(result.results),
            "expectations_failed": len(failures),
            "expectations": dg.MetadataValue.md("\n".join(lines)),
            "failures": dg.MetadataValue.json(json.loads(json.dumps(failures, default=str))),
            **docs,
        },
    )


@dg.asset_check(
    asset="source_files", blocking=True,
    additional_ins={"raw_records": dg.AssetIn("raw_records"), "rejected_records": dg.AssetIn("rejected_records")},
)
def source_files_suite(context: dg.AssetCheckExecutionContext, etl: EtlSettings, source_files: pl.LazyFrame, raw_records: pl.LazyFrame, rejected_records: pl.LazyFrame):
    """Files unique, statuses valid, rejected files say why, and no character lost: each file's
    decoded text is fully accounted for by its title, raw records and rejected records."""
    return check_result(run_suite(suites.SOURCE_FILES, suites.source_files_frame(source_files, raw_records, rejected_records), docs_dir(etl, context)))


@dg.asset_check(asset="raw_records", blocking=True)
def raw_records_suite(context: dg.AssetCheckExecutionContext, etl: EtlSettings, raw_records: pl.LazyFrame):
    """record_id unique and not null, ordinals unique per file and >= 1, line spans ordered."""
    return check_result(run_suite(suites.RAW_RECORDS, suites.raw_records_frame(raw_records), docs_dir(etl, context)))


@dg.asset_check(asset="records", blocking=True, additional_ins={"raw_records": dg.AssetIn("raw_records")})
def records_suite(context: dg.AssetCheckExecutionContext, etl: EtlSettings, records: pl.LazyFrame, raw_records: pl.LazyFrame):
    """One normalized record per raw record, each with a non-empty text and dedup key."""
    return check_result(run_suite(suites.records_suite(row_count(raw_records)), suites.records_frame(records), docs_dir(etl, context)))


@dg.asset_check(asset="papers", blocking=True)
def papers_suite(context: dg.AssetCheckExecutionContext, etl: EtlSettings, papers: pl.LazyFrame):
    """paper_id unique, well-formed, one per key; counts consistent; abstract size sane (mostly)."""
    return check_result(run_suite(suites.PAPERS, suites.papers_frame(papers), docs_dir(etl, context)))


@dg.asset_check(
    asset="paper_occurrences", blocking=True,
    additional_ins={"raw_records": dg.AssetIn("raw_records"), "papers": dg.AssetIn("papers")},
)
def paper_occurrences_suite(context: dg.AssetCheckExecutionContext, etl: EtlSettings, paper_occurrences: pl.LazyFrame, raw_records: pl.LazyFrame, papers: pl.LazyFrame):
    """Every raw record maps to exactly one existing paper; one canonical occurrence per paper."""
    frame = suites.paper_occurrences_frame(paper_occurrences, raw_records, papers)
    return check_result(run_suite(suites.PAPER_OCCURRENCES, frame, docs_dir(etl, context)))


@dg.asset_check(asset="source_overlap", blocking=True)
def source_overlap_suite(context: dg.AssetCheckExecutionContext, etl: EtlSettings, source_overlap: pl.LazyFrame):
    """File pairs unique and ordered, shared counts positive, Jaccard within [0, 1]."""
    return check_result(run_suite(suites.SOURCE_OVERLAP, source_overlap, docs_dir(etl, context)))


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
        metadata={
            "near_clusters": report["near_clusters"],
            "near_records": report["near_records"],
            "largest_cluster_variants": largest,
            "min_similarity": dg.MetadataValue.float(report["min_similarity"] or 0.0),
            "median_similarity": dg.MetadataValue.float(report["median_similarity"] or 0.0),
            "cluster_sizes": dg.MetadataValue.md(markdown_table(report["sizes"])),
            "least_similar_pairs": dg.MetadataValue.md(_pairs_markdown(report["samples"])),
        },
    )


def _pairs_markdown(samples: pl.DataFrame) -> str:
    """Sample pairs as a list (the difference excerpts are too long for a table cell)."""
    if samples.height == 0:
        return "No near duplicates."
    return "\n".join(
        f"- **{r['similarity']:.3f}** paper `{r['paper_id']}`: `{r['member']}` vs canonical `{r['canonical']}`: "
        f"{r['difference']}"
        for r in samples.iter_rows(named=True)
    )


ALL_CHECKS = [
    source_files_suite, raw_records_suite, records_suite,
    papers_suite, paper_occurrences_suite, source_overlap_suite, near_duplicate_clusters,
]
