"""The warehouse with its DuckLake catalog in a real PostgreSQL server (the team setup): the
pipeline publishes into it, readers of the folder find it, and two runs at once take turns by the
server's advisory lock, each publishing one whole snapshot."""

import re
import subprocess
from pathlib import Path

import etl_project
from etl_project.lake import Lake
from etl_project_tests.warehouse_helpers import CLI, cli_env

SEEDS_FIGURES = (2, 38, 31, 7)  # files, records, papers, papers in both lists



def figures(snapshot_id: int | None = None) -> str:
    at = f" AT (VERSION => {int(snapshot_id)})" if snapshot_id is not None else ""
    return (f"SELECT (SELECT count(*) FROM source_files{at}), (SELECT count(*) FROM raw_records{at}), "
            f"(SELECT count(*) FROM papers{at}), (SELECT count(*) FILTER (WHERE source_count > 1) FROM papers{at})")


def start_run(landing: Path, warehouse: Path, env: dict) -> subprocess.Popen:
    return subprocess.Popen([CLI, "run", "--full", "--seeds", str(landing), "--warehouse", str(warehouse)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_pipeline_on_a_postgres_catalog(postgres_catalog: str, seeds_copy: Path, tmp_path: Path):
    warehouse = tmp_path / "wh"
    env = cli_env(tmp_path / "home", ETL_CATALOG=postgres_catalog)
    run = subprocess.run([CLI, "run", "--seeds", str(seeds_copy), "--warehouse", str(warehouse)],
                         env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"of {postgres_catalog}" in run.stdout
    assert not (warehouse / "catalog.sqlite").exists()  # the catalog is the server's
    assert (warehouse / "data" / "main" / "papers").is_dir()  # the data files are the folder's

    # A reader of the folder needs no ETL_CATALOG: the publish recorded it.
    assert Lake.of(warehouse).catalog == postgres_catalog
    with etl_project.connect(warehouse) as con:
        assert con.sql(figures()).fetchone() == SEEDS_FIGURES
        assert con.sql("SELECT name FROM search_papers('counterfactual explanations') LIMIT 1").fetchone() == ("CoDy",)
    sql = subprocess.run([CLI, "sql", "--warehouse", str(warehouse), "SELECT count(*) AS papers FROM papers"],
                         env={k: v for k, v in env.items() if k != "ETL_CATALOG"}, capture_output=True, text=True, timeout=120)
    assert sql.returncode == 0 and re.search(r"\b31\b", sql.stdout), sql.stdout + sql.stderr


def test_two_runs_at_once_take_turns_by_the_advisory_lock(postgres_catalog: str, seeds_copy: Path, tmp_path: Path):
    warehouse = tmp_path / "wh"
    env = cli_env(tmp_path / "home", ETL_CATALOG=postgres_catalog)
    runs = [start_run(seeds_copy, warehouse, env) for _ in range(2)]
    outputs = [r.communicate(timeout=600)[0] for r in runs]
    assert [r.returncode for r in runs] == [0, 0], "\n".join(outputs)
    waited = [out for out in outputs if re.search(r"waiting for run \S+ \(pid \d+\) to finish", out)]
    assert len(waited) == 1, "\n".join(outputs)

    with etl_project.connect(warehouse) as con:
        snapshots = con.sql(
            "SELECT snapshot_id, commit_extra_info::JSON->>'run_id' FROM lake.snapshots() "
            "WHERE commit_message LIKE 'run %' ORDER BY snapshot_id"
        ).fetchall()
        assert len(snapshots) == 2 and snapshots[0][1] != snapshots[1][1]
        for snapshot_id, _ in snapshots:  # each run's snapshot is whole: nothing of the other mixed in
            assert con.sql(figures(snapshot_id)).fetchone() == SEEDS_FIGURES
