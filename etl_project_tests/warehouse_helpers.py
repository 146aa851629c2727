"""Helpers for tests that read a published warehouse or drive the real CLI in subprocesses."""

import hashlib
import os
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import duckdb
import polars as pl

PY = sys.executable
CLI = str(Path(sys.executable).with_name("etl-project"))
DUCKDB_CLI = str(Path(sys.executable).with_name("duckdb"))


def snapshot(warehouse: Path) -> dict[str, list[tuple]]:
    """Every table, read through the ``warehouse.duckdb`` link (read-only) and through the
    ``parquet`` link; asserts that both give the same rows and returns them."""
    with duckdb.connect(str(warehouse / "warehouse.duckdb"), read_only=True) as con:
        names = sorted(r[0] for r in con.sql(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main' AND table_type = 'BASE TABLE'"
        ).fetchall())
        from_duckdb = {n: sorted(con.sql(f'SELECT * FROM "{n}"').fetchall(), key=repr) for n in names}
    from_parquet = {
        p.stem: sorted(pl.read_parquet(p).rows(), key=repr) for p in sorted((warehouse / "parquet").glob("*.parquet"))
    }
    assert from_duckdb == from_parquet
    return from_duckdb


def parquet_digests(parquet_dir: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(parquet_dir.glob("*.parquet"))}


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
