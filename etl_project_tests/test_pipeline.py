"""The whole graph materialized with dg.materialize into a temporary warehouse."""

from pathlib import Path

import polars as pl
import pytest

import etl_project
from etl_project.lake import Lake
from etl_project_tests.conftest import materialize_all
from etl_project_tests.warehouse_helpers import query, snapshot, tables


def materialize(landing: Path, warehouse: Path):
    return materialize_all(landing, warehouse)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    import shutil

    from etl_project_tests.conftest import SEEDS

    root = tmp_path_factory.mktemp("pipeline")
    shutil.copytree(SEEDS, root / "landing")
    result = materialize(root / "landing", root / "warehouse")
    assert result.success
    assert all(c.passed for c in result.get_asset_check_evaluations())
    assert len(result.get_asset_check_evaluations()) == 11
    return root / "warehouse", result


@pytest.fixture(scope="module")
def published(run) -> Path:
    return run[0]


def test_checks_report_after_the_assets_and_the_publish_comes_last(run):
    """The steps' order that lets validation overlap the next stages: every asset step that can run
    runs before any check step (their suites were started in the background meanwhile), and the
    publish waits for every check."""
    _, result = run
    started = [e.step_key for e in result.all_events if e.event_type_value == "STEP_START"]
    checks = [i for i, key in enumerate(started) if key.endswith(("_suite", "_near_duplicate_clusters"))]
    assets = [i for i, key in enumerate(started) if i not in checks and key != "warehouse"]
    assert len(checks) == 11 and len(assets) == 8
    assert max(assets) < min(checks)
    assert started[-1] == "warehouse"


def test_the_run_keeps_paths_not_frames_of_the_big_tables(run):
    """Dagster's in-process execution keeps every step's output value until the run ends; the
    steps of the big tables return their staged file, so no frame outlives its step."""
    _, result = run
    outputs = [("landing_tables", "records"), ("deduplicated", "papers"), ("deduplicated", "paper_occurrences"),
               ("paper_links", "result"), ("paper_names", "result"), ("paper_topics", "result"), ("paper_terms", "result")]
    for node, output in outputs:
        assert isinstance(result.output_for_node(node, output), Path), (node, output)


def test_seed_figures_in_the_lake(published: Path):
    with etl_project.connect(published) as con:
        titles = con.sql("SELECT title FROM source_files ORDER BY source_file").fetchall()
        assert titles == [("ICML 2025 Papers",), ("ICML 2025 论文列表",)]
        assert con.sql("SELECT count(*) FROM raw_records").fetchone() == (38,)
        per_file = con.sql("SELECT record_count FROM source_files ORDER BY source_file").fetchall()
        assert per_file == [(19,), (19,)]
        assert con.sql("SELECT count(*) FROM papers").fetchone() == (31,)
        assert con.sql("SELECT count(*) FROM papers WHERE source_count = 2").fetchone() == (7,)
        assert con.sql("SELECT count(DISTINCT paper_id) FROM papers").fetchone() == (31,)
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


def test_one_snapshot_holds_every_table_and_an_export_gives_the_same_rows(published: Path):
    tables = snapshot(published)  # asserts the export's rows equal the lake's
    assert set(tables) == {"source_files", "raw_records", "records", "papers", "paper_occurrences", "source_overlap",
                           "rejected_records", "paper_links", "paper_names", "paper_topics", "paper_terms"}
    with etl_project.connect(published) as con:
        runs = con.sql("SELECT snapshot_id, commit_message FROM lake.snapshots() WHERE commit_message IS NOT NULL").fetchall()
        registered = {name: [Path(r[0]) for r in con.execute("SELECT data_file FROM ducklake_list_files('lake', ?)", [name]).fetchall()]
                      for name in tables}
    assert len(runs) == 1 and runs[0][1].startswith("run ")  # one run, one snapshot
    # Each main table's rows are the one data file Polars wrote, under the warehouse's data path.
    # A table without rows (rejected_records here) has none: an unregistered file would be
    # taken for an interrupted run's by the next publish.
    written = {p.parent.name: p for p in (published / "data" / "main").glob("*/*.parquet")}
    assert set(written) == {name for name, rows in tables.items() if rows} and "rejected_records" not in written
    assert len(list((published / "data" / "main").glob("*/*.parquet"))) == len(written)
    assert all(pl.read_parquet(path).height == len(tables[name]) for name, path in written.items())
    # ... registered where it was written, not copied.
    assert registered == {name: [written[name]] if name in written else [] for name in tables}
    assert (published / "open.sql").is_file() and not (published / "warehouse.duckdb").exists()


def test_raw_text_is_exactly_as_decoded(published: Path):
    from etl_project_tests.conftest import SEEDS

    for name in ("000_0f293dacb70f2eae.txt", "001_100c1899c4c5134e.txt"):
        paragraphs = (SEEDS / name).read_text(encoding="utf-8").split("\n\n")[1:]
        expected = [p.strip("\n") for p in paragraphs if p.strip()]
        rows = query(published, "SELECT raw_text FROM raw_records WHERE source_file = ? ORDER BY ordinal", [name])
        assert [r[0] for r in rows] == expected


def test_rerun_gives_same_ids(published: Path, seeds_copy: Path, tmp_path: Path):
    result = materialize(seeds_copy, tmp_path / "again")
    assert result.success
    first, second = tables(published), tables(tmp_path / "again")
    assert first["papers"] == second["papers"] and first["paper_occurrences"] == second["paper_occurrences"]


def test_failed_error_check_stops_publish(seeds_copy: Path, tmp_path: Path, monkeypatch):
    """A blocking ERROR check that fails leaves the warehouse unpublished and the run failed."""
    from etl_project import dedup

    monkeypatch.setattr(dedup, "paper_id_of", lambda key: "not-a-hex-id")  # every paper the same bad id
    result = materialize(seeds_copy, tmp_path / "wh")
    failed = [c.check_name for c in result.get_asset_check_evaluations() if not c.passed]
    assert "papers_suite" in failed
    assert not result.success
    assert not Lake.of(tmp_path / "wh").exists()  # no catalog: nothing was published
    assert not list((tmp_path / "wh").glob("data/main/*/*.parquet"))


def test_a_run_of_only_the_warehouse_refuses_tables_an_earlier_run_failed_to_check(seeds_copy: Path, tmp_path: Path, monkeypatch):
    """The publish validates the very files it would publish: tables staged by a run whose checks
    failed are refused by a later run of the warehouse alone (from the UI, or a re-execution),
    whose selection holds no check."""
    import dagster as dg

    from etl_project import dedup
    from etl_project.definitions import ETL_JOB, build_defs

    instance = dg.DagsterInstance.ephemeral()
    with monkeypatch.context() as patch:
        patch.setattr(dedup, "paper_id_of", lambda key: "not-a-hex-id")
        assert not materialize_all(seeds_copy, tmp_path / "wh", instance).success
    job = build_defs(str(seeds_copy), str(tmp_path / "wh")).resolve_job_def(ETL_JOB)
    result = job.execute_in_process(instance=instance, asset_selection=[dg.AssetKey("warehouse")], raise_on_error=False)
    assert not result.success
    assert not result.get_asset_check_evaluations()  # no check ran in this run
    (failure,) = result.get_step_failure_events()
    assert failure.step_key == "warehouse"
    assert "papers:papers_suite" in failure.step_failure_data.error.message
    assert not Lake.of(tmp_path / "wh").exists()
