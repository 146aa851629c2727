"""Two runs at once, through the project's instance settings: the run lock makes them take
turns (all of one run's steps, then all of the other's), the waiting one says which run it waits
for, both succeed, the warehouse is whole; and a run whose process was killed is marked failed by
the next one."""

import logging
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

import etl_project
from etl_project import publish, settings
from etl_project.defs import launch

CLI = Path(sys.executable).with_name("etl-project")


@pytest.fixture
def home(tmp_path: Path, monkeypatch) -> Path:
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copyfile(settings.instance_settings(), home / "dagster.yaml")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    return home


def start_cli(landing: Path, warehouse: Path, home: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [str(CLI), "run", "--seeds", str(landing), "--warehouse", str(warehouse), *extra],
        env={**os.environ, "DAGSTER_HOME": str(home)},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )


def step_intervals(instance: dg.DagsterInstance, run_id: str) -> list[tuple[float, float, str]]:
    starts, spans = {}, []
    for record in instance.all_logs(run_id):
        event = record.dagster_event
        if event is None:
            continue
        if event.event_type == dg.DagsterEventType.STEP_START:
            starts[event.step_key] = record.timestamp
        elif event.event_type in (dg.DagsterEventType.STEP_SUCCESS, dg.DagsterEventType.STEP_FAILURE):
            spans.append((starts[event.step_key], record.timestamp, event.step_key))
    return spans


def test_two_runs_at_once_take_turns_and_both_publish(seeds_copy: Path, tmp_path: Path, home: Path):
    warehouse = tmp_path / "wh"
    first = start_cli(seeds_copy, warehouse, home, "--full")
    second = start_cli(seeds_copy, warehouse, home, "--full")
    outputs = {p.pid: p.communicate(timeout=600)[0] for p in (first, second)}
    assert [p.returncode for p in (first, second)] == [0, 0], "\n".join(outputs.values())

    # One waited for the other and said so on its terminal, naming the run and its process.
    waits = {pid: re.findall(r"waiting for run (\S+) \(pid (\d+)\) to finish", out) for pid, out in outputs.items()}
    (waiter, [(holder_run, holder_pid)]), = [(pid, found) for pid, found in waits.items() if found]
    assert int(holder_pid) == (first.pid if waiter == second.pid else second.pid)
    assert f"run {holder_run} succeeded" in outputs[int(holder_pid)]

    with dg.DagsterInstance.get() as instance:
        runs = instance.get_runs()
        assert len(runs) == 2 and all(r.is_success for r in runs)
        by_run = {run.run_id: sorted(step_intervals(instance, run.run_id)) for run in runs}
        (waited_run,) = {run.run_id for run in runs} - {holder_run}
        # ... and in its log, as a warning.
        assert any(f"waiting for run {holder_run} (pid {holder_pid}) to finish" in (r.user_message or "")
                   and r.level == logging.WARNING for r in instance.all_logs(waited_run))
    assert all(len(spans) >= 8 for spans in by_run.values())
    # All steps of the run that held the lock came before all steps of the one that waited.
    assert max(end for _, end, _ in by_run[holder_run]) <= min(start for start, _, _ in by_run[waited_run]), \
        "steps of two runs overlapped"

    with etl_project.connect(warehouse) as con:
        assert con.sql("SELECT (SELECT count(*) FROM raw_records), (SELECT count(*) FROM papers)").fetchone() == (38, 31)
        snapshots = publish.history(con).drop_nulls("run_id")
    # One whole snapshot per run, the waiting run's last.
    assert snapshots["run_id"].to_list() == [waited_run, holder_run]
    assert snapshots.select("papers", "records", "files").rows() == [(31, 38, 2), (31, 38, 2)]


def test_a_killed_run_is_marked_failed_by_the_next_run(seeds_copy: Path, tmp_path: Path, home: Path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    with dg.DagsterInstance.get() as instance:
        ghost = instance.create_run_for_job(
            dg.GraphDefinition("ghost", node_defs=[]).to_job(), run_id=None,
            tags={launch.PID_TAG: str(dead.pid), launch.HOST_TAG: launch.process_tags()[launch.HOST_TAG]},
        )
        instance.handle_run_event(ghost.run_id, dg.DagsterEvent(
            dg.DagsterEventType.RUN_START.value, job_name="ghost", message="started"))

    run = start_cli(seeds_copy, tmp_path / "wh", home)
    output = run.communicate(timeout=300)[0]
    assert run.returncode == 0, output

    with dg.DagsterInstance.get() as instance:
        assert instance.get_run_by_id(ghost.run_id).status == dg.DagsterRunStatus.FAILURE

