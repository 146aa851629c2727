"""This project's pipeline core, in process and without Dagster: every stage function the assets
call, in the asset graph's order, handing tables over as the Dagster run does (each staged as
Parquet and read back as a scan, files parsed a batch at a time), with each stage's wall time
and the process's peak resident memory during it.

    python benchmarks/pipeline_core.py LANDING WAREHOUSE [--exact-only] [--no-enrich] [--no-validate]

Prints one JSON object: ``{"stages": {stage: seconds}, "stage_rss_mb": {stage: MB},
"peak_rss_mb": MB, "rows": {table: rows}}``. Run it as a child process to read its peak RSS (pipeline_bench.py does).
"""

import argparse
import json
import os
import shutil
import time
import uuid
from contextlib import contextmanager
from pathlib import Path

import polars as pl

from etl_project import dedup, ingest, integrity, lake, publish, search_terms, stage
from etl_project.enrich import links, names, topics
from etl_project.enrich.markup import with_plain_text
from etl_project.near_dedup import NearConfig
from etl_project.quality import suites
from etl_project.quality.runner import run_suite

LANDING_TABLES = ("source_files", "raw_records", "rejected_records", "records")


def reset_peak_rss() -> bool:
    """Start a new high-water mark of this process's resident memory (Linux; False elsewhere)."""
    try:
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")
        return True
    except OSError:
        return False


def peak_rss_mb() -> float:
    """The resident memory high-water mark since the last reset_peak_rss, in MB."""
    with open("/proc/self/status") as handle:
        kb = next(int(line.split()[1]) for line in handle if line.startswith("VmHWM:"))
    return kb * 1024 / 1e6


def paper_terms(staged: Path, variants: pl.DataFrame) -> pl.LazyFrame:
    """The paper_terms asset of a full refresh (etl_project/defs/enrich.py: search_terms.stage_terms,
    no previous table): a folder of parts beside the fingerprint sidecar; its scan."""
    folder = staged / "paper_terms.parquet"
    search_terms.stage_terms(*(pl.scan_parquet(staged / f"{name}.parquet") for name in ("papers", "paper_names")),
                             folder, staged / "paper_terms.fingerprints.parquet", "bench", temp_directory=staged / "duckdb_tmp",
                             variants=search_terms.Variants.of(variants))
    return pl.scan_parquet(folder)


def run_core(landing: Path, warehouse: Path, near: bool = True, enrich: bool = True, validate: bool = True) -> dict:
    stages: dict[str, float] = {}
    stage_rss: dict[str, float] = {}
    staged = warehouse / ".stage" / "core"
    shutil.rmtree(staged, ignore_errors=True)

    @contextmanager
    def timed(name: str):
        measured = reset_peak_rss()
        started = time.perf_counter()
        yield
        stages[name] = stages.get(name, 0.0) + time.perf_counter() - started
        if measured:
            stage_rss[name] = max(stage_rss.get(name, 0.0), peak_rss_mb())

    def keep(name: str, frame: pl.DataFrame | pl.LazyFrame) -> pl.LazyFrame:
        """Stage a table and hand back its scan, as the run's IO manager does."""
        path = staged / f"{name}.parquet"
        stage.write(frame, path)
        return pl.scan_parquet(path)

    def check(*tables_checked: str) -> None:
        """The suite checks of these tables (suites.SUITE_CHECKS, as the run's checks are made)."""
        if not validate:
            return
        for spec in suites.SUITE_CHECKS.values():
            if spec.asset not in tables_checked:
                continue
            with timed("validate"):
                scans = [tables[t] for t in spec.tables]
                result = run_suite(spec.suite(*scans), spec.frame(*scans))
                if result.blocks:  # failed WARN rules are reported, not fatal
                    raise RuntimeError(f"{spec.name} failed: {[r.rule.describe() for r in result.failed]}")

    with timed("parse"):
        paths = ingest.list_landing_files(landing)
        for number, indexes in enumerate(stage.batches(paths)):
            files = [ingest.read_landing_file(paths[i], landing) for i in indexes]
            for name, frame in ingest.file_tables(files).items():
                stage.write(frame, staged / name / f"{number:06d}.parquet")
        tables = {name: keep(name, pl.scan_parquet(staged / name / "*.parquet")) for name in LANDING_TABLES}
    records = tables["records"]
    check(*LANDING_TABLES)
    with timed("dedup"):
        papers, occurrences = dedup.deduplicate(records, NearConfig() if near else None)
        papers = keep("papers", with_plain_text(papers, "abstract", "abstract_plain"))
        occurrences = keep("paper_occurrences", occurrences)
        tables |= {"papers": papers, "paper_occurrences": occurrences, "source_overlap": keep("source_overlap", dedup.source_overlap(papers))}
    check("papers", "paper_occurrences", "source_overlap")
    if enrich:
        with timed("enrich"):
            texts = dedup.variant_texts(occurrences, records)
            tables["paper_links"] = keep("paper_links", links.extract_links(texts))
            variants = search_terms.variants_of(texts)  # what paper_terms reads (the asset finds them itself)
            del texts
            tables["paper_names"] = keep("paper_names", names.extract_names(papers))
            tables["paper_topics"] = keep("paper_topics", topics.tag_topics(papers, topics.load_taxonomy()))
        check("paper_links", "paper_names", "paper_topics")
        with timed("paper_terms"):
            tables["paper_terms"] = paper_terms(staged, variants)  # staged already, as the asset stages it
        check("paper_terms")
    with timed("publish"):
        problems = integrity.cross_table_problems(tables)
        if problems:
            raise RuntimeError("; ".join(problems))
        # The staged files, as the warehouse asset hands them over (publish links them).
        files = {name: staged / f"{name}.parquet" for name in tables}
        release = publish.publish(files, lake.Lake.of(warehouse), f"bench-{uuid.uuid4().hex[:12]}")
    shutil.rmtree(staged, ignore_errors=True)
    # Resetting the high-water mark also resets what the parent reads from wait4, so the
    # whole run's peak is the highest stage peak (every stage function runs inside a stage).
    peak = max([*stage_rss.values(), peak_rss_mb()]) if stage_rss else None
    return {"stages": stages, "stage_rss_mb": stage_rss, "peak_rss_mb": peak, "rows": release.row_counts}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("landing", type=Path)
    parser.add_argument("warehouse", type=Path)
    parser.add_argument("--exact-only", action="store_true", help="no near-duplicate matching")
    parser.add_argument("--no-enrich", action="store_true", help="no links, names, topics or search terms")
    parser.add_argument("--no-validate", action="store_true", help="skip the Great Expectations suites")
    args = parser.parse_args(argv)
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    result = run_core(args.landing, args.warehouse, near=not args.exact_only, enrich=not args.no_enrich, validate=not args.no_validate)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
