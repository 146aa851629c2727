"""The analysis layer inside the DuckDB file: full-text search and views for common questions.

Built by ``publish`` in the release's DuckDB file before it is renamed into place, so the index,
the macro and the views ship with the tables they read. Objects whose tables (or columns) are
missing from the release are skipped.

Full-text search uses DuckDB's ``fts`` extension, which cannot be downloaded here: the
``duckdb-extension-fts`` package ships it for this DuckDB version. Building the index installs
that file into DuckDB's extension directory (``~/.duckdb/extensions/v<version>/<platform>/``,
exactly what ``INSTALL fts`` would download), so on this machine every DuckDB client of the same
version, the ``duckdb`` CLI included, autoloads it when ``search_papers`` needs it. Elsewhere,
``etl-project install-fts`` does the same, or a session runs the one line ``load_statement()``
prints.

The BM25 index is the extension's own, built several times faster. ``PRAGMA create_fts_index``
on the full table runs the extension's regex tokenizer over every text, then filters stopwords
and stems the ~100 word occurrences of each abstract one by one, then fills term ids, lengths and
document frequencies with correlated UPDATEs: ~15 s of CPU per 100k papers, the costliest step of
a publish. ``fts_index_statements`` runs that PRAGMA on the still-empty table instead, which
creates the extension's schema as it is: stopwords, fields, the ``tokenize`` and ``match_bm25``
macros (so ``match_bm25``, ``PRAGMA drop_fts_index`` and every client with the extension work
unchanged) and empty docs/terms/dict/stats tables. It then fills those four with set-based SQL
that mirrors the extension's indexing query: texts are cut at spaces only (cheap), each distinct
chunk goes once through the extension's ``tokenize``, stopword filter and stemmer, and every chunk
occurrence is joined to its term ids. Cutting at spaces first changes no word: a space separates
words before and after the tokenizer's ``strip_accents`` and ``lower``, which map code point by
code point and never join a space to its neighbours (a property test checks it). Term ids are
numbered as the extension numbers them, so docs, dict and stats equal the PRAGMA's row for row and
terms holds the same rows (tests compare both builds on awkward texts).
"""

import importlib.util
import logging
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path

import duckdb

from etl_project.enrich.links import CODE_KINDS

FTS_PACKAGE = "duckdb_extension_fts"
SEARCH_SCHEMA = "search"
SEARCH_TABLE = f"{SEARCH_SCHEMA}.papers"
FTS_SCHEMA = "fts_search_papers"  # named by the fts extension after the indexed table
SNIPPET_CHARS = 140
SNIPPET_LEAD = 40
# The index build's sorts and aggregates spill to DuckDB's temp_directory (next to the database
# file) beyond this: at a million papers the process then peaks at ~1.7 GB of RSS instead of
# ~4 GB, and runs no slower. A connection with a lower limit keeps its own.
BUILD_MEMORY_GIB = 1
_BYTE_UNITS = {"bytes": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40, "PiB": 2**50}

log = logging.getLogger(__name__)


class FtsUnavailable(RuntimeError):
    """The full-text-search extension for this DuckDB version is not installed as a package."""


def fts_extension_path() -> Path:
    """The ``fts`` extension file shipped by ``duckdb-extension-fts`` for this DuckDB version."""
    version = duckdb.__version__
    spec = importlib.util.find_spec(FTS_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise FtsUnavailable(f"full-text search needs the package duckdb-extension-fts=={version} (pip install it)")
    path = Path(next(iter(spec.submodule_search_locations))) / "extensions" / f"v{version}" / "fts.duckdb_extension"
    if not path.is_file():
        raise FtsUnavailable(f"duckdb-extension-fts has no extension for DuckDB {version} (looked for {path})")
    return path


def load_statement() -> str:
    """The one SQL line that makes ``search_papers`` work in any DuckDB session of this version."""
    return f"LOAD {_literal(str(fts_extension_path()))};"


def load_fts(con: duckdb.DuckDBPyConnection) -> str | None:
    """Install the packaged extension into the connection's extension directory and load it.
    Returns None, or why the directory could not take it (the extension is then loaded from the
    package for this connection only, and other clients need ``load_statement()``)."""
    path = _literal(str(fts_extension_path()))
    try:
        con.execute(f"INSTALL {path}")
    except duckdb.Error as exc:
        con.execute(f"LOAD {path}")
        return str(exc)
    con.execute("LOAD fts")
    return None


def install_fts() -> str:
    """``etl-project install-fts``: install the extension for this user's DuckDB clients; says
    where it went, and the LOAD line for clients that use another extension directory."""
    with duckdb.connect() as con:
        problem = load_fts(con)
        where = con.sql("SELECT install_path FROM duckdb_extensions() WHERE extension_name = 'fts'").fetchone()[0]
    if problem:
        head = [f"could not install the fts extension into DuckDB's extension directory: {problem}"]
    else:
        head = [
            f"fts extension for DuckDB {duckdb.__version__} installed at {where}",
            "DuckDB clients of this version now load it by themselves for search_papers(...).",
        ]
    return "\n".join([*head, "Clients with another extension directory run this once per session:", f"  {load_statement()}"])


@dataclass(frozen=True)
class SqlObject:
    name: str
    requires: dict[str, tuple[str, ...]]  # table -> columns it reads
    statements: tuple[str, ...]
    needs_fts: bool = False


def _literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


_CODE_KINDS_SQL = "(" + ", ".join(_literal(k) for k in CODE_KINDS) + ")"


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
        f"(SELECT fieldid FROM {fts}.fields WHERE field = {_literal(field)}) AS fieldid FROM {table}"
        for field in fields
    )
    return (
        f"CREATE OR REPLACE TABLE {table} AS SELECT * FROM ({rows}) LIMIT 0",
        # On the empty table: the index schema, stopwords, fields and macros, in the extension's own words.
        f"PRAGMA create_fts_index({_literal(table)}, {_literal(id_column)}, {', '.join(map(_literal, fields))}, "
        f"stemmer = {_literal(stemmer)}, stopwords = {_literal(stopwords)}, overwrite = 1)",
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
            SELECT w, stem(w, {_literal(stemmer)}) AS term, min(first) AS first FROM {chunks} GROUP BY w
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
        JOIN (SELECT termid, count(DISTINCT docid) AS df FROM {fts}.terms GROUP BY termid) AS t USING (termid)
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
        WITH terms AS (
            SELECT DISTINCT stem(token, 'porter') AS term
            FROM (SELECT unnest({FTS_SCHEMA}.tokenize(query_text)) AS token)
            WHERE token <> '' AND token NOT IN (SELECT sw FROM {FTS_SCHEMA}.stopwords)
        ),
        ranked AS (
            SELECT * FROM (
                SELECT paper_id, name, abstract_plain, {FTS_SCHEMA}.match_bm25(paper_id, query_text) AS score
                FROM {SEARCH_TABLE}
            )
            WHERE score IS NOT NULL
            ORDER BY round(score, 9) DESC, paper_id
            LIMIT max_results
        ),
        located AS (
            SELECT r.paper_id, greatest(coalesce(min(nullif(instr(lower(r.abstract_plain), t.term), 0)), 1) - {SNIPPET_LEAD}, 1) AS start
            FROM ranked AS r LEFT JOIN terms AS t ON true
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
        FROM ranked AS r JOIN located AS l USING (paper_id)
        ORDER BY round(r.score, 9) DESC, r.paper_id"""

SEARCH = SqlObject(
    "search_papers",
    {"papers": ("paper_id", "abstract_plain"), "paper_names": ("paper_id", "name", "long_name", "name_rank")},
    (
        f"CREATE SCHEMA IF NOT EXISTS {SEARCH_SCHEMA}",
        *fts_index_statements(SEARCH_TABLE, "paper_id", SEARCH_FIELDS, SEARCH_ROWS),
        SEARCH_MACRO,
        "COMMENT ON MACRO TABLE search_papers IS 'Full-text search (BM25) over the papers'' names and "
        "plain text: SELECT * FROM search_papers(''counterfactual explanations''). Needs the fts extension: "
        "etl-project install-fts, or LOAD it from the duckdb-extension-fts package.'",
    ),
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


def create_analysis_layer(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Create the search index, ``search_papers`` and the views in ``con``'s database, each only
    when the tables and columns it reads exist. Returns the names of what was created."""
    present: dict[str, set[str]] = {}
    for table, column in con.execute(
        "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = 'main'"
    ).fetchall():
        present.setdefault(table, set()).add(column)
    created, fts_loaded = [], False
    for obj in OBJECTS:
        if not all(set(columns) <= present.get(table, set()) for table, columns in obj.requires.items()):
            continue
        if obj.needs_fts and not fts_loaded:
            problem = load_fts(con)
            if problem:
                log.warning("fts extension not installed for other DuckDB clients (%s); they need: %s", problem, load_statement())
            fts_loaded = True
        with build_memory_limit(con) if obj.needs_fts else nullcontext():
            for statement in obj.statements:
                con.execute(statement)
        created.append(obj.name)
    return created


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
        con.execute(f"SET memory_limit = {_literal(previous)}")
