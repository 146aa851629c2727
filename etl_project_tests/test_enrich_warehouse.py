"""The analysis layer in the published lake, read as analysts read it: through the real duckdb CLI
(``duckdb -init warehouse/open.sql``, from the folder holding the warehouse) and through
``etl_project.connect``: the seeds' figures, the README's queries, search_papers, the views, and
time travel to the previous snapshot."""

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pytest

import etl_project
from etl_project import lake, publish, search_terms
from etl_project_tests.conftest import SEEDS, materialize_all
from etl_project_tests.enrich_seeds import paper_starting
from etl_project_tests.warehouse_helpers import DUCKDB_CLI, current_snapshot

SEED_FILES = sorted(SEEDS.glob("*.txt"))


@dataclass(frozen=True)
class Published:
    root: Path  # the folder holding warehouse/, as the project root holds it
    warehouse: Path
    home: Path
    previous: int  # the snapshot of the first run (the first seed file alone)
    current: int  # the second run's (both files)


@pytest.fixture(scope="module")
def published(tmp_path_factory) -> Published:
    """Two runs into one lake: the first seed file, then both. HOME is a fresh folder, so the
    extensions the publish installs land there and nowhere else."""
    root = tmp_path_factory.mktemp("enrich")
    home = root / "home"
    home.mkdir()
    (root / "landing").mkdir()
    shutil.copy(SEED_FILES[0], root / "landing")
    warehouse = root / "warehouse"
    snapshots = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HOME", str(home))
        for added in SEED_FILES[1:] + [None]:
            result = materialize_all(root / "landing", warehouse)
            assert result.success
            assert [c.check_name for c in result.get_asset_check_evaluations() if not c.passed] == []
            snapshots.append(current_snapshot(warehouse))
            if added is not None:
                shutil.copy(added, root / "landing")
    assert snapshots[0] < snapshots[1]
    return Published(root, warehouse, home, *snapshots)


@pytest.fixture(scope="module")
def con(published):
    """One reader for the module (each connection loads the extensions: ~1 s)."""
    with etl_project.connect(published.warehouse) as con:
        yield con


def duckdb_cli(p: Published, sql: str, mode: str = "-json", home: Path | None = None) -> subprocess.CompletedProcess:
    """The duckdb CLI as the README shows it: ``duckdb -init warehouse/open.sql -c "..."``, run
    from the folder that holds the warehouse."""
    return subprocess.run(
        [DUCKDB_CLI, "-init", "warehouse/open.sql", mode, "-c", sql], cwd=p.root,
        env={**os.environ, "HOME": str(home or p.home)}, capture_output=True, text=True, timeout=120,
    )


def cli_results(p: Published, queries: list[str]) -> list[list[dict]]:
    """Each query's rows (as JSON objects) through one duckdb CLI session."""
    out = duckdb_cli(p, "\n".join(q.rstrip(";") + ";" for q in queries))
    assert out.returncode == 0, out.stderr
    decoder, text, results = json.JSONDecoder(), out.stdout, []
    position = 0
    while text[position:].strip():
        position += len(text[position:]) - len(text[position:].lstrip())
        value, position = decoder.raw_decode(text, position)
        results.append(value)
    assert len(results) == len(queries), out.stdout
    return results


def plain(value):
    """A value as comparable between the CLI's JSON and Python's: numbers that JSON cannot hold
    (HUGEINT) come out of the CLI as strings."""
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, (bool, float)) or value is None:
        return value
    return str(value)


def both_ways(p: Published, con, queries: list[str]) -> list[list[tuple]]:
    """Each query's rows through etl_project.connect (``con``), asserted equal to the duckdb CLI's."""
    through_cli = cli_results(p, queries)
    answers = []
    for query, cli_rows in zip(queries, through_cli):
        rows = con.sql(query).fetchall()
        assert [tuple(plain(v) for v in r.values()) for r in cli_rows] == [tuple(plain(v) for v in r) for r in rows], query
        answers.append(rows)
    return answers


def test_seed_figures_through_the_duckdb_cli_and_connect(published, con):
    [figures, titles] = both_ways(published, con, [
        "SELECT (SELECT count(*) FROM source_files) AS files, (SELECT count(*) FROM raw_records) AS records, "
        "count(*) AS papers, count(*) FILTER (WHERE source_count = 2) AS in_both FROM papers",
        "SELECT title, record_count FROM source_files ORDER BY source_file",
    ])
    assert figures == [(2, 38, 31, 7)]
    assert titles == [("ICML 2025 Papers", 19), ("ICML 2025 论文列表", 19)]


# The README's queries ("Querying the warehouse", "Links, names, topics and full-text search"),
# with the answers it shows.
README = {
    "SELECT source_file, encoding, title, record_count, status FROM source_files;": [
        ("000_0f293dacb70f2eae.txt", "utf-8", "ICML 2025 Papers", 19, "ok"),
        ("001_100c1899c4c5134e.txt", "utf-8", "ICML 2025 论文列表", 19, "ok"),
    ],
    "SELECT count(*) AS papers, count(*) FILTER (WHERE source_count > 1) AS in_both_lists, sum(occurrence_count) AS records FROM papers;": [
        (31, 7, 38),
    ],
    "SELECT paper_id, word_count, left(abstract, 60) AS abstract FROM papers WHERE source_count > 1 ORDER BY word_count DESC LIMIT 3;": [
        ("880c9a2ee0dcd24a", 197, "Interpretability for machine learning models is becoming mor"),
        ("a4661956e2abe0e6", 192, "Aligning large language models (LLMs) with human values is e"),
        ("577f2aad9621adb7", 178, "While the activations of neurons in deep neural networks usu"),
    ],
    "SELECT name, score, snippet FROM search_papers('counterfactual explanations', max_results := 3);": [
        ("CoDy", 3.5328, "…challenges for explainability. Counterfactual explanation methods provide a promising solution by illustrating how modifications…"),
        ("EquiGX", 1.2528, "…decomposition rules provide a detailed explanation of each layer’s contribution to the network’s predictions, thereby enhancing our…"),
        ("FastPD", 0.8679, "…methods include Shapley additive explanations (SHAP) which computes feature contributions based on a game theoretical interpretation…"),
    ],
    "SELECT name, topics, code_links FROM paper_summary WHERE has_code ORDER BY name;": [
        ("ANOVA-TPNN", ["interpretability", "theory"], ["https://github.com/ParkSeokhun/ANOVA-TPNN"]),
        ("AutoAdvExBench", ["benchmarks_evaluation", "adversarial_robustness"], ["https://github.com/ethz-spylab/AutoAdvExBench"]),
        ("CASE-Bench", ["llm_safety_alignment", "benchmarks_evaluation"], ["https://anonymous.4open.science/r/CASEBench-D5DB"]),
        ("CoDy", ["graphs", "interpretability"], ["https://github.com/daniel-gomm/CoDy"]),
        ("EquiGX", ["graphs", "interpretability"], ["https://github.com/divelab/AIRS/"]),
        ("OR-Bench", ["llm_safety_alignment", "benchmarks_evaluation"], ["https://github.com/justincui03/or-bench"]),
        ("UEFL", ["uncertainty", "federated_private"], ["https://github.com/destiny301/uefl"]),
        ("WMarkGPT", ["multimodal_vision"], ["https://github.com/TanSongBai/WMarkGPT"]),
        (None, ["interpretability"], ["https://github.com/EleutherAI/delphi"]),
    ],
    "SELECT name, long_name, pattern FROM paper_names ORDER BY name LIMIT 6;": [
        ("ANOVA-TPNN", "ANOVA Tensor Product Neural Network", "we call … X"),
        ("AutoAdvExBench", None, "we propose X"),
        ("BOPO", "Best-anchored and Objective-guided Preference Optimization", "we propose X"),
        ("CASE-Bench", None, "we propose X"),
        ("CoDy", "Counterfactual Explainer for Dynamic Graphs", "X—<long form>—"),
        ("DSI", "Data-Specific Indistinguishability", "termed X"),
    ],
    "SELECT topic, papers, share_of_papers, len(source_files) AS files FROM topic_counts ORDER BY papers DESC, topic LIMIT 5;": [
        ("interpretability", 8, 0.2581, 2),
        ("benchmarks_evaluation", 6, 0.1935, 2),
        ("llm_safety_alignment", 6, 0.1935, 2),
        ("theory", 6, 0.1935, 2),
        ("adversarial_robustness", 5, 0.1613, 2),
    ],
    "FROM code_availability ORDER BY source_file;": [
        ("(all files)", 31, 9, 0.2903, 1),
        ("000_0f293dacb70f2eae.txt", 19, 7, 0.3684, 1),
        ("001_100c1899c4c5134e.txt", 19, 6, 0.3158, 1),
    ],
}


def test_the_readmes_queries_give_the_readmes_answers(published, con):
    answers = both_ways(published, con, list(README))
    for (query, expected), got in zip(README.items(), answers):
        assert got == expected, query


def test_search_papers_through_the_duckdb_cli(published, con):
    out = duckdb_cli(published, "SELECT paper_id, name FROM search_papers('counterfactual explanations') LIMIT 1;", "-csv")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["paper_id,name", f"{paper_starting('Temporal Graph Neural Networks')},CoDy"]

    [ranked] = both_ways(published, con, ["SELECT name, score > 0, snippet FROM search_papers('over-refusal benchmark', max_results := 3)"])
    assert len(ranked) == 3
    name, positive, snippet = ranked[0]
    assert (name, positive) == ("OR-Bench", True) and "over-refusal" in snippet.lower()


def test_time_travel_to_the_previous_snapshot(published, con):
    p = published
    at = f"AT (VERSION => {p.previous})"
    [then, now, snapshots] = both_ways(p, con, [
        f"SELECT (SELECT count(*) FROM source_files {at}), (SELECT count(*) FROM raw_records {at}), count(*) FROM papers {at}",
        "SELECT (SELECT count(*) FROM source_files), (SELECT count(*) FROM raw_records), count(*) FROM papers",
        f"SELECT snapshot_id FROM lake.snapshots() WHERE snapshot_id IN ({p.previous}, {p.current}) ORDER BY 1",
    ])
    assert then == [(1, 19, 19)]  # the first seed file alone
    assert now == [(2, 38, 31)]
    assert snapshots == [(p.previous,), (p.current,)]
    # The same old rows, not just as many: the first run's papers are those of the first file.
    old = con.sql(f"SELECT paper_id FROM papers {at} ORDER BY 1").fetchall()
    first_file = con.sql("SELECT DISTINCT paper_id FROM paper_occurrences WHERE source_file = ? ORDER BY 1",
                         params=[SEED_FILES[0].name]).fetchall()
    assert old == first_file
    history = publish.history(con)
    assert history["snapshot_id"].to_list()[:2] == [p.current, p.previous]
    assert history["papers"].to_list()[:2] == [31, 19]


def test_enrichment_tables_are_published(con):
    tables = {r[0] for r in con.sql("SELECT table_name FROM duckdb_tables() WHERE database_name = 'lake' AND schema_name = 'main'").fetchall()}
    assert {"paper_links", "paper_names", "paper_topics"} <= tables
    bopo = con.sql("SELECT abstract, abstract_plain FROM papers WHERE paper_id = ?",
                   params=[paper_starting("Neural Combinatorial Optimization")]).fetchone()
    assert "*Best-anchored" in bopo[0]
    assert "We propose Best-anchored and Objective-guided Preference Optimization (BOPO), a" in bopo[1]


def test_views_answer_the_common_questions(con):
    assert con.sql("SELECT count(*), count(DISTINCT paper_id) FROM paper_summary").fetchone() == (31, 31)
    cody = con.sql(
        "SELECT name, has_code, code_links, topics FROM paper_summary WHERE paper_id = ?",
        params=[paper_starting("Temporal Graph Neural Networks")],
    ).fetchone()
    assert cody[:3] == ("CoDy", True, ["https://github.com/daniel-gomm/CoDy"])
    assert {"interpretability", "graphs"} <= set(cody[3])
    # topic_counts agrees with the published paper_topics, counted independently here.
    topics = con.sql("FROM paper_topics").pl()
    expected = {t: (n, round(n / 31, 4)) for t, n in topics.group_by("topic").len().iter_rows()}
    view = {t: (n, share) for t, n, share in con.sql("SELECT topic, papers, share_of_papers FROM topic_counts").fetchall()}
    assert view == expected and "other" in view
    safety_by_file = con.sql("SELECT source_file, papers FROM topic_by_source "
                             "WHERE topic = 'llm_safety_alignment' ORDER BY 1").fetchall()
    assert sum(n for _, n in safety_by_file) >= expected["llm_safety_alignment"][0]


def _lake_objects(warehouse: Path, search: str | None = None) -> tuple[set[str], set[str], list[tuple]]:
    """(macros and views in the lake's main schema, tables of its search schema, and the answer
    of search_papers(search) when asked)."""
    with etl_project.connect(warehouse) as con:
        found = con.sql("SELECT paper_id, name FROM search_papers(?)", params=[search]).fetchall() if search else []
        objects = {r[0] for r in con.sql(
            "SELECT function_name FROM duckdb_functions() WHERE database_name = 'lake' AND schema_name = 'main' "
            "UNION SELECT view_name FROM duckdb_views() WHERE database_name = 'lake' AND schema_name = 'main'").fetchall()}
        index = {r[0] for r in con.sql(
            "SELECT table_name FROM duckdb_tables() WHERE database_name = 'lake' AND schema_name = 'search'").fetchall()}
    return objects, index, found


def test_the_layer_skips_objects_whose_tables_are_missing(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    target = lake.Lake.of(tmp_path / "warehouse")
    papers = pl.DataFrame({"paper_id": ["a", "b"], "abstract": ["graph learning", "robust text"]})
    names = pl.DataFrame({"paper_id": ["a"], "name": ["GL"], "long_name": [None], "name_rank": [1]},
                         schema_overrides={"long_name": pl.String, "name_rank": pl.UInt32})

    publish.publish({"papers": papers}, target, "no-plain-text")
    assert _lake_objects(target.warehouse) == (set(), set(), [])

    plain = papers.with_columns(abstract_plain=pl.col("abstract"))
    publish.publish({"papers": plain, "paper_names": names}, target, "no-terms")
    assert _lake_objects(target.warehouse)[:2] == (set(), set())
    terms = search_terms.paper_terms(plain, names)
    publish.publish({"papers": plain, "paper_names": names, "paper_terms": terms}, target, "searchable")
    objects, index, found = _lake_objects(target.warehouse, "graphs")
    assert objects == {"search_papers"} and index == {"stopwords"}
    assert found == [("a", "GL")]

    publish.publish({"papers": papers}, target, "plain-text-gone")  # no stale index over other papers
    assert _lake_objects(target.warehouse)[:2] == (set(), set())


def test_topics_code_version_follows_the_taxonomy():
    from etl_project.definitions import defs
    from etl_project.enrich.topics import taxonomy_version

    versions = defs.resolve_assets_def("paper_topics").code_versions_by_key
    assert set(versions.values()) == {f"taxonomy-{taxonomy_version()}"}


def test_a_failed_enrichment_check_stops_publish(tmp_path: Path, monkeypatch):
    """An invented name (not in its abstract) fails paper_names_suite, which blocks the publish."""
    from etl_project.enrich import names

    real = names.extract_names

    def invent(papers: pl.DataFrame) -> pl.DataFrame:
        return real(papers).with_columns(name=pl.lit("NotInTheText"), name_rank=pl.int_range(1, pl.len() + 1, dtype=pl.UInt32))

    monkeypatch.setattr(names, "extract_names", invent)
    monkeypatch.setenv("HOME", str(tmp_path))
    shutil.copytree(SEEDS, tmp_path / "landing")
    result = materialize_all(tmp_path / "landing", tmp_path / "wh")
    failed = [c.check_name for c in result.get_asset_check_evaluations() if not c.passed]
    assert failed == ["paper_names_suite"]
    assert not result.success
    assert not lake.Lake.of(tmp_path / "wh").exists()
    with pytest.raises(lake.NoWarehouse):
        etl_project.connect(tmp_path / "wh")
