"""What validation costs: every Great Expectations suite on real pipeline tables, this worktree's
code against a baseline git revision, suite by suite.

    PYTHONPATH=$PWD python benchmarks/validate_bench.py LANDING [LANDING ...] [--baseline main]
        [--repeat 3] [--no-docs] [--cache /tmp/validate_bench]

For each landing folder (seeds/, or a corpus of text files) the tables are built once with this
worktree's code (ingest.file_tables, dedup.deduplicate(records, None), enrichment) and cached as
Parquet. Then, for the baseline (its etl_project exported with ``git archive``) and for this
worktree, a child process loads them and runs every suite in the asset graph's order, as the
asset checks call them: the suite's frame builder, then run_suite with a Data Docs folder. The
first pass pays the Great Expectations import and context; ``--repeat`` more passes follow.

Printed per suite: median wall and CPU seconds (user + system, all threads; the machine is shared,
CPU is the steadier figure) of the passes after the first, and the peak RSS the suite added above
what the process held before it (VmHWM reset through /proc/self/clear_refs). Then the first pass's
wall time, the sum of the medians, and each child's peak RSS (tables included).
"""

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def build_tables(landing: Path, out: Path) -> None:
    """Every table the suites read, from the landing folder, as Parquet files in ``out``."""
    import polars as pl

    from etl_project import dedup, ingest
    from etl_project.enrich import links, names, topics
    from etl_project.enrich.markup import plain_text

    files = [ingest.read_landing_file(path, landing) for path in ingest.list_landing_files(landing)]
    tables = ingest.file_tables(files)
    del files
    papers, occurrences = dedup.deduplicate(tables["records"], None)
    papers = papers.with_columns(abstract_plain=plain_text(pl.col("abstract")))
    tables |= {"papers": papers, "paper_occurrences": occurrences, "source_overlap": dedup.source_overlap(papers)}
    tables["paper_links"] = links.extract_links(dedup.variant_texts(occurrences, tables["records"]))
    tables["paper_names"] = names.extract_names(papers)
    tables["paper_topics"] = topics.tag_topics(papers, topics.load_taxonomy())
    out.mkdir(parents=True, exist_ok=True)
    for name, frame in tables.items():
        frame.write_parquet(out / f"{name}.parquet")
    (out / "complete").touch()


def suite_calls(tables: dict):
    """(suite, frame builder) per suite, in the asset graph's order."""
    from etl_project.enrich import topics
    from etl_project.quality import suites

    raw, papers = tables["raw_records"], tables["papers"]
    return [
        (suites.SOURCE_FILES, lambda: suites.source_files_frame(tables["source_files"], raw, tables["rejected_records"])),
        (suites.RAW_RECORDS, lambda: suites.raw_records_frame(raw)),
        (suites.records_suite(raw.height), lambda: suites.records_frame(tables["records"])),
        (suites.PAPERS, lambda: suites.papers_frame(papers)),
        (suites.PAPER_OCCURRENCES, lambda: suites.paper_occurrences_frame(tables["paper_occurrences"], papers)),
        (suites.SOURCE_OVERLAP, lambda: tables["source_overlap"]),
        (suites.PAPERS_PLAIN_TEXT, lambda: suites.papers_plain_text_frame(papers)),
        (suites.PAPER_LINKS, lambda: suites.paper_links_frame(tables["paper_links"], papers)),
        (suites.PAPER_NAMES, lambda: suites.paper_names_frame(tables["paper_names"], papers)),
        (suites.paper_topics_suite(topics.load_taxonomy().topic_ids()),
         lambda: suites.paper_topics_frame(tables["paper_topics"], papers)),
    ]


def _memory_kb(field: str) -> int:
    return int(re.search(rf"{field}:\s+(\d+)", Path("/proc/self/status").read_text()).group(1))


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def measure(tables_dir: Path, repeat: int, docs: bool) -> dict:
    """Child process: run every suite 1 + ``repeat`` times on the cached tables."""
    import polars as pl

    from etl_project.quality.runner import run_suite

    tables = {path.stem: pl.read_parquet(path) for path in tables_dir.glob("*.parquet")}
    calls = suite_calls(tables)
    docs_dir = Path(tempfile.mkdtemp(prefix="validate_bench_docs_")) if docs else None
    runs: dict[str, list[tuple[float, float, float]]] = {suite.name: [] for suite, _ in calls}
    rows, first_pass, first_cpu = {}, 0.0, 0.0
    for attempt in range(1 + repeat):
        for suite, build in calls:
            Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS
            before_kb, wall, cpu = _memory_kb("VmRSS"), time.perf_counter(), _cpu()
            frame = build()
            result = run_suite(suite, frame, docs_dir)
            wall, cpu = time.perf_counter() - wall, _cpu() - cpu
            peak_mb = (_memory_kb("VmHWM") - before_kb) / 1024
            if result.blocks:  # failed WARN rules are reported, not fatal
                raise SystemExit(f"{suite.name} failed on {tables_dir}: {[r.rule.describe() for r in result.failed]}")
            rows[suite.name] = frame.height
            del frame, result
            if attempt == 0:
                first_pass, first_cpu = first_pass + wall, first_cpu + cpu
            else:
                runs[suite.name].append((wall, cpu, peak_mb))
    if docs_dir:
        shutil.rmtree(docs_dir, ignore_errors=True)
    suites_out = {
        name: {"rows": rows[name], "wall": statistics.median(r[0] for r in rs),
               "cpu": statistics.median(r[1] for r in rs), "peak_mb": max(r[2] for r in rs)}
        for name, rs in runs.items()
    }
    return {"suites": suites_out, "first_pass": first_pass, "first_cpu": first_cpu,
            "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def child(code_root: Path, *args: str) -> str:
    """Run this script in a fresh process with ``code_root``'s etl_project first on the path."""
    env = os.environ | {"PYTHONPATH": str(code_root), "GX_ANALYTICS_ENABLED": "false"}
    done = subprocess.run([sys.executable, __file__, *args], env=env, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"child failed ({code_root}):\n{done.stderr[-3000:]}")
    return done.stdout


def export(revision: str, into: Path) -> Path:
    """``revision``'s etl_project package, extracted into ``into``."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", revision, "etl_project"], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into


def report(landing: Path, versions: dict[str, dict]) -> None:
    names = list(versions)
    first = next(iter(versions.values()))["suites"]
    print(f"\n{landing}  ({first['raw_records']['rows']:,} raw records)")
    header = f"{'suite':<18} {'rows':>9}" + "".join(f" | {n[:12]:>12}: wall   cpu peakMB" for n in names)
    print(header + (" | cpu ratio" if len(names) == 2 else ""))
    for suite, stats in first.items():
        line = f"{suite:<18} {stats['rows']:>9,}"
        for n in names:
            s = versions[n]["suites"][suite]
            line += f" | {'':>12}  {s['wall']:5.2f} {s['cpu']:5.2f} {s['peak_mb']:6.0f}"
        if len(names) == 2:
            old, new = (versions[n]["suites"][suite]["cpu"] for n in names)
            line += f" | {old / new:8.1f}x" if new > 0 else ""
        print(line)
    for label, value in (
        ("sum of medians", lambda v: f"{sum(s['wall'] for s in v['suites'].values()):6.2f} s wall "
                                     f"{sum(s['cpu'] for s in v['suites'].values()):6.2f} s cpu"),
        ("first pass (GX import)", lambda v: f"{v['first_pass']:6.2f} s wall {v['first_cpu']:6.2f} s cpu"),
        ("process peak RSS", lambda v: f"{v['max_rss_mb']:6.0f} MB (tables included)"),
    ):
        print(f"{label:<28}" + "".join(f" | {n[:12]:>12}: {value(v)}" for n, v in versions.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("landing", type=Path, nargs="*")
    parser.add_argument("--baseline", default="main", help="git revision to compare with ('' for none)")
    parser.add_argument("--repeat", type=int, default=3, help="passes after the first (medians of these)")
    parser.add_argument("--no-docs", action="store_true", help="no Data Docs rendering")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "validate_bench")
    parser.add_argument("--build-tables", nargs=2, type=Path, metavar=("LANDING", "OUT"), help=argparse.SUPPRESS)
    parser.add_argument("--measure", type=Path, metavar="TABLES", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.build_tables:
        return build_tables(*args.build_tables)
    if args.measure:
        return print(json.dumps(measure(args.measure, args.repeat, not args.no_docs)))

    with tempfile.TemporaryDirectory(prefix="validate_bench_code_") as scratch:
        code = {"this": ROOT}
        if args.baseline:
            code = {args.baseline: export(args.baseline, Path(scratch))} | code
        for landing in args.landing:
            landing = landing.resolve()
            tables = args.cache / re.sub(r"[^\w.-]+", "_", str(landing)).strip("_")
            if not (tables / "complete").exists():
                child(ROOT, "--build-tables", str(landing), str(tables))
            flags = ["--repeat", str(args.repeat)] + (["--no-docs"] if args.no_docs else [])
            results = {name: json.loads(child(root, "--measure", str(tables), *flags)) for name, root in code.items()}
            report(landing, results)


if __name__ == "__main__":
    main()
