"""The warehouse's run lock (etl_project/run_lock.py): processes contending for it take turns, the
waiter names the holder's run and pid, a killed holder releases it; the same with a PostgreSQL
catalog, on a real server (Debian's `postgresql` package, started here); and a pipeline run takes
it before its first step, also a run of only the cross-file assets."""

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import dagster as dg
import pytest

from etl_project import run_lock, settings

ROOT = Path(__file__).resolve().parents[1]

# One lock holder: takes the lock as run <run_id>, says so, holds it until a line on stdin (or
# until killed), says it is releasing it. Log lines go to stdout, prefixed with their time.
HOLDER = """
import logging, sys, time
from pathlib import Path
from etl_project import run_lock
catalog, warehouse, run_id = sys.argv[1:4]
logging.basicConfig(stream=sys.stdout, level=logging.INFO, format="%(created).6f %(levelname)s %(message)s")
log = logging.getLogger("holder")
with run_lock.hold(catalog, Path(warehouse), run_id, log, poll_seconds=0.05):
    print(f"{time.time():.6f} HOLDING", flush=True)
    sys.stdin.readline()
    print(f"{time.time():.6f} RELEASING", flush=True)
"""


class Holder:
    def __init__(self, catalog: str, warehouse: Path, run_id: str):
        self.run_id = run_id
        self.proc = subprocess.Popen(
            [sys.executable, "-c", HOLDER, catalog, str(warehouse), run_id], cwd=ROOT,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
        self.lines: list[str] = []

    @property
    def pid(self) -> int:
        return self.proc.pid

    def wait_for(self, word: str, timeout: float = 60) -> float:
        """Read lines until one contains ``word``; returns the time it carries."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                raise AssertionError(f"{self.run_id} ended before saying {word!r}:\n" + "".join(self.lines))
            self.lines.append(line)
            if word in line:
                return float(line.split()[0])
        raise AssertionError(f"{self.run_id} did not say {word!r} in {timeout} s:\n" + "".join(self.lines))

    def release(self) -> float:
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()
        released = self.wait_for("RELEASING")
        assert self.proc.wait(timeout=30) == 0, "".join(self.lines) + self.proc.stdout.read()
        return released

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.kill()


@pytest.fixture
def holders():
    started = []

    def start(catalog: str, warehouse: Path, run_id: str) -> Holder:
        holder = Holder(catalog, warehouse, run_id)
        started.append(holder)
        return holder

    yield start
    for holder in started:
        holder.stop()


def take_turns(start, catalog: str, warehouse: Path) -> None:
    """The second holder waits, names the first, and holds the lock only once the first let go."""
    first = start(catalog, warehouse, "run-one")
    first.wait_for("HOLDING")
    second = start(catalog, warehouse, "run-two")
    second.wait_for(f"WARNING waiting for run run-one (pid {first.pid}) to finish")
    time.sleep(0.5)
    assert not any("HOLDING" in line for line in second.lines), "both held the lock"
    released = first.release()
    holding = second.wait_for("HOLDING")
    assert holding >= released
    assert any("holds the warehouse lock" in line and "after waiting" in line for line in second.lines)
    second.release()


def a_killed_holder_lets_go(start, catalog: str, warehouse: Path) -> None:
    first = start(catalog, warehouse, "run-killed")
    first.wait_for("HOLDING")
    second = start(catalog, warehouse, "run-next")
    second.wait_for(f"waiting for run run-killed (pid {first.pid}) to finish")
    first.kill()
    second.wait_for("HOLDING", timeout=30)
    second.release()


# --- the file lock (the embedded catalog) ---------------------------------------------------


def test_two_processes_take_turns_for_the_file_lock(holders, tmp_path: Path):
    warehouse = tmp_path / "wh"
    take_turns(holders, settings.catalog(warehouse), warehouse)
    assert (warehouse / ".run.lock").read_text() == ""  # the last holder erased its name


def test_a_killed_holder_releases_the_file_lock(holders, tmp_path: Path):
    warehouse = tmp_path / "wh"
    a_killed_holder_lets_go(holders, settings.catalog(warehouse), warehouse)


def test_the_lock_belongs_to_the_catalog():
    warehouse = Path("/srv/wh")
    assert run_lock.lock_file("sqlite:/srv/wh/catalog.sqlite", warehouse) == Path("/srv/wh/.run.lock")
    assert run_lock.lock_file("ducklake:sqlite:/shared/lake/meta.sqlite", warehouse) == Path("/shared/lake/.run.lock")
    assert run_lock.lock_file("/shared/lake/meta.ducklake", warehouse) == Path("/shared/lake/.run.lock")
    assert run_lock.lock_file("mysql:db=lake", warehouse) == Path("/srv/wh/.run.lock")
    conninfo = "dbname=etl host=127.0.0.1 port=5433 user=postgres"
    assert run_lock.postgres_conninfo(f"postgres:{conninfo}") == conninfo
    assert run_lock.postgres_conninfo(f"ducklake:postgres:{conninfo}") == conninfo
    assert run_lock.postgres_conninfo("postgresql://u@db/etl") == "postgresql://u@db/etl"
    assert run_lock.postgres_conninfo("sqlite:/srv/wh/catalog.sqlite") is None
    assert run_lock.advisory_key() == run_lock.advisory_key()
    assert -(2**63) <= run_lock.advisory_key() < 2**63


def test_the_same_run_taking_it_twice_in_one_process_does_not_wait_for_itself(tmp_path: Path):
    catalog, log = settings.catalog(tmp_path), dg.get_dagster_logger()
    with run_lock.hold(catalog, tmp_path, "run-a", log), run_lock.hold(catalog, tmp_path, "run-a", log):
        pass


def test_the_resource_holds_the_lock_while_it_is_in_use(tmp_path: Path):
    from etl_project import locks
    from etl_project.defs.resources import EtlSettings, WarehouseLock

    lock = WarehouseLock(etl=EtlSettings(warehouse_dir=str(tmp_path)))
    with dg.build_resources({"lock": lock}):
        fd = os.open(tmp_path / ".run.lock", os.O_RDWR)
        try:
            assert not locks.try_flock(fd)
            assert f'"pid": {os.getpid()}' in (tmp_path / ".run.lock").read_text()
        finally:
            os.close(fd)
    fd = os.open(tmp_path / ".run.lock", os.O_RDWR)
    try:
        assert locks.try_flock(fd)
    finally:
        os.close(fd)


# --- a pipeline run takes it before its first step ------------------------------------------


def test_a_run_waits_for_the_lock_before_its_first_step(
    holders, seeds_copy: Path, tmp_path: Path
):
    from etl_project.definitions import ETL_JOB, build_defs
    from etl_project.defs import launch

    warehouse = tmp_path / "wh"
    home = tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    job = build_defs(str(seeds_copy), str(warehouse)).resolve_job_def(ETL_JOB)
    with dg.DagsterInstance.from_config(str(home)) as instance:
        _, first = launch.run_in_process(job, instance, seeds_copy, warehouse)
        assert first.success

        holder = holders(settings.catalog(warehouse), warehouse, "run-elsewhere")
        holder.wait_for("HOLDING")
        outcome = {}
        # Nothing changed: the run's parse step finds nothing to do, after it took the lock.
        thread = threading.Thread(target=lambda: outcome.update(
            zip(("plan", "result"), launch.run_in_process(job, instance, seeds_copy, warehouse))))
        thread.start()
        run_id = None
        deadline = time.monotonic() + 120
        while run_id is None and time.monotonic() < deadline:
            for run in instance.get_runs():
                if run.run_id != first.run_id and any(
                    "waiting for run run-elsewhere" in (r.user_message or "") for r in instance.all_logs(run.run_id)
                ):
                    run_id = run.run_id
            time.sleep(0.2)
        assert run_id, "the second run never said it was waiting"
        steps_started = instance.all_logs(run_id, of_type=dg.DagsterEventType.STEP_START)
        released = holder.release()
        thread.join(timeout=300)
        result = outcome["result"]
        assert result.success and result.run_id == run_id and not outcome["plan"].to_parse
        assert not steps_started, "a step started while another process held the lock"

        logs = instance.all_logs(run_id)
        messages = [r.user_message or "" for r in logs]
        waiting = next(i for i, m in enumerate(messages) if f"waiting for run run-elsewhere (pid {holder.pid}) to finish" in m)
        holds = next(i for i, m in enumerate(messages) if "holds the warehouse lock" in m and "after waiting" in m)
        starts = [r for r in logs if r.dagster_event and r.dagster_event.event_type == dg.DagsterEventType.STEP_START]
        assert starts and waiting < holds < logs.index(starts[0])
        assert starts[0].timestamp >= released
        # The first run took it too (without waiting), before its first step.
        first_logs = instance.all_logs(first.run_id)
        holds_first = next(i for i, r in enumerate(first_logs) if "holds the warehouse lock" in (r.user_message or ""))
        assert holds_first < next(i for i, r in enumerate(first_logs) if r.dagster_event and r.dagster_event.event_type == dg.DagsterEventType.STEP_START)


# --- PostgreSQL: the advisory lock on the catalog's server -----------------------------------


def test_two_processes_take_turns_for_the_advisory_lock(holders, postgres_catalog: str, tmp_path: Path):
    # Separate warehouse folders: only the catalog's server can make them take turns.
    take_turns(lambda catalog, _, run_id: holders(catalog, tmp_path / run_id, run_id), postgres_catalog, tmp_path)
    assert not list(tmp_path.rglob(".run.lock"))


def test_a_killed_holder_releases_the_advisory_lock(holders, postgres_catalog: str, tmp_path: Path):
    a_killed_holder_lets_go(holders, postgres_catalog, tmp_path / "wh")


def test_a_run_whose_lock_session_was_ended_says_so(holders, postgres_catalog: str, tmp_path: Path):
    import psycopg

    holder = holders(postgres_catalog, tmp_path / "wh", "run-cut-off")
    holder.wait_for("HOLDING")
    with psycopg.connect(run_lock.postgres_conninfo(postgres_catalog), autocommit=True) as con:
        ended = con.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
            (f"etl_project run run-cut-off pid {holder.pid}",),
        ).fetchall()
    assert ended == [(True,)]
    holder.proc.stdin.write("go\n")
    holder.proc.stdin.flush()
    holder.wait_for("WARNING the warehouse lock's session to the catalog's server ended during the run")
