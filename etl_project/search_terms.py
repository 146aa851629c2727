"""What full-text search scores: each paper's search terms and how often it holds each one.

A paper's search document is its names (each name with its long form, in name_rank order) and its
plain text, as ``DOCUMENTS`` selects them, plus the plain text of its near-duplicate variants (texts
of its records other than the canonical one, which can hold words the canonical lacks: "Code is
available at ...", an edited sentence). Its terms are what DuckDB's ``fts`` extension makes of
those texts (its tokenizer, English stopwords out, Porter stems), counted per paper:
``paper_terms`` holds ``(paper_id, term, tf, doc_terms)``, staged as parts each sorted by paper_id
and term. A term's count is its count in the names plus its count in the plain text or, for a
term the plain text lacks, its largest count in one variant: variants add the words they bring,
and the words they share with the canonical text are not counted again. A paper without variants
is counted as the extension's index counts its document. A paper whose variants differ much (a
large near-duplicate cluster) holds more terms, which BM25's length normalisation weighs against.

BM25's corpus statistics (how many papers hold a term, the mean document length) are not stored:
the lake's ``search_papers`` computes them at query time (etl_project/warehouse_sql.py), so a
paper's rows depend on its own texts only and a run works out the rows of the papers whose texts
changed, taking every other paper's from the previous run's table (``stage_terms``).

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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import duckdb
import polars as pl

from etl_project import lake, stage
from etl_project.dedup_memo import text_hash
from etl_project.enrich import reuse
from etl_project.enrich.markup import with_plain_text
from etl_project.lake import literal

FIELDS = ("names", "abstract_plain")
STEMMER, STOPWORDS = "porter", "english"
# An empty table indexed by the extension, for its tokenize macro and stopwords.
_TEMPLATE, _FTS = "etl_terms.template", "fts_etl_terms_template"
# The names and plain text of every paper of ``papers`` (paper_id, abstract_plain) and ``paper_names``.
DOCUMENTS = """
        SELECT p.paper_id, n.names, p.abstract_plain
        FROM papers AS p
        LEFT JOIN (
            SELECT paper_id, string_agg(concat_ws(' ', name, long_name), ' ' ORDER BY name_rank) AS names
            FROM paper_names GROUP BY paper_id
        ) AS n USING (paper_id)"""
# A paper's variants: the raw texts of its records other than its canonical one.
VARIANTS_SCHEMA = {"paper_id": pl.String, "abstract": pl.String}
PAPER_COLUMNS, NAME_COLUMNS = ("paper_id", "abstract_plain"), ("paper_id", "name", "long_name", "name_rank")
# DuckDB's memory limit while the terms are made: sorts and aggregates spill to its temp
# directory beyond it.
MEMORY_GIB = 1
# Papers per batch, and so per part: a change's papers lie anywhere, so smaller parts leave more
# of them linked; smaller batches also need less memory, in no more time (benchmarks/fts_bench.py).
BATCH_PAPERS = 10_000
MAX_PARTS = 128  # parts of a staged paper_terms before the smallest are merged (a million papers: ~65)


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


@dataclass(frozen=True)
class Variants:
    """The papers' variants: their ``text_hash`` (paper_id, hash_a, hash_b), which the
    fingerprints take, and their texts (VARIANTS_SCHEMA) read for the papers worked out only."""

    hashes: pl.DataFrame
    read: Callable[[pl.Series], pl.DataFrame]  # the variants of those paper_ids
    # Each paper's fingerprint of its variants' hashes (reuse.text_fingerprints), when worked out
    # already; None: combined from ``hashes``.
    fingerprints: pl.DataFrame | None = None

    def combined(self) -> pl.DataFrame:
        """``(paper_id, fp_a, fp_b)`` of each paper's variants, in hash order (a paper without
        any has no row, or nulls: either way its fingerprint has no variants' part)."""
        if self.fingerprints is not None:
            return self.fingerprints
        return reuse.combine(self.hashes.sort("paper_id", "hash_a", "hash_b"))

    @classmethod
    def of(cls, variants: pl.DataFrame) -> "Variants":
        """Variants held in memory (VARIANTS_SCHEMA)."""
        variants = variants.select(VARIANTS_SCHEMA.keys())
        return cls(variants.select("paper_id", *text_hash("abstract")),
                   lambda paper_ids: variants.filter(pl.col("paper_id").is_in(paper_ids.implode())))


NO_VARIANTS = Variants.of(pl.DataFrame(schema=VARIANTS_SCHEMA))


def fingerprints(papers: pl.LazyFrame, paper_names: pl.DataFrame, variants: Variants, plain: pl.DataFrame | None = None) -> pl.DataFrame:
    """``(paper_id, fp_a, fp_b)``: what each paper's terms are made from (its plain text, its
    names in name_rank order, its variants in any order), told apart by two independently seeded
    64-bit Polars hashes (etl_project/enrich/reuse.py, whose fingerprints of names and variants
    these combine). ``plain``: the reuse.fingerprints of every paper's plain text, or what stands
    in for them (the canonical text's, of which the plain text is a function); None: the plain
    texts are hashed as they stream by, never held. The variants go by their text hashes, never
    read."""
    names = reuse.fingerprints(paper_names.sort("paper_id", "name_rank").select("paper_id", name=pl.struct("name", "long_name")), "name")
    texts = variants.combined()
    if plain is None:
        plain = reuse.fingerprints(papers.select("paper_id", "abstract_plain"), "abstract_plain")
    return (
        plain.lazy()
        .join(names.lazy(), on="paper_id", how="left", suffix="_names", maintain_order="left")
        .join(texts.lazy(), on="paper_id", how="left", suffix="_variants", maintain_order="left")
        .select("paper_id", fp_a=pl.struct("fp_a", "fp_a_names", "fp_a_variants").hash(reuse.SEED_A),
                fp_b=pl.struct("fp_b", "fp_b_names", "fp_b_variants").hash(reuse.SEED_B))
        .collect()
    )


# ``(paper_id, term, tf, doc_terms)`` of the relations ``_register_batch`` registers, sorted by
# paper_id and term; a ``connection``'s tokenize macro and stopwords. text_no: -1 for the names,
# 0 for the plain text and 1... for the variants' additions. A term's count is its names' count
# plus its plain text's, or when that has none, the largest count in one variant.
_TEXTS = ("SELECT paper_id, -1 AS text_no, names AS text FROM documents",
          "SELECT paper_id, 0 AS text_no, abstract_plain AS text FROM documents",
          "SELECT paper_id, text_no, plain AS text FROM variant_additions")
TERMS = f"""
        WITH documents AS ({DOCUMENTS}),
        chunks AS ({" UNION ALL ".join(f"SELECT paper_id, text_no, unnest(string_split(text, ' ')) AS chunk FROM ({sql})" for sql in _TEXTS)}),
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
                   (coalesce(sum(n) FILTER (WHERE text_no < 0), 0)
                    + coalesce(max(n) FILTER (WHERE text_no = 0), max(n) FILTER (WHERE text_no > 0), 0))::INTEGER AS tf
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


def stage_terms(papers: pl.LazyFrame | Path, paper_names: pl.LazyFrame, folder: Path, sidecar: Path, build: str,
                previous: tuple[Path, Path] | None = None, temp_directory: Path | None = None,
                variants: Variants = NO_VARIANTS, plain: pl.DataFrame | None = None) -> StagedTerms:
    """``paper_terms`` of the papers of ``papers`` and ``paper_names`` (scans of their tables;
    papers may be its staged table, whose parts holding the papers worked out are all that is
    read of it: stage.rows_of) and of their ``variants`` staged into ``folder``, a folder of
    Parquet parts (each sorted by paper_id and term), and each paper's fingerprint and part into
    the file ``sidecar``. Only the papers worked out are read whole (their plain text, their
    variants' texts); ``plain`` is as ``fingerprints`` takes it.

    ``previous`` is the previous table's folder and fingerprints, by the same ``build``: a paper
    whose fingerprint did not change keeps its rows, only the others are worked out. A previous
    part none of whose papers changed or went is hard-linked, not read; a part that lost some is
    rewritten without them; the new papers' terms go to new parts. When the folder would hold more
    than MAX_PARTS parts, its smallest are merged into one, so the parts stay few and large."""
    shutil.rmtree(folder, ignore_errors=True)  # a retried step's parts
    folder.mkdir(parents=True)
    paper_names = paper_names.select(NAME_COLUMNS).collect()
    current = fingerprints(pl.scan_parquet(papers) if isinstance(papers, Path) else papers, paper_names, variants, plain)
    placed = pl.DataFrame(schema={"paper_id": pl.String, "part": pl.String})  # where each paper's rows are
    linked = written = 0
    if previous is not None:
        before, earlier = previous[0], pl.read_parquet(previous[1], columns=["paper_id", "fp_a", "fp_b", "part"])
        placed = current.join(earlier, on=["paper_id", "fp_a", "fp_b"]).select("paper_id", "part")
        losing = dict(earlier.filter(pl.col("part").is_not_null()).join(placed, on="paper_id", how="anti")
                      .group_by("part").agg("paper_id").iter_rows())
        renamed, rewrites = {}, []
        for part in sorted(placed["part"].drop_nulls().unique()):
            if part not in losing:
                stage.link_or_copy(before / part, folder / part)
                linked += 1
                continue
            # Streamed through Polars, which keeps the part's order: no sort.
            renamed[part] = _part_name()
            rewrites.append((pl.scan_parquet(before / part).filter(~pl.col("paper_id").is_in(losing[part])), folder / renamed[part]))
        stage.write_each(rewrites)
        written += len(rewrites)
        placed = placed.with_columns(pl.col("part").replace(renamed))
    todo = current.join(placed, on="paper_id", how="anti", maintain_order="left")["paper_id"]
    chosen = (stage.rows_of(papers, "paper_id", todo, *PAPER_COLUMNS) if isinstance(papers, Path)
              else papers.filter(pl.col("paper_id").is_in(todo.implode())).select(PAPER_COLUMNS).collect())
    with connection(temp_directory) as con:
        new_parts = _write_new_parts(con, chosen, paper_names, variants.read(todo).select(VARIANTS_SCHEMA.keys()), folder)
        merged = _merge_smallest_parts(con, folder)
        if not any(folder.glob("*.parquet")):  # no terms at all: still a table, with its columns
            _register_batch(con, chosen.clear(), paper_names, NO_VARIANTS.read(todo))
            con.execute(f"COPY ({TERMS}) TO {literal(str(folder / _part_name()))} "
                        "(FORMAT parquet, COMPRESSION zstd)")
    placed = pl.concat([placed, new_parts]).with_columns(pl.col("part").replace(merged))
    written += new_parts["part"].n_unique() + bool(merged)
    stage.write(current.join(placed, on="paper_id", how="left", maintain_order="left").with_columns(build=pl.lit(build)),
                sidecar)
    return StagedTerms(todo.len(), current.height - todo.len(), linked, written)


def _write_new_parts(con: duckdb.DuckDBPyConnection, papers: pl.DataFrame, paper_names: pl.DataFrame,
                     variants: pl.DataFrame, folder: Path) -> pl.DataFrame:
    """The terms of ``papers`` into new parts of ``folder``; returns where each paper went
    (paper_id, part). Made BATCH_PAPERS papers at a time, each batch in memory: one statement
    over a million papers would sort and aggregate ~50M rows, spilling far beyond MEMORY_GIB. The
    batches follow the papers table's order, which a full build stages in its canonical records'
    (source_file, ordinal) order (and a later run keeps, adding its changed papers after): a
    file's papers share a part or two, so removing or changing a file rewrites those, not every
    part (paper_id, a hash, would spread them over all)."""
    prefix = stage.new_batch_id()  # the parts' names sort in the papers' order
    placed = [pl.DataFrame(schema={"paper_id": pl.String, "part": pl.String})]
    for batch, start in enumerate(range(0, papers.height, BATCH_PAPERS)):
        name = f"{prefix}-{batch:05d}.parquet"
        rows = papers.slice(start, BATCH_PAPERS)
        _register_batch(con, rows, paper_names, variants)
        con.execute(f"COPY ({TERMS}) TO {literal(str(folder / name))} "
                    "(FORMAT parquet, COMPRESSION zstd)")
        # A paper without terms is placed too: at worst its part is rewritten for nothing once.
        placed.append(rows.select("paper_id", part=pl.lit(name)))
    return pl.concat(placed)


def _register_batch(con: duckdb.DuckDBPyConnection, papers: pl.DataFrame, paper_names: pl.DataFrame, variants: pl.DataFrame) -> None:
    """``papers``, their names and their variants' additions as the relations DOCUMENTS and
    TERMS read: ``papers``, ``paper_names`` and ``variant_additions``."""
    ids = papers["paper_id"].implode()
    con.register("papers", papers)
    con.register("paper_names", paper_names.filter(pl.col("paper_id").is_in(ids)))
    con.register("variant_additions", variant_additions(papers, variants.filter(pl.col("paper_id").is_in(ids))))


def variant_additions(papers: pl.DataFrame, variants: pl.DataFrame) -> pl.DataFrame:
    """``(paper_id, text_no, plain)``: what each variant (VARIANTS_SCHEMA) of ``papers``
    (paper_id, abstract_plain) adds to its paper's search text, numbered from 1 within its paper:
    its plain text without the space-separated chunks the paper's plain text holds. A term the
    plain text lacks comes from no chunk of it, so every chunk that yields such a term stays and
    its count in the variant is kept; the chunks a near duplicate shares with its canonical text
    (nearly all of them) never reach the tokenizer."""
    plain = with_plain_text(variants.cast(VARIANTS_SCHEMA), "abstract", "plain").select(
        "paper_id", text_no=pl.int_range(1, pl.len() + 1, dtype=pl.Int64).over("paper_id"), chunk=pl.col("plain").str.split(" "))
    held = (papers.lazy().join(plain.lazy().select("paper_id").unique(), on="paper_id", how="semi")
            .select("paper_id", chunk=pl.col("abstract_plain").str.split(" ")).explode("chunk"))
    return (
        plain.lazy().with_row_index("_text").explode("chunk").with_row_index("_at")
        .join(held, on=["paper_id", "chunk"], how="anti")
        .sort("_at")
        .group_by("_text", maintain_order=True)
        .agg(pl.col("paper_id").first(), pl.col("text_no").first(), plain=pl.col("chunk").str.join(" "))
        .select("paper_id", "text_no", "plain")
        .collect()
    )


def _merge_smallest_parts(con: duckdb.DuckDBPyConnection, folder: Path) -> dict[str, str]:
    """Beyond MAX_PARTS parts, the smallest ones as one; returns the new name of each merged part."""
    parts = sorted(folder.glob("*.parquet"), key=lambda path: path.stat().st_size)
    if len(parts) <= MAX_PARTS:
        return {}
    smallest = parts[:len(parts) - MAX_PARTS + 1]
    name = _part_name()
    listed = "[" + ", ".join(literal(str(path)) for path in smallest) + "]"
    con.execute(f"COPY (FROM read_parquet({listed}) ORDER BY paper_id, term) TO {literal(str(folder / name))} "
                "(FORMAT parquet, COMPRESSION zstd)")
    for path in smallest:
        path.unlink()
    return {path.name: name for path in smallest}


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
    variants = pl.DataFrame(schema=VARIANTS_SCHEMA) if variants is None else variants
    with connection() as con:
        _register_batch(con, papers.lazy().select(PAPER_COLUMNS).collect(), paper_names.lazy().select(NAME_COLUMNS).collect(), variants)
        return con.execute(TERMS).pl()


def variants_of(texts: pl.DataFrame) -> pl.DataFrame:
    """The variants (VARIANTS_SCHEMA) of ``dedup.variant_texts``: every text but each paper's first."""
    return texts.filter(~pl.col("paper_id").is_first_distinct()).select(VARIANTS_SCHEMA.keys())
