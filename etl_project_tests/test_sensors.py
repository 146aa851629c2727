"""The landing sensor, evaluated in process with build_sensor_context: new, changed, removed and
growing files, a cursor that survives, files another run already parsed, and the runs it asks
for, executed in process as the daemon would launch them."""

import os
import time
from pathlib import Path

import dagster as dg
import pytest

from etl_project.definitions import build_defs
from etl_project.defs import launch
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
        self.requested: list[dg.RunRequest] = []  # the last tick's that asked for a run
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
        for request in result.run_requests or []:  # submitted, not run here
            self.instance.create_run_for_job(WAITING_STANDIN, tags=request.tags, status=dg.DagsterRunStatus.NOT_STARTED)
        self.requested = list(result.run_requests) if result.run_requests else self.requested
        return result

    def lose_waiting_runs(self) -> None:
        """The submitted runs end without running (cancelled), as a crash or a user could make them."""
        for run in self.instance.get_runs(dg.RunsFilter(statuses=[dg.DagsterRunStatus.NOT_STARTED])):
            self.instance.report_run_canceled(run)

    def run_requested(self) -> dg.ExecuteInProcessResult:
        """The last tick's run, executed as the daemon would launch it (its stand-in ends)."""
        [request] = self.requested
        self.lose_waiting_runs()
        result = self.defs.resolve_job_def("etl").execute_in_process(
            instance=self.instance, run_config=request.run_config, tags=request.tags)
        assert result.success
        return result

    def parsed(self) -> list[str]:
        """The files the last parse's manifest holds."""
        return launch.last_manifest(self.instance, self.warehouse)["key"].to_list()


@pytest.fixture
def folder(tmp_path: Path):
    with dg.DagsterInstance.ephemeral() as instance:
        yield Landing(tmp_path, instance)


def only_run(result) -> dg.RunRequest:
    assert len(result.run_requests) == 1, result
    return result.run_requests[0]


def parse_count(result: dg.ExecuteInProcessResult) -> int:
    [event] = [e for e in result.get_asset_materialization_events() if e.asset_key == dg.AssetKey("parsed_files")]
    return event.step_materialization_data.materialization.metadata["files_parsed"].value


def test_new_files_wait_one_tick_then_one_run_parses_them_all(folder: Landing):
    folder.write("a.txt")
    folder.write("b.txt")
    first = folder.tick()
    assert not first.run_requests and "settle" in first.skip_reason.skip_message
    run = only_run(folder.tick())
    assert run.run_config == launch.parse_config(settle_seconds=5)  # the run's parse step waits for growing files too
    assert run.asset_selection is None and run.tags[launch.TRIGGER_TAG] == "landing_sensor"
    folder.write("c.txt")
    waiting = folder.tick()
    assert not waiting.run_requests and "still queued or running" in waiting.skip_reason.skip_message
    assert parse_count(folder.run_requested()) == 3  # c settled before the run started: parsed too
    assert folder.parsed() == ["a.txt", "b.txt", "c.txt"]
    assert not folder.tick().run_requests


def test_changed_file_waits_to_settle_then_is_parsed_alone(folder: Landing):
    folder.write("a.txt")
    folder.write("b.txt")
    folder.tick(), folder.tick()
    folder.run_requested()
    folder.write("a.txt", TEXT + "\nA second abstract, added later, about the same sensors.\n")
    assert not folder.tick().run_requests  # stat changed since the last look: not settled yet
    only_run(folder.tick())
    assert parse_count(folder.run_requested()) == 1


def test_touch_without_new_content_is_not_a_change(folder: Landing):
    folder.write("a.txt")
    folder.tick(), folder.tick()
    folder.run_requested()
    folder.write("a.txt", age_seconds=30)  # same bytes, new mtime
    assert not folder.tick().run_requests
    assert not folder.tick().run_requests


def test_removed_file_leads_to_a_run_that_publishes_without_it(folder: Landing):
    from etl_project_tests.warehouse_helpers import query

    folder.write("a.txt")
    folder.write("b.txt", TEXT.replace("One abstract", "Another abstract"))
    folder.tick(), folder.tick()
    folder.run_requested()
    (folder.folder / "a.txt").unlink()
    only_run(folder.tick())
    assert parse_count(folder.run_requested()) == 0
    assert folder.parsed() == ["b.txt"]
    assert query(folder.warehouse, "SELECT source_file FROM source_files") == [("b.txt",)]


def test_a_run_started_by_the_sensor_leaves_files_still_growing_for_later(folder: Landing):
    folder.write("a.txt")
    folder.tick(), folder.tick()
    folder.write("late.txt", age_seconds=0)  # appeared after the tick: the run must not take it half-copied
    folder.run_requested()
    assert folder.parsed() == ["a.txt"]


def test_growing_file_is_not_picked_up_until_stable(folder: Landing):
    for size in range(3):  # still being copied: different size at every look
        folder.write("big.txt", TEXT * (size + 1), age_seconds=0)
        assert not folder.tick().run_requests
    folder.write("big.txt", TEXT * 3, age_seconds=0)  # stopped growing, but only just now
    assert not folder.tick().run_requests
    folder.write("big.txt", TEXT * 3, age_seconds=60)  # settle time is counted from the mtime
    folder.tick()
    only_run(folder.tick())
    folder.run_requested()
    assert folder.parsed() == ["big.txt"]


def test_the_cursor_string_alone_carries_the_state_across_a_restart(folder: Landing, tmp_path: Path):
    folder.write("a.txt")
    folder.tick(), folder.tick()
    folder.run_requested()
    restarted = Landing.__new__(Landing)  # new objects, same folder and instance, only the cursor kept
    restarted.__dict__.update(folder.__dict__, defs=build_defs(str(folder.folder), str(folder.warehouse)))
    assert isinstance(folder.cursor, str)
    assert not restarted.tick().run_requests
    folder.write("b.txt")
    restarted.tick()
    only_run(restarted.tick())


def test_files_the_cli_already_parsed_are_not_parsed_again(folder: Landing):
    folder.write("a.txt")
    assert materialize_all(folder.folder, folder.warehouse, folder.instance).success
    first = folder.tick()  # first look: not settled by the sensor's own rule yet
    second = folder.tick()
    assert not first.run_requests and not second.run_requests


def test_nightly_full_refresh_asks_for_every_file(tmp_path: Path):
    from etl_project.defs.schedules import nightly_full_refresh

    # A schedule's context needs an instance with a ref: a temporary persistent one, entered and
    # left within the test (it sets context-wide state that must not leak into later tests).
    with dg.instance_for_test() as instance:
        folder = Landing(tmp_path, instance)
        folder.write("a.txt")
        folder.write("b.txt")
        with dg.build_schedule_context(
            instance=instance,
            resources={"etl": EtlSettings(seeds_dir=str(folder.folder), warehouse_dir=str(folder.warehouse))},
            repository_def=folder.defs.get_repository_def(),
        ) as context:
            run = nightly_full_refresh(context)
    assert run.run_config == launch.parse_config(full=True)
    assert run.asset_selection is None and run.tags["etl_project/trigger"] == "nightly_full_refresh"
    assert nightly_full_refresh.default_status == dg.DefaultScheduleStatus.STOPPED


def test_a_file_whose_run_never_parsed_it_is_asked_for_again(folder: Landing):
    folder.write("a.txt")
    folder.tick()
    only_run(folder.tick())
    assert not folder.tick().run_requests  # its run is submitted: wait for it
    folder.lose_waiting_runs()  # the run was cancelled before it parsed anything
    only_run(folder.tick())
    folder.lose_waiting_runs()
    assert materialize_all(folder.folder, folder.warehouse, folder.instance).success  # parsed at last
    assert not folder.tick().run_requests


def test_a_tick_that_would_remove_every_published_file_skips_and_says_how_to_allow_it(folder: Landing, monkeypatch):

    folder.write("a.txt")
    folder.write("b.txt")
    folder.tick(), folder.tick()
    folder.run_requested()  # the two files published
    for name in ("a.txt", "b.txt"):  # an unmounted share or a failed sync looks like this
        (folder.folder / name).unlink()
    result = folder.tick()
    assert not result.run_requests
    reason = result.skip_reason.skip_message
    assert "all 2 published file(s)" in reason and "--allow-removals" in reason and "ETL_ALLOW_REMOVALS=1" in reason
    monkeypatch.setenv("ETL_ALLOW_REMOVALS", "1")
    assert only_run(folder.tick()).run_config == launch.parse_config(allow_removals=True, settle_seconds=5)
    assert parse_count(folder.run_requested()) == 0 and folder.parsed() == []


def test_a_tick_over_other_folders_than_the_instance_serves_changes_nothing(tmp_path: Path):
    with dg.instance_for_test() as instance:
        served = Landing(tmp_path, instance)
        served.write("a.txt")
        served.tick(), served.tick()
        served.run_requested()
        (tmp_path / "other").mkdir()
        other = Landing(tmp_path / "other", instance)  # another landing folder and warehouse
        result = other.tick()
        assert not result.run_requests
        assert f"serves landing folder {served.folder}" in result.skip_reason.skip_message
        assert served.parsed() == ["a.txt"]


def test_a_snapshot_behind_the_last_parse_gets_one_run_to_catch_up(folder: Landing):
    folder.write("a.txt")
    folder.tick(), folder.tick()
    folder.run_requested()
    folder.write("b.txt", TEXT.replace("One abstract", "A second abstract"))
    # A run that parsed b and was killed before it published: the stage is ahead of the snapshot.
    job = folder.defs.resolve_job_def("etl")
    assert job.execute_in_process(instance=folder.instance, asset_selection=[dg.AssetKey("parsed_files")]).success
    assert folder.parsed() == ["a.txt", "b.txt"]
    run = only_run(folder.tick())  # nothing new to parse (b was parsed, as it is now), but the snapshot lags
    assert run.run_config == launch.parse_config(settle_seconds=5)
    folder.lose_waiting_runs()  # that run failed too
    assert not folder.tick().run_requests  # asked for once per parse: not again at every tick
    folder.write("c.txt", TEXT.replace("One abstract", "A third abstract"))
    folder.tick()
    only_run(folder.tick())
    result = folder.run_requested()
    assert parse_count(result) == 1
    from etl_project_tests.warehouse_helpers import query

    assert query(folder.warehouse, "SELECT source_file FROM source_files ORDER BY 1") == [("a.txt",), ("b.txt",), ("c.txt",)]
    assert not folder.tick().run_requests
