"""The analysis layer in the published DuckDB file: enrichment tables, views, and search_papers
through the real duckdb CLI."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import polars as pl
import pytest

from etl_project import warehouse_sql
from etl_project_tests.conftest import SEEDS, materialize_all
from etl_project_tests.enrich_seeds import paper_starting

DUCKDB_CLI = shutil.which("duckdb", path=str(Path(sys.executable).parent)) or shutil.which("duckdb")


@pytest.fixture(scope="module")
def published(tmp_path_factory) -> tuple[Path, Path]:
    """The seeds run through the whole graph; HOME is a fresh folder, so the fts extension the
    publish installs lands there and nowhere else. Returns (warehouse, home)."""
    root = tmp_path_factory.mktemp("enrich")
    home = root / "home"
    home.mkdir()
    shutil.copytree(SEEDS, root / "landing")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HOME", str(home))
        result = materialize_all(root / "landing", root / "warehouse")
    assert result.success
    failed = [c.check_name for c in result.get_asset_check_evaluations() if not c.passed]
    assert failed == []
    return root / "warehouse", home


def cli(database: Path, sql: str, home: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [DUCKDB_CLI, "-readonly", "-csv", str(database), "-c", sql],
        env={**os.environ, "HOME": str(home)}, capture_output=True, text=True, timeout=120,
    )


def test_enrichment_tables_are_published(published):
    warehouse, _ = published
    for table in ("paper_links", "paper_names", "paper_topics"):
        assert (warehouse / "parquet" / f"{table}.parquet").is_file()
    papers = pl.read_parquet(warehouse / "parquet" / "papers.parquet")
    bopo = papers.filter(pl.col("paper_id") == paper_starting("Neural Combinatorial Optimization"))
    assert "*Best-anchored" in bopo["abstract"].item()
    assert "We propose Best-anchored and Objective-guided Preference Optimization (BOPO), a" in bopo["abstract_plain"].item()


def test_views_answer_the_common_questions(published):
    warehouse, _ = published
    with duckdb.connect(str(warehouse / "warehouse.duckdb"), read_only=True) as con:
        assert con.sql("SELECT count(*), count(DISTINCT paper_id) FROM paper_summary").fetchone() == (31, 31)
        cody = con.sql(
            "SELECT name, has_code, code_links, topics FROM paper_summary WHERE paper_id = ?",
            params=[paper_starting("Temporal Graph Neural Networks")],
        ).fetchone()
        assert cody[:3] == ("CoDy", True, ["https://github.com/daniel-gomm/CoDy"])
        assert {"interpretability", "graphs"} <= set(cody[3])
        overall = con.sql("SELECT papers, papers_with_code, papers_with_anonymous_code FROM code_availability "
                          "WHERE source_file = '(all files)'").fetchone()
        assert overall == (31, 9, 1)  # 8 GitHub repositories + the anonymous one
        per_file = con.sql("SELECT source_file, papers, papers_with_code FROM code_availability "
                           "WHERE source_file <> '(all files)' ORDER BY 1").fetchall()
        assert per_file == [("000_0f293dacb70f2eae.txt", 19, 7), ("001_100c1899c4c5134e.txt", 19, 6)]
        # topic_counts agrees with the published paper_topics, counted independently here.
        topics = pl.read_parquet(warehouse / "parquet" / "paper_topics.parquet")
        expected = {t: (n, round(n / 31, 4)) for t, n in topics.group_by("topic").len().iter_rows()}
        view = {t: (n, share) for t, n, share in con.sql("SELECT topic, papers, share_of_papers FROM topic_counts").fetchall()}
        assert view == expected and "other" in view
        safety_by_file = con.sql("SELECT source_file, papers FROM topic_by_source "
                                 "WHERE topic = 'llm_safety_alignment' ORDER BY 1").fetchall()
        assert sum(n for _, n in safety_by_file) >= expected["llm_safety_alignment"][0]


def test_search_papers_through_the_duckdb_cli(published):
    warehouse, home = published
    out = cli(warehouse / "warehouse.duckdb",
              "SELECT paper_id, name FROM search_papers('counterfactual explanations') LIMIT 1;", home)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["paper_id,name", f"{paper_starting('Temporal Graph Neural Networks')},CoDy"]

    out = cli(warehouse / "warehouse.duckdb", "SELECT name, score > 0, snippet FROM search_papers('over-refusal benchmark', max_results := 3);", home)
    assert out.returncode == 0, out.stderr
    first = out.stdout.splitlines()[1]
    assert first.startswith("OR-Bench,true,") and "over-refusal" in first.lower()
    assert len(out.stdout.splitlines()) == 4


def test_a_client_without_the_extension_gets_it_from_one_line(published, tmp_path: Path):
    warehouse, _ = published
    elsewhere = tmp_path / "other_user"
    elsewhere.mkdir()
    query = "SELECT name FROM search_papers('sparse autoencoders interpretations') LIMIT 1;"
    refused = cli(warehouse / "warehouse.duckdb", query, elsewhere)
    assert refused.returncode != 0 and "fts" in refused.stderr
    loaded = cli(warehouse / "warehouse.duckdb", warehouse_sql.load_statement() + query, elsewhere)
    assert loaded.returncode == 0, loaded.stderr
    assert loaded.stdout.split()[0] == "name"

    # Or once per user: etl-project install-fts, after which the CLI loads it by itself.
    done = subprocess.run([str(Path(sys.executable).with_name("etl-project")), "install-fts"],
                          env={**os.environ, "HOME": str(elsewhere)}, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert str(elsewhere / ".duckdb" / "extensions") in done.stdout and "LOAD '" in done.stdout
    assert cli(warehouse / "warehouse.duckdb", query, elsewhere).returncode == 0


def test_layer_skips_objects_whose_tables_are_missing():
    with duckdb.connect() as con:
        con.execute("CREATE TABLE papers AS SELECT 'a' AS paper_id, 'text' AS abstract")
        assert warehouse_sql.create_analysis_layer(con) == []
        con.execute("ALTER TABLE papers ADD COLUMN abstract_plain VARCHAR")
        con.execute("CREATE TABLE paper_names (paper_id VARCHAR, name VARCHAR, long_name VARCHAR, name_rank UINTEGER)")
        assert warehouse_sql.create_analysis_layer(con) == ["search_papers"]


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
    assert not (tmp_path / "wh" / "warehouse.duckdb").exists()
