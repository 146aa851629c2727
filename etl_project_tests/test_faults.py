"""Real ``etl-project run`` subprocesses killed with SIGKILL, and real readers (the ``duckdb`` CLI
and a Python client) holding a read transaction open while runs commit.

Kill points are observed, not injected: the run's own Dagster event log says which step is
running (ingest, or an asset check: validation); new ``etl-<run>-*.parquet`` files under
``data/main/`` say the publish is writing the tables' data files; new files under
``data/search/`` (DuckLake writes the stop words' data file inside the publish's one
transaction, after every table's rows were replaced and before COMMIT) say it is committing.
No hook exists in the production code for these tests.
"""

import glob
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

from etl_project_tests.conftest import SEEDS, materialize_all
from etl_project_tests.test_publish import data_files, registered_files, snapshot_ids
from etl_project_tests.warehouse_helpers import (
    CLI, Client, DuckDBShell, cli_env, generate_paper_lists, query, run_cli, snapshot,
)

INGEST_STEP = "parsed_files"  # the step that reads and parses the landing files
CHECK_STEP_SUFFIX = "_suite"  # asset-check steps run a Great Expectations suite


def main_files(warehouse: Path) -> set[str]:
    return set(glob.glob(str(warehouse / "data" / "main" / "*" / "etl-*.parquet")))


def search_files(warehouse: Path) -> set[str]:
    return set(glob.glob(str(warehouse / "data" / "search" / "**" / "*.parquet"), recursive=True))


class KilledRun:
    """An ``etl-project run`` in its own process group, killed when ``point`` is observed."""

    def __init__(self, landing: Path, warehouse: Path, env: dict, dagster_home: Path):
        self.warehouse, self.home = warehouse, dagster_home
        self.known_runs = set(self._run_dbs())
        self.main_before, self.search_before = main_files(warehouse), search_files(warehouse)
        self.tables = {table.name for table in (warehouse / "data" / "main").iterdir()}  # a folder of data files each
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

    def new_main_files(self) -> set[str]:
        return main_files(self.warehouse) - self.main_before

    def new_search_files(self) -> set[str]:
        return search_files(self.warehouse) - self.search_before

    def kill_when(self, point: str, timeout: float = 300) -> None:
        observed = {
            "parse": lambda: ("STEP_START", INGEST_STEP) in self.events(),
            "validation": lambda: any(t == "STEP_START" and k.endswith(CHECK_STEP_SUFFIX) for t, k in self.events()),
            "data files": lambda: bool(self.new_main_files()),
            "commit": lambda: bool(self.new_search_files()),
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


def test_runs_killed_while_parsing_validating_writing_and_committing(tmp_path: Path):
    landing, warehouse, home = tmp_path / "landing", tmp_path / "warehouse", tmp_path / "dagster_home"
    shutil.copytree(SEEDS, landing)
    (landing / "junk.bin").write_bytes(b"\x00\x01binary")
    env = cli_env(home)
    first = run_cli(landing, warehouse, env)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "refused files:" in first.stdout and "junk.bin" in first.stdout and "binary file" in first.stdout
    assert "warehouse:  snapshot 1 of sqlite:" in first.stdout
    previous = snapshot(warehouse)
    previous_ids = snapshot_ids(warehouse)
    registered = registered_files(warehouse)
    assert len(previous["papers"]) == 31 and registered

    # More input, so that every stage takes long enough to be caught in the act.
    generate_paper_lists(landing, files=3, per_file=700)
    added = 3 * 700
    for point in ("parse", "validation", "data files", "commit"):
        for attempt in range(1, 4):
            run = KilledRun(landing, warehouse, env, home)
            run.kill_when(point)
            events = run.events()
            if point != "parse" or ("STEP_SUCCESS", INGEST_STEP) not in events:
                break
            # The kill landed just after the parse step ended (a busy machine): those files are
            # staged now, so the next attempt needs new ones to be caught parsing.
            generate_paper_lists(landing, files=3, per_file=700, seed=attempt)
            added += 3 * 700
        if point == "parse":
            assert ("STEP_SUCCESS", INGEST_STEP) not in events, "never killed while parsing in 3 attempts"
        if point in ("parse", "validation"):
            assert not run.new_main_files(), point
        if point == "data files":
            assert 0 < len(run.new_main_files()) and not run.new_search_files()
        if point == "commit":  # the data files written (of the tables with new rows), the transaction under way
            written = {Path(path).parent.name for path in run.new_main_files()}
            assert {"raw_records", "records", "papers"} <= written <= run.tables and run.new_search_files()
        # The previous snapshot is still the current one, intact and complete (through the lake
        # and through an export of it); no file it lists was lost; the catalog opens.
        assert snapshot_ids(warehouse) == previous_ids, point
        assert snapshot(warehouse) == previous, point
        assert all(Path(p).exists() for p in registered), point

    # The next run succeeds, cleans up what the killed runs left, and publishes what an
    # uninterrupted run on the same input publishes.
    assert data_files(warehouse) - registered  # the killed runs' files are there until then
    final = run_cli(landing, warehouse, env)
    assert final.returncode == 0, final.stdout + final.stderr
    assert f"warehouse:  snapshot {previous_ids[-1] + 1} of" in final.stdout
    assert re.search(r"removed [1-9]\d* data file\(s\) left by an interrupted run", final.stderr), final.stdout + final.stderr
    after = snapshot(warehouse)
    assert len(after["raw_records"]) == 38 + added
    assert data_files(warehouse) == registered_files(warehouse)  # no orphan left
    assert registered <= registered_files(warehouse)  # the first snapshot's files are all kept
    assert snapshot_ids(warehouse) == previous_ids + [previous_ids[-1] + 1]
    reference = tmp_path / "reference"
    assert materialize_all(landing, reference).success
    assert snapshot(reference) == after
    assert data_files(reference) == registered_files(reference)


def test_readers_holding_a_transaction_open_while_runs_commit(tmp_path: Path):
    landing, warehouse, home = tmp_path / "landing", tmp_path / "warehouse", tmp_path / "dagster_home"
    shutil.copytree(SEEDS, landing)
    env = cli_env(home)
    done = run_cli(landing, warehouse, env)
    assert done.returncode == 0, done.stdout + done.stderr

    # An analyst's duckdb CLI and a Python client, each in a read transaction on the first snapshot.
    shell, client = DuckDBShell(warehouse), Client(warehouse)
    try:
        shell.execute("BEGIN TRANSACTION")
        client.begin()
        first_snapshot = client.snapshot()
        assert shell.query("SELECT id FROM current_snapshot()") == str(first_snapshot)
        assert shell.query("SELECT count(*) FROM raw_records") == "38"
        assert client.count("papers") == 31
        counts = [(38, 31)]
        for seed, per_file in ((1, 20), (2, 5)):
            generate_paper_lists(landing, files=1, per_file=per_file, seed=seed)
            done = run_cli(landing, warehouse, env)
            assert done.returncode == 0, done.stdout + done.stderr
            now = query(warehouse, "SELECT (SELECT count(*) FROM raw_records), (SELECT count(*) FROM papers)")[0]
            assert now[0] == counts[-1][0] + per_file and now[1] > counts[-1][1]  # a new query sees the new run
            counts.append(now)
            # Inside their transactions, both keep seeing the first snapshot, whole.
            assert shell.query("SELECT count(*) FROM raw_records") == "38"
            assert shell.query("SELECT count(*) FROM papers") == "31"
            assert client.count("papers") == 31 and client.count("raw_records") == 38
            assert client.snapshot() == first_snapshot
        # After COMMIT, their next query sees the newest snapshot.
        shell.execute("COMMIT")
        client.commit()
        assert shell.query("SELECT count(*) FROM raw_records") == str(counts[-1][0])
        assert client.count("papers") == counts[-1][1]
        assert client.snapshot() == first_snapshot + 2
    finally:
        client.close()
        assert shell.close() == ""
