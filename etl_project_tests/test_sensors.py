"""The landing sensor, evaluated in process with build_sensor_context: new, changed, removed and
growing files, a cursor that survives, and files another run already parsed."""

import os
import time
from pathlib import Path

import dagster as dg
import pytest

from etl_project.definitions import build_defs
from etl_project.defs import launch
from etl_project.defs.partitions import LANDING_FILES
from etl_project.defs.resources import EtlSettings
from etl_project.defs.sensors import landing_sensor
from etl_project_tests.conftest import materialize_all

# Stands for a submitted etl run: the sensor only looks at the runs' status and tags.
WAITING_STANDIN = dg.GraphDefinition("waiting_etl_run", node_defs=[]).to_job()
TEXT = "Title\n\nOne abstract about sensors, long enough to be a record.\n"


class Landing:
    """A landing folder, an instance and the sensor's cursor, ticked like the daemon would."""

    def __init__(self, root: Path, instance: dg.DagsterInstance):
        self.folder, self.warehouse, self.instance = root / "landing", root / "wh", instance
        self.folder.mkdir()
        self.cursor = None
        self.defs = build_defs(str(self.folder), str(self.warehouse))

    def write(self, name: str, text: str = TEXT, age_seconds: float = 60) -> None:
        path = self.folder / name
        path.write_text(text)
        stamp = time.time_ns() - int(age_seconds * 1e9)
        os.utime(path, ns=(stamp, stamp))

    def tick(self):
        context = dg.build_sensor_context(
            instance=self.instance,
            cursor=self.cursor,
            resources={"etl": EtlSettings(seeds_dir=str(self.folder), warehouse_dir=str(self.warehouse), settle_seconds=5)},
            repository_def=self.defs.get_repository_def(),
        )
        result = landing_sensor(context)
        self.cursor = result.cursor
        for request in result.dynamic_partitions_requests or []:  # what the daemon does with them
            if isinstance(request, dg.AddDynamicPartitionsRequest):
                self.instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))
            else:
                for key in request.partition_keys:
                    self.instance.delete_dynamic_partition(request.partitions_def_name, key)
        for request in result.run_requests or []:  # submitted, not run here
            self.instance.create_run_for_job(WAITING_STANDIN, tags=request.tags, status=dg.DagsterRunStatus.NOT_STARTED)
        return result

    def lose_waiting_runs(self) -> None:
        """The submitted runs end without running (cancelled), as a crash or a user could make them."""
        for run in self.instance.get_runs(dg.RunsFilter(statuses=[dg.DagsterRunStatus.NOT_STARTED])):
            self.instance.report_run_canceled(run)

    def partitions(self) -> list[str]:
        return list(self.instance.get_dynamic_partitions(LANDING_FILES.name))


@pytest.fixture
def folder(tmp_path: Path):
    with dg.DagsterInstance.ephemeral() as instance:
        yield Landing(tmp_path, instance)


def only_run(result) -> dg.RunRequest:
    assert len(result.run_requests) == 1, result
    return result.run_requests[0]


def test_new_files_wait_one_tick_then_one_run_parses_them_all(folder: Landing):
    folder.write("a.txt")
    folder.write("b.txt")
    first = folder.tick()
    assert not first.run_requests and "settle" in first.skip_reason.skip_message
    run = only_run(folder.tick())
    assert run.tags[launch.RANGE_START] == "a.txt" and run.tags[launch.RANGE_END] == "b.txt"
    assert run.asset_selection is None  # the whole job: parse, then republish
    assert folder.partitions() == ["a.txt", "b.txt"]
    third = folder.tick()
    assert not third.run_requests  # the cursor remembers what was requested


def test_changed_file_is_re_added_last_and_parsed_alone(folder: Landing):
    folder.write("a.txt")
    folder.write("b.txt")
    folder.tick(), folder.tick()
    folder.write("a.txt", TEXT + "\nA second abstract, added later, about the same sensors.\n")
    assert not folder.tick().run_requests  # stat changed since the last look: not settled yet
    run = only_run(folder.tick())
    assert (run.tags[launch.RANGE_START], run.tags[launch.RANGE_END]) == ("a.txt", "a.txt")
    assert folder.partitions() == ["b.txt", "a.txt"]


def test_touch_without_new_content_is_not_a_change(folder: Landing):
    folder.write("a.txt")
    folder.tick(), folder.tick()
    folder.write("a.txt", age_seconds=30)  # same bytes, new mtime
    assert not folder.tick().run_requests
    assert not folder.tick().run_requests


def test_removed_file_deletes_its_partition_and_republishes(folder: Landing):
    folder.write("a.txt")
    folder.write("b.txt")
    folder.tick(), folder.tick()
    (folder.folder / "a.txt").unlink()
    run = only_run(folder.tick())
    assert folder.partitions() == ["b.txt"]
    assert launch.RANGE_START not in run.tags
    job = folder.defs.resolve_job_def("etl")
    assert run.asset_selection == launch.cross_file_assets(job)
    assert dg.AssetKey("warehouse") in run.asset_selection and dg.AssetKey("parsed_files") not in run.asset_selection


def test_growing_file_is_not_picked_up_until_stable(folder: Landing):
    for size in range(3):  # still being copied: different size at every look
        folder.write("big.txt", TEXT * (size + 1), age_seconds=0)
        assert not folder.tick().run_requests
    folder.write("big.txt", TEXT * 3, age_seconds=0)  # stopped growing, but only just now
    assert not folder.tick().run_requests
    folder.write("big.txt", TEXT * 3, age_seconds=60)  # settle time is counted from the mtime
    folder.tick()
    run = only_run(folder.tick())
    assert run.tags[launch.RANGE_START] == "big.txt"


def test_the_cursor_string_alone_carries_the_state_across_a_restart(folder: Landing, tmp_path: Path):
    folder.write("a.txt")
    folder.tick(), folder.tick()
    restarted = Landing.__new__(Landing)  # new objects, same folder and instance, only the cursor kept
    restarted.__dict__.update(folder.__dict__, defs=build_defs(str(folder.folder), str(folder.warehouse)))
    assert isinstance(folder.cursor, str)
    assert not restarted.tick().run_requests
    folder.write("b.txt")
    restarted.tick()
    assert only_run(restarted.tick()).tags[launch.RANGE_START] == "b.txt"


def test_files_the_cli_already_parsed_are_not_parsed_again(folder: Landing):
    folder.write("a.txt")
    assert materialize_all(folder.folder, folder.warehouse, folder.instance).success
    first = folder.tick()  # first look: not settled by the sensor's own rule yet
    second = folder.tick()
    assert not first.run_requests and not second.run_requests
    assert folder.partitions() == ["a.txt"]


def test_nightly_full_refresh_syncs_the_folder_and_asks_for_every_file(tmp_path: Path):
    from etl_project.defs.schedules import nightly_full_refresh

    # A schedule's context needs an instance with a ref: a temporary persistent one, entered and
    # left within the test (it sets context-wide state that must not leak into later tests).
    with dg.instance_for_test() as instance:
        folder = Landing(tmp_path, instance)
        folder.write("a.txt")
        folder.write("b.txt")
        folder.tick(), folder.tick()
        (folder.folder / "a.txt").unlink()
        folder.write("c.txt")  # the sensor has not seen these changes: the schedule syncs them itself
        with dg.build_schedule_context(
            instance=instance,
            resources={"etl": EtlSettings(seeds_dir=str(folder.folder), warehouse_dir=str(folder.warehouse))},
            repository_def=folder.defs.get_repository_def(),
        ) as context:
            run = nightly_full_refresh(context)
        assert folder.partitions() == ["b.txt", "c.txt"]
    assert (run.tags[launch.RANGE_START], run.tags[launch.RANGE_END]) == ("b.txt", "c.txt")
    assert run.asset_selection is None and run.tags["etl_project/trigger"] == "nightly_full_refresh"
    assert nightly_full_refresh.default_status == dg.DefaultScheduleStatus.STOPPED


def test_changing_the_newest_file_again_is_parsed_again(folder: Landing):
    folder.write("a.txt")
    folder.tick(), folder.tick()
    folder.write("b.txt")
    folder.tick(), folder.tick()
    assert folder.partitions() == ["a.txt", "b.txt"]
    folder.write("b.txt", TEXT + "\\nAnother abstract, added to the newest file after it was parsed.\\n")
    folder.tick()
    run = only_run(folder.tick())
    assert (run.tags[launch.RANGE_START], run.tags[launch.RANGE_END]) == ("b.txt", "b.txt")
    assert folder.partitions() == ["a.txt", "b.txt"]  # already last: nothing to move


def test_a_file_whose_run_never_parsed_it_is_asked_for_again(folder: Landing):
    folder.write("a.txt")
    folder.tick()
    assert only_run(folder.tick()).tags[launch.RANGE_START] == "a.txt"
    assert not folder.tick().run_requests  # its run is submitted: wait for it
    folder.lose_waiting_runs()  # the run was cancelled before it parsed anything
    assert only_run(folder.tick()).tags[launch.RANGE_START] == "a.txt"
    folder.lose_waiting_runs()
    assert materialize_all(folder.folder, folder.warehouse, folder.instance).success  # parsed at last
    assert not folder.tick().run_requests


def test_a_tick_that_would_remove_every_published_file_skips_and_says_how_to_allow_it(folder: Landing, monkeypatch):
    from etl_project_tests.conftest import materialize_all

    folder.write("a.txt")
    folder.write("b.txt")
    folder.tick(), folder.tick()
    assert materialize_all(folder.folder, folder.warehouse, folder.instance).success  # the two files published
    for name in ("a.txt", "b.txt"):  # an unmounted share or a failed sync looks like this
        (folder.folder / name).unlink()
    result = folder.tick()
    assert not result.run_requests and not result.dynamic_partitions_requests
    reason = result.skip_reason.skip_message
    assert "all 2 published file(s)" in reason and "--allow-removals" in reason and "ETL_ALLOW_REMOVALS=1" in reason
    assert folder.partitions() == ["a.txt", "b.txt"]
    monkeypatch.setenv("ETL_ALLOW_REMOVALS", "1")
    assert only_run(folder.tick()) and folder.partitions() == []


def test_a_tick_over_other_folders_than_the_instance_serves_changes_nothing(tmp_path: Path):
    with dg.instance_for_test() as instance:
        served = Landing(tmp_path, instance)
        served.write("a.txt")
        served.tick(), served.tick()
        assert served.partitions() == ["a.txt"]
        (tmp_path / "other").mkdir()
        other = Landing(tmp_path / "other", instance)  # another landing folder and warehouse
        result = other.tick()
        assert not result.run_requests and not result.dynamic_partitions_requests
        assert f"serves landing folder {served.folder}" in result.skip_reason.skip_message
        assert served.partitions() == ["a.txt"]
