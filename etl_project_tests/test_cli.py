"""The ``etl-project`` commands in subprocesses, as a user runs them: ``run`` twice into one lake,
then ``sql``, ``history``, ``export``, ``install-extensions`` and ``rollback``, with the result read
by the real duckdb CLI (``duckdb -init warehouse/open.sql``) and ``etl_project.connect``."""

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pytest

import etl_project
from etl_project_tests.conftest import SEEDS
from etl_project_tests.warehouse_helpers import CLI, DUCKDB_CLI

SEED_FILES = sorted(SEEDS.glob("*.txt"))
FIGURES = "SELECT count(*) AS papers, count(*) FILTER (WHERE source_count > 1) AS in_both_lists, sum(occurrence_count) AS records FROM papers;"


@dataclass(frozen=True)
class Lake:
    root: Path  # holds landing/, warehouse/ and the home; the commands run from here
    env: dict[str, str]
    runs: tuple[subprocess.CompletedProcess, subprocess.CompletedProcess]

    def cli(self, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        return subprocess.run([CLI, *args], cwd=self.root, env=env or self.env, capture_output=True, text=True, timeout=600)

    def sql(self, query: str) -> subprocess.CompletedProcess:
        return self.cli("sql", query, "--warehouse", "warehouse")

    def duckdb(self, query: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        return subprocess.run([DUCKDB_CLI, "-init", "warehouse/open.sql", "-csv", "-c", query], cwd=self.root,
                              env=env or self.env, capture_output=True, text=True, timeout=120)


def user_env(root: Path, name: str) -> dict[str, str]:
    home = root / name
    (home / "dagster_home").mkdir(parents=True, exist_ok=True)
    return {**os.environ, "HOME": str(home), "DAGSTER_HOME": str(home / "dagster_home"), "GX_ANALYTICS_ENABLED": "false"}


@pytest.fixture(scope="module")
def lake(tmp_path_factory) -> Lake:
    """``etl-project run`` on the first seed file, then again once the second has landed."""
    root = tmp_path_factory.mktemp("cli")
    env = user_env(root, "home")
    (root / "landing").mkdir()
    runs = []
    for seed in SEED_FILES:
        shutil.copy(seed, root / "landing")
        runs.append(subprocess.run([CLI, "run", "--seeds", "landing", "--warehouse", "warehouse"], cwd=root,
                                   env=env, capture_output=True, text=True, timeout=600))
        assert runs[-1].returncode == 0, runs[-1].stdout + runs[-1].stderr
    return Lake(root, env, tuple(runs))


def table_rows(output: str) -> list[list[str]]:
    """The data rows of a box-drawn table as the duckdb CLI (and Polars) print it."""
    return [[cell.strip() for cell in re.split("[│┆]", line)[1:-1]] for line in output.splitlines()
            if line.startswith("│") and not re.match(r"│\s*(varchar|int|double|uint|bigint|hugeint)", line)]


def test_run_prints_the_seeds_figures_and_is_in_the_instance_history(lake, monkeypatch):
    first, second = lake.runs
    assert "files:      1 (1 ok, 0 empty, 0 rejected)" in first.stdout
    assert "parsed 1 file(s) (1 new, 0 changed), 0 removed, 1 unchanged" in second.stdout  # only the new file
    assert "files:      2 (2 ok, 0 empty, 0 rejected)" in second.stdout
    assert "records:    38 (0 rejected paragraphs)" in second.stdout
    assert "papers:     31 (7 duplicate records" in second.stdout
    assert "checks:     11 passed, 0 failed" in second.stdout
    assert re.search(r"warehouse:  snapshot \d+ of sqlite:", second.stdout)

    import dagster as dg

    monkeypatch.setenv("DAGSTER_HOME", lake.env["DAGSTER_HOME"])
    with dg.DagsterInstance.get() as instance:
        runs = instance.get_runs()
        assert [r.job_name for r in runs] == ["etl", "etl"] and all(r.is_success for r in runs)


def test_a_run_with_nothing_changed_starts_no_run_and_publishes_nothing(lake, monkeypatch):
    before = history(lake)
    again = lake.cli("run", "--seeds", "landing", "--warehouse", "warehouse")
    assert again.returncode == 0, again.stdout + again.stderr
    assert again.stdout.strip() == (f"nothing changed; snapshot {before[0]['snapshot_id']} stays current (2 file(s), each as "
                                    "published, by the same code and settings; --full rebuilds anyway)")
    assert history(lake) == before

    import dagster as dg

    monkeypatch.setenv("DAGSTER_HOME", lake.env["DAGSTER_HOME"])
    with dg.DagsterInstance.get() as instance:
        assert len(instance.get_runs()) == 2


def test_sql_prints_the_answer_as_the_duckdb_cli_does(lake):
    done = lake.sql(FIGURES)
    assert done.returncode == 0, done.stderr
    assert table_rows(done.stdout) == [["papers", "in_both_lists", "records"], ["31", "7", "38"]]
    found = lake.sql("SELECT name, score, snippet FROM search_papers('counterfactual explanations', max_results := 3);")
    assert found.returncode == 0, found.stderr
    assert [row[:2] for row in table_rows(found.stdout)] == [["name", "score"], ["CoDy", "3.5328"], ["EquiGX", "1.2528"], ["FastPD", "0.8679"]]
    views = lake.sql("FROM code_availability ORDER BY source_file;")
    assert table_rows(views.stdout)[1] == ["(all files)", "31", "9", "0.2903", "1"]

    wrong = lake.sql("SELECT nope FROM papers")
    assert wrong.returncode == 1 and "error:" in wrong.stderr and "nope" in wrong.stderr
    refused = lake.sql("DELETE FROM papers")  # read-only
    assert refused.returncode == 1 and "read-only" in refused.stderr.lower()
    assert table_rows(lake.sql("SELECT count(*) FROM papers").stdout)[-1] == ["31"]


def history(lake: Lake) -> list[dict[str, str]]:
    done = lake.cli("history", "--warehouse", "warehouse")
    assert done.returncode == 0, done.stderr
    header, *rows = table_rows(done.stdout)
    return [dict(zip(header, row)) for row in rows]


def test_history_lists_each_run_newest_first(lake):
    snapshots = history(lake)
    runs = [s for s in snapshots if s["run_id"] != "null"]
    assert [(s["papers"], s["records"], s["files"]) for s in runs] == [("31", "38", "2"), ("19", "19", "1")]
    assert int(runs[0]["snapshot_id"]) > int(runs[1]["snapshot_id"])
    assert all(s["message"] == f"run {s['run_id']}" for s in runs)


def test_export_writes_one_parquet_file_per_table_from_one_snapshot(lake):
    done = lake.cli("export", "exported", "--warehouse", "warehouse")
    assert done.returncode == 0, done.stderr
    files = {p.stem for p in (lake.root / "exported").glob("*.parquet")}
    assert {"source_files", "raw_records", "records", "papers", "paper_occurrences", "rejected_records",
            "paper_links", "paper_names", "paper_topics"} <= files
    assert {line.split(":")[0] for line in done.stdout.splitlines()} == files
    papers = pl.read_parquet(lake.root / "exported" / "papers.parquet")
    assert papers.height == 31 and papers.filter(pl.col("source_count") == 2).height == 7

    previous = [s for s in history(lake) if s["run_id"] != "null"][1]["snapshot_id"]
    done = lake.cli("export", "old", "--tables", "papers", "raw_records", "--snapshot", previous, "--warehouse", "warehouse")
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in (lake.root / "old").iterdir()) == ["papers.parquet", "raw_records.parquet"]
    assert pl.read_parquet(lake.root / "old" / "papers.parquet").height == 19
    unknown = lake.cli("export", "nowhere", "--tables", "nope", "--warehouse", "warehouse")
    assert unknown.returncode == 1 and "no table nope" in unknown.stderr
    assert not (lake.root / "nowhere").exists()


def test_another_user_installs_the_extensions_once_then_any_duckdb_client_reads_the_lake(lake):
    other = user_env(lake.root, "other_user")
    query = "SELECT name FROM search_papers('sparse autoencoders interpretations') LIMIT 1;"
    refused = lake.duckdb(query, env=other)
    assert refused.returncode != 0 and "ducklake" in refused.stderr.lower()

    done = lake.cli("install-extensions", env=other)
    assert done.returncode == 0, done.stderr
    installed = dict(line.split(": ", 1) for line in done.stdout.splitlines() if ": " in line and line.split(":")[0] in
                     ("ducklake", "sqlite_scanner", "postgres_scanner", "fts"))
    assert set(installed) == {"ducklake", "sqlite_scanner", "postgres_scanner", "fts"}
    assert all(Path(path).is_file() and Path(path).is_relative_to(Path(other["HOME"]) / ".duckdb" / "extensions")
               for path in installed.values()), installed

    loaded = lake.duckdb(query, env=other)
    assert loaded.returncode == 0, loaded.stderr
    assert loaded.stdout.split()[0] == "name" and len(loaded.stdout.split()) == 2


def test_rollback_makes_the_previous_snapshot_current_as_a_new_one(lake):
    """Last in this module: it changes the lake."""
    before = history(lake)
    previous = [s for s in before if s["run_id"] != "null"][1]["snapshot_id"]
    done = lake.cli("rollback", previous, "--warehouse", "warehouse")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"now holds the tables of snapshot {previous} (19 papers)" in done.stdout

    after = history(lake)
    assert len(after) == len(before) + 1
    assert after[0]["message"] == f"rollback to snapshot {previous}" and after[0]["papers"] == "19"

    # Every reader sees the first run's tables again, the search index and views included.
    one_file = ("SELECT (SELECT count(*) FROM source_files) AS files, (SELECT count(*) FROM raw_records) AS records, "
                "count(*) AS papers FROM papers;")
    through_cli = lake.duckdb(one_file + " SELECT name FROM search_papers('counterfactual explanations') LIMIT 1;"
                              " SELECT papers FROM code_availability WHERE source_file = '(all files)';")
    assert through_cli.returncode == 0, through_cli.stderr
    assert through_cli.stdout.split() == ["files,records,papers", "1,19,19", "name", "CoDy", "papers", "19"]
    with etl_project.connect(lake.root / "warehouse") as con:
        assert con.sql(one_file).fetchall() == [(1, 19, 19)]
        assert con.sql("SELECT DISTINCT source_file FROM paper_occurrences").fetchall() == [(SEED_FILES[0].name,)]
        assert con.sql("SELECT count(DISTINCT paper_id) FROM paper_terms").fetchone() == (19,)
        current = con.sql("SELECT id FROM lake.current_snapshot()").fetchone()[0]
        assert current == int(after[0]["snapshot_id"])
        # The rolled-back state stays in the history: time travel still reaches it.
        assert con.sql(f"SELECT count(*) FROM papers AT (VERSION => {after[1]['snapshot_id']})").fetchone() == (31,)

    unknown = lake.cli("rollback", "9999", "--warehouse", "warehouse")
    assert unknown.returncode == 1 and "snapshot 9999 is not in the history" in unknown.stderr


def test_commands_on_a_warehouse_never_published_say_so(tmp_path: Path):
    env = user_env(tmp_path, "home")
    for command in (["sql", "SELECT 1"], ["history"], ["export", "out"]):
        done = subprocess.run([CLI, *command, "--warehouse", str(tmp_path / "wh")], env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 1 and "no warehouse has been published" in done.stderr, command
    assert not (tmp_path / "wh").exists() and not (tmp_path / "out").exists()

