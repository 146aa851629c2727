"""Search against the fts extension's own ``PRAGMA create_fts_index`` and ``match_bm25``, on
generated abstracts plus awkward texts: ``paper_terms`` (etl_project/search_terms.py) holds the
index's terms counted per paper, and the lake's ``search_papers``, which computes BM25's statistics
from it at query time, scores and ranks as match_bm25 does."""

import functools
import importlib.util
from pathlib import Path

import duckdb
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import etl_project
from etl_project import lake, publish, search_terms, warehouse_sql
from etl_project.enrich import markup

FTS = "fts_search_papers"  # the extension's index of search.papers
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
    """The papers, paper_names and paper_terms tables of ``rows``, as the pipeline publishes them."""
    papers = pl.DataFrame([(i, text) for i, text, _ in rows], schema={"paper_id": pl.String, "abstract_plain": pl.String}, orient="row")
    names = pl.DataFrame(
        [(i, n, "Long Form" if k == 0 else None, k + 1) for i, _, names in rows if names for k, n in enumerate(names.split(" ", 1))],
        schema={"paper_id": pl.String, "name": pl.String, "long_name": pl.String, "name_rank": pl.UInt32}, orient="row",
    )
    return {"papers": papers, "paper_names": names, "paper_terms": search_terms.paper_terms(papers, names)}


def _with_pragma(rows) -> duckdb.DuckDBPyConnection:
    """The index as the fts extension builds it: each paper's search document, then its PRAGMA."""
    con = duckdb.connect()
    lake.load_extension(con, "fts")
    frames = _frames(rows)
    for name in ("papers", "paper_names"):
        con.register(name, frames[name])
    con.execute("CREATE SCHEMA search")
    con.execute(f"CREATE TABLE search.papers AS {search_terms.DOCUMENTS} ORDER BY p.paper_id")
    fields = ", ".join(f"'{f}'" for f in search_terms.FIELDS)
    con.execute(f"PRAGMA create_fts_index('search.papers', 'paper_id', {fields}, stemmer = 'porter', stopwords = 'english', overwrite = 1)")
    return con


def _published(rows, warehouse: Path) -> duckdb.DuckDBPyConnection:
    """``rows`` published into a lake at ``warehouse``; a reader of it."""
    publish.publish(_frames(rows), lake.Lake.of(warehouse), "search-index-test")
    return etl_project.connect(warehouse)


def _terms_of_index(con) -> list[tuple]:
    """The PRAGMA's index as paper_terms rows: its term occurrences counted per paper and term."""
    return con.sql(f"""
        SELECT docs.name AS paper_id, dict.term, count(*)::INTEGER AS tf, any_value(docs.len)::INTEGER AS doc_terms
        FROM {FTS}.terms AS terms JOIN {FTS}.docs AS docs USING (docid) JOIN {FTS}.dict AS dict USING (termid)
        GROUP BY ALL ORDER BY paper_id, term""").fetchall()


def _bm25(con, query: str, options: str) -> dict[str, float]:
    return dict(con.execute(
        f"SELECT paper_id, score FROM (SELECT paper_id, {FTS}.match_bm25(paper_id, ?{options}) AS score "
        f"FROM search.papers) WHERE score IS NOT NULL", [query]).fetchall())


@pytest.fixture(scope="module")
def pragma(papers):
    with _with_pragma(papers) as con:
        yield con


@pytest.fixture(scope="module")
def published(papers, tmp_path_factory):
    """(the warehouse, a reader of it) after publishing the rows."""
    warehouse = tmp_path_factory.mktemp("search") / "warehouse"
    with _published(papers, warehouse) as con:
        yield warehouse, con


def test_paper_terms_are_the_extensions_index_counted_per_paper(papers, pragma, published):
    _, con = published
    expected = _terms_of_index(pragma)
    assert len(expected) > 10_000
    built = _frames(papers)["paper_terms"]
    assert built.rows() == expected  # sorted by paper_id and term, as the asset stages it
    assert con.sql("SELECT * FROM paper_terms ORDER BY paper_id, term").fetchall() == expected
    lengths = dict(pragma.sql(f"SELECT name, len FROM {FTS}.docs").fetchall())
    assert lengths["a07"] == 0 and "a07" not in set(built["paper_id"])  # stopwords only: no terms
    assert lengths["null"] == 3  # no text: only its names, "NullText Long Form"
    assert dict(built.select("paper_id", "doc_terms").unique().rows()) == {p: n for p, n in lengths.items() if n}


def test_the_terms_of_some_papers_are_the_rows_of_all(papers):
    """What lets a run work out only the changed papers' rows: a paper's rows do not depend on
    the other papers."""
    whole = _frames(papers)["paper_terms"]
    some = [row for i, row in enumerate(papers) if i % 3 == 0]
    assert _frames(some)["paper_terms"].equals(whole.filter(pl.col("paper_id").is_in([p for p, _, _ in some])))


def _variants(papers) -> pl.DataFrame:
    """Variants (raw texts) for every fifth paper: its text with words added and LaTeX markup,
    the same text again (a repeat adds nothing), and for some a second variant."""
    rows = []
    for i, (paper_id, text, _) in enumerate(papers):
        if i % 5:
            continue
        rows.append((paper_id, f"{text or ''} Code: \\textbf{{Zebrafish}} $\\alpha$-nets learning learning."))
        rows.append((paper_id, text))
        if i % 10 == 0:
            rows.append((paper_id, f"Variant {i} rewrites it: learning robust graph models."))
    rows.append(("null", "A variant of a paper without text names NullText."))  # a term of its names too
    return pl.DataFrame(rows, schema=search_terms.VARIANTS_SCHEMA, orient="row")


def test_variants_add_the_terms_the_plain_text_lacks_at_their_largest_count_in_one_variant(papers):
    """A term's count is its count in the names plus its count in the plain text or, when the
    plain text lacks it, its largest count in one variant: the texts, each made a paper of its
    own, give it."""
    variants = _variants(papers)
    frames = _frames(papers)
    got = search_terms.paper_terms(frames["papers"], frames["paper_names"], variants)
    plain = markup.with_plain_text(variants, "abstract", "abstract_plain").select("paper_id", "abstract_plain")
    texts = (pl.concat([frames["papers"].with_columns(variant=pl.lit(False)), plain.with_columns(variant=pl.lit(True))])
             .with_columns(text_id=pl.int_range(pl.len()).cast(pl.String)))
    no_names = frames["paper_names"].clear()
    per_text = (search_terms.paper_terms(texts.select(paper_id="text_id", abstract_plain="abstract_plain"), no_names)
                .join(texts.select(paper_id="text_id", owner="paper_id", variant="variant"), on="paper_id")
                .group_by(paper_id="owner", term="term")
                .agg(tf=pl.coalesce(pl.col("tf").filter(~pl.col("variant")).max(), pl.col("tf").filter(pl.col("variant")).max())))
    nameless = frames["papers"].with_columns(abstract_plain=pl.lit(None, pl.String))
    in_names = search_terms.paper_terms(nameless, frames["paper_names"]).select("paper_id", "term", "tf")
    expected = (
        pl.concat([per_text, in_names]).group_by("paper_id", "term").agg(pl.col("tf").sum().cast(pl.Int32))
        .with_columns(doc_terms=pl.col("tf").sum().over("paper_id").cast(pl.Int32)).sort("paper_id", "term")
    )
    assert got.equals(expected)
    assert got.height > frames["paper_terms"].height  # the variants brought words
    # A term the plain text holds keeps its count (a term only of the names can gain a variant's).
    in_text = search_terms.paper_terms(frames["papers"], no_names).select("paper_id", "term")
    before = frames["paper_terms"].select("paper_id", "term", "tf").join(in_text, on=["paper_id", "term"], how="semi")
    assert before.height > 10_000 and before.join(got, on=["paper_id", "term", "tf"], how="anti").is_empty()
    # "learning" is repeated in a variant: the plain text's count stands.
    learning = before.filter(term="learn", paper_id=papers[0][0])["tf"].to_list()
    assert learning and got.filter(term="learn", paper_id=papers[0][0])["tf"].to_list() == learning
    # Names and a variant add up for a paper without plain text.
    assert got.filter(paper_id="null", term="nulltext")["tf"].to_list() == [2]
    assert got.filter(paper_id="null", term="variant")["tf"].to_list() == [1]
    without = frames["paper_terms"].filter(~pl.col("paper_id").is_in(variants["paper_id"].implode()))
    assert got.filter(~pl.col("paper_id").is_in(variants["paper_id"].implode())).equals(without)


# search_papers with its score left unrounded, as a temporary macro over the same lake tables.
_UNROUNDED = "round(r.score, 4) AS score"


def test_search_papers_scores_and_ranks_as_the_extensions_match_bm25(pragma, published):
    old = pragma
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
    with _with_pragma(rows) as old:
        assert _frames(rows)["paper_terms"].rows() == _terms_of_index(old) == []
        with _published(rows, tmp_path / "warehouse") as con:
            assert con.sql("SELECT * FROM search_papers('anything')").fetchall() == []


def test_a_publish_drops_an_earlier_releases_index_tables(papers, tmp_path):
    target = lake.Lake.of(tmp_path / "warehouse")
    publish.publish(_frames(papers[:5]), target, "first")
    with etl_project.connect(tmp_path / "warehouse", read_only=False) as con:
        con.execute("CREATE TABLE search.docs (docid BIGINT, name VARCHAR, len BIGINT)")
    publish.publish(_frames(papers[:5]), target, "second")
    with etl_project.connect(tmp_path / "warehouse") as con:
        tables = con.sql("SELECT table_name FROM duckdb_tables() WHERE database_name = 'lake' AND schema_name = 'search'").fetchall()
        assert tables == [("stopwords",)]


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


def _stage(rows, folder: Path, previous: tuple[Path, Path] | None = None, build: str = "b1", variants: pl.DataFrame | None = None):
    """stage_terms of ``rows`` into ``folder``/terms (parts) and ``folder``/fingerprints.parquet."""
    frames = _frames(rows)
    folder.mkdir(parents=True)
    for name in ("papers", "paper_names"):
        frames[name].write_parquet(folder / f"{name}.parquet")
    terms, sidecar = folder / "terms", folder / "fingerprints.parquet"
    done = search_terms.stage_terms(pl.scan_parquet(folder / "papers.parquet"), pl.scan_parquet(folder / "paper_names.parquet"),
                                    terms, sidecar, build, previous,
                                    variants=search_terms.NO_VARIANTS if variants is None else search_terms.Variants.of(variants))
    expected = frames["paper_terms"] if variants is None else search_terms.paper_terms(frames["papers"], frames["paper_names"], variants)
    return expected, (terms, sidecar), done


def _parts(folder: Path) -> dict[str, pl.DataFrame]:
    return {path.name: pl.read_parquet(path) for path in sorted(folder.glob("*.parquet"))}


def test_terms_staged_in_batches_are_the_terms_made_at_once(papers, tmp_path, monkeypatch):
    monkeypatch.setattr(search_terms, "BATCH_PAPERS", 37)
    expected, (terms, _), done = _stage(papers, tmp_path / "s")
    parts = _parts(terms)
    assert len(parts) == done.parts_written == -(-len(papers) // 37) and done.computed == len(papers)
    assert all(part.equals(part.sort("paper_id", "term")) for part in parts.values())
    assert pl.concat(parts.values()).sort("paper_id", "term").equals(expected)
    # Batches follow the papers' own order (a file's papers together), not paper_id's.
    for number, part in enumerate(parts.values()):
        assert set(part["paper_id"]) <= {row[0] for row in papers[37 * number: 37 * (number + 1)]}


def test_staged_terms_after_changes_equal_terms_made_from_scratch(papers, tmp_path, monkeypatch):
    """Papers removed, added and with a changed text: the staged table equals the terms made at
    once; only new and changed papers are worked out; untouched parts are the same files."""
    monkeypatch.setattr(search_terms, "BATCH_PAPERS", 40)
    _, previous, _ = _stage(papers, tmp_path / "before")
    before = _parts(previous[0])
    gone = {papers[0][0], papers[1][0]}  # both in the first part
    changed = [(papers[45][0], "A changed text about federated learning of graph models.", papers[45][2])]
    added = [("new1", "Fresh words: quantum annealing schedules.", "QAS"), ("new2", None, None)]
    rows = [r for r in papers if r[0] not in gone and r[0] != changed[0][0]] + changed + added
    expected, (terms, sidecar), done = _stage(rows, tmp_path / "after", previous)
    assert pl.concat(_parts(terms).values()).sort("paper_id", "term").equals(expected)
    assert (done.computed, done.reused) == (3, len(rows) - 3)
    after = {name: path.stat().st_ino for name, path in ((p.name, p) for p in terms.glob("*.parquet"))}
    untouched = sorted(set(before) & set(after))  # the parts of neither a removed nor a changed paper
    assert len(untouched) == done.parts_linked == len(before) - 2
    assert all(after[name] == (previous[0] / name).stat().st_ino for name in untouched)
    placed = pl.read_parquet(sidecar)
    assert placed["part"].is_in(list(after)).all() and placed.height == len(rows)

    # Nothing changed: every part linked, nothing worked out.
    _, _, again = _stage(rows, tmp_path / "again", (terms, sidecar))
    assert (again.computed, again.parts_written, again.parts_linked) == (0, 0, len(after))


def test_staged_terms_of_papers_whose_variants_changed_are_worked_out_again(papers, tmp_path, monkeypatch):
    monkeypatch.setattr(search_terms, "BATCH_PAPERS", 40)
    variants = _variants(papers)
    expected, previous, first = _stage(papers, tmp_path / "before", variants=variants)
    assert pl.concat(_parts(previous[0]).values()).sort("paper_id", "term").equals(expected) and first.computed == len(papers)
    # One paper gains a variant, one loses all of its own, one has a variant edited, and the
    # others' variants come in another order.
    gains, loses, edited = papers[1][0], papers[5][0], papers[10][0]
    reordered = variants.filter(pl.col("paper_id") != loses).reverse().with_columns(
        abstract=pl.when((pl.col("paper_id") == edited) & pl.col("abstract").str.starts_with("Variant"))
        .then(pl.col("abstract") + " Edited.").otherwise("abstract"))
    changed = pl.concat([reordered, pl.DataFrame({"paper_id": [gains], "abstract": ["Its variant: zebrafish atlases."]})])
    expected, (terms, _), done = _stage(papers, tmp_path / "after", previous, variants=changed)
    assert pl.concat(_parts(terms).values()).sort("paper_id", "term").equals(expected)
    assert (done.computed, done.reused) == (3, len(papers) - 3)
    assert expected.filter(pl.col("paper_id") == gains, pl.col("term") == "zebrafish").height == 1


def test_staged_terms_merge_their_smallest_parts(papers, tmp_path, monkeypatch):
    monkeypatch.setattr(search_terms, "BATCH_PAPERS", 40)
    monkeypatch.setattr(search_terms, "MAX_PARTS", 3)
    expected, previous, first = _stage(papers, tmp_path / "first")
    assert len(_parts(previous[0])) == 3 and first.parts_written > 3  # written, then the smallest merged
    assert pl.concat(_parts(previous[0]).values()).sort("paper_id", "term").equals(expected)
    more = [*papers, ("new1", "Fresh words: quantum annealing schedules.", "QAS")]
    expected, (terms, _), done = _stage(more, tmp_path / "second", previous)
    assert len(_parts(terms)) == 3 and done.computed == 1
    assert pl.concat(_parts(terms).values()).sort("paper_id", "term").equals(expected)


def test_empty_staged_terms_are_a_table_with_its_columns(tmp_path):
    _, (terms, sidecar), done = _stage([("p", None, None)], tmp_path / "s")
    [part] = _parts(terms).values()
    assert part.columns == ["paper_id", "term", "tf", "doc_terms"] and part.is_empty()
    assert pl.read_parquet(sidecar)["paper_id"].to_list() == ["p"]
