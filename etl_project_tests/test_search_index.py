"""The set-based BM25 index (warehouse_sql.fts_index_statements) against the fts extension's own
``PRAGMA create_fts_index``: the same index tables, the same match_bm25 answers, and the lake's
``search_papers`` (its index copied into the lake's ``search`` schema by a publish) scoring and
ranking as the extension's match_bm25, on generated abstracts plus awkward texts."""

import functools
import importlib.util
import math
from pathlib import Path

import duckdb
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import etl_project
from etl_project import lake, publish, warehouse_sql

FTS = warehouse_sql.FTS_SCHEMA
CORPUS_PY = Path(__file__).resolve().parents[1] / "benchmarks" / "corpus.py"

AWKWARD = {  # abstract_plain -> names (None: a paper without names)
    "Façade naïve café résumé: déjà vu für Ünïcödé modèles, ÉCOLE and École.": "Café-Net Ça Va",
    "Нейронные сети обучаются быстро; Нейронные модели.": "Сеть",
    "Greek question mark λόγος;λέξη and ano teleia λόγος·λέξη, ΣΟΦΙΑ σοφία.": None,
    "机器学习模型 在 图 上 的 泛化 机器学习模型": "图网络",
    "نموذج التعلم العميق and hindi मॉडल सीखना": None,
    "123 456 7.89 3.14159 2025-01-01 x2 h100 GPT-4o": "GPT-4o",
    "": "OnlyAName",
    "the of and to it is was": None,
    "Combining marks: e\u0301te\u0301 cafe\u0301 a \u0301 b x\u226ey and Kelvin \u212a İstanbul": "E\u0301MC",
    "tabs\tand\nnewlines  double  spaces   and trailing ": None,
    "(model), [data]; {graph}! <tree> 'quoted' \"double\" `tick` back\\slash a/b a|b a~b": None,
    "learning learning learning learning learning learning learning models": "LL",
    "Duplicate text scored twice: robust graph learning under distribution shift.": None,
    "don't isn't the model's agents' rock'n'roll": "Rock'n'Roll",
    "Emoji 🚀 rockets 🚀🚀 and ZWJ 👩‍🔬 scientists, zero\u200bwidth": None,
}
QUERIES = (
    "learning", "federated learning models", "graph neural networks robustness benchmark", "the of and", "",
    "café", "CAFE", "École", "Нейронные", "λόγος", "σοφια", "机器学习模型", "model's", "123", "gpt", "rockets 🚀",
    "distribution shift", "ete", "Kelvin", "istanbul", "rock'n'roll", "long form", "gen3 café-net", "сеть",
)


def _corpus_module():
    spec = importlib.util.spec_from_file_location("fts_test_corpus", CORPUS_PY)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def papers(tmp_path_factory) -> list[tuple[str, str | None, str | None]]:
    """(paper_id, abstract_plain, names) rows: a few hundred generated abstracts (their exact and
    near copies included) and the awkward texts, one of them twice and one with a NULL text."""
    folder = tmp_path_factory.mktemp("corpus")
    _corpus_module().generate(folder, records=300, files=3, seed=11)
    abstracts = [p.strip() for path in sorted(folder.glob("*.txt"))
                 for p in path.read_text(encoding="utf-8").split("\n\n")[1:] if p.strip()]
    rows = [(f"g{i:04d}", text, f"Gen{i % 7}" if i % 3 else None) for i, text in enumerate(abstracts)]
    rows += [(f"a{i:02d}", text, names) for i, (text, names) in enumerate(AWKWARD.items())]
    rows += [("dup", "Duplicate text scored twice: robust graph learning under distribution shift.", None),
             ("null", None, "NullText")]
    return rows


def _frames(rows) -> dict[str, pl.DataFrame]:
    """The papers and paper_names tables of ``rows``, as the pipeline publishes them."""
    papers = pl.DataFrame([(i, text) for i, text, _ in rows], schema={"paper_id": pl.String, "abstract_plain": pl.String}, orient="row")
    names = pl.DataFrame(
        [(i, n, "Long Form" if k == 0 else None, k + 1) for i, _, names in rows if names for k, n in enumerate(names.split(" ", 1))],
        schema={"paper_id": pl.String, "name": pl.String, "long_name": pl.String, "name_rank": pl.UInt32}, orient="row",
    )
    return {"papers": papers, "paper_names": names}


def _database(rows, path: Path | None = None) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect(str(path) if path else ":memory:")
    lake.load_extension(con, "fts")
    for name, frame in _frames(rows).items():
        con.register(f"{name}_frame", frame)
        con.execute(f"CREATE TABLE {name} AS FROM {name}_frame")
        con.unregister(f"{name}_frame")
    return con


def _with_pragma(rows) -> duckdb.DuckDBPyConnection:
    """The index as the fts extension builds it: the table, then its PRAGMA over it."""
    con = _database(rows)
    con.execute(f"CREATE SCHEMA {warehouse_sql.SEARCH_SCHEMA}")
    con.execute(f"CREATE TABLE {warehouse_sql.SEARCH_TABLE} AS {warehouse_sql.SEARCH_ROWS}")
    fields = ", ".join(f"'{f}'" for f in warehouse_sql.SEARCH_FIELDS)
    con.execute(f"PRAGMA create_fts_index('{warehouse_sql.SEARCH_TABLE}', 'paper_id', {fields}, "
                "stemmer = 'porter', stopwords = 'english', overwrite = 1)")
    return con


def _build(con) -> None:
    con.execute(f"CREATE SCHEMA IF NOT EXISTS {warehouse_sql.SEARCH_SCHEMA}")
    for statement in warehouse_sql.fts_index_statements(warehouse_sql.SEARCH_TABLE, "paper_id", warehouse_sql.SEARCH_FIELDS,
                                                         warehouse_sql.SEARCH_ROWS):
        con.execute(statement)


def _with_statements(rows) -> duckdb.DuckDBPyConnection:
    """The set-based build (what build_search_index runs in the publishing session)."""
    con = _database(rows)
    _build(con)
    return con


def _published(rows, warehouse: Path) -> duckdb.DuckDBPyConnection:
    """``rows`` published into a lake at ``warehouse``; a reader of it."""
    publish.publish(_frames(rows), lake.Lake.of(warehouse), "search-index-test")
    return etl_project.connect(warehouse)


def _index(con) -> dict[str, list[tuple]]:
    tables = {t: con.sql(f"SELECT * FROM {FTS}.{t} ORDER BY rowid").fetchall()
              for t in ("docs", "dict", "stats", "fields", "stopwords")}
    tables["terms"] = sorted(con.sql(f"SELECT * FROM {FTS}.terms").fetchall())  # same rows, in any order
    tables["schema"] = con.sql(f"SELECT table_name, sql FROM duckdb_tables() WHERE schema_name = '{FTS}' ORDER BY 1").fetchall()
    tables["macros"] = con.sql(f"SELECT function_name, macro_definition FROM duckdb_functions() "
                               f"WHERE schema_name = '{FTS}' ORDER BY 1").fetchall()
    tables["search"] = con.sql(f"SELECT * FROM {warehouse_sql.SEARCH_TABLE} ORDER BY rowid").fetchall()
    return tables


def _index_rows(con, schema: str) -> dict[str, list[tuple]]:
    """The tables search_papers reads, each sorted (a lake table has no rowid order)."""
    return {t: sorted(con.sql(f"SELECT * FROM {schema}.{t}").fetchall(), key=repr) for t in warehouse_sql.INDEX_TABLES}


def _bm25(con, query: str, options: str) -> dict[str, float]:
    return dict(con.execute(
        f"SELECT paper_id, score FROM (SELECT paper_id, {FTS}.match_bm25(paper_id, ?{options}) AS score "
        f"FROM {warehouse_sql.SEARCH_TABLE}) WHERE score IS NOT NULL", [query]).fetchall())


@pytest.fixture(scope="module")
def both(papers):
    with _with_pragma(papers) as old, _with_statements(papers) as new:
        yield old, new


@pytest.fixture(scope="module")
def published(papers, tmp_path_factory):
    """(the warehouse, a reader of it) after publishing the rows."""
    warehouse = tmp_path_factory.mktemp("search") / "warehouse"
    with _published(papers, warehouse) as con:
        yield warehouse, con


def test_the_index_tables_are_the_extensions(both):
    old, new = both
    expected, built = _index(old), _index(new)
    assert len(expected["docs"]) == 300 + len(AWKWARD) + 2 and len(expected["terms"]) > 20_000
    assert {name for name, _ in expected["macros"]} == {"match_bm25", "tokenize"}
    for table in expected:
        assert built[table] == expected[table], table
    docs = dict((name, length) for _, name, length in built["docs"])
    assert docs["a07"] == 0  # stopwords only: a document without terms
    assert docs["null"] == 3  # no text: only its names, "NullText Long Form"


def test_the_lakes_index_is_the_extensions(both, published):
    old, _ = both
    _, con = published
    assert _index_rows(con, f"lake.{warehouse_sql.SEARCH_SCHEMA}") == _index_rows(old, FTS)


@pytest.mark.parametrize("options", ["", ", conjunctive := true", ", fields := 'names'", ", fields := 'abstract_plain', k := 2, b := 0.5"])
def test_match_bm25_scores_are_the_same(both, options):
    old, new = both
    matched = 0
    for query in QUERIES:
        expected, got = _bm25(old, query, options), _bm25(new, query, options)
        assert got.keys() == expected.keys(), query
        # Equal but for the last bits: match_bm25 adds a paper's term scores in no fixed order,
        # which makes the extension differ from itself between runs too.
        assert all(math.isclose(got[p], expected[p], rel_tol=1e-12) for p in got), query
        matched += len(got)
    assert matched > 100


# search_papers with its score left unrounded, as a temporary macro over the same lake tables.
_UNROUNDED = "round(r.score, 4) AS score"


def test_search_papers_scores_and_ranks_as_the_extensions_match_bm25(both, published):
    old, _ = both
    _, con = published
    assert warehouse_sql.SEARCH_MACRO.count(_UNROUNDED) == 1
    con.execute(warehouse_sql.SEARCH_MACRO.replace("MACRO search_papers(", "TEMP MACRO search_papers_unrounded(")
                .replace(_UNROUNDED, "r.score AS score"))
    matched = 0
    for query in QUERIES:
        expected = _bm25(old, query, "")
        exact = dict(con.execute("SELECT paper_id, score FROM search_papers_unrounded(?, max_results := 1000)", [query]).fetchall())
        assert exact.keys() == expected.keys(), query
        assert all(abs(exact[p] - expected[p]) <= 1e-9 for p in exact), query
        ranked = con.execute("SELECT paper_id, score FROM search_papers(?, max_results := 1000)", [query]).fetchall()
        assert [p for p, _ in ranked] == sorted(expected, key=lambda p: (-round(expected[p], 9), p)), query
        assert all(abs(score - expected[p]) <= 5e-5 + 1e-9 for p, score in ranked), query
        matched += len(ranked)
    assert matched > 100
    top = con.execute("SELECT paper_id FROM search_papers('Нейронные')").fetchall()
    assert top == [("a01",)]
    tied = con.execute("SELECT paper_id, score FROM search_papers('duplicate text scored twice', max_results := 2)").fetchall()
    assert [p for p, _ in tied] == ["a12", "dup"] and tied[0][1] == tied[1][1]
    assert len(con.execute("SELECT * FROM search_papers('learning')").fetchall()) == 10  # max_results' default


@pytest.mark.parametrize("rows", [[], [("only", None, None)], [("x", "the and of", "")]], ids=["empty", "null", "stopwords"])
def test_degenerate_tables_index_as_the_extension_does(rows, tmp_path):
    with _with_pragma(rows) as old, _with_statements(rows) as new:
        assert _index(new) == _index(old)
        with _published(rows, tmp_path / "warehouse") as con:
            assert _index_rows(con, f"lake.{warehouse_sql.SEARCH_SCHEMA}") == _index_rows(old, FTS)
            assert con.sql("SELECT * FROM search_papers('anything')").fetchall() == []


def test_the_index_is_rebuilt_in_place_and_dropped_by_the_extension(papers, tmp_path):
    rows = papers[:40]
    with _database(rows, tmp_path / "w.duckdb") as con:
        _build(con)
        first = _index(con)
        _build(con)  # again, over the first
        assert _index(con) == first
        assert not con.sql("SELECT * FROM duckdb_tables() WHERE temporary").fetchall()  # its work tables are gone
        con.execute(f"PRAGMA drop_fts_index('{warehouse_sql.SEARCH_TABLE}')")
        assert con.sql(f"SELECT * FROM duckdb_schemas() WHERE schema_name = '{FTS}'").fetchall() == []


def test_the_build_runs_under_a_lower_memory_limit_and_gives_the_connection_its_own_back(published):
    """build_search_index from the lake's own data files, in a reader's session: the same index
    as the lake's, and the session's memory limit as it was."""
    warehouse, _ = published

    def limit(con) -> str:
        return con.sql("SELECT current_setting('memory_limit')").fetchone()[0]

    with etl_project.connect(warehouse) as con:
        con.execute("SET memory_limit = '4GiB'")
        with warehouse_sql.build_memory_limit(con):
            assert limit(con) == f"{warehouse_sql.BUILD_MEMORY_GIB:.1f} GiB"
        assert limit(con) == "4.0 GiB"
        sources = {table: con.execute("SELECT data_file FROM ducklake_list_files('lake', ?)", [table]).fetchone()[0]
                   for table in warehouse_sql.SEARCH.requires}
        assert warehouse_sql.build_search_index(con, sources) is True
        assert limit(con) == "4.0 GiB"
        assert con.sql("SELECT current_database()").fetchone() == ("lake",)  # the lake in use again
        assert _index_rows(con, f"memory.{FTS}") == _index_rows(con, f"lake.{warehouse_sql.SEARCH_SCHEMA}")
        con.execute("SET memory_limit = '300MiB'")  # already lower: left alone
        with warehouse_sql.build_memory_limit(con):
            assert limit(con) == "300.0 MiB"
        assert limit(con) == "300.0 MiB"


# Text made of what tokenizers trip on: spaces and other whitespace, the ignored punctuation and
# digits, letters with and without case, combining marks, and characters that strip_accents turns
# into punctuation (U+037E into ';', U+226E into '<' and a mark) or that lower maps oddly.
_AWKWARD_CHARS = st.sampled_from(list(
    " \t\n\r\x0b\x0c.,;:!?-_'\"`()[]{}<>/\\|~@#$%^&*+=0123456789aAzZéÉßİıΣσς\u037e\u226e\u0301\u0338\u212a"
    "кЖλ机ةम\u200b\u00a0\u2003🚀"
))


@functools.cache
def _tokenizer() -> duckdb.DuckDBPyConnection:
    """A connection holding the extension's tokenize macro (default options, as the index uses)."""
    con = duckdb.connect()
    lake.load_extension(con, "fts")
    con.execute("CREATE SCHEMA s; CREATE TABLE s.t (id INTEGER, txt VARCHAR)")
    con.execute("PRAGMA create_fts_index('s.t', 'id', 'txt')")
    return con


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(_AWKWARD_CHARS, max_size=40), min_size=1, max_size=20))
def test_cutting_at_spaces_first_gives_the_same_words(texts):
    """The premise of the chunk dictionary: the extension's tokenize of a text, empty words
    dropped, is the concatenation of its tokenize of each space-separated chunk."""
    rows = _tokenizer().execute(
        "SELECT list_filter(fts_s_t.tokenize(t), w -> len(w) > 0), "
        "       flatten(list_transform(string_split(t, ' '), c -> list_filter(fts_s_t.tokenize(c), w -> len(w) > 0))) "
        "FROM (SELECT unnest(?::VARCHAR[]) AS t)", [texts]).fetchall()
    assert len(rows) == len(texts)
    for (whole, by_chunk), text in zip(rows, texts):
        assert by_chunk == whole, repr(text)
