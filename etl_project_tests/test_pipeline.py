"""The whole graph materialized with dg.materialize into a temporary warehouse."""

from pathlib import Path

import duckdb
import polars as pl
import pytest

from etl_project_tests.conftest import materialize_all


def materialize(landing: Path, warehouse: Path):
    return materialize_all(landing, warehouse)


@pytest.fixture(scope="module")
def published(tmp_path_factory) -> Path:
    import shutil

    from etl_project_tests.conftest import SEEDS

    root = tmp_path_factory.mktemp("pipeline")
    shutil.copytree(SEEDS, root / "landing")
    result = materialize(root / "landing", root / "warehouse")
    assert result.success
    assert all(c.passed for c in result.get_asset_check_evaluations())
    assert len(result.get_asset_check_evaluations()) == 11
    return root / "warehouse"


def test_seed_figures_in_duckdb(published: Path):
    with duckdb.connect(str(published / "warehouse.duckdb"), read_only=True) as con:
        titles = con.sql("SELECT title FROM source_files ORDER BY source_file").fetchall()
        assert titles == [("ICML 2025 Papers",), ("ICML 2025 论文列表",)]
        assert con.sql("SELECT count(*) FROM raw_records").fetchone() == (38,)
        per_file = con.sql("SELECT record_count FROM source_files ORDER BY source_file").fetchall()
        assert per_file == [(19,), (19,)]
        assert con.sql("SELECT count(*) FROM papers").fetchone() == (31,)
        assert con.sql("SELECT count(*) FROM papers WHERE source_count = 2").fetchone() == (7,)
        assert con.sql("SELECT shared_papers FROM source_overlap").fetchall() == [(7,)]
        assert con.sql("SELECT count(*) FROM rejected_records").fetchone() == (0,)
        kinds = dict(con.sql("SELECT match_kind, count(*) FROM paper_occurrences GROUP BY 1").fetchall())
        assert kinds == {"canonical": 31, "exact": 7}
        # Every raw record maps to exactly one paper.
        unmapped = con.sql(
            "SELECT count(*) FROM raw_records r LEFT JOIN paper_occurrences o USING (record_id) "
            "WHERE o.paper_id IS NULL"
        ).fetchone()
        assert unmapped == (0,)


def test_seed_figures_in_parquet(published: Path):
    parquet = published / "parquet"
    assert pl.read_parquet(parquet / "raw_records.parquet").height == 38
    papers = pl.read_parquet(parquet / "papers.parquet")
    assert papers.height == 31
    assert papers.filter(pl.col("source_count") == 2).height == 7
    assert papers["paper_id"].is_unique().all()
    # The same tables in both outputs.
    with duckdb.connect(str(published / "warehouse.duckdb"), read_only=True) as con:
        tables = {r[0] for r in con.sql(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main' AND table_type = 'BASE TABLE'"
        ).fetchall()}
    assert tables == {p.stem for p in parquet.glob("*.parquet")}


def test_raw_text_is_exactly_as_decoded(published: Path):
    from etl_project_tests.conftest import SEEDS

    raw = pl.read_parquet(published / "parquet" / "raw_records.parquet")
    for name in ("000_0f293dacb70f2eae.txt", "001_100c1899c4c5134e.txt"):
        paragraphs = (SEEDS / name).read_text(encoding="utf-8").split("\n\n")[1:]
        expected = [p.strip("\n") for p in paragraphs if p.strip()]
        assert raw.filter(pl.col("source_file") == name).sort("ordinal")["raw_text"].to_list() == expected


def test_rerun_gives_same_ids(published: Path, seeds_copy: Path, tmp_path: Path):
    result = materialize(seeds_copy, tmp_path / "again")
    assert result.success
    first = pl.read_parquet(published / "parquet" / "papers.parquet")
    second = pl.read_parquet(tmp_path / "again" / "parquet" / "papers.parquet")
    assert first.equals(second)


def test_failed_error_check_stops_publish(seeds_copy: Path, tmp_path: Path, monkeypatch):
    """A blocking ERROR check that fails leaves the warehouse unpublished and the run failed."""
    from etl_project import dedup

    monkeypatch.setattr(dedup, "paper_id_of", lambda key: "not-a-hex-id")  # every paper the same bad id
    result = materialize(seeds_copy, tmp_path / "wh")
    failed = [c.check_name for c in result.get_asset_check_evaluations() if not c.passed]
    assert "papers_suite" in failed
    assert not result.success
    assert not (tmp_path / "wh" / "warehouse.duckdb").exists()
