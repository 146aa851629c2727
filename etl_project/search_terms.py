"""What full-text search scores: each paper's search terms and how often it holds each one.

A paper's search document is its names (each name with its long form, in name_rank order) and its
plain text, as ``DOCUMENTS`` selects them. Its terms are what DuckDB's ``fts`` extension makes of
that document (its tokenizer, English stopwords out, Porter stems), counted per paper:
``paper_terms`` holds ``(paper_id, term, tf, doc_terms)``, sorted by paper_id and term. BM25's
corpus statistics (how many papers hold a term, the mean document length) are not stored: the
lake's ``search_papers`` computes them at query time (etl_project/warehouse_sql.py), so a paper's
rows depend on its own texts only and a run works out the rows of the papers whose texts changed,
taking every other paper's from the previous run's table.

The terms are made set-based, several times faster than the extension's ``PRAGMA
create_fts_index``: texts are cut at spaces (cheap), each distinct chunk goes once through the
extension's ``tokenize``, stopword filter and stemmer, and every chunk occurrence is joined to its
terms. Cutting at spaces first changes no word: a space separates words before and after the
tokenizer's ``strip_accents`` and ``lower``, which map code point by code point and never join a
space to its neighbours (a property test checks it, and another compares the counts with the
index the PRAGMA builds).
"""

import functools
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb
import polars as pl

from etl_project import lake
from etl_project.lake import literal

FIELDS = ("names", "abstract_plain")
STEMMER, STOPWORDS = "porter", "english"
# An empty table indexed by the extension, for its tokenize macro and stopwords.
_TEMPLATE, _FTS = "etl_terms.template", "fts_etl_terms_template"
# The search document of every paper of ``papers`` (paper_id, abstract_plain) and ``paper_names``.
DOCUMENTS = """
        SELECT p.paper_id, n.names, p.abstract_plain
        FROM papers AS p
        LEFT JOIN (
            SELECT paper_id, string_agg(concat_ws(' ', name, long_name), ' ' ORDER BY name_rank) AS names
            FROM paper_names GROUP BY paper_id
        ) AS n USING (paper_id)"""
# What a paper's terms are made from, told apart by 128 bits (md5: the same in every DuckDB).
FINGERPRINT = "md5_number_lower({text}) AS fp_a, md5_number_upper({text}) AS fp_b"
_FINGERPRINT_TEXT = "concat(coalesce(names, chr(1)), chr(0), coalesce(abstract_plain, chr(1)))"
# DuckDB's memory limit while the terms are made: sorts and aggregates spill to its temp
# directory beyond it.
MEMORY_GIB = 1
BATCH_PAPERS = 50_000


@contextmanager
def connection(temp_directory: Path | None = None) -> Iterator[duckdb.DuckDBPyConnection]:
    """An in-memory DuckDB session with the fts extension's tokenize macro and stopwords."""
    con = duckdb.connect()
    try:
        lake.load_extension(con, "fts")
        con.execute(f"SET memory_limit = '{MEMORY_GIB}GiB'")
        if temp_directory is not None:
            temp_directory.mkdir(parents=True, exist_ok=True)
            con.execute(f"SET temp_directory = {literal(str(temp_directory))}")
        schema = _TEMPLATE.split(".")[0]
        con.execute(f"CREATE SCHEMA {schema}; CREATE TABLE {_TEMPLATE} (id VARCHAR, {', '.join(f'{f} VARCHAR' for f in FIELDS)})")
        con.execute(f"PRAGMA create_fts_index({literal(_TEMPLATE)}, 'id', {', '.join(map(literal, FIELDS))}, "
                    f"stemmer = {literal(STEMMER)}, stopwords = {literal(STOPWORDS)})")
        yield con
    finally:
        con.close()


def documents_sql(papers: str, paper_names: str) -> str:
    """Every paper's search document and fingerprint, from two Parquet files (or SQL relations)."""
    return (f"WITH papers AS (FROM {papers}), paper_names AS (FROM {paper_names}) "
            f"SELECT *, {FINGERPRINT.format(text=_FINGERPRINT_TEXT)} FROM ({DOCUMENTS})")


def terms_sql(documents: str) -> str:
    """``(paper_id, term, tf, doc_terms)`` of the papers of the relation ``documents`` (paper_id
    and FIELDS), sorted by paper_id and term; a ``connection``'s tokenize macro and stopwords."""
    chunks = " UNION ALL ".join(f"SELECT paper_id, unnest(string_split({field}, ' ')) AS chunk FROM {documents}" for field in FIELDS)
    return f"""
        WITH chunks AS ({chunks}),
        cut AS (
            SELECT chunk, unnest({_FTS}.tokenize(chunk)) AS w FROM (SELECT DISTINCT chunk FROM chunks)
        ),
        stems AS (
            SELECT w, stem(w, {literal(STEMMER)}) AS term
            FROM (SELECT DISTINCT w FROM cut)
            WHERE w IS NOT NULL AND len(w) > 0 AND w NOT IN (SELECT sw FROM {_FTS}.stopwords)
        ),
        chunk_terms AS (SELECT cut.chunk, list(stems.term) AS terms FROM cut JOIN stems USING (w) GROUP BY cut.chunk),
        counted AS (
            SELECT paper_id, term, count(*)::INTEGER AS tf
            FROM (SELECT c.paper_id, unnest(t.terms) AS term FROM chunks AS c JOIN chunk_terms AS t USING (chunk))
            GROUP BY paper_id, term
        )
        SELECT paper_id, term, tf, sum(tf) OVER (PARTITION BY paper_id)::INTEGER AS doc_terms
        FROM counted
        ORDER BY paper_id, term"""


def write_terms(con: duckdb.DuckDBPyConnection, documents: str, path: Path) -> int:
    """The terms of ``documents`` (see ``terms_sql``) into one zstd Parquet file; returns its rows.
    Made BATCH_PAPERS papers at a time, in paper_id order, each batch in memory: one statement over
    a million papers would sort and aggregate ~50M rows, spilling far beyond MEMORY_GIB."""
    path.parent.mkdir(parents=True, exist_ok=True)
    con.execute(f"CREATE OR REPLACE TEMP TABLE batched AS SELECT *, (row_number() OVER (ORDER BY paper_id) - 1) // {BATCH_PAPERS} AS batch "
                f"FROM {documents}")
    batches = con.execute("SELECT coalesce(max(batch) + 1, 0) FROM batched").fetchone()[0]
    parts = [path.with_name(f"{path.stem}.part{batch:05d}.parquet") for batch in range(max(batches, 1))]
    rows = 0
    for batch, part in enumerate(parts):
        query = terms_sql(f"(FROM batched WHERE batch = {batch})")
        rows += con.execute(f"COPY ({query}) TO {literal(str(part))} (FORMAT parquet, COMPRESSION zstd)").fetchone()[0]
    con.execute("DROP TABLE batched")
    if len(parts) == 1:
        parts[0].replace(path)
    else:  # the parts in order, as one file
        pl.scan_parquet(parts).sink_parquet(path, compression="zstd", statistics=True)
        for part in parts:
            part.unlink()
    return rows


@functools.cache
def stopword_list() -> list[str]:
    """The stopwords the terms leave out, which ``search_papers`` leaves out of a query too."""
    with connection() as con:
        return [word for (word,) in con.execute(f"SELECT sw FROM {_FTS}.stopwords ORDER BY sw").fetchall()]


def paper_terms(papers: pl.DataFrame | pl.LazyFrame, paper_names: pl.DataFrame | pl.LazyFrame) -> pl.DataFrame:
    """``paper_terms`` of every paper, in memory (the asset streams from file to file instead)."""
    with connection() as con:
        con.register("papers_frame", papers.lazy().select("paper_id", "abstract_plain").collect())
        con.register("names_frame", paper_names.lazy().select("paper_id", "name", "long_name", "name_rank").collect())
        return con.execute(terms_sql(f"({documents_sql('papers_frame', 'names_frame')})")).pl()
