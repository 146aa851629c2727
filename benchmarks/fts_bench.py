"""Time to build the full-text (BM25) index of ``search_papers``, three ways, on N papers:

- ``pragma``: the fts extension's ``PRAGMA create_fts_index`` over the table (as before);
- ``pragma-tuned``: the same with DuckDB settings alone: ``preserve_insertion_order = false`` and
  the build's memory limit (``warehouse_sql.build_memory_limit``);
- ``set-based``: ``warehouse_sql.fts_index_statements`` under that memory limit, as publish runs it.

Papers are the distinct paragraphs of a corpus folder in the seeds' format (a title line, a blank
line, one abstract per paragraph; ``benchmarks/corpus.py`` makes them), taken in file order, with
``abstract_plain`` and ``paper_names`` from the project's own enrichment functions. Each build runs
in a fresh child process on a copy of the same DuckDB file; the child reports the build's wall and
CPU time (user + sys, all threads) and its peak RSS (process start included). Runs alternate
between the ways (the machine is shared), and each build's matches and scores for a few queries
are digested, so the table also shows that all ways answer the same.

    PYTHONPATH=$PWD python benchmarks/fts_bench.py /work/bench/c100000 --papers 100000 --repeat 3
"""

import argparse
import contextlib
import hashlib
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import duckdb
import polars as pl

from etl_project import lake, warehouse_sql
from etl_project.enrich import markup, names

WAYS = ("pragma", "pragma-tuned", "set-based")
QUERIES = ("federated learning", "graph neural networks under distribution shift", "benchmark", "the of and")


def read_papers(corpus: Path, count: int) -> pl.DataFrame:
    """The first ``count`` distinct paragraphs (after each file's title) of the corpus files."""
    frames, total = [], 0
    for path in sorted(corpus.glob("*.txt")):
        paragraphs = [p.strip() for p in path.read_text(encoding="utf-8").split("\n\n")[1:]]
        frames.append(pl.Series("abstract", [p for p in paragraphs if p]).to_frame())
        total += frames[-1].height
        if total >= 1.3 * count:  # room for the exact duplicates dropped below
            break
    abstracts = pl.concat(frames).unique("abstract", keep="first", maintain_order=True).head(count)
    return abstracts.select(
        paper_id=pl.col("abstract").map_batches(
            lambda s: pl.Series([hashlib.sha256(t.encode()).hexdigest()[:16] for t in s], dtype=pl.String)),
        abstract=pl.col("abstract"),
        abstract_plain=markup.plain_text(pl.col("abstract")),
    )


def build_statements(way: str) -> tuple[str, ...]:
    if way.startswith("pragma"):
        return (
            "CREATE SCHEMA search",
            f"CREATE TABLE search.papers AS {warehouse_sql.SEARCH_ROWS}",
            "PRAGMA create_fts_index('search.papers', 'paper_id', 'names', 'abstract_plain', "
            "stemmer = 'porter', stopwords = 'english', overwrite = 1)",
        )
    statements = warehouse_sql.fts_index_statements("search.papers", "paper_id", warehouse_sql.SEARCH_FIELDS, warehouse_sql.SEARCH_ROWS)
    return ("CREATE SCHEMA search", *statements)


def child(way: str, database: Path) -> None:
    """Build the index one way in ``database``; print timings, index size and a digest of answers."""
    with duckdb.connect(str(database)) as con:
        lake.load_extension(con, "fts")
        if way == "pragma-tuned":
            con.execute("SET preserve_insertion_order = false")
        before, started = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        with warehouse_sql.build_memory_limit(con) if way != "pragma" else contextlib.nullcontext():
            for statement in build_statements(way):
                con.execute(statement)
        con.execute("CHECKPOINT")
        wall, after, rss = time.perf_counter() - started, resource.getrusage(resource.RUSAGE_SELF), peak_rss_mb()
        # Every match with its score to 9 decimals: the last bits of a multi-term score vary from run
        # to run (the extension's macro sums in no fixed order), on either index.
        answers = [
            con.execute("SELECT paper_id, round(score, 9) FROM (SELECT paper_id, fts_search_papers.match_bm25(paper_id, ?) AS score "
                        "FROM search.papers) WHERE score IS NOT NULL ORDER BY paper_id", [q]).fetchall()
            for q in QUERIES
        ]
        terms = con.sql("SELECT count(*) FROM fts_search_papers.terms").fetchone()[0]
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    digest = hashlib.sha256(repr(answers).encode()).hexdigest()[:12]
    print(json.dumps({"wall": wall, "cpu": cpu, "terms": terms, "digest": digest, "mb": database.stat().st_size / 1e6,
                      "rss_mb": rss}))


def peak_rss_mb() -> float:
    """This process's peak resident set (VmHWM). Not getrusage: a child's ru_maxrss starts from its
    parent's RSS at fork, which would hide the build behind the parent's papers."""
    status = Path("/proc/self/status").read_text()
    return int(status.split("VmHWM:")[1].split()[0]) / 1024


def run(way: str, base: Path, work: Path) -> dict:
    database = work / f"{way}.duckdb"
    shutil.copy(base, database)
    done = subprocess.run([sys.executable, __file__, "--child", way, str(database)], stdout=subprocess.PIPE, text=True)
    if done.returncode:
        raise SystemExit(f"{way} build failed ({done.returncode})")
    database.unlink()
    shutil.rmtree(database.with_suffix(".duckdb.tmp"), ignore_errors=True)
    return json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpus", type=Path, nargs="?")
    parser.add_argument("--papers", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--ways", default=",".join(WAYS), help="comma-separated subset of: " + ", ".join(WAYS))
    parser.add_argument("--child", nargs=2, metavar=("WAY", "DATABASE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.child[0], Path(args.child[1]))
    if args.corpus is None:
        parser.error("the corpus folder is required")

    with tempfile.TemporaryDirectory(dir=os.environ.get("FTS_BENCH_TMP")) as tmp:
        work, base = Path(tmp), Path(tmp) / "base.duckdb"
        papers = read_papers(args.corpus, args.papers)
        found = names.extract_names(papers)
        with duckdb.connect(str(base)) as con:
            for name, frame in {"papers": papers, "paper_names": found}.items():
                con.register("incoming", frame.to_arrow())
                con.execute(f"CREATE TABLE {name} AS SELECT * FROM incoming")
                con.unregister("incoming")
        mb = papers["abstract_plain"].str.len_bytes().sum() / 1e6
        print(f"{papers.height} papers ({mb:.0f} MB of abstract_plain, {found.height} names) from {args.corpus}; "
              f"DuckDB {duckdb.__version__}, {os.cpu_count()} cpus; median of {args.repeat} runs")
        ways = args.ways.split(",")
        runs: dict[str, list[dict]] = {way: [] for way in ways}
        for _ in range(args.repeat):
            for way in ways:
                runs[way].append(run(way, base, work))
        print(f"{'way':12} {'wall s':>8} {'cpu s':>8} {'peak RSS MB':>12} {'index MB':>9} {'terms':>11}  answers")
        for way, results in runs.items():
            median = {key: statistics.median(r[key] for r in results) for key in ("wall", "cpu", "rss_mb", "mb")}
            digests = ",".join(sorted({r["digest"] for r in results}))
            print(f"{way:12} {median['wall']:8.2f} {median['cpu']:8.2f} {median['rss_mb']:12.0f} {median['mb']:9.0f} "
                  f"{results[0]['terms']:11d}  {digests}")
        if "pragma" in runs and "set-based" in runs:
            ratios = [statistics.median(r[key] for r in runs["pragma"]) / statistics.median(r[key] for r in runs["set-based"])
                      for key in ("wall", "cpu", "rss_mb")]
            print("pragma / set-based: wall {:.1f}x, cpu {:.1f}x, peak RSS {:.1f}x".format(*ratios))


if __name__ == "__main__":
    main()
