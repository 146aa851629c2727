"""What full-text search costs on N papers: building its terms, and querying them.

``search_papers`` scores BM25 over the ``paper_terms`` table (etl_project/search_terms.py) and
computes the corpus statistics at query time; the fts extension's index is the reference. Each
build reads the same two Parquet files (papers, paper_names; no paper has near-duplicate variants,
whose texts the asset adds to a paper's terms) and runs, timed from its connection's start to the
end of its last statement, in one of these ways:

- ``pragma``: the extension's ``PRAGMA create_fts_index`` (porter, english stopwords, DuckDB's
  default memory limit, in memory) over ``search_terms.DOCUMENTS``, the table made from the files
  first: the index search used to build in every publish;
- ``terms``: ``search_terms.stage_terms`` of every paper into a folder of zstd Parquet parts,
  with no previous table: what a full refresh of the ``paper_terms`` asset computes;
- ``terms-1%``: the same for 1% of the papers only (every 100th, from files holding only them and
  their names): the terms an incremental run works out when 1% of the papers' texts changed;
- ``asset-1%``: everything the ``paper_terms`` asset does in that incremental run
  (``search_terms.stage_terms`` with the previous table, without Dagster): every paper's search
  document and fingerprint, the papers whose fingerprint is unchanged since the previous run's
  sidecar (one in 100 has a changed ``abstract_plain``), the terms of the others into new parts,
  the previous parts rewritten without the changed papers (those holding none are linked).

Papers are the distinct paragraphs of a corpus folder in the seeds' format (a title line, a blank
line, one abstract per paragraph; ``benchmarks/corpus.py`` makes them), taken in file order, with
``abstract_plain`` and ``paper_names`` from the project's own enrichment functions. Each build runs
in a fresh child process, which reports its wall and CPU time (user + sys, all threads) and its
peak RSS (process start included); runs alternate between the ways (the machine is shared), and
the table shows medians. ``rows`` is the (paper, term) pairs built: ``paper_terms`` rows, or the
distinct (document, term) pairs of the extension's index, which should be the same number.

Then queries (``--query-repeat`` runs each, median): the papers, their names and every paper's
terms (as ``terms`` builds them) are published as a lake (``publish.publish``, untimed), and
``search_papers`` is timed through ``etl_project.connect``. ``same top 10`` tells whether its ten results (paper_id
and score to 4 decimals, in its order) are those the extension's ``match_bm25`` ranks first on
the ``pragma`` index (set ``--ways`` to include ``pragma`` for it).

    PYTHONPATH=$PWD python benchmarks/fts_bench.py /work/bench/c100000 --papers 100000 --repeat 3

``FTS_BENCH_TMP`` sets the folder of the work files (default: the system's temp folder).
"""

import argparse
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

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import duckdb
import polars as pl
from pipeline_bench import fmt, table

import etl_project
from etl_project import lake, publish, search_terms
from etl_project.enrich import markup, names
from etl_project.lake import literal
from etl_project.search_terms import parquet

WAYS = ("pragma", "terms", "terms-1%", "asset-1%")
# Two phrases, one frequent word (the corpus generator never writes "benchmark"), only stopwords.
QUERIES = ("federated learning", "graph neural networks under distribution shift", "robust", "the of and")
TOP = 10  # search_papers' default max_results
SAMPLE_EVERY = 100  # 1% of the papers


def read_papers(corpus: Path, count: int) -> pl.DataFrame:
    """The first ``count`` distinct paragraphs (after each file's title) of the corpus files."""
    frames, total = [], 0
    for path in sorted(corpus.glob("*.txt")):
        paragraphs = [p.strip() for p in path.read_text(encoding="utf-8").split("\n\n")[1:]]
        frames.append(pl.Series("abstract", [p for p in paragraphs if p]).to_frame())
        total += frames[-1].height
        if total >= 1.3 * count:  # room for the exact duplicates dropped below
            break
    if not frames:
        raise SystemExit(f"no *.txt files in {corpus}")
    abstracts = pl.concat(frames).unique("abstract", keep="first", maintain_order=True).head(count)
    return abstracts.select(
        paper_id=pl.col("abstract").map_batches(
            lambda s: pl.Series([hashlib.sha256(t.encode()).hexdigest()[:16] for t in s], dtype=pl.String)),
        abstract=pl.col("abstract"),
        abstract_plain=markup.plain_text(pl.col("abstract")),
    )


# --- the ways, each run in a child process -----------------------------------------------------

def build_pragma(work: Path, out: Path, mark) -> dict:
    with duckdb.connect() as con:
        lake.load_extension(con, "fts")
        con.execute(f"SET temp_directory = {literal(str(work / 'duckdb_tmp'))}")
        con.execute(f"CREATE TABLE documents AS WITH papers AS (FROM {parquet(work / 'papers.parquet')}), "
                    f"paper_names AS (FROM {parquet(work / 'paper_names.parquet')}) {search_terms.DOCUMENTS}")
        con.execute(f"PRAGMA create_fts_index('documents', 'paper_id', {', '.join(map(literal, search_terms.FIELDS))}, "
                    f"stemmer = {literal(search_terms.STEMMER)}, stopwords = {literal(search_terms.STOPWORDS)})")
        mark()  # the build is done: what follows checks it
        rows = con.execute("SELECT count(*) FROM (SELECT DISTINCT docid, termid FROM fts_main_documents.terms)").fetchone()[0]
        # What search_papers returns: the first TOP by BM25 (ties to 9 decimals, then paper_id), to 4 decimals.
        answers = {q: con.execute(
            "SELECT paper_id, round(score, 4) FROM (SELECT paper_id, fts_main_documents.match_bm25(paper_id, ?) AS score "
            f"FROM documents) WHERE score IS NOT NULL ORDER BY round(score, 9) DESC, paper_id LIMIT {TOP}", [q]).fetchall()
            for q in QUERIES}
    return {"rows": rows, "answers": {q: digest(a) for q, a in answers.items()}}


def build_terms(work: Path, out: Path, mark, papers: str = "papers", paper_names: str = "paper_names") -> dict:
    sources = (pl.scan_parquet(work / f"{papers}.parquet"), pl.scan_parquet(work / f"{paper_names}.parquet"))
    search_terms.stage_terms(*sources, out, out.with_name("fingerprints.parquet"), "bench", temp_directory=work / "duckdb_tmp")
    return {"rows": pl.scan_parquet(out).select(pl.len()).collect().item(), "mb": _size_mb(out)}


def build_terms_sample(work: Path, out: Path, mark) -> dict:
    return build_terms(work, out, mark, "papers_sample", "paper_names_sample")


def build_asset_increment(work: Path, out: Path, mark) -> dict:
    """The paper_terms asset's incremental run (search_terms.stage_terms with the previous table)."""
    sources = (pl.scan_parquet(work / "papers_changed.parquet"), pl.scan_parquet(work / "paper_names.parquet"))
    done = search_terms.stage_terms(*sources, out, out.with_name("fingerprints.parquet"), "bench",
                                    (work / "previous_terms", work / "previous_fingerprints.parquet"), work / "duckdb_tmp")
    rows = pl.scan_parquet(out).select(pl.len()).collect().item()
    return {"rows": rows, "mb": _size_mb(out), "computed_papers": done.computed, "parts_written": done.parts_written}


def _size_mb(folder: Path) -> float:
    return sum(path.stat().st_size for path in folder.glob("*.parquet")) / 1e6


BUILDS = {"pragma": build_pragma, "terms": build_terms, "terms-1%": build_terms_sample, "asset-1%": build_asset_increment}


def child(way: str, work: Path) -> None:
    """Build one way from the files in ``work``; print its timings, rows and answers as JSON."""
    out = work / "out" / "paper_terms"
    shutil.rmtree(out.parent, ignore_errors=True)
    out.parent.mkdir()
    marks: list[tuple[float, resource.struct_rusage, float]] = []

    def mark() -> None:
        """The build's end (a build that goes on to check itself marks it earlier)."""
        if not marks:
            marks.append((time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF), peak_rss_mb()))

    before, started = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    result = BUILDS[way](work, out, mark)
    mark()
    finished, after, rss = marks[0]
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    print(json.dumps({"wall": finished - started, "cpu": cpu, "rss_mb": rss, **result}))


def digest(rows: list) -> str:
    return hashlib.sha256(repr([tuple(r) for r in rows]).encode()).hexdigest()[:12]


def peak_rss_mb() -> float:
    """This process's peak resident set (VmHWM). Not getrusage: a child's ru_maxrss starts from its
    parent's RSS at fork, which would hide the build behind the parent's papers."""
    status = Path("/proc/self/status").read_text()
    return int(status.split("VmHWM:")[1].split()[0]) / 1024


def run(way: str, work: Path) -> dict:
    done = subprocess.run([sys.executable, __file__, "--child", way, str(work)], check=False, stdout=subprocess.PIPE, text=True)
    if done.returncode:
        raise SystemExit(f"{way} build failed ({done.returncode})")
    shutil.rmtree(work / "duckdb_tmp", ignore_errors=True)
    return json.loads(done.stdout)


# --- the parent ----------------------------------------------------------------------------------

def prepare(work: Path, papers: pl.DataFrame, found: pl.DataFrame) -> None:
    """The builds' input files: papers and names, their 1% sample, the papers with that 1% changed,
    and the previous run's terms and fingerprints (of the unchanged papers) for asset-1%."""
    papers.write_parquet(work / "papers.parquet", compression="zstd")
    found.write_parquet(work / "paper_names.parquet", compression="zstd")
    sample = papers.gather_every(SAMPLE_EVERY)
    sample.write_parquet(work / "papers_sample.parquet", compression="zstd")
    found.join(sample.select("paper_id"), on="paper_id", how="semi").write_parquet(work / "paper_names_sample.parquet", compression="zstd")
    changed = papers.with_columns(abstract_plain=pl.when(pl.int_range(pl.len()) % SAMPLE_EVERY == 0)
                                  .then(pl.col("abstract_plain") + " Revised with a corrected evaluation.")
                                  .otherwise(pl.col("abstract_plain")))
    changed.write_parquet(work / "papers_changed.parquet", compression="zstd")
    search_terms.stage_terms(pl.scan_parquet(work / "papers.parquet"), pl.scan_parquet(work / "paper_names.parquet"), work / "previous_terms",
                             work / "previous_fingerprints.parquet", "bench", temp_directory=work / "duckdb_tmp")
    shutil.rmtree(work / "duckdb_tmp", ignore_errors=True)


def time_queries(work: Path, repeat: int) -> dict[str, dict]:
    """Publish papers, paper_names and paper_terms as a lake; time search_papers on it."""
    warehouse = work / "warehouse"
    publish.publish({"papers": work / "papers.parquet", "paper_names": work / "paper_names.parquet",
                     "paper_terms": work / "previous_terms"}, lake.Lake.of(warehouse), "fts-bench")
    found = {}
    with etl_project.connect(warehouse) as con:
        for query in QUERIES:
            times, rows = [], []
            for _ in range(repeat):
                started = time.perf_counter()
                rows = con.execute("SELECT paper_id, score FROM search_papers(?)", [query]).fetchall()
                times.append(time.perf_counter() - started)
            found[query] = {"ms": statistics.median(times) * 1000, "results": len(rows), "answers": digest(rows)}
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpus", type=Path, nargs="?")
    parser.add_argument("--papers", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3, help="builds per way")
    parser.add_argument("--query-repeat", type=int, default=5, help="runs per query (0: no queries)")
    parser.add_argument("--ways", default=",".join(WAYS), help="comma-separated subset of: " + ", ".join(WAYS))
    parser.add_argument("--child", nargs=2, metavar=("WAY", "WORK"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.child[0], Path(args.child[1]))
    if args.corpus is None:
        parser.error("the corpus folder is required")
    ways = args.ways.split(",")
    if unknown := set(ways) - set(WAYS):
        parser.error(f"unknown ways: {', '.join(sorted(unknown))}")

    with tempfile.TemporaryDirectory(dir=os.environ.get("FTS_BENCH_TMP")) as tmp:
        work = Path(tmp)
        papers = read_papers(args.corpus, args.papers)
        found = names.extract_names(papers)
        prepare(work, papers, found)
        mb = papers["abstract_plain"].str.len_bytes().sum() / 1e6
        print(f"{papers.height:,} papers ({mb:.1f} MB of abstract_plain, {found.height:,} names) from {args.corpus}; "
              f"DuckDB {duckdb.__version__}, {os.cpu_count()} cpus; median of {args.repeat} builds\n")
        runs: dict[str, list[dict]] = {way: [] for way in ways}
        for _ in range(args.repeat):
            for way in ways:
                runs[way].append(run(way, work))

        medians = {way: {key: statistics.median(r[key] for r in results) for key in ("wall", "cpu", "rss_mb")}
                   for way, results in runs.items()}
        sample_papers = -(-papers.height // SAMPLE_EVERY)
        built = {"pragma": papers.height, "terms": papers.height, "terms-1%": sample_papers, "asset-1%": sample_papers}
        rows = [[way, f"{built[way]:,}", fmt(m["wall"]), fmt(m["cpu"]), fmt(m["rss_mb"], 0),
                 f"{runs[way][0]['rows']:,}", fmt(runs[way][0].get("mb"))] for way, m in medians.items()]
        print(table(["way", "papers computed", "wall s", "cpu s", "peak RSS MB", "rows", "file MB"], rows))
        if "pragma" in medians and "terms" in medians:
            ratios = [medians["pragma"][k] / max(medians["terms"][k], 1e-9) for k in ("wall", "cpu", "rss_mb")]
            print("pragma / terms: wall {:.1f}x, cpu {:.1f}x, peak RSS {:.1f}x".format(*ratios))
        for way in ("terms-1%", "asset-1%"):
            if way in medians and "terms" in medians:
                shares = [medians[way][k] / max(medians["terms"][k], 1e-9) for k in ("wall", "cpu")]
                print("{}: {:.0%} of the wall time of terms (every paper), {:.0%} of its cpu".format(way, *shares))

        if args.query_repeat > 0:
            queries = time_queries(work, args.query_repeat)
            reference = runs["pragma"][0]["answers"] if "pragma" in runs else {}
            print(f"\nsearch_papers on the published lake, median of {args.query_repeat} runs")
            print(table(["query", "results", "median ms", f"same top {TOP}"],
                        [[repr(q), r["results"], fmt(r["ms"], 1),
                          ("yes" if reference[q] == r["answers"] else "NO") if reference else "-"]
                         for q, r in queries.items()]))


if __name__ == "__main__":
    main()
