"""Helpers for tests that read a published warehouse or drive the real CLI in subprocesses."""

import os
import random
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

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
    """A separate Python process reading the lake through ``etl_project.connect``, kept open,
    answering one line per command: ``begin`` / ``commit`` (a read transaction: every query in
    it sees one snapshot), ``count <table>``, ``snapshot`` (the id of the snapshot it sees)."""

    SCRIPT = textwrap.dedent("""
        import sys
        import etl_project
        con = etl_project.connect(sys.argv[1])
        print("ready", flush=True)
        for line in sys.stdin:
            command, *rest = line.split()
            if command in ("begin", "commit"):
                con.execute("BEGIN TRANSACTION" if command == "begin" else "COMMIT")
                print("ok", flush=True)
            elif command == "count":
                print(con.sql(f'SELECT count(*) FROM "{rest[0]}"').fetchone()[0], flush=True)
            elif command == "snapshot":
                print(con.sql("SELECT id FROM lake.current_snapshot()").fetchone()[0], flush=True)
    """)

    def __init__(self, warehouse: Path):
        self.proc = subprocess.Popen([PY, "-c", self.SCRIPT, str(warehouse)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        assert line == "ready\n", line + self._stderr()

    def _ask(self, line: str) -> str:
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline()
        assert answer, f"the client died on {line!r}: {self._stderr()}"
        return answer.strip()

    def _stderr(self) -> str:
        if self.proc.poll() is None:
            self.proc.kill()
        return self.proc.stderr.read()

    def begin(self) -> None:
        assert self._ask("begin") == "ok"

    def commit(self) -> None:
        assert self._ask("commit") == "ok"

    def count(self, table: str) -> int:
        return int(self._ask(f"count {table}"))

    def snapshot(self) -> int:
        return int(self._ask("snapshot"))

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


class DuckDBShell:
    """The real ``duckdb`` command-line client as an analyst opens the lake, kept open:
    ``duckdb -init <warehouse>/open.sql`` from the folder that holds the warehouse."""

    LOADING = "-- Loading resources from"  # the CLI's note on stderr about the -init file

    def __init__(self, warehouse: Path):
        self.proc = subprocess.Popen([DUCKDB_CLI, "-init", f"{warehouse.name}/open.sql", "-csv", "-noheader"],
                                     cwd=warehouse.parent, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, bufsize=1)

    def execute(self, sql: str) -> None:
        """A statement that prints nothing (BEGIN TRANSACTION, COMMIT)."""
        self.proc.stdin.write(sql.rstrip(";") + ";\n")
        self.proc.stdin.flush()

    def query(self, sql: str) -> str:
        """The first line of a query's CSV output (one value for a count)."""
        self.execute(sql)
        line = self.proc.stdout.readline()
        assert line, f"the duckdb CLI died on {sql!r}: {self.close()}"
        return line.strip()

    def close(self) -> str:
        """Ends the CLI; returns what it wrote to stderr besides its note about the init file."""
        if self.proc.stdin and not self.proc.stdin.closed:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        err = self.proc.stderr.read()
        return "\n".join(l for l in err.replace("\x1b[90m", "").replace("\x1b[00m", "").splitlines()
                         if l.strip() and not l.startswith(self.LOADING))
