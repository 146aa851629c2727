"""publish(): the release layout, atomic switch, readers that hold files open, locks and crashes.

Readers and crashing publishers are real subprocesses (DuckDB locks are per process).
"""

import os
import signal
import subprocess
import textwrap
from pathlib import Path

import duckdb
import polars as pl
import pytest

from etl_project import publish
from etl_project_tests.warehouse_helpers import PY, Client, parquet_digests, snapshot


def tables(version: int) -> dict[str, pl.DataFrame]:
    """Two small tables whose contents depend on ``version``."""
    return {
        "papers": pl.DataFrame({"paper_id": [f"{i:016x}" for i in range(version)], "abstract": [f"text {i}" for i in range(version)]}),
        "source_files": pl.DataFrame({"source_file": [f"v{version}.txt"], "record_count": [version]}),
    }


def release_ids(warehouse: Path) -> list[str]:
    return sorted(p.name for p in (warehouse / ".releases").iterdir() if p.is_dir())


@pytest.fixture
def reader_factory():
    readers = []

    def make(path: Path, mode: str = "ro") -> Client:
        readers.append(Client(path, mode))
        return readers[-1]

    yield make
    for reader in readers:
        reader.close()


def test_layout_and_both_formats_from_one_release(tmp_path: Path):
    wh = tmp_path / "wh"
    first = publish.publish(tables(2), wh, "20250101T000000000000Z")
    assert first.row_counts == {"papers": 2, "source_files": 1}
    assert os.readlink(wh / "current") == ".releases/20250101T000000000000Z"
    assert os.readlink(wh / "warehouse.duckdb") == "current/warehouse.duckdb"
    assert os.readlink(wh / "parquet") == "current/parquet"
    assert snapshot(wh)["papers"] == sorted(tables(2)["papers"].rows())
    publish.publish(tables(3), wh, "20250101T000000000001Z")
    assert os.readlink(wh / "current") == ".releases/20250101T000000000001Z"
    assert snapshot(wh)["source_files"] == [("v3.txt", 3)]
    assert not any(p.name.endswith(".partial") for p in (wh / ".releases").iterdir())


def test_unchanged_tables_give_identical_parquet_bytes(tmp_path: Path):
    """Parquet written by Polars is deterministic (no timestamps inside), so a re-run on unchanged
    input republishes byte-identical files; only the manifest's published_at differs."""
    wh = tmp_path / "wh"

    def digests(release: str) -> dict[str, str]:
        return parquet_digests(wh / ".releases" / release / "parquet")

    publish.publish(tables(5), wh, "20250101T000000000000Z")
    before = snapshot(wh)
    publish.publish(tables(5), wh, "20250101T000000000001Z")
    assert snapshot(wh) == before
    assert digests("20250101T000000000000Z") == digests("20250101T000000000001Z")


def test_reader_holding_the_file_keeps_its_view_and_new_readers_see_the_new_release(tmp_path: Path, reader_factory):
    wh = tmp_path / "wh"
    publish.publish(tables(2), wh, "20250101T000000000000Z")
    reader = reader_factory(wh / "warehouse.duckdb", "ro")
    assert reader.count("papers") == 2
    # Five more releases: the reader's release is pruned from disk while it holds it open.
    for i in range(1, 6):
        publish.publish(tables(2 + i), wh, f"20250101T00000000000{i}Z")
    assert "20250101T000000000000Z" not in release_ids(wh)
    assert reader.count("papers") == 2  # same file, same view
    assert snapshot(wh)["source_files"] == [("v7.txt", 7)]
    assert reader_factory(wh / "warehouse.duckdb", "ro").count("papers") == 7


def test_read_write_client_does_not_block_and_its_log_stays_with_its_release(tmp_path: Path, reader_factory):
    wh = tmp_path / "wh"
    publish.publish(tables(2), wh, "20250101T000000000000Z")
    writer = reader_factory(wh / "warehouse.duckdb", "rw-write")  # holds DuckDB's exclusive lock
    old = wh / ".releases" / "20250101T000000000000Z"
    assert (old / "warehouse.duckdb.wal").exists()  # DuckDB resolves the links: the log is per release
    assert not (wh / "warehouse.duckdb.wal").exists()

    release = publish.publish(tables(3), wh, "20250101T000000000001Z", wait_seconds=1)
    assert snapshot(wh)["source_files"] == [("v3.txt", 3)]
    assert writer.count("mine") == 1 and writer.count("papers") == 2
    # Pruning skips the release the writer holds and says who holds it.
    for i in range(2, 5):
        release = publish.publish(tables(2 + i), wh, f"20250101T00000000000{i}Z")
    assert old.name in release_ids(wh)
    assert any(f"PID {writer.proc.pid}" in note and old.name in note for note in release.notes)

    # The writer dies without a checkpoint: its log stays beside its own file, never the new one.
    writer.proc.send_signal(signal.SIGKILL)
    writer.proc.wait()
    assert (old / "warehouse.duckdb.wal").exists()
    publish.publish(tables(9), wh, "20250101T000000000009Z")
    assert snapshot(wh)["source_files"] == [("v9.txt", 9)]
    assert old.name not in release_ids(wh)


def test_prune_never_removes_the_current_release_even_if_its_name_sorts_first(tmp_path: Path):
    wh = tmp_path / "wh"
    for i in range(4):
        publish.publish(tables(2), wh, f"20250101T00000000000{i}Z")
    publish.publish(tables(8), wh, "19990101T000000000000Z")  # the clock went back
    assert os.readlink(wh / "current") == ".releases/19990101T000000000000Z"
    assert "19990101T000000000000Z" in release_ids(wh)
    assert snapshot(wh)["source_files"] == [("v8.txt", 8)]
    assert len(release_ids(wh)) == publish.KEEP_RELEASES + 1


def test_migrates_a_warehouse_with_a_plain_duckdb_file_and_a_stale_log(tmp_path: Path):
    wh = tmp_path / "wh"
    (wh / ".releases" / "old" / "parquet").mkdir(parents=True)
    with duckdb.connect(str(wh / "warehouse.duckdb")) as con:
        con.execute("CREATE TABLE papers AS SELECT 1 AS x")
    (wh / "warehouse.duckdb.wal").write_bytes(b"a log of another file")
    (wh / "parquet").symlink_to(".releases/old/parquet")
    release = publish.publish(tables(4), wh, "20250101T000000000000Z")
    assert not (wh / "warehouse.duckdb.wal").exists()
    assert os.readlink(wh / "warehouse.duckdb") == "current/warehouse.duckdb"
    assert snapshot(wh)["source_files"] == [("v4.txt", 4)]
    assert any("plain file" in note for note in release.notes)


def test_real_folder_where_a_link_belongs_is_refused(tmp_path: Path):
    wh = tmp_path / "wh"
    (wh / "parquet").mkdir(parents=True)
    (wh / "parquet" / "mine.parquet").write_bytes(b"someone's data")
    with pytest.raises(publish.PublishError, match="real file or folder"):
        publish.publish(tables(2), wh, "20250101T000000000000Z")
    assert (wh / "parquet" / "mine.parquet").read_bytes() == b"someone's data"
    assert not (wh / "current").exists() and not (wh / "warehouse.duckdb").exists()  # nothing switched


HOLD_LOCK = textwrap.dedent("""
    import fcntl, os, sys, time
    fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.pwrite(fd, f"PID {os.getpid()}\\n".encode(), 0)
    print("locked", flush=True)
    time.sleep(60)
""")


def test_concurrent_publish_waits_then_fails_naming_the_holder(tmp_path: Path):
    wh = tmp_path / "wh"
    wh.mkdir()
    holder = subprocess.Popen([PY, "-c", HOLD_LOCK, str(wh / publish.LOCK_FILE)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "locked\n"
        with pytest.raises(publish.PublishError, match=rf"still running \(process PID {holder.pid}\); waited 0.5 s"):
            publish.publish(tables(2), wh, "20250101T000000000000Z", wait_seconds=0.5)
        assert not (wh / "current").exists()
        # SIGKILL frees the lock (the OS drops it with the process): the next publish goes through.
        holder.send_signal(signal.SIGKILL)
        holder.wait()
        publish.publish(tables(2), wh, "20250101T000000000000Z", wait_seconds=5)
        assert snapshot(wh)["source_files"] == [("v2.txt", 2)]
    finally:
        holder.kill()
        holder.wait()


# A publisher that SIGKILLs itself at one step: test-side monkeypatching in a child process,
# no hook in the production code.
CRASHING_PUBLISH = textwrap.dedent("""
    import os, signal, sys
    import polars as pl
    from etl_project import publish

    point = sys.argv[2]
    def die(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGKILL)
    real_write, real_replace, real_point = publish._write_table, os.replace, publish.point_link
    if point == "parquet":  # after the first table's file
        written = []
        def write_then_die(*a, **k):
            real_write(*a, **k); written.append(1)
            if len(written) == 2: die()
        publish._write_table = write_then_die
    elif point == "duckdb":  # every table written, the analysis layer not yet
        publish.warehouse_sql.create_analysis_layer = die
    elif point == "renamed":  # the release is complete in .releases/ but not switched to
        def point_or_die(link, target, replace_file=False):
            if link.name == "current": die()
            real_point(link, target, replace_file)
        publish.point_link = point_or_die
    tables = {
        "papers": pl.DataFrame({"paper_id": ["new"], "abstract": ["new"]}),
        "source_files": pl.DataFrame({"source_file": ["new.txt"], "record_count": [1]}),
    }
    publish.publish(tables, __import__("pathlib").Path(sys.argv[1]), "20250101T000000000009Z")
""")


@pytest.mark.parametrize("point", ["parquet", "duckdb", "renamed"])
def test_publish_killed_at_each_step_leaves_the_previous_release(tmp_path: Path, point: str):
    wh = tmp_path / "wh"
    publish.publish(tables(2), wh, "20250101T000000000000Z")
    before = snapshot(wh)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(publish.__file__).parents[1]), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([PY, "-c", CRASHING_PUBLISH, str(wh), point], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert os.readlink(wh / "current") == ".releases/20250101T000000000000Z"
    assert snapshot(wh) == before
    leftovers = {"parquet": "20250101T000000000009Z.partial", "duckdb": "20250101T000000000009Z.partial",
                 "renamed": "20250101T000000000009Z"}
    assert leftovers[point] in release_ids(wh)
    # The next publish cleans up and succeeds.
    release = publish.publish(tables(3), wh, "20250101T000000000010Z")
    assert snapshot(wh)["source_files"] == [("v3.txt", 3)]
    assert not any(name.endswith(".partial") for name in release_ids(wh))
    assert (point != "renamed") == any("interrupted publish" in note for note in release.notes)
