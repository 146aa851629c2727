"""Helpers for tests that read a published warehouse or drive the real CLI in subprocesses."""

import hashlib
import os
import random
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import duckdb
import polars as pl

PY = sys.executable
CLI = str(Path(sys.executable).with_name("etl-project"))
DUCKDB_CLI = str(Path(sys.executable).with_name("duckdb"))


def tables(warehouse: Path, snapshot_id: int | None = None) -> dict[str, list[tuple]]:
    """Every table of the lake's main schema (at ``snapshot_id``, else the current snapshot), read
    through ``etl_project.connect``, each table's rows sorted."""
    import etl_project

    at = f" AT (VERSION => {int(snapshot_id)})" if snapshot_id is not None else ""
    with etl_project.connect(warehouse) as con:
        names = sorted(r[0] for r in con.sql(
            "SELECT table_name FROM duckdb_tables() WHERE database_name = 'lake' AND schema_name = 'main'"
        ).fetchall())
        return {n: sorted(con.sql(f'SELECT * FROM "{n}"{at}').fetchall(), key=repr) for n in names}


def snapshot(warehouse: Path) -> dict[str, list[tuple]]:
    """Every table of the current snapshot, read through ``etl_project.connect`` and through an
    ``etl-project export`` of it; asserts that both give the same rows and returns them."""
    from etl_project import lake, publish

    current = tables(warehouse)
    exported = warehouse.parent / f".export-{os.getpid()}-{random.getrandbits(32):08x}"
    try:
        with lake.connect(warehouse) as con:
            files = publish.export(con, exported)
        from_parquet = {name: sorted(pl.read_parquet(path).rows(), key=repr) for name, path in files.items()}
    finally:
        shutil.rmtree(exported, ignore_errors=True)
    assert current == from_parquet
    return current


def current_snapshot(warehouse: Path) -> int:
    import etl_project

    with etl_project.connect(warehouse) as con:
        return con.sql("SELECT id FROM lake.current_snapshot()").fetchone()[0]


def query(warehouse: Path, sql: str, params: list | None = None) -> list[tuple]:
    import etl_project

    with etl_project.connect(warehouse) as con:
        return con.execute(sql, params or []).fetchall()


def generate_paper_lists(folder: Path, files: int, per_file: int, seed: int = 0) -> None:
    """Synthetic paper lists (distinct abstracts of ~150 words) to make a run take a while."""
    rng = random.Random(seed)
    words = ("model data learning neural network robust training method results show improve benchmark "
             "noise task language graph optimization theory").split()
    folder.mkdir(parents=True, exist_ok=True)
    for f in range(files):
        paragraphs = [" ".join(rng.choice(words) for _ in range(150)) + f" (paper {seed}-{f}-{i})." for i in range(per_file)]
        (folder / f"generated_{seed}_{f:03d}.txt").write_text(f"Generated list {f}\n\n" + "\n\n".join(paragraphs) + "\n")


def cli_env(dagster_home: Path, **extra: str) -> dict[str, str]:
    dagster_home.mkdir(parents=True, exist_ok=True)
    return {**os.environ, "DAGSTER_HOME": str(dagster_home), "GX_ANALYTICS_ENABLED": "false", **extra}


def run_cli(landing: Path, warehouse: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([CLI, "run", "--seeds", str(landing), "--warehouse", str(warehouse)],
                          env=env, capture_output=True, text=True, timeout=600)


class Client:
    """A separate process holding ``warehouse.duckdb`` open, answering ``count <table>`` lines.

    mode: 'ro' (read-only), 'rw' (read-write), 'rw-write' (read-write, and writes a table,
    which leaves a write-ahead log until it checkpoints)."""

    SCRIPT = textwrap.dedent("""
        import sys, duckdb
        con = duckdb.connect(sys.argv[1], read_only=sys.argv[2] == "ro")
        if sys.argv[2] == "rw-write":
            con.execute("CREATE TABLE mine AS SELECT 42 AS answer")
        print("ready", flush=True)
        for line in sys.stdin:
            table = line.split()[1]
            print(con.sql(f'SELECT count(*) FROM "{table}"').fetchone()[0], flush=True)
    """)

    def __init__(self, path: Path, mode: str = "ro"):
        self.proc = subprocess.Popen([PY, "-c", self.SCRIPT, str(path), mode], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        assert line == "ready\n", line + self.proc.stderr.read()

    def count(self, table: str) -> int:
        self.proc.stdin.write(f"count {table}\n")
        self.proc.stdin.flush()
        return int(self.proc.stdout.readline())

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


class DuckDBShell:
    """The real ``duckdb`` command-line client, opened read-only as an analyst would, kept open."""

    def __init__(self, path: Path):
        self.proc = subprocess.Popen([DUCKDB_CLI, "-readonly", "-csv", "-noheader", str(path)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1)

    def query(self, sql: str) -> str:
        self.proc.stdin.write(sql.rstrip(";") + ";\n")
        self.proc.stdin.flush()
        return self.proc.stdout.readline().strip()

    def close(self) -> str:
        self.proc.stdin.close()
        self.proc.wait(timeout=30)
        return self.proc.stderr.read()
