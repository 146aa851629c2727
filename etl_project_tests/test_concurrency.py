"""Two runs at once, through the project's instance settings: the pool serializes their steps,
both succeed, the warehouse is whole; two processes claiming the pool's one slot at the same
instant never both get it; and a killed run's pool slot does not block the next run."""

import multiprocessing
import os
import shutil
import subprocess
import sys
from pathlib import Path

import dagster as dg
import duckdb
import pytest

from etl_project import settings
from etl_project.defs import instance_storage, launch
from etl_project.defs.partitions import WAREHOUSE_POOL

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
    outputs = [p.communicate(timeout=600)[0] for p in (first, second)]
    assert [p.returncode for p in (first, second)] == [0, 0], "\n".join(outputs)

    with dg.DagsterInstance.get() as instance:
        runs = instance.get_runs()
        assert len(runs) == 2 and all(r.is_success for r in runs)
        # The pool the steps claim has the one slot the instance settings give it.
        assert instance.event_log_storage.get_concurrency_info(WAREHOUSE_POOL).slot_count == 1
        spans = sorted(span for run in runs for span in step_intervals(instance, run.run_id))
    assert len(spans) >= 2 * 8
    for (_, end, step), (start, _, next_step) in zip(spans, spans[1:]):
        assert start >= end, f"{next_step} started before {step} ended: steps of two runs overlapped"

    with duckdb.connect(str(warehouse / "warehouse.duckdb"), read_only=True) as con:
        assert con.sql("SELECT (SELECT count(*) FROM raw_records), (SELECT count(*) FROM papers)").fetchone() == (38, 31)


def claim_in_rounds(run_id: str, rounds: int, barrier, results) -> None:
    """One process of the race below: claim a fresh step's slot when the other does, then free it."""
    with dg.DagsterInstance.get() as instance:
        storage = instance.event_log_storage
        claimed = []
        for step in range(rounds):
            barrier.wait()
            claimed.append(storage.claim_concurrency_slot(WAREHOUSE_POOL, run_id, f"step_{step}").is_claimed)
            barrier.wait()
            storage.free_concurrency_slots_for_run(run_id)
        results.put(claimed)


def test_two_processes_claiming_at_once_never_both_hold_the_one_slot(home: Path):
    # Dagster's own SQLite storage lost this race in over a third of the rounds.
    with dg.DagsterInstance.get() as instance:
        instance.event_log_storage.set_concurrency_slots(WAREHOUSE_POOL, 1)
    rounds = 40
    spawn = multiprocessing.get_context("spawn")
    barrier, results = spawn.Barrier(2, timeout=120), spawn.Queue()  # a crashed racer must not hang the other
    racers = [
        spawn.Process(target=claim_in_rounds, args=(f"run_{i}", rounds, barrier, results), daemon=True) for i in range(2)
    ]
    for racer in racers:
        racer.start()
    first, second = results.get(timeout=300), results.get(timeout=300)
    for racer in racers:
        racer.join()
    assert not any(a and b for a, b in zip(first, second)), "both processes held the pool's one slot"
    # One of them got it each time: the lock serializes claims, it does not refuse them.
    assert all(a or b for a, b in zip(first, second))


def test_a_killed_run_does_not_hold_the_pool_forever(seeds_copy: Path, tmp_path: Path, home: Path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    with dg.DagsterInstance.get() as instance:
        instance.event_log_storage.initialize_concurrency_limit_to_default(WAREHOUSE_POOL)
        ghost = instance.create_run_for_job(
            dg.GraphDefinition("ghost", node_defs=[]).to_job(), run_id=None,
            tags={launch.PID_TAG: str(dead.pid), launch.HOST_TAG: launch.process_tags()[launch.HOST_TAG]},
        )
        instance.handle_run_event(ghost.run_id, dg.DagsterEvent(
            dg.DagsterEventType.RUN_START.value, job_name="ghost", message="started"))
        claim = instance.event_log_storage.claim_concurrency_slot(WAREHOUSE_POOL, ghost.run_id, "ghost_step")
        assert claim.is_claimed  # the slot is taken by a process that no longer exists

    run = start_cli(seeds_copy, tmp_path / "wh", home)
    output = run.communicate(timeout=300)[0]
    assert run.returncode == 0, output

    with dg.DagsterInstance.get() as instance:
        assert instance.get_run_by_id(ghost.run_id).status == dg.DagsterRunStatus.FAILURE


def test_a_home_without_the_project_storage_is_told_apart(home: Path, tmp_path: Path):
    with dg.DagsterInstance.get() as instance:
        assert instance_storage.serializes_slots(instance)
    stock = tmp_path / "stock_home"
    stock.mkdir()
    (stock / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    with dg.DagsterInstance.from_config(str(stock)) as instance:
        assert not instance_storage.serializes_slots(instance)
