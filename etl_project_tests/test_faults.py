"""Real ``etl-project run`` subprocesses killed with SIGKILL, and real clients holding the
warehouse open while runs publish.

Kill points are observed, not injected: the run's own Dagster event log says which step is
running (ingest, or an asset check: validation), and a ``.releases/*.partial`` folder says the
publish is writing. No hook exists in the production code for these tests.
"""

import glob
import os
import shutil
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

from etl_project_tests.conftest import SEEDS, materialize_all
from etl_project_tests.warehouse_helpers import (
    CLI, Client, DuckDBShell, cli_env, generate_paper_lists, parquet_digests, run_cli, snapshot,
)

INGEST_STEP = "parsed_files"  # the step that reads and parses the landing files
CHECK_STEP_SUFFIX = "_suite"  # asset-check steps run a Great Expectations suite


class KilledRun:
    """An ``etl-project run`` in its own process group, killed when ``point`` is observed."""

    def __init__(self, landing: Path, warehouse: Path, env: dict, dagster_home: Path):
        self.warehouse, self.home = warehouse, dagster_home
        self.known_runs = set(self._run_dbs())
        self.log = open(dagster_home / f"killed-{time.monotonic_ns()}.log", "w")
        self.proc = subprocess.Popen([CLI, "run", "--seeds", str(landing), "--warehouse", str(warehouse)],
                                     env=env, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)

    def _run_dbs(self) -> list[str]:
        return [d for d in glob.glob(str(self.home / "history" / "runs" / "*.db")) if not d.endswith("index.db")]

    def events(self) -> list[tuple[str, str]]:
        """(event type, step key) of this run's step events so far, from Dagster's run storage."""
        new = [d for d in self._run_dbs() if d not in self.known_runs]
        if not new:
            return []
        try:
            with sqlite3.connect(f"file:{new[0]}?mode=ro", uri=True, timeout=0.1) as con:
                return con.execute(
                    "SELECT dagster_event_type, step_key FROM event_logs "
                    "WHERE dagster_event_type LIKE 'STEP_%' ORDER BY id"
                ).fetchall()
        except sqlite3.OperationalError:  # the database is being created
            return []

    def partials(self) -> list[str]:
        return glob.glob(str(self.warehouse / ".releases" / "*.partial"))

    def kill_when(self, point: str, timeout: float = 300) -> None:
        observed = {
            "parse": lambda: ("STEP_START", INGEST_STEP) in self.events(),
            "validation": lambda: any(t == "STEP_START" and k.endswith(CHECK_STEP_SUFFIX) for t, k in self.events()),
            "publish": lambda: bool(self.partials()),
        }[point]
        deadline = time.monotonic() + timeout
        while not observed():
            assert self.proc.poll() is None, f"the run ended before reaching {point}: {self.output()}"
            assert time.monotonic() < deadline, f"{point} not reached in {timeout} s"
            time.sleep(0.002)
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        assert self.proc.returncode == -signal.SIGKILL

    def output(self) -> str:
        self.log.flush()
        return Path(self.log.name).read_text()


def test_runs_killed_while_parsing_validating_and_publishing(tmp_path: Path):
    landing, warehouse, home = tmp_path / "landing", tmp_path / "warehouse", tmp_path / "dagster_home"
    shutil.copytree(SEEDS, landing)
    (landing / "junk.bin").write_bytes(b"\x00\x01binary")
    env = cli_env(home)
    first = run_cli(landing, warehouse, env)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "refused files:" in first.stdout and "junk.bin" in first.stdout and "binary file" in first.stdout
    previous = snapshot(warehouse)
    previous_release = os.readlink(warehouse / "current")
    assert len(previous["papers"]) == 31

    # More input, so that every stage takes long enough to be caught in the act.
    generate_paper_lists(landing, files=3, per_file=700)
    for point in ("parse", "validation", "publish"):
        run = KilledRun(landing, warehouse, env, home)
        run.kill_when(point)
        events = run.events()
        if point == "parse":
            assert ("STEP_SUCCESS", INGEST_STEP) not in events
        if point in ("parse", "validation"):
            assert not run.partials()
        else:
            assert run.partials()  # killed with a half-written release on disk
        # The previous warehouse is untouched and complete, through DuckDB and through Parquet.
        assert os.readlink(warehouse / "current") == previous_release, point
        assert snapshot(warehouse) == previous, point

    # The next run succeeds and equals an uninterrupted run on the same input.
    final = run_cli(landing, warehouse, env)
    assert final.returncode == 0, final.stdout + final.stderr
    assert "interrupted publish" not in final.stdout  # notes go to the run log, the summary stays short
    after = snapshot(warehouse)
    assert len(after["raw_records"]) == 38 + 3 * 700
    assert not glob.glob(str(warehouse / ".releases" / "*.partial"))
    reference = materialize_all(landing, tmp_path / "reference")
    assert reference.success
    assert snapshot(tmp_path / "reference") == after
    assert parquet_digests(tmp_path / "reference" / "parquet") == parquet_digests(warehouse / "parquet")

    # Re-running on unchanged input changes nothing: a new release, byte-identical Parquet (the
    # reference above already showed it across processes; in process here, to spare a CLI start).
    release = os.readlink(warehouse / "current")
    assert materialize_all(landing, warehouse).success
    assert os.readlink(warehouse / "current") != release
    assert snapshot(warehouse) == after
    assert parquet_digests(warehouse / "parquet") == parquet_digests(warehouse / release / "parquet")


def test_clients_holding_the_warehouse_open_while_runs_publish(tmp_path: Path):
    landing, warehouse, home = tmp_path / "landing", tmp_path / "warehouse", tmp_path / "dagster_home"
    shutil.copytree(SEEDS, landing)
    env = cli_env(home)
    assert run_cli(landing, warehouse, env).returncode == 0

    # An analyst's duckdb CLI and a Python client, both read-only, hold the first release open.
    shell = DuckDBShell(warehouse / "warehouse.duckdb")
    client = Client(warehouse / "warehouse.duckdb", "ro")
    try:
        assert shell.query("SELECT count(*) FROM raw_records") == "38"
        assert client.count("papers") == 31
        generate_paper_lists(landing, files=1, per_file=20, seed=1)
        second = run_cli(landing, warehouse, env)
        assert second.returncode == 0, second.stdout + second.stderr
        assert "Could not set lock" not in second.stdout + second.stderr
        # Their view is unchanged; a client that connects now sees the new release.
        assert shell.query("SELECT count(*) FROM raw_records") == "38"
        assert client.count("papers") == 31
        fresh = DuckDBShell(warehouse / "warehouse.duckdb")
        assert fresh.query("SELECT count(*) FROM raw_records") == "58"
        assert fresh.close() == ""

        # A read-write client that wrote (so a write-ahead log exists) and still holds the file.
        writer = Client(warehouse / "warehouse.duckdb", "rw-write")
        try:
            generate_paper_lists(landing, files=1, per_file=5, seed=2)
            # In process this time (a separate process from the clients all the same).
            assert materialize_all(landing, warehouse).success
            assert writer.count("mine") == 1 and writer.count("raw_records") == 58
        finally:
            writer.proc.send_signal(signal.SIGKILL)  # dies without a checkpoint: its log stays behind
            writer.proc.wait()
        # The log stays beside the file it belongs to; the current file opens cleanly.
        assert glob.glob(str(warehouse / ".releases" / "*" / "warehouse.duckdb.wal"))
        assert not (warehouse / "warehouse.duckdb.wal").exists()
        assert len(snapshot(warehouse)["raw_records"]) == 63
        assert shell.query("SELECT count(*) FROM raw_records") == "38"
    finally:
        client.close()
        assert shell.close() == ""
