"""`etl-project run` in a subprocess, then the result queried with the real duckdb CLI."""

import os
import shutil
import subprocess
import sys
from pathlib import Path


def test_cli_run_and_duckdb_cli(seeds_copy: Path, tmp_path: Path, monkeypatch):
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

    duckdb_cli = shutil.which("duckdb", path=str(Path(sys.executable).parent)) or shutil.which("duckdb")
    query = "SELECT count(*) AS papers, sum(source_count = 2) AS shared FROM papers;"
    out = subprocess.run(
        [duckdb_cli, "-readonly", "-csv", str(warehouse / "warehouse.duckdb"), "-c", query],
        capture_output=True, text=True, timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["papers,shared", "31,7"]

    # The run is in the instance's history, as the UI would show it.
    import dagster as dg

    monkeypatch.setenv("DAGSTER_HOME", env["DAGSTER_HOME"])
    with dg.DagsterInstance.get() as instance:
        runs = instance.get_runs()
        assert [r.job_name for r in runs] == ["etl"]
        assert runs[0].is_success


def test_cli_fails_on_missing_landing_folder(tmp_path: Path):
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path)}
    cli = Path(sys.executable).with_name("etl-project")
    done = subprocess.run(
        [str(cli), "run", "--seeds", str(tmp_path / "nope"), "--warehouse", str(tmp_path / "wh")],
        env=env, capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 1
    assert "FAILED" in done.stdout
    assert "NOT published" in done.stdout
    assert "landing folder does not exist" in done.stdout
