"""What `etl-project run` refuses to do, in one or two lines, before it changes anything: another
instance's folders, an emptied landing folder, an unwritable warehouse; and how it words what
happened. (The commands that read the lake are tested in test_cli.py.)"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from etl_project import cli, landing, settings
from etl_project_tests import warehouse_helpers

CLI = Path(sys.executable).with_name("etl-project")


def etl_project(*args: str, home: Path | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "DAGSTER_HOME"}
    if home is not None:
        env["DAGSTER_HOME"] = str(home)
    return subprocess.run([str(CLI), *args], env=env, capture_output=True, text=True, timeout=600)


def test_a_run_over_other_folders_or_an_emptied_landing_folder_is_refused(seeds_copy: Path, tmp_path: Path, monkeypatch):
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path / "dagster_home")}
    (tmp_path / "dagster_home").mkdir()
    cli = Path(sys.executable).with_name("etl-project")
    warehouse = tmp_path / "wh"
    done = subprocess.run(
        [str(cli), "run", "--seeds", str(seeds_copy), "--warehouse", str(warehouse)],
        env=env, capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "files:      2 (2 ok, 0 empty, 0 rejected)" in done.stdout
    assert "papers:     31 (7 duplicate records" in done.stdout
    assert "checks:     11 passed, 0 failed" in done.stdout

    query = "SELECT count(*) AS papers, sum(source_count = 2) AS shared FROM papers"
    assert warehouse_helpers.query(warehouse, query) == [(31, 7)]
    published = warehouse_helpers.current_snapshot(warehouse)

    # The run is in the instance's history, as the UI would show it.
    import dagster as dg

    monkeypatch.setenv("DAGSTER_HOME", env["DAGSTER_HOME"])
    with dg.DagsterInstance.get() as instance:
        runs = instance.get_runs()
        assert [r.job_name for r in runs] == ["etl"]
        assert runs[0].is_success

    # The instance serves this landing folder and warehouse: a run over others is refused.
    other = etl_project("run", "--seeds", str(seeds_copy), "--warehouse", str(tmp_path / "other"), home=tmp_path / "dagster_home")
    assert other.returncode == 1 and len(other.stdout.splitlines()) == 2, other.stdout + other.stderr
    assert f"serves landing folder {seeds_copy} and warehouse {warehouse}" in other.stdout
    assert f"DAGSTER_HOME={tmp_path / 'other' / '.dagster_home'}" in other.stdout

    # An emptied landing folder (an unmounted share, a failed sync) never empties the warehouse.
    for path in seeds_copy.iterdir():
        path.unlink()
    emptied = etl_project("run", "--seeds", str(seeds_copy), "--warehouse", str(warehouse), home=tmp_path / "dagster_home")
    assert emptied.returncode == 1, emptied.stdout + emptied.stderr
    assert emptied.stdout.splitlines() == [
        "run NOT started: it would remove all 2 published file(s): none of them is in the landing folder any more "
        "(a mistyped path, an unmounted share or a failed sync?); nothing was changed. If those files really are "
        "gone, run again with --allow-removals",
        "warehouse:  not changed; the previous snapshot stays current",
    ]
    assert warehouse_helpers.query(warehouse, query) == [(31, 7)]
    assert warehouse_helpers.current_snapshot(warehouse) == published  # no new snapshot
    with dg.DagsterInstance.get() as instance:
        assert len(instance.get_runs()) == 1


def test_a_missing_landing_folder_or_a_file_is_named_as_such(tmp_path: Path):
    missing = etl_project("run", "--seeds", str(tmp_path / "nope"), "--warehouse", str(tmp_path / "wh"))
    assert missing.returncode == 1
    assert missing.stdout.splitlines() == [
        f"run NOT started: landing folder does not exist: {tmp_path / 'nope'}",
        "warehouse:  nothing was published (the warehouse has no earlier snapshot)",
    ]
    (tmp_path / "list.txt").write_text("Title\n\nAn abstract.\n")
    a_file = etl_project("run", "--seeds", str(tmp_path / "list.txt"), "--warehouse", str(tmp_path / "wh"))
    assert a_file.returncode == 1
    assert f"landing folder {tmp_path / 'list.txt'} is a file, not a folder" in a_file.stdout.splitlines()[0]
    assert not (tmp_path / "wh").exists()


def test_a_warehouse_that_cannot_be_written_is_refused_in_one_line(seeds_copy: Path, tmp_path: Path):
    (tmp_path / "a_file").write_text("")
    # A real failure even as root (modes do not stop root): the warehouse's parent is a file.
    done = etl_project("run", "--seeds", str(seeds_copy), "--warehouse", str(tmp_path / "a_file" / "wh"))
    assert done.returncode == 1 and done.stderr == ""
    assert done.stdout.splitlines()[0] == (
        f"run NOT started: cannot create the warehouse {tmp_path / 'a_file' / 'wh'}: Not a directory; "
        f"choose another with --warehouse or ${settings.WAREHOUSE_ENV}"
    )
    assert len(done.stdout.splitlines()) == 2


def test_preflight_write_probe_fails_on_folders_that_cannot_be_written(tmp_path: Path):
    assert cli.writable_folder(tmp_path / "new" / "wh", "warehouse", "advice") is None
    assert (tmp_path / "new" / "wh").is_dir() and list((tmp_path / "new" / "wh").iterdir()) == []
    # /proc/self exists and is a folder, but nothing can be created in it, root or not.
    problem = cli.writable_folder(Path("/proc/self"), "Dagster instance folder", "set DAGSTER_HOME")
    assert problem and problem.startswith("cannot write in the Dagster instance folder /proc/self") and problem.endswith("set DAGSTER_HOME")


def test_a_failed_step_is_one_line_with_its_cause_not_a_traceback(seeds_copy: Path, tmp_path: Path):
    warehouse = tmp_path / "wh"
    warehouse.mkdir()
    (warehouse / ".stage").write_text("")  # the stage cannot be created: the parse step fails
    done = etl_project("run", "--seeds", str(seeds_copy), "--warehouse", str(warehouse))
    assert done.returncode == 1
    output = done.stdout + done.stderr
    assert "Traceback" not in output and "Stack Trace" not in output and len(output.splitlines()) <= 7, output
    lines = done.stdout.splitlines()
    assert lines[1] == "this run:   did not parse its 2 file(s) (2 new, 0 changed), 0 removed, 0 unchanged"
    assert any(line.startswith("error in step parsed_files: NotADirectoryError") for line in lines)
    assert any("the run's log in the Dagster UI (run " in line for line in lines)
    assert lines[-1] == "warehouse:  NOT published (a step failed); the warehouse has no earlier snapshot"
    # The run is the warehouse's own (DAGSTER_HOME was not set), and its log keeps the traceback.
    import dagster as dg

    with dg.DagsterInstance.local_temp(str(warehouse / ".dagster_home")) as instance:
        [run] = instance.get_runs()
        failures = [e for e in instance.all_logs(run.run_id) if e.dagster_event and e.dagster_event.is_step_failure]
        assert failures and "stage.py" in failures[0].dagster_event.step_failure_data.error.cause.to_string()


def test_help_is_plain_text(capsys):
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    with pytest.raises(SystemExit):
        cli.main(["run", "--help"])
    help_text = capsys.readouterr().out
    assert "``" not in help_text and "--allow-removals" in help_text


class FakeResult:
    run_id, success = "r1", True
    checks: list = []

    def get_asset_materialization_events(self):
        return []

    def get_asset_check_evaluations(self):
        return self.checks

    def get_step_failure_events(self):
        return []


def test_summary_wording_says_what_happened():
    changes = landing.Changes(unchanged=["a", "b"])
    full = landing.make_plan(changes, full=True, published=["a", "b"])
    summary = cli.summarize(FakeResult(), full, instance_home="/h").splitlines()
    assert summary[1] == "this run:   parsed 2 file(s) (full refresh: 0 new, 0 changed, 2 unchanged), 0 removed"
    incremental = landing.make_plan(changes, published=["a", "b"])
    assert cli.summarize(FakeResult(), incremental, "/h").splitlines()[1] == (
        "this run:   parsed 0 file(s) (0 new, 0 changed), 0 removed, 2 unchanged")
    failed = FakeResult()
    failed.success = False
    assert cli.summarize(failed, incremental, "/h", previous=False).splitlines()[-1] == (
        "warehouse:  NOT published (the run failed); the warehouse has no earlier snapshot")
    assert cli.summarize(failed, incremental, "/h", previous=True).splitlines()[-1] == (
        "warehouse:  NOT published (the run failed); the previous snapshot stays current")


def test_a_warn_only_failure_is_counted_as_failed_and_not_blocking():
    import dagster as dg

    def evaluation(name: str, passed: bool, severity: dg.AssetCheckSeverity):
        return dg.AssetCheckEvaluation(asset_key=dg.AssetKey("papers"), check_name=name, passed=passed, severity=severity)

    result = FakeResult()
    result.checks = [evaluation("papers_suite", False, dg.AssetCheckSeverity.WARN),
                     evaluation("records_suite", True, dg.AssetCheckSeverity.ERROR)]
    plan = landing.make_plan(landing.Changes(unchanged=["a"]), published=["a"])
    lines = cli.summarize(result, plan, "/h").splitlines()
    assert "checks:     1 passed, 1 failed (1 WARN, not blocking)" in lines
    assert "  FAILED papers:papers_suite (WARN, not blocking)" in lines
    result.checks = [evaluation("papers_suite", False, dg.AssetCheckSeverity.ERROR)]
    result.success = False
    lines = cli.summarize(result, plan, "/h", previous=True).splitlines()
    assert "  FAILED papers:papers_suite (ERROR, blocks the publish)" in lines
    assert lines[-1] == "warehouse:  NOT published (a blocking check failed); the previous snapshot stays current"


def test_each_warehouse_has_its_own_instance_unless_dagster_home_is_set(tmp_path: Path):
    assert settings.dagster_home(settings.PROJECT_ROOT / "warehouse", environ={}) == settings.default_dagster_home()
    assert settings.dagster_home(tmp_path / "wh", environ={}) == tmp_path / "wh" / ".dagster_home"
    assert settings.dagster_home(tmp_path / "wh", environ={"DAGSTER_HOME": str(tmp_path / "h")}) == tmp_path / "h"




def test_removals_are_counted_against_what_the_lake_publishes(seeds_copy: Path, tmp_path: Path):
    """Files parsed but never published (their run failed) are not 'published': emptying the
    folder then is no removal of published files; once they are in the lake, it is."""
    import dagster as dg

    from etl_project.defs import launch
    from etl_project_tests.conftest import SEEDS, materialize_all

    warehouse = tmp_path / "wh"
    with dg.DagsterInstance.ephemeral() as instance:
        empty = tmp_path / "empty"
        empty.mkdir()
        assert launch.published_keys(launch.plan_run(instance, empty, warehouse), warehouse) == frozenset()
        assert materialize_all(seeds_copy, warehouse, instance).success
        for path in seeds_copy.iterdir():
            path.unlink()
        plan = launch.plan_run(instance, seeds_copy, warehouse)
        assert launch.published_keys(plan, warehouse) == {landing.file_key(p.name) for p in SEEDS.glob("*.txt")}
        assert "remove all 2 published file(s)" in launch.removal_refusal(plan, warehouse)
