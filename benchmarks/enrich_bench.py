"""Speed of the enrichment stages and of the DuckDB search layer on many papers.

Papers are the seeds' abstracts, each copy made distinct by a numbered sentence (so URLs, names
and markup occur at the seeds' rates). Prints the median of several runs per stage: the plain
text, links, names and topics in Polars; ``paper_terms`` (what ``search_papers`` scores) by
``search_terms.stage_terms`` from the papers' and names' Parquet files to a folder of parts, for
every paper (a full refresh; the papers have no near-duplicate variants); then, once, the publish of papers, paper_names and paper_terms as a lake, and
``search_papers`` queries on it.

    PYTHONPATH=$PWD python benchmarks/enrich_bench.py --papers 100000 --repeat 3
"""

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import polars as pl

import etl_project
from etl_project import dedup, ingest, lake, normalize, publish, search_terms
from etl_project.enrich import links, markup, names, topics

SEEDS = Path(__file__).resolve().parents[1] / "seeds"


def make_papers(count: int) -> pl.DataFrame:
    parsed = ingest.parse_files(ingest.read_landing_folder(SEEDS))
    seeds, _ = dedup.deduplicate(normalize.normalize_records(parsed.raw_records))
    abstracts = seeds["abstract"]
    index = pl.int_range(count, eager=True)
    return pl.DataFrame({
        "paper_id": index.cast(pl.String).str.zfill(16),
        "abstract": abstracts.gather(index % len(abstracts)) + " Variant " + index.cast(pl.String) + ".",
    })


def timed(repeat: int, action) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = action()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--papers", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    papers = make_papers(args.papers)
    mb = papers["abstract"].str.len_bytes().sum() / 1e6
    print(f"{papers.height} papers, {mb:.0f} MB of abstracts; median of {args.repeat} runs")
    seconds, papers = timed(args.repeat, lambda: markup.with_plain_text(papers, "abstract", "abstract_plain"))
    print(f"abstract_plain   {seconds:7.2f} s  {papers.height / seconds:9.0f} papers/s")
    seconds, found = timed(args.repeat, lambda: links.extract_links(papers))
    print(f"paper_links      {seconds:7.2f} s  {papers.height / seconds:9.0f} papers/s  ({found.height} links)")
    seconds, found = timed(args.repeat, lambda: names.extract_names(papers))
    print(f"paper_names      {seconds:7.2f} s  {papers.height / seconds:9.0f} papers/s  ({found.height} names)")
    taxonomy = topics.load_taxonomy()
    seconds, tagged = timed(args.repeat, lambda: topics.tag_topics(papers, taxonomy))
    print(f"paper_topics     {seconds:7.2f} s  {papers.height / seconds:9.0f} papers/s  ({tagged.height} tags)")

    with tempfile.TemporaryDirectory() as tmp:
        work, warehouse = Path(tmp), Path(tmp) / "warehouse"
        inputs = {"papers": work / "papers.parquet", "paper_names": work / "paper_names.parquet"}
        papers.write_parquet(inputs["papers"], compression="zstd")
        found.write_parquet(inputs["paper_names"], compression="zstd")
        terms = work / "paper_terms"

        def build_terms() -> int:
            shutil.rmtree(terms, ignore_errors=True)
            sources = (pl.scan_parquet(path) for path in inputs.values())
            search_terms.stage_terms(*sources, terms, work / "fingerprints.parquet", "bench", temp_directory=work / "duckdb_tmp")
            return pl.scan_parquet(terms).select(pl.len()).collect().item()

        seconds, rows = timed(args.repeat, build_terms)
        print(f"paper_terms      {seconds:7.2f} s  {papers.height / seconds:9.0f} papers/s  ({rows} rows; from Parquet files to parts, every paper)")
        tables = {"papers": papers, "paper_names": found, "paper_terms": terms}  # the terms' parts are linked, not rewritten
        seconds, _ = timed(1, lambda: publish.publish(tables, lake.Lake.of(warehouse), "enrich-bench"))
        print(f"publish          {seconds:7.2f} s  (papers and paper_names written as data files, paper_terms linked, one snapshot)")
        with etl_project.connect(warehouse) as con:
            for query in ("counterfactual explanations", "over-refusal benchmark for safety"):
                seconds, hits = timed(args.repeat, lambda query=query: con.sql("SELECT * FROM search_papers(?)", params=[query]).fetchall())
                print(f"search_papers    {seconds:7.3f} s  {query!r} ({len(hits)} hits)")


if __name__ == "__main__":
    main()
