"""The analysis layer of the lake: full-text search and views for common questions.

Published with the tables, in the same DuckLake snapshot: the search index's tables (schema
``search``), the ``search_papers`` macro and the views live in the lake, so every reader that
attaches it (``etl_project.connect``, ``etl-project sql``/``shell``, ``warehouse/open.sql``) has
them. Objects whose tables (or columns) are missing are skipped.

The BM25 index holds the tables DuckDB's ``fts`` extension builds, built several times faster and
outside the lake (DuckLake refuses ``PRAGMA create_fts_index`` and the NULL defaults of the
extension's ``match_bm25`` macro). ``PRAGMA create_fts_index`` on the full table runs the
extension's regex tokenizer over every text, then filters stopwords and stems the ~100 word
occurrences of each abstract one by one, then fills term ids, lengths and document frequencies
with correlated UPDATEs: ~15 s of CPU per 100k papers. ``fts_index_statements`` runs that PRAGMA
on the still-empty table instead, which creates the extension's schema as it is (stopwords,
fields, the ``tokenize`` macro, empty docs/terms/dict/stats tables), then fills those four with
set-based SQL that mirrors the extension's indexing query: texts are cut at spaces only (cheap),
each distinct chunk goes once through the extension's ``tokenize``, stopword filter and stemmer,
and every chunk occurrence is joined to its term ids. Cutting at spaces first changes no word: a
space separates words before and after the tokenizer's ``strip_accents`` and ``lower``, which map
code point by code point and never join a space to its neighbours (a property test checks it).
Term ids are numbered as the extension numbers them, so docs, dict and stats equal the PRAGMA's
row for row and terms holds the same rows (tests compare both builds on awkward texts).

The index is built in the publishing session's in-memory database, from the data files the run
just wrote, before the lake transaction (a DuckDB transaction writes to one database only); the
transaction then copies its tables into the lake. ``search_papers`` scores with the extension's
BM25 formula (k = 1.2, b = 0.75, as ``match_bm25``) over those tables; it needs the extension's
``stem`` function, which every reader of ``etl_project.lake`` loads and which DuckDB clients of
this version autoload once ``etl-project install-extensions`` ran.
"""

import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import duckdb

from etl_project import lake
from etl_project.enrich.links import CODE_KINDS
from etl_project.lake import literal

SEARCH_SCHEMA = "search"
SEARCH_TABLE = f"{SEARCH_SCHEMA}.papers"
FTS_SCHEMA = "fts_search_papers"  # named by the fts extension after the indexed table
# The index's tables as the fts extension names them, copied into the lake's `search` schema.
INDEX_TABLES = ("docs", "terms", "dict", "stats", "stopwords")
# The fts extension's tokenizer (the body of its `tokenize` macro), for the query's words.
_TOKENIZE = r"""string_split_regex(regexp_replace(lower(strip_accents(CAST(<<TEXT>> AS VARCHAR))), '[0-9!@#$%^&*()_+={}\[\]:;<>,.?~\\/\|''''"`-]+', ' ', 'g'), '\s+')"""
BM25_K, BM25_B = 1.2, 0.75
SNIPPET_CHARS = 140
SNIPPET_LEAD = 40
# The index build's sorts and aggregates spill to DuckDB's temp_directory beyond this: at a
# million papers the process then peaks at ~1.7 GB of RSS instead of ~4 GB, and runs no slower.
# A connection with a lower limit keeps its own.
BUILD_MEMORY_GIB = 1
_BYTE_UNITS = {"bytes": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40, "PiB": 2**50}

log = logging.getLogger(__name__)


def tokenize_sql(expression: str) -> str:
    return _TOKENIZE.replace("<<TEXT>>", expression)


@dataclass(frozen=True)
class SqlObject:
    name: str
    requires: dict[str, tuple[str, ...]]  # table -> columns it reads
    statements: tuple[str, ...]
    needs_fts: bool = False


_CODE_KINDS_SQL = "(" + ", ".join(literal(k) for k in CODE_KINDS) + ")"


def fts_index_statements(table: str, id_column: str, fields: tuple[str, ...], rows: str,
                         stemmer: str = "porter", stopwords: str = "english") -> tuple[str, ...]:
    """Statements that create ``table`` (``schema.name``) from the query ``rows`` and the fts
    extension's BM25 index over its ``fields``: the tables ``PRAGMA create_fts_index(table,
    id_column, *fields, stemmer=..., stopwords=...)`` builds, built set-based (see the module
    docstring). The fts extension must be loaded."""
    schema, name = table.split(".")
    fts = f"fts_{schema}_{name}"  # the extension's name for the index schema
    chunks, words, chunk_terms = f"{fts}_chunks", f"{fts}_words", f"{fts}_chunk_terms"
    # Every space-separated chunk of every field, fields and rows in the extension's order.
    all_chunks = "\n            UNION ALL ".join(
        f"SELECT unnest(string_split(\"{field}\", ' ')) AS chunk, rowid AS docid, "
        f"(SELECT fieldid FROM {fts}.fields WHERE field = {literal(field)}) AS fieldid FROM {table}"
        for field in fields
    )
    return (
        f"CREATE OR REPLACE TABLE {table} AS SELECT * FROM ({rows}) LIMIT 0",
        # On the empty table: the index schema, stopwords, fields and macros, in the extension's own words.
        f"PRAGMA create_fts_index({literal(table)}, {literal(id_column)}, {', '.join(map(literal, fields))}, "
        f"stemmer = {literal(stemmer)}, stopwords = {literal(stopwords)}, overwrite = 1)",
        f"INSERT INTO {table} {rows}",  # rowids 0.. in the query's order, as CREATE TABLE AS gives
        # Each distinct chunk once, with where it first occurs (field, then row), cut into the words
        # the extension's tokenize makes of it; NULL and empty words and stopwords out, as it does.
        f"""CREATE OR REPLACE TEMP TABLE {chunks} AS
        WITH seen AS (
            SELECT chunk, min({{'fieldid': fieldid, 'docid': docid}}) AS first
            FROM ({all_chunks})
            GROUP BY chunk
        ),
        cut AS (
            SELECT chunk, first, unnest(tokens) AS w, generate_subscripts(tokens, 1) AS pos
            FROM (SELECT chunk, first, {fts}.tokenize(chunk) AS tokens FROM seen)
        )
        SELECT chunk, first, pos, w FROM cut
        WHERE w NOT NULL AND len(w) > 0 AND w NOT IN (SELECT sw FROM {fts}.stopwords)""",
        # Each distinct word stemmed once. Term ids as the extension numbers them: its dict is
        # SELECT DISTINCT term ... ORDER BY docid, term over the occurrences (fields, then rows, in
        # order), numbered by row_number(): by the first document holding the term, then the term.
        f"""CREATE OR REPLACE TEMP TABLE {words} AS
        WITH stems AS (
            SELECT w, stem(w, {literal(stemmer)}) AS term, min(first) AS first FROM {chunks} GROUP BY w
        ),
        term_first AS (SELECT w, term, min(first) OVER (PARTITION BY term) AS first FROM stems)
        SELECT w, term, dense_rank() OVER (ORDER BY first.docid, term) - 1 AS termid FROM term_first""",
        f"""CREATE OR REPLACE TEMP TABLE {chunk_terms} AS
        SELECT c.chunk, list(w.termid ORDER BY c.pos) AS termids
        FROM {chunks} AS c JOIN {words} AS w USING (w)
        GROUP BY c.chunk""",
        # One row per word occurrence, as the extension's terms table (it drops its term column).
        f"""INSERT INTO {fts}.terms
        SELECT c.docid, c.fieldid, unnest(t.termids) FROM ({all_chunks}) AS c JOIN {chunk_terms} AS t USING (chunk)""",
        f"""INSERT INTO {fts}.docs
        SELECT d.rowid, d."{id_column}", coalesce(t.len, 0)
        FROM {table} AS d LEFT JOIN (SELECT docid, count(*) AS len FROM {fts}.terms GROUP BY docid) AS t ON t.docid = d.rowid
        ORDER BY d.rowid""",
        f"""INSERT INTO {fts}.dict
        SELECT w.termid, w.term, t.df
        FROM (SELECT DISTINCT termid, term FROM {words}) AS w
        JOIN (SELECT termid, count(*) AS df FROM (SELECT DISTINCT termid, docid FROM {fts}.terms) GROUP BY termid) AS t
            USING (termid)  -- distinct pairs first: DuckDB's count(DISTINCT) per group is slower
        ORDER BY w.termid""",
        f"DELETE FROM {fts}.stats",  # the PRAGMA's, of the empty table
        f"INSERT INTO {fts}.stats SELECT COUNT(docs.docid), SUM(docs.len) / COUNT(docs.len) FROM {fts}.docs AS docs",
        f"DROP TABLE {chunk_terms}; DROP TABLE {words}; DROP TABLE {chunks}",
    )


# One document per paper: its names (searchable on their own field) and its plain text.
SEARCH_FIELDS = ("names", "abstract_plain")
SEARCH_ROWS = """
        SELECT p.paper_id, n.name, n.names, p.abstract_plain
        FROM papers AS p
        LEFT JOIN (
            SELECT paper_id,
                   arg_min(name, name_rank) AS name,
                   string_agg(concat_ws(' ', name, long_name), ' ' ORDER BY name_rank) AS names
            FROM paper_names GROUP BY paper_id
        ) AS n USING (paper_id)
        ORDER BY p.paper_id"""

# Ranked by BM25; the snippet is the plain text around the first query term it holds. Ties are
# ranked to 9 decimals, then by paper_id: the extension's match_bm25 sums a paper's term scores in
# no fixed order, so equal scores can differ in their last bits from one run to the next.
SEARCH_MACRO = f"""CREATE OR REPLACE MACRO search_papers(query_text, max_results := 10) AS TABLE
        WITH tokens AS (
            SELECT DISTINCT stem(token, 'porter') AS term
            FROM (SELECT unnest({tokenize_sql('query_text')}) AS token)
            WHERE token <> '' AND token NOT IN (SELECT sw FROM {SEARCH_SCHEMA}.stopwords)
        ),
        term_tf AS (
            SELECT t.docid, t.termid, count(*) AS tf
            FROM {SEARCH_SCHEMA}.terms AS t
            WHERE t.termid IN (SELECT d.termid FROM {SEARCH_SCHEMA}.dict AS d JOIN tokens ON d.term = tokens.term)
            GROUP BY t.docid, t.termid
        ),
        scores AS (
            SELECT tf.docid,
                   sum(log((((SELECT num_docs FROM {SEARCH_SCHEMA}.stats) - d.df) + 0.5) / (d.df + 0.5) + 1)
                       * ((tf.tf * ({BM25_K} + 1)) / (tf.tf + ({BM25_K} * ((1 - {BM25_B}) + ({BM25_B} * (docs.len / (SELECT avgdl FROM {SEARCH_SCHEMA}.stats)))))))) AS score
            FROM term_tf AS tf
            JOIN {SEARCH_SCHEMA}.docs AS docs USING (docid)
            JOIN {SEARCH_SCHEMA}.dict AS d USING (termid)
            GROUP BY tf.docid
        ),
        ranked AS (
            SELECT docs.name AS paper_id, s.score
            FROM scores AS s JOIN {SEARCH_SCHEMA}.docs AS docs USING (docid)
            ORDER BY round(s.score, 9) DESC, paper_id
            LIMIT max_results
        ),
        texts AS (
            SELECT r.paper_id, r.score, p.abstract_plain,
                   (SELECT arg_min(n.name, n.name_rank) FROM paper_names AS n WHERE n.paper_id = r.paper_id) AS name
            FROM ranked AS r JOIN papers AS p USING (paper_id)
        ),
        located AS (
            SELECT r.paper_id, greatest(coalesce(min(nullif(instr(lower(r.abstract_plain), t.term), 0)), 1) - {SNIPPET_LEAD}, 1) AS start
            FROM texts AS r LEFT JOIN tokens AS t ON true
            GROUP BY r.paper_id
        )
        SELECT r.paper_id, r.name, round(r.score, 4) AS score,
               concat(
                   CASE WHEN l.start > 1 THEN '…' END,
                   regexp_replace(
                       regexp_replace(substr(r.abstract_plain, l.start, {SNIPPET_CHARS}),
                                      CASE WHEN l.start > 1 THEN '^\\S*\\s+' ELSE '^$' END, ''),
                       CASE WHEN l.start + {SNIPPET_CHARS} <= length(r.abstract_plain) THEN '\\s+\\S*$' ELSE '^$' END, ''),
                   CASE WHEN l.start + {SNIPPET_CHARS} <= length(r.abstract_plain) THEN '…' END
               ) AS snippet
        FROM texts AS r JOIN located AS l USING (paper_id)
        ORDER BY round(r.score, 9) DESC, r.paper_id"""

SEARCH = SqlObject(
    "search_papers",
    {"papers": ("paper_id", "abstract_plain"), "paper_names": ("paper_id", "name", "long_name", "name_rank")},
    (SEARCH_MACRO,),  # DuckLake keeps no comments on macros: the README documents it
    needs_fts=True,
)

PAPER_SUMMARY = SqlObject(
    "paper_summary",
    {
        "papers": ("paper_id", "abstract_plain", "sources", "source_count", "occurrence_count", "word_count"),
        "paper_names": ("paper_id", "name", "name_rank"),
        "paper_topics": ("paper_id", "topic", "match_count"),
        "paper_links": ("paper_id", "url", "kind", "link_rank"),
    },
    (
        f"""CREATE OR REPLACE VIEW paper_summary AS
        SELECT p.paper_id, n.name, coalesce(n.names, []) AS names, t.topics,
               coalesce(l.has_code, false) AS has_code,
               coalesce(l.code_links, []) AS code_links, coalesce(l.links, []) AS links,
               p.sources, p.source_count, p.occurrence_count, p.word_count, p.abstract_plain
        FROM papers AS p
        LEFT JOIN (
            SELECT paper_id, arg_min(name, name_rank) AS name, list(name ORDER BY name_rank) AS names
            FROM paper_names GROUP BY paper_id
        ) AS n USING (paper_id)
        LEFT JOIN (
            SELECT paper_id, list(topic ORDER BY match_count DESC, topic) AS topics
            FROM paper_topics GROUP BY paper_id
        ) AS t USING (paper_id)
        LEFT JOIN (
            SELECT paper_id,
                   bool_or(kind IN {_CODE_KINDS_SQL}) AS has_code,
                   list(url ORDER BY link_rank) FILTER (WHERE kind IN {_CODE_KINDS_SQL}) AS code_links,
                   list(url ORDER BY link_rank) AS links
            FROM paper_links GROUP BY paper_id
        ) AS l USING (paper_id)""",
        "COMMENT ON VIEW paper_summary IS 'One row per paper: its first name, topics, code and other links, "
        "source files and size.'",
    ),
)

TOPIC_COUNTS = SqlObject(
    "topic_counts",
    {"papers": ("paper_id",), "paper_topics": ("paper_id", "topic", "label"), "paper_occurrences": ("paper_id", "source_file")},
    (
        """CREATE OR REPLACE VIEW topic_counts AS
        SELECT t.topic, any_value(t.label) AS label,
               count(DISTINCT t.paper_id) AS papers,
               round(count(DISTINCT t.paper_id) / (SELECT count(*) FROM papers), 4) AS share_of_papers,
               list(DISTINCT o.source_file ORDER BY o.source_file) AS source_files
        FROM paper_topics AS t JOIN paper_occurrences AS o USING (paper_id)
        GROUP BY t.topic""",
        "COMMENT ON VIEW topic_counts IS 'Per topic: papers tagged, their share of all papers, and the source "
        "files that carry them.'",
        """CREATE OR REPLACE VIEW topic_by_source AS
        SELECT o.source_file, t.topic, any_value(t.label) AS label, count(DISTINCT t.paper_id) AS papers
        FROM paper_topics AS t JOIN paper_occurrences AS o USING (paper_id)
        GROUP BY o.source_file, t.topic""",
        "COMMENT ON VIEW topic_by_source IS 'Per source file and topic: papers tagged.'",
    ),
)

CODE_AVAILABILITY = SqlObject(
    "code_availability",
    {"paper_occurrences": ("paper_id", "source_file"), "paper_links": ("paper_id", "kind")},
    (
        f"""CREATE OR REPLACE VIEW code_availability AS
        WITH per_paper AS (
            SELECT paper_id, bool_or(kind IN {_CODE_KINDS_SQL}) AS has_code,
                   bool_or(kind = 'anonymous_review') AS has_anonymous_code
            FROM paper_links GROUP BY paper_id
        ),
        file_papers AS (SELECT DISTINCT source_file, paper_id FROM paper_occurrences)
        SELECT CASE WHEN grouping(f.source_file) = 1 THEN '(all files)' ELSE f.source_file END AS source_file,
               count(DISTINCT f.paper_id) AS papers,
               count(DISTINCT f.paper_id) FILTER (WHERE pp.has_code) AS papers_with_code,
               round(papers_with_code / papers, 4) AS share_with_code,
               count(DISTINCT f.paper_id) FILTER (WHERE pp.has_anonymous_code) AS papers_with_anonymous_code
        FROM file_papers AS f LEFT JOIN per_paper AS pp USING (paper_id)
        GROUP BY GROUPING SETS ((f.source_file), ())""",
        "COMMENT ON VIEW code_availability IS 'Per source file, and for all files together: papers, how many "
        f"link code ({', '.join(CODE_KINDS)}), and their share.'",
    ),
)

OBJECTS = (SEARCH, PAPER_SUMMARY, TOPIC_COUNTS, CODE_AVAILABILITY)


def build_search_index(con: duckdb.DuckDBPyConnection, sources: Mapping[str, str], temp_directory: Path | None = None) -> bool:
    """Build the BM25 index in ``con``'s in-memory database from the Parquet files ``sources``
    names (``{table: path}``: the papers and paper_names this run writes). Returns False (and
    builds nothing) when those tables or their columns are missing."""
    columns = {t: _parquet_columns(con, path) for t, path in sources.items()}
    if not _satisfied(SEARCH, columns):
        return False
    lake.load_extension(con, "fts")
    if temp_directory is not None:
        temp_directory.mkdir(parents=True, exist_ok=True)
        con.execute(f"SET temp_directory = {literal(str(temp_directory))}")
    con.execute("USE memory")
    try:
        for table in SEARCH.requires:
            con.execute(f"CREATE OR REPLACE TEMP VIEW {table} AS SELECT * FROM read_parquet({literal(sources[table])})")
        con.execute(f"CREATE SCHEMA IF NOT EXISTS {SEARCH_SCHEMA}")
        with build_memory_limit(con):
            for statement in fts_index_statements(SEARCH_TABLE, "paper_id", SEARCH_FIELDS, SEARCH_ROWS):
                con.execute(statement)
    finally:
        for table in SEARCH.requires:  # they would shadow the lake's tables of the same name
            con.execute(f"DROP VIEW IF EXISTS temp.main.{table}")
        con.execute(f"USE {lake.ALIAS}")
    return True


def publish_analysis_layer(con: duckdb.DuckDBPyConnection, index_built: bool) -> list[str]:
    """Inside the publish transaction, with the lake in use: the index built by
    ``build_search_index`` copied into the lake's ``search`` schema, then ``search_papers`` and the
    views. Returns the names of what was created."""
    created = []
    if index_built:
        con.execute(f"CREATE SCHEMA IF NOT EXISTS {SEARCH_SCHEMA}")
        for table in INDEX_TABLES:
            con.execute(f"CREATE OR REPLACE TABLE {SEARCH_SCHEMA}.{table} AS SELECT * FROM memory.{FTS_SCHEMA}.{table}")
        created.append(SEARCH.name)
    else:  # no stale index over other papers, nor a search_papers reading a dropped one
        if _schema_exists(con, SEARCH_SCHEMA):
            con.execute(f"DROP SCHEMA {SEARCH_SCHEMA} CASCADE")
        con.execute(f"DROP MACRO TABLE IF EXISTS {SEARCH.name}")
    return created + create_views(con, with_search=index_built)


def drop_search_build(con: duckdb.DuckDBPyConnection) -> None:
    """The in-memory index, once copied (or not needed)."""
    for schema in (FTS_SCHEMA, SEARCH_SCHEMA):
        con.execute(f"DROP SCHEMA IF EXISTS memory.{schema} CASCADE")


def create_views(con: duckdb.DuckDBPyConnection, with_search: bool | None = None) -> list[str]:
    """``search_papers`` (when the index is there, or ``with_search``) and the views, in the
    lake in use, each only when the tables and columns it reads exist."""
    present: dict[str, set[str]] = {}
    for table, column in con.execute(
        f"SELECT table_name, column_name FROM duckdb_columns() WHERE database_name = {literal(lake.ALIAS)} AND schema_name = 'main'"
    ).fetchall():
        present.setdefault(table, set()).add(column)
    if with_search is None:
        with_search = _schema_exists(con, SEARCH_SCHEMA)
    created = []
    for obj in OBJECTS:
        if (obj.needs_fts and not with_search) or not _satisfied(obj, present):
            continue
        for statement in obj.statements:
            con.execute(statement)
        created.append(obj.name)
    return created


def _satisfied(obj: SqlObject, present: Mapping[str, set[str] | list[str]]) -> bool:
    return all(set(columns) <= set(present.get(table, ())) for table, columns in obj.requires.items())


def _parquet_columns(con: duckdb.DuckDBPyConnection, path: str) -> list[str]:
    return [row[0] for row in con.execute(f"DESCRIBE SELECT * FROM read_parquet({literal(path)})").fetchall()]


def _schema_exists(con: duckdb.DuckDBPyConnection, schema: str) -> bool:
    return bool(con.execute(
        f"SELECT count(*) FROM duckdb_schemas() WHERE database_name = {literal(lake.ALIAS)} AND schema_name = {literal(schema)}"
    ).fetchone()[0])


@contextmanager
def build_memory_limit(con: duckdb.DuckDBPyConnection, gib: float = BUILD_MEMORY_GIB) -> Iterator[None]:
    """Lower ``con``'s memory limit to ``gib`` GiB for the duration, when it is higher; then put
    the previous one back (as DuckDB shows it: to 0.1 of its unit)."""
    previous = con.sql("SELECT current_setting('memory_limit')").fetchone()[0]
    number, unit = previous.split()
    if float(number) * _BYTE_UNITS[unit] <= gib * 2**30:
        yield
        return
    con.execute(f"SET memory_limit = '{gib}GiB'")
    try:
        yield
    finally:
        con.execute(f"SET memory_limit = {literal(previous)}")
