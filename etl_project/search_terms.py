"""What full-text search scores: each paper's search terms and how often it holds each one.

A paper's search document is its names (each name with its long form, in name_rank order), its
plain text, as ``DOCUMENTS`` selects them, and the plain text of its near-duplicate variants (texts
of its records other than the canonical one, which can hold words the canonical lacks: "Code is
available at ...", an edited sentence). Its terms are what DuckDB's ``fts`` extension makes of
those texts (its tokenizer, English stopwords out, Porter stems), counted per paper:
``paper_terms`` holds ``(paper_id, term, tf, doc_terms)``, staged as parts each sorted by paper_id
and term. A term's count is its count in the names plus its largest count in any one of the
paper's texts, so a paper's variants add the words they bring without counting the words they
share with the canonical text again; a paper without variants is counted as the extension's
index counts its document. BM25's corpus statistics (how many papers hold a term, the mean document length) are
not stored: the lake's ``search_papers`` computes them at query time (etl_project/warehouse_sql.py),
so a paper's rows depend on its own texts only and a run works out the rows of the papers whose
texts changed, taking every other paper's from the previous run's table (``stage_terms``).

The terms are made set-based, several times faster than the extension's ``PRAGMA
create_fts_index``: texts are cut at spaces (cheap), each distinct chunk goes once through the
extension's ``tokenize``, stopword filter and stemmer, and every chunk occurrence is joined to its
terms. Cutting at spaces first changes no word: a space separates words before and after the
tokenizer's ``strip_accents`` and ``lower``, which map code point by code point and never join a
space to its neighbours (a property test checks it, and another compares the counts with the
index the PRAGMA builds).
"""

import functools
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import duckdb
import polars as pl

from etl_project import lake, stage
from etl_project.enrich.markup import with_plain_text
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
_FINGERPRINT_TEXT = ("concat(coalesce(names, chr(1)), chr(0), coalesce(abstract_plain, chr(1)), chr(0), "
                     "coalesce(variants_md5, chr(1)))")
# What a paper's variants (paper_id, abstract: raw texts other than its canonical one) are, in
# 128 bits: the texts themselves stay out of the documents table, which DuckDB holds whole.
_VARIANTS_MD5 = "SELECT paper_id, md5(string_agg(abstract, chr(2) ORDER BY abstract)) AS variants_md5 FROM {variants} GROUP BY paper_id"
VARIANTS_SCHEMA = {"paper_id": pl.String, "abstract": pl.String}
# DuckDB's memory limit while the terms are made: sorts and aggregates spill to its temp
# directory beyond it.
MEMORY_GIB = 1
BATCH_PAPERS = 50_000
MAX_PARTS = 32  # parts of a staged paper_terms before the smallest are merged (a million papers: 20)


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


def documents_sql(papers: str, paper_names: str, variants: str) -> str:
    """Every paper's search document (FIELDS) and fingerprint, which covers its ``variants``
    (VARIANTS_SCHEMA), from three Parquet files (or SQL relations)."""
    return (f"WITH papers AS (FROM {papers}), paper_names AS (FROM {paper_names}), "
            f"variant_digests AS ({_VARIANTS_MD5.format(variants=variants)}) "
            f"SELECT * EXCLUDE (variants_md5), {FINGERPRINT.format(text=_FINGERPRINT_TEXT)} "
            f"FROM ({DOCUMENTS}) LEFT JOIN variant_digests USING (paper_id)")


def terms_sql(documents: str, variants: str | None = None) -> str:
    """``(paper_id, term, tf, doc_terms)`` of the papers of the relation ``documents`` (paper_id
    and FIELDS) and of ``variants`` (paper_id, text_no from 1, plain: their variants' plain texts),
    sorted by paper_id and term; a ``connection``'s tokenize macro and stopwords."""
    # text_no: -1 for the names, whose counts add up; 0 for the plain text and 1... for the
    # variants, of which each term takes its largest count.
    texts = [f"SELECT paper_id, -1 AS text_no, names AS text FROM {documents}",
             f"SELECT paper_id, 0 AS text_no, abstract_plain AS text FROM {documents}"]
    if variants is not None:
        texts.append(f"SELECT paper_id, text_no, plain AS text FROM {variants}")
    chunks = " UNION ALL ".join(f"SELECT paper_id, text_no, unnest(string_split(text, ' ')) AS chunk FROM ({sql})" for sql in texts)
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
        per_text AS (
            SELECT paper_id, text_no, term, count(*) AS n
            FROM (SELECT c.paper_id, c.text_no, unnest(t.terms) AS term FROM chunks AS c JOIN chunk_terms AS t USING (chunk))
            GROUP BY paper_id, text_no, term
        ),
        counted AS (
            SELECT paper_id, term,
                   (coalesce(sum(n) FILTER (WHERE text_no < 0), 0) + coalesce(max(n) FILTER (WHERE text_no >= 0), 0))::INTEGER AS tf
            FROM per_text
            GROUP BY paper_id, term
        )
        SELECT paper_id, term, tf, sum(tf) OVER (PARTITION BY paper_id)::INTEGER AS doc_terms
        FROM counted
        ORDER BY paper_id, term"""


@dataclass(frozen=True)
class StagedTerms:
    """What ``stage_terms`` did: papers worked out and taken over, parts linked and written."""

    computed: int
    reused: int
    parts_linked: int
    parts_written: int


def stage_terms(papers: str, paper_names: str, folder: Path, fingerprints: Path, build: str,
                previous: tuple[Path, Path] | None = None, temp_directory: Path | None = None,
                variants: pl.DataFrame | None = None) -> StagedTerms:
    """``paper_terms`` of the papers of ``papers`` and ``paper_names`` (SQL relations such as
    ``read_parquet(...)``) and of their ``variants`` (VARIANTS_SCHEMA: the raw texts of each paper
    other than its canonical one; None: no paper has any) staged into ``folder``, a folder of
    Parquet parts (each sorted by paper_id and term), and each paper's fingerprint and part into
    the file ``fingerprints``.

    ``previous`` is the previous table's folder and fingerprints, by the same ``build``: a paper
    whose fingerprint did not change keeps its rows, only the others are worked out. A previous
    part none of whose papers changed or went is hard-linked, not read; a part that lost some is
    rewritten without them; the new papers' terms go to new parts. When the folder would hold more
    than MAX_PARTS parts, its smallest are merged into one, so the parts stay few and large."""
    shutil.rmtree(folder, ignore_errors=True)  # a retried step's parts
    folder.mkdir(parents=True)
    variants = pl.DataFrame(schema=VARIANTS_SCHEMA) if variants is None else variants.select(VARIANTS_SCHEMA.keys())
    with connection(temp_directory) as con:
        con.register("variant_texts", variants)
        con.execute(f"CREATE TEMP TABLE documents AS {documents_sql(papers, paper_names, 'variant_texts')}")
        con.unregister("variant_texts")
        con.execute("CREATE TEMP TABLE placed (paper_id VARCHAR, part VARCHAR)")  # where each paper's rows are
        linked = written = 0
        if previous is not None:
            before, sidecar = previous[0], parquet(previous[1])
            con.execute(f"INSERT INTO placed SELECT paper_id, part FROM documents JOIN {sidecar} USING (paper_id, fp_a, fp_b)")
            dropped = con.execute(f"SELECT part, list(paper_id) FROM {sidecar} ANTI JOIN placed USING (paper_id) "
                                  "WHERE part IS NOT NULL GROUP BY part").fetchall()
            losing = dict(dropped)
            keeping = {part for (part,) in con.execute("SELECT DISTINCT part FROM placed WHERE part IS NOT NULL").fetchall()}
            for part in sorted(keeping):
                if part not in losing:
                    stage.link_or_copy(before / part, folder / part)
                    linked += 1
                    continue
                # Streamed through Polars, which keeps the part's order: no sort, both cores.
                name = _part_name()
                stage.write(pl.scan_parquet(before / part).filter(~pl.col("paper_id").is_in(losing[part])), folder / name)
                con.execute("UPDATE placed SET part = ? WHERE part = ?", [name, part])
                written += 1
        computed = con.execute("SELECT count(*) FROM documents ANTI JOIN placed USING (paper_id)").fetchone()[0]
        written += _write_new_parts(con, "(FROM documents ANTI JOIN placed USING (paper_id))", variants, folder)
        written += _merge_smallest_parts(con, folder)
        if not any(folder.glob("*.parquet")):  # no terms at all: still a table, with its columns
            con.execute(f"COPY ({terms_sql('(FROM documents LIMIT 0)')}) TO {literal(str(folder / _part_name()))} "
                        "(FORMAT parquet, COMPRESSION zstd)")
        con.execute(f"COPY (SELECT paper_id, fp_a, fp_b, part, {literal(build)} AS build FROM documents "
                    f"LEFT JOIN placed USING (paper_id) ORDER BY paper_id) TO {literal(str(fingerprints))} (FORMAT parquet, COMPRESSION zstd)")
        total = con.execute("SELECT count(*) FROM documents").fetchone()[0]
    return StagedTerms(computed, total - computed, linked, written)


def _write_new_parts(con: duckdb.DuckDBPyConnection, documents: str, variants: pl.DataFrame, folder: Path) -> int:
    """The terms of ``documents`` into new parts of ``folder``, placed; returns how many parts.
    Made BATCH_PAPERS papers at a time, in paper_id order, each batch in memory: one statement over
    a million papers would sort and aggregate ~50M rows, spilling far beyond MEMORY_GIB."""
    con.execute(f"CREATE OR REPLACE TEMP TABLE batched AS SELECT *, (row_number() OVER (ORDER BY paper_id) - 1) // {BATCH_PAPERS} AS batch "
                f"FROM {documents}")
    batches = con.execute("SELECT coalesce(max(batch) + 1, 0) FROM batched").fetchone()[0]
    prefix = stage.new_batch_id()  # the parts' names sort in paper_id order
    for batch in range(batches):
        name = f"{prefix}-{batch:05d}.parquet"
        ids = con.execute("SELECT paper_id FROM batched WHERE batch = ?", [batch]).pl()["paper_id"]
        con.register("batch_variants", _plain_variants(variants.filter(pl.col("paper_id").is_in(ids.implode()))))
        con.execute(f"COPY ({terms_sql(f'(FROM batched WHERE batch = {batch})', 'batch_variants')}) "
                    f"TO {literal(str(folder / name))} (FORMAT parquet, COMPRESSION zstd)")
        con.unregister("batch_variants")
        # A paper without terms is placed too: at worst its part is rewritten for nothing once.
        con.execute("INSERT INTO placed SELECT paper_id, ? FROM batched WHERE batch = ?", [name, batch])
    con.execute("DROP TABLE batched")
    return batches


def _plain_variants(variants: pl.DataFrame) -> pl.DataFrame:
    """``(paper_id, text_no, plain)``: the plain text of each variant (VARIANTS_SCHEMA), numbered
    from 1 within its paper. Worked out here, for the papers whose terms are made, not for all."""
    return with_plain_text(variants.cast(VARIANTS_SCHEMA), "abstract", "plain").select(
        "paper_id", text_no=pl.int_range(1, pl.len() + 1, dtype=pl.Int64).over("paper_id"), plain="plain")


def _merge_smallest_parts(con: duckdb.DuckDBPyConnection, folder: Path) -> int:
    """Beyond MAX_PARTS parts, the smallest ones as one; returns how many parts were written."""
    parts = sorted(folder.glob("*.parquet"), key=lambda path: path.stat().st_size)
    if len(parts) <= MAX_PARTS:
        return 0
    smallest = parts[:len(parts) - MAX_PARTS + 1]
    name = _part_name()
    listed = "[" + ", ".join(literal(str(path)) for path in smallest) + "]"
    con.execute(f"COPY (FROM read_parquet({listed}) ORDER BY paper_id, term) TO {literal(str(folder / name))} "
                "(FORMAT parquet, COMPRESSION zstd)")
    con.execute(f"UPDATE placed SET part = ? WHERE part IN ({', '.join(literal(path.name) for path in smallest)})", [name])
    for path in smallest:
        path.unlink()
    return 1


def _part_name() -> str:
    return f"{stage.new_batch_id()}.parquet"


def parquet(path: Path) -> str:
    """The SQL relation reading the Parquet file or files at ``path``."""
    return f"read_parquet({literal(str(path))})"


@functools.cache
def stopword_list() -> list[str]:
    """The stopwords the terms leave out, which ``search_papers`` leaves out of a query too."""
    with connection() as con:
        return [word for (word,) in con.execute(f"SELECT sw FROM {_FTS}.stopwords ORDER BY sw").fetchall()]


def paper_terms(papers: pl.DataFrame | pl.LazyFrame, paper_names: pl.DataFrame | pl.LazyFrame,
                variants: pl.DataFrame | None = None) -> pl.DataFrame:
    """``paper_terms`` of every paper, in memory (the asset streams from file to file instead)."""
    with connection() as con:
        con.register("papers_frame", papers.lazy().select("paper_id", "abstract_plain").collect())
        con.register("names_frame", paper_names.lazy().select("paper_id", "name", "long_name", "name_rank").collect())
        variants = pl.DataFrame(schema=VARIANTS_SCHEMA) if variants is None else variants.select(VARIANTS_SCHEMA.keys())
        con.register("variants_frame", variants)
        con.register("plain_frame", _plain_variants(variants))
        return con.execute(terms_sql(f"({documents_sql('papers_frame', 'names_frame', 'variants_frame')})", "plain_frame")).pl()


def variants_of(texts: pl.DataFrame) -> pl.DataFrame:
    """The variants (VARIANTS_SCHEMA) of ``dedup.variant_texts``: every text but each paper's first."""
    return texts.filter(~pl.col("paper_id").is_first_distinct()).select(VARIANTS_SCHEMA.keys())
