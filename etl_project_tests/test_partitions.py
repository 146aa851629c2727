"""Partition bookkeeping: what a run parses, what it deletes, and the runs it leads to."""

from pathlib import Path

import dagster as dg
import pytest
from polars.testing import assert_frame_equal

import etl_project
from etl_project import landing, stage
from etl_project.defs import launch
from etl_project.defs.partitions import LANDING_FILES
from etl_project.defs.resources import EtlSettings
from etl_project_tests.conftest import materialize_all
from etl_project_tests.warehouse_helpers import query


def changes(**lists) -> landing.Changes:
    return landing.Changes(**lists)


def test_plan_re_adds_changed_files_last_so_the_run_is_one_range():
    plan = landing.make_plan(changes(new=["d"], changed=["b"], unchanged=["a", "c"]), existing=["a", "b", "c", "gone"])
    assert plan.to_delete == ["gone", "b"]
    assert plan.to_add == ["b", "d"]
    assert plan.to_parse == ["b", "d"]
    assert plan.removed == ["gone"]
    assert launch.range_tags(plan) == {launch.RANGE_START: "b", launch.RANGE_END: "d"}


def test_full_plan_covers_every_partition_in_order():
    plan = landing.make_plan(changes(new=["d"], changed=["b"], unchanged=["a", "c"]), existing=["a", "b", "c"], full=True)
    assert plan.to_parse == ["a", "c", "b", "d"]
    assert launch.range_tags(plan) == {launch.RANGE_START: "a", launch.RANGE_END: "d"}


def test_nothing_to_parse_means_no_range():
    plan = landing.make_plan(changes(unchanged=["a"]), existing=["a", "b"])
    assert (plan.to_parse, plan.removed, launch.range_tags(plan)) == ([], ["b"], {})


def paper_list(title: str, *abstracts: str) -> str:
    return title + "\n\n" + "\n\n".join(abstracts) + "\n"


ABSTRACTS = [f"Abstract number {i} studies topic {i} with a method that is described in words." for i in range(6)]


def count(warehouse: Path, sql: str):
    return query(warehouse, sql)


@pytest.fixture
def instance():
    with dg.DagsterInstance.ephemeral() as instance:
        yield instance


def test_runs_follow_the_folder_new_changed_removed(tmp_path: Path, instance):
    landing_dir, warehouse = tmp_path / "landing", tmp_path / "wh"
    landing_dir.mkdir()
    (landing_dir / "a.txt").write_text(paper_list("A", *ABSTRACTS[:2]))
    (landing_dir / "b.txt").write_text(paper_list("B", *ABSTRACTS[2:4]))
    assert materialize_all(landing_dir, warehouse, instance).success
    assert instance.get_dynamic_partitions(LANDING_FILES.name) == ["a.txt", "b.txt"]

    # Unchanged folder: nothing parsed, everything republished the same.
    plan = launch.plan_run(instance, landing_dir, warehouse)
    assert plan.to_parse == [] and plan.changes.unchanged == ["a.txt", "b.txt"]

    # b changes, c arrives: only they are parsed, b's partition moves last.
    (landing_dir / "b.txt").write_text(paper_list("B", ABSTRACTS[3]))
    (landing_dir / "c.txt").write_text(paper_list("C", ABSTRACTS[4], ABSTRACTS[0]))
    result = materialize_all(landing_dir, warehouse, instance)
    assert result.success
    parsed = {e.partition for e in result.get_asset_materialization_events() if e.asset_key == dg.AssetKey("parsed_files")}
    assert parsed == {"b.txt", "c.txt"}
    assert instance.get_dynamic_partitions(LANDING_FILES.name) == ["a.txt", "b.txt", "c.txt"]
    assert count(warehouse, "SELECT source_file, record_count FROM source_files ORDER BY 1") == [("a.txt", 2), ("b.txt", 1), ("c.txt", 2)]
    assert count(warehouse, "SELECT count(*) FROM papers") == [(4,)]  # abstracts 0, 1, 3, 4

    # a is removed: its partition and its records are gone from the next publish.
    (landing_dir / "a.txt").unlink()
    result = materialize_all(landing_dir, warehouse, instance)
    assert result.success
    assert not [e for e in result.get_asset_materialization_events() if e.partition]  # nothing parsed
    assert instance.get_dynamic_partitions(LANDING_FILES.name) == ["b.txt", "c.txt"]
    assert count(warehouse, "SELECT DISTINCT source_file FROM raw_records ORDER BY 1") == [("b.txt",), ("c.txt",)]
    assert count(warehouse, "SELECT count(*) FROM papers") == [(3,)]
    staged = stage.partition_path(warehouse, launch.PER_FILE_ASSET, "raw_records", "b.txt").parent
    assert sorted(p.name for p in staged.glob("*.parquet")) == sorted(
        f"{stage.partition_id(k)}.parquet" for k in ["b.txt", "c.txt"]
    )  # a.txt's staged tables were pruned


def test_a_run_is_needed_until_the_snapshot_holds_the_folder_as_it_is(tmp_path: Path, instance):
    landing_dir, warehouse = tmp_path / "landing", tmp_path / "wh"
    landing_dir.mkdir()
    (landing_dir / "a.txt").write_text(paper_list("A", *ABSTRACTS[:2]))
    (landing_dir / "b.txt").write_text(paper_list("B", *ABSTRACTS[2:4]))
    build = EtlSettings().build_fingerprint()  # what the definitions' runs record

    def unchanged(build: str = build) -> int | None:
        return launch.unchanged_snapshot(launch.plan_run(instance, landing_dir, warehouse), warehouse, build)

    assert unchanged() is None  # nothing published yet
    assert materialize_all(landing_dir, warehouse, instance).success
    [(snapshot,)] = query(warehouse, "SELECT max(snapshot_id) FROM lake.snapshots()")
    assert unchanged() == snapshot
    assert unchanged(EtlSettings(near_threshold=0.5).build_fingerprint()) is None  # other settings
    (landing_dir / "a.txt").touch()
    assert unchanged() == snapshot  # a touch is not a change
    (landing_dir / "b.txt").write_text(paper_list("B", ABSTRACTS[3]))
    assert unchanged() is None  # changed content
    (landing_dir / "b.txt").write_text(paper_list("B", *ABSTRACTS[2:4]))
    assert unchanged() == snapshot
    # A removal whose run never published: the partition is gone, so the plan has nothing left to
    # do, but the snapshot still holds the file.
    (landing_dir / "b.txt").unlink()
    launch.apply_plan(instance, launch.plan_run(instance, landing_dir, warehouse))
    plan = launch.plan_run(instance, landing_dir, warehouse)
    assert (plan.to_parse, plan.to_delete) == ([], [])
    assert launch.unchanged_snapshot(plan, warehouse, build) is None


def test_an_empty_landing_folder_publishes_empty_tables(tmp_path: Path, instance):
    (tmp_path / "landing").mkdir()
    result = materialize_all(tmp_path / "landing", tmp_path / "wh", instance)
    assert result.success
    assert count(tmp_path / "wh", "SELECT (SELECT count(*) FROM source_files), (SELECT count(*) FROM papers)") == [(0, 0)]


def test_full_refresh_parses_every_file_again(seeds_copy: Path, tmp_path: Path, instance):
    assert materialize_all(seeds_copy, tmp_path / "wh", instance).success
    result = materialize_all(seeds_copy, tmp_path / "wh", instance, full=True)
    parsed = {e.partition for e in result.get_asset_materialization_events() if e.asset_key == dg.AssetKey("parsed_files")}
    assert parsed == {p.name for p in seeds_copy.iterdir()}
    assert count(tmp_path / "wh", "SELECT count(*) FROM papers") == [(31,)]


def test_each_run_keeps_its_own_cross_file_stage_and_old_runs_are_pruned(seeds_copy: Path, tmp_path: Path, instance):
    runs = [materialize_all(seeds_copy, tmp_path / "wh", instance) for _ in range(3)]
    assert all(r.success for r in runs)
    staged = sorted(p.name for p in (tmp_path / "wh" / stage.STAGE / stage.RUNS).iterdir())
    assert staged == [runs[-1].run_id]  # the latest materializations are all the last run's
    assert stage.run_path(tmp_path / "wh", runs[-1].run_id, "papers").is_file()


def test_tables_staged_by_another_version_of_the_code_are_parsed_again(seeds_copy: Path, tmp_path: Path, instance):
    warehouse = tmp_path / "wh"
    assert materialize_all(seeds_copy, warehouse, instance).success
    current = stage.partition_path(warehouse, launch.PER_FILE_ASSET, "raw_records", "x").parents[1]
    current.rename(current.with_name(f"{launch.PER_FILE_ASSET}@0ldc0de0"))  # as an older release left it
    plan = launch.plan_run(instance, seeds_copy, warehouse)
    assert plan.to_parse == sorted(p.name for p in seeds_copy.iterdir())
    assert materialize_all(seeds_copy, warehouse, instance).success
    assert not (warehouse / stage.STAGE / f"{launch.PER_FILE_ASSET}@0ldc0de0").exists()  # pruned
    assert count(warehouse, "SELECT count(*) FROM papers") == [(31,)]


def test_batches_of_any_size_stage_and_publish_the_same_tables(tmp_path: Path, monkeypatch):
    """parsed_files stages a batch of files at a time; one file per batch must publish exactly
    what one batch of all files does (order included: the stack is read in file order)."""
    landing_dir = tmp_path / "landing"
    landing_dir.mkdir()
    for name in ("b.txt", "a.txt", "sub/c.txt", "Z.txt", "é.txt"):
        (landing_dir / name).parent.mkdir(exist_ok=True)
        (landing_dir / name).write_text(paper_list(name, *ABSTRACTS[len(name) % 3:], ABSTRACTS[0]))
    (landing_dir / "empty.txt").write_text("")
    published = {}
    for label, batch_bytes in (("one batch", 1 << 30), ("file by file", 1)):
        monkeypatch.setattr(stage, "BATCH_BYTES", batch_bytes)
        warehouse = tmp_path / label
        assert materialize_all(landing_dir, warehouse).success
        with etl_project.connect(warehouse) as con:  # each table is one data file, read in its order
            published[label] = {
                table: con.sql(f"FROM {table}").pl()
                for table in ("source_files", "raw_records", "records", "papers", "paper_occurrences")
            }
    for table, frame in published["one batch"].items():
        assert_frame_equal(frame, published["file by file"][table], check_exact=True)
    files = published["one batch"]["source_files"]["source_file"].to_list()
    assert files == sorted(files) and len(files) == 6
    for table in ("raw_records", "records"):
        frame = published["file by file"][table]
        assert frame.height == 27 and frame.equals(frame.sort("source_file", "ordinal"))
