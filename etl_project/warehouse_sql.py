"""The analysis layer of the lake: full-text search and views for common questions.

Published with the tables, in the same DuckLake snapshot: ``search_papers``, the ``search``
schema's stopwords and the views live in the lake, so every reader that attaches it
(``etl_project.connect``, ``etl-project sql``/``shell``, ``warehouse/open.sql``) has them.
Objects whose tables (or columns) are missing are skipped.

``search_papers`` ranks papers by BM25 over ``paper_terms`` (each paper's stemmed terms and their
counts: etl_project/search_terms.py) with the formula and statistics of the fts extension's
``match_bm25`` (k = 1.2, b = 0.75; a term's document frequency, the number of papers and their
mean length), computed at query time from that table and ``papers``: a run that changes some
papers works out their rows only, and the scores are those an index of the whole table gives. The
query's words go through the extension's tokenizer, stopwords and stemmer as the texts' did; it
needs the extension's ``stem`` function, which every reader of ``etl_project.lake`` loads and
which DuckDB clients of this version autoload once ``etl-project install-extensions`` ran.
"""

from collections.abc import Mapping
from dataclasses import dataclass

import duckdb

from etl_project import lake, search_terms
from etl_project.enrich.links import CODE_KINDS
from etl_project.lake import literal

SEARCH_SCHEMA = "search"
# The search index's tables of earlier releases (the fts extension's), dropped by a publish.
OLD_INDEX_TABLES = ("docs", "terms", "dict", "stats")
# The fts extension's tokenizer (the body of its `tokenize` macro), for the query's words.
_TOKENIZE = r"""string_split_regex(regexp_replace(lower(strip_accents(CAST(<<TEXT>> AS VARCHAR))), '[0-9!@#$%^&*()_+={}\[\]:;<>,.?~\\/\|''''"`-]+', ' ', 'g'), '\s+')"""
BM25_K, BM25_B = 1.2, 0.75
SNIPPET_CHARS = 140
SNIPPET_LEAD = 40



def tokenize_sql(expression: str) -> str:
    return _TOKENIZE.replace("<<TEXT>>", expression)


@dataclass(frozen=True)
class SqlObject:
    name: str
    requires: dict[str, tuple[str, ...]]  # table -> columns it reads
    statements: tuple[str, ...]
    needs_search_schema: bool = False  # reads the search schema's stopwords


_CODE_KINDS_SQL = "(" + ", ".join(literal(k) for k in CODE_KINDS) + ")"


# Ranked by BM25; the snippet is the plain text around the first query term it holds. Ties are
# ranked to 9 decimals, then by paper_id: the extension's match_bm25 sums a paper's term scores in
# no fixed order, so equal scores can differ in their last bits from one run to the next.
SEARCH_MACRO = f"""CREATE OR REPLACE MACRO search_papers(query_text, max_results := 10) AS TABLE
        WITH tokens AS (
            SELECT DISTINCT stem(token, {literal(search_terms.STEMMER)}) AS term
            FROM (SELECT unnest({tokenize_sql('query_text')}) AS token)
            WHERE token <> '' AND token NOT IN (SELECT sw FROM {SEARCH_SCHEMA}.stopwords)
        ),
        hits AS (
            SELECT t.paper_id, t.term, t.tf, t.doc_terms FROM paper_terms AS t WHERE t.term IN (SELECT term FROM tokens)
        ),
        corpus AS (
            SELECT (SELECT count(*) FROM papers) AS num_docs,
                   (SELECT sum(tf) FROM paper_terms) / (SELECT count(*) FROM papers) AS avgdl
        ),
        df AS (SELECT term, count(*) AS df FROM hits GROUP BY term),
        scores AS (
            SELECT h.paper_id,
                   sum(log(((c.num_docs - df.df) + 0.5) / (df.df + 0.5) + 1)
                       * ((h.tf * ({BM25_K} + 1)) / (h.tf + ({BM25_K} * ((1 - {BM25_B}) + ({BM25_B} * (h.doc_terms / c.avgdl))))))) AS score
            FROM hits AS h JOIN df USING (term) CROSS JOIN corpus AS c
            GROUP BY h.paper_id
        ),
        ranked AS (
            SELECT paper_id, score FROM scores
            ORDER BY round(score, 9) DESC, paper_id
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
    {"papers": ("paper_id", "abstract_plain"), "paper_names": ("paper_id", "name", "name_rank"),
     "paper_terms": ("paper_id", "term", "tf", "doc_terms")},
    (SEARCH_MACRO,),  # DuckLake keeps no comments on macros: the README documents it
    needs_search_schema=True,
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


def publish_analysis_layer(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Inside the publish transaction, with the lake in use: the stopwords ``search_papers`` leaves
    out of a query (schema ``search``), ``search_papers`` and the views, each when the tables it
    reads are there. Returns the names of what was created."""
    for table in OLD_INDEX_TABLES:  # an earlier release's index: search_papers no longer reads it
        con.execute(f"DROP TABLE IF EXISTS {SEARCH_SCHEMA}.{table}")
    searchable = _satisfied(SEARCH, _present(con))
    if searchable:
        con.execute(f"CREATE SCHEMA IF NOT EXISTS {SEARCH_SCHEMA}")
        con.execute(f"CREATE OR REPLACE TABLE {SEARCH_SCHEMA}.stopwords AS SELECT unnest(?::VARCHAR[]) AS sw",
                    [search_terms.stopword_list()])
    elif _schema_exists(con, SEARCH_SCHEMA):
        con.execute(f"DROP SCHEMA {SEARCH_SCHEMA} CASCADE")
    return create_views(con, with_search=searchable)


def create_views(con: duckdb.DuckDBPyConnection, with_search: bool | None = None) -> list[str]:
    """``search_papers`` (when the search schema is there, or ``with_search``) and the views, in
    the lake in use, each only when the tables and columns it reads exist."""
    present = _present(con)
    if with_search is None:
        with_search = _schema_exists(con, SEARCH_SCHEMA)
    created = []
    for obj in OBJECTS:
        if (obj.needs_search_schema and not with_search) or not _satisfied(obj, present):
            if obj is SEARCH:  # no search_papers over tables this snapshot lacks (after a rollback, say)
                con.execute(f"DROP MACRO TABLE IF EXISTS {SEARCH.name}")
            continue
        for statement in obj.statements:
            con.execute(statement)
        created.append(obj.name)
    return created


def _present(con: duckdb.DuckDBPyConnection) -> dict[str, set[str]]:
    """The columns of each table of the lake's main schema."""
    present: dict[str, set[str]] = {}
    for table, column in con.execute(
        f"SELECT table_name, column_name FROM duckdb_columns() WHERE database_name = {literal(lake.ALIAS)} AND schema_name = 'main'"
    ).fetchall():
        present.setdefault(table, set()).add(column)
    return present


def _satisfied(obj: SqlObject, present: Mapping[str, set[str] | list[str]]) -> bool:
    return all(set(columns) <= set(present.get(table, ())) for table, columns in obj.requires.items())


def _schema_exists(con: duckdb.DuckDBPyConnection, schema: str) -> bool:
    return bool(con.execute(
        f"SELECT count(*) FROM duckdb_schemas() WHERE database_name = {literal(lake.ALIAS)} AND schema_name = {literal(schema)}"
    ).fetchone()[0])
