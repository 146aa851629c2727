"""publish(): one DuckLake snapshot per run, data files registered in place, failures that commit
nothing, orphans and retention, history, time travel, rollback, export, a moved warehouse and
the refused old layout. Small hand-made tables in a temporary warehouse."""

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest

import etl_project
from etl_project import lake, publish, warehouse_sql
from etl_project_tests.warehouse_helpers import (
    CLI,
    DUCKDB_CLI,
    current_snapshot,
    query,
    snapshot,
    tables,
)


def frames(version: int) -> dict[str, pl.DataFrame]:
    """Two small tables whose contents depend on ``version``."""
    return {
        "papers": pl.DataFrame({"paper_id": [f"{i:016x}" for i in range(version)], "abstract": [f"text {i}" for i in range(version)]}),
        "source_files": pl.DataFrame({"source_file": [f"v{version}.txt"], "record_count": [version]}),
    }


def rows(version: int) -> dict[str, list[tuple]]:
    return {name: sorted(frame.rows(), key=repr) for name, frame in frames(version).items()}


def run(wh: Path, version: int, run_id: str, retention: publish.Retention | None = None, **extra: pl.DataFrame) -> publish.Published:
    return publish.publish({**frames(version), **extra}, lake.Lake.of(wh), run_id, retention or publish.Retention())


def data_files(wh: Path) -> set[str]:
    """Every Parquet file under the warehouse's data folder."""
    return {str(p) for p in (wh / "data").rglob("*.parquet")}


def snapshot_ids(wh: Path) -> list[int]:
    return [r[0] for r in query(wh, "SELECT snapshot_id FROM lake.snapshots() ORDER BY snapshot_id")]


def listed_files(wh: Path, snapshot_id: int | None = None) -> set[str]:
    """The data files the lake lists for every table of the main and search schemas (at a snapshot)."""
    with etl_project.connect(wh) as con:
        return _listed(con, snapshot_id)


def registered_files(wh: Path) -> set[str]:
    """Every data file some kept snapshot lists."""
    with etl_project.connect(wh) as con:
        kept = [r[0] for r in con.sql("SELECT snapshot_id FROM lake.snapshots()").fetchall()]
        return set().union(*(_listed(con, sid) for sid in kept))


def _listed(con, snapshot_id: int | None) -> set[str]:
    at = f", snapshot_version => {int(snapshot_id)}" if snapshot_id is not None else ""
    names = con.sql(f"""SELECT schema_name, table_name FROM duckdb_tables() WHERE database_name = 'lake'
                        AND schema_name IN ('main', '{warehouse_sql.SEARCH_SCHEMA}')""").fetchall()
    files = set()
    for schema, table in names:
        try:
            files |= {r[0] for r in con.execute(
                f"SELECT data_file FROM ducklake_list_files('lake', ?, schema => ?{at})", [table, schema]).fetchall()}
        except Exception:  # the table did not exist at that snapshot
            continue
    return files


def test_one_snapshot_per_publish_named_after_its_run_with_history_and_time_travel(tmp_path: Path):
    wh = tmp_path / "wh"
    first = run(wh, 2, "run-one")
    assert first.row_counts == {"papers": 2, "source_files": 1}
    assert snapshot(wh) == rows(2)
    second = run(wh, 3, "run-two")
    assert second.snapshot_id == first.snapshot_id + 1 == current_snapshot(wh)  # one commit per publish
    assert snapshot(wh) == rows(3)

    info = query(wh, "SELECT snapshot_id, author, commit_message, commit_extra_info FROM lake.snapshots() WHERE snapshot_id >= ? "
                     "ORDER BY snapshot_id", [first.snapshot_id])
    assert [(sid, author, message) for sid, author, message, _ in info] == [
        (first.snapshot_id, publish.AUTHOR, "run run-one"), (second.snapshot_id, publish.AUTHOR, "run run-two")]
    assert json.loads(info[1][3]) == {"run_id": "run-two", "tables": {"papers": 3, "source_files": 1}}

    with etl_project.connect(wh) as con:
        history = publish.history(con)
    assert history.select("snapshot_id", "run_id", "message", "papers", "files").rows()[:2] == [
        (second.snapshot_id, "run-two", "run run-two", 3, 1), (first.snapshot_id, "run-one", "run run-one", 2, 1)]
    assert history["time"].is_sorted(descending=True)
    done = subprocess.run([CLI, "history", "--warehouse", str(wh)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "run-two" in done.stdout and "run-one" in done.stdout

    # Time travel: the previous snapshot's rows, as they were.
    assert tables(wh, first.snapshot_id) == rows(2)
    assert query(wh, f"SELECT count(*) FROM papers AT (VERSION => {first.snapshot_id})") == [(2,)]


def test_parts_the_table_holds_stay_registered_and_the_others_go_whole(tmp_path: Path, monkeypatch):
    """A table handed over as parts, as the stage hands them on (the parts that did not change
    hard-linked from the previous run's): those the lake holds are not registered again, the
    files of the parts that went are deleted whole (no delete file), time travel still reaches
    the old rows; a table whose columns changed, or that would drop more rows than its kept
    files are worth, is created again."""
    wh, stage = tmp_path / "wh", tmp_path / "stage"

    def parts(run: str, numbers: list[int], before: str | None = None, same: tuple[int, ...] = ()) -> Path:
        folder = stage / run / "papers.parquet"
        folder.mkdir(parents=True)
        for n in numbers:
            if n in same:
                (folder / f"{n}.parquet").hardlink_to(stage / before / "papers.parquet" / f"{n}.parquet")
            else:
                pl.DataFrame({"paper_id": [f"{n}-{i}" for i in range(3)], "abstract": [f"{run} {n}"] * 3}).write_parquet(
                    folder / f"{n}.parquet", compression="zstd")
        return folder

    def files() -> dict[str, str]:
        with etl_project.connect(wh) as con:
            listed = con.sql("SELECT data_file, delete_file FROM ducklake_list_files('lake', 'papers')").fetchall()
        assert all(deletes is None for _, deletes in listed)
        return {path: Path(path).stat().st_ino for path, _ in listed}

    def published(folder: Path) -> list[tuple]:
        return sorted(pl.read_parquet(folder).rows(), key=repr)

    first = publish.publish({"papers": parts("one", [1, 2, 3])}, lake.Lake.of(wh), "one")
    before = files()
    second = publish.publish({"papers": parts("two", [1, 3, 4], "one", same=(1, 3))}, lake.Lake.of(wh), "two")
    after = files()
    assert second.row_counts == {"papers": 9} and query(wh, "SELECT count(*) FROM papers") == [(9,)]
    assert tables(wh)["papers"] == published(stage / "two" / "papers.parquet")
    kept = {path: inode for path, inode in before.items() if path in after}
    assert len(kept) == 2 and set(kept.values()) == {(stage / "one" / "papers.parquet" / f"{n}.parquet").stat().st_ino for n in (1, 3)}
    assert len(after) == 3  # part 2's file went whole; part 4's was added
    assert tables(wh, first.snapshot_id)["papers"] == published(stage / "one" / "papers.parquet")

    monkeypatch.setattr(publish, "KEPT_FILE_ROWS", 1)  # part 4's three rows are more than the two kept files' worth
    publish.publish({"papers": parts("two-b", [1, 3, 5], "two", same=(1, 3))}, lake.Lake.of(wh), "two-b")
    assert not set(files()) & set(after) and tables(wh)["papers"] == published(stage / "two-b" / "papers.parquet")
    monkeypatch.undo()
    after = files()

    # Another column: the table is made again, every part registered anew.
    folder = stage / "three" / "papers.parquet"
    folder.mkdir(parents=True)
    pl.read_parquet(stage / "two" / "papers.parquet" / "1.parquet").with_columns(pl.lit(1).alias("extra")).write_parquet(
        folder / "1.parquet", compression="zstd")
    publish.publish({"papers": folder}, lake.Lake.of(wh), "three")
    assert not set(files()) & set(after) and query(wh, "SELECT count(*), min(extra) FROM papers") == [(3, 1)]


@pytest.mark.parametrize("fault", ["analysis_layer", "unreadable_data_file"])
def test_failing_publish_commits_nothing_and_removes_the_files_it_wrote(tmp_path: Path, monkeypatch, fault: str):
    wh = tmp_path / "wh"
    first = run(wh, 2, "run-one")
    before, files_before = snapshot(wh), data_files(wh)
    if fault == "analysis_layer":  # inside the transaction, after every table's rows were replaced
        def boom(*args, **kwargs):
            raise RuntimeError("injected failure in the analysis layer")
        monkeypatch.setattr(warehouse_sql, "publish_analysis_layer", boom)
        expected = "injected failure"
    else:  # the second table's data file is not Parquet: registering it fails in the transaction
        real = publish._write_data_file

        def write_garbage(frame, data_path, table, run_id):
            path, count = real(frame, data_path, table, run_id)
            if table == "source_files":
                Path(path).write_bytes(b"not parquet at all" * 10)
            return path, count
        monkeypatch.setattr(publish, "_write_data_file", write_garbage)
        expected = "not a|magic bytes"  # DuckDB: not a Parquet file
    with pytest.raises(Exception, match=expected):
        run(wh, 5, "run-failing")
    monkeypatch.undo()
    assert current_snapshot(wh) == first.snapshot_id
    assert snapshot(wh) == before
    assert data_files(wh) == files_before  # nothing of the failed run's stays on disk
    assert not query(wh, "SELECT * FROM lake.snapshots() WHERE commit_message LIKE '%run-failing%'")
    # The next publish goes through.
    assert run(wh, 3, "run-three").snapshot_id == first.snapshot_id + 1
    assert snapshot(wh) == rows(3)


def test_data_files_are_registered_in_place_and_zstd(tmp_path: Path):
    wh = tmp_path / "wh"
    written = []
    real = publish._write_data_file

    def recording(*args):
        written.append(real(*args)[0])
        return written[-1], pq.ParquetFile(written[-1]).metadata.num_rows
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(publish, "_write_data_file", recording)
        run(wh, 4, "run-one")
    assert len(written) == 2
    assert {Path(p).parent.relative_to(wh / "data" / "main").as_posix() for p in written} == {"papers", "source_files"}
    assert all(Path(p).name.startswith("etl-run-one-") for p in written)
    with etl_project.connect(wh) as con:
        for table in ("papers", "source_files"):
            registered = [r[0] for r in con.execute("SELECT data_file FROM ducklake_list_files('lake', ?)", [table]).fetchall()]
            assert registered == [p for p in written if f"/main/{table}/" in p]  # the file Polars wrote, not a copy
    main_files = {p for p in data_files(wh) if "/data/main/" in p}
    assert main_files == set(written)
    assert data_files(wh) == listed_files(wh)  # nothing on disk the lake does not list
    for path in data_files(wh):
        meta = pq.ParquetFile(path).metadata
        codecs = {meta.row_group(g).column(c).compression for g in range(meta.num_row_groups) for c in range(meta.num_columns)}
        assert codecs == {"ZSTD"}, (path, codecs)


@pytest.mark.parametrize("codec", ["zstd", "lz4"])
def test_a_staged_file_is_linked_into_the_lake_when_zstd_and_rewritten_otherwise(tmp_path: Path, codec: str):
    wh, staged = tmp_path / "wh", tmp_path / "stage"
    staged.mkdir()
    files = {}
    for name, frame in frames(3).items():
        files[name] = staged / f"{name}.parquet"
        frame.write_parquet(files[name], compression=codec)
    published = publish.publish(files, lake.Lake.of(wh), "run-one", publish.Retention())
    assert published.row_counts == {"papers": 3, "source_files": 1}
    assert snapshot(wh) == rows(3)
    for name, source in files.items():
        (registered,) = [Path(p) for p in listed_files(wh) if f"/main/{name}/" in p]
        # zstd: the same bytes under a second name (no rewrite); another codec: a zstd rewrite
        assert registered.samefile(source) == (codec == "zstd")
        meta = pq.ParquetFile(registered).metadata
        assert {meta.row_group(0).column(c).compression for c in range(meta.num_columns)} == {"ZSTD"}
    for source in files.values():  # the stage is pruned later: the lake's files stay whole
        source.unlink()
    assert snapshot(wh) == rows(3)


def test_orphaned_files_are_deleted_by_the_next_publish_and_listed_files_stay(tmp_path: Path):
    wh = tmp_path / "wh"
    run(wh, 2, "run-one")
    run(wh, 3, "run-two")
    # A publish that finished says so, and the next one does not search the data path for orphans.
    marker = wh / publish.LISTED_MARKER
    assert marker.exists()
    # As a killed run leaves it: its files, and no marker (it removed it before writing them).
    orphan = wh / "data" / "main" / "papers" / "etl-killed-run-0123.parquet"
    frames(7)["papers"].write_parquet(orphan, compression="zstd")
    stray = wh / "data" / "main" / "source_files" / "etl-killed-run-4567.parquet"
    frames(7)["source_files"].write_parquet(stray, compression="zstd")
    marker.unlink()
    before = snapshot(wh)
    assert snapshot(wh) == before  # an unregistered file changes nothing a reader sees

    done = run(wh, 4, "run-three")
    assert not orphan.exists() and not stray.exists() and marker.exists()
    assert any("removed 2 data file(s)" in note for note in done.notes)
    kept = snapshot_ids(wh)
    assert len(kept) >= 3
    assert all(Path(p).exists() for p in registered_files(wh))
    for sid, version in zip(kept[-3:], (2, 3, 4)):
        assert tables(wh, sid) == rows(version)  # every kept snapshot still reads, complete
    assert data_files(wh) == registered_files(wh)
    assert snapshot(wh) == rows(4)


def test_retention_expires_old_snapshots_and_removes_only_their_files(tmp_path: Path):
    wh = tmp_path / "wh"
    keep_two = publish.Retention(snapshots=2, days=0)
    published = [run(wh, 2 + i, f"run-{i}", keep_two) for i in range(4)]
    kept = snapshot_ids(wh)
    assert kept == [published[2].snapshot_id, published[3].snapshot_id]
    assert any("expired" in note for note in published[3].notes)
    assert data_files(wh) == registered_files(wh)  # what the two kept snapshots list, nothing else
    assert not [p for p in data_files(wh) if Path(p).name.startswith(("etl-run-0-", "etl-run-1-"))]
    assert tables(wh, kept[0]) == rows(4) and snapshot(wh) == rows(5)

    # Seven days: nothing this young expires, however many snapshots there are.
    wh7 = tmp_path / "wh7"
    week = publish.Retention(snapshots=2, days=7)
    published = [run(wh7, 2 + i, f"run-{i}", week) for i in range(4)]
    assert snapshot_ids(wh7)[-4:] == [p.snapshot_id for p in published]
    assert not any(p.notes for p in published)
    assert tables(wh7, published[0].snapshot_id) == rows(2)
    assert len([p for p in data_files(wh7) if "/data/main/papers/" in p]) == 4


def test_retention_from_the_environment(monkeypatch):
    monkeypatch.setenv(publish.KEEP_SNAPSHOTS_ENV, "3")
    monkeypatch.setenv(publish.KEEP_DAYS_ENV, "0.5")
    assert publish.Retention.from_env() == publish.Retention(3, 0.5)
    monkeypatch.delenv(publish.KEEP_SNAPSHOTS_ENV)
    monkeypatch.delenv(publish.KEEP_DAYS_ENV)
    assert publish.Retention.from_env() == publish.Retention(10, 7)
    monkeypatch.setenv(publish.KEEP_SNAPSHOTS_ENV, "ten")
    with pytest.raises(publish.PublishError, match="ETL_KEEP_SNAPSHOTS must be a number"):
        publish.Retention.from_env()


def test_rollback_makes_an_earlier_snapshot_current_as_a_new_one(tmp_path: Path):
    wh = tmp_path / "wh"
    first = run(wh, 2, "run-one")
    second = run(wh, 3, "run-two", extra=pl.DataFrame({"x": [1]}))  # a table the first had not
    assert set(snapshot(wh)) == {"papers", "source_files", "extra"}

    assert (wh / publish.LISTED_MARKER).exists()
    back = publish.rollback(lake.Lake.of(wh), first.snapshot_id, "rollback-test")
    assert back.snapshot_id == second.snapshot_id + 1 == current_snapshot(wh)
    assert not (wh / publish.LISTED_MARKER).exists()  # it wrote data files: the next publish looks for orphans
    assert back.row_counts == {"papers": 2, "source_files": 1}
    assert snapshot(wh) == rows(2)  # the extra table is gone, as in the first snapshot
    assert tables(wh, second.snapshot_id) == rows(3)  # still in the history, the extra table too
    assert query(wh, f"SELECT x FROM extra AT (VERSION => {second.snapshot_id})") == [(1,)]
    with etl_project.connect(wh) as con:
        newest = publish.history(con).row(0, named=True)
    assert newest["message"] == f"rollback to snapshot {first.snapshot_id}" and newest["run_id"] == "rollback-test"

    with pytest.raises(publish.PublishError, match=r"snapshot 99 is not in the history \(kept: 0\.\.3\)"):
        publish.rollback(lake.Lake.of(wh), 99, "rollback-unknown")
    assert current_snapshot(wh) == back.snapshot_id
    # Through the CLI (which takes the run lock): unknown fails with the message, a known one works.
    done = subprocess.run([CLI, "rollback", "--warehouse", str(wh), "99"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "snapshot 99 is not in the history" in done.stderr
    done = subprocess.run([CLI, "rollback", "--warehouse", str(wh), str(second.snapshot_id)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert f"now holds the tables of snapshot {second.snapshot_id} (3 papers)" in done.stdout
    assert snapshot(wh) == {**rows(3), "extra": [(1,)]}
    # The next publish replaces the rolled-back tables as usual.
    assert run(wh, 4, "run-four").row_counts["papers"] == 4 and snapshot(wh)["papers"] == rows(4)["papers"]


def test_export_writes_one_file_per_table_from_one_snapshot(tmp_path: Path):
    wh = tmp_path / "wh"
    first = run(wh, 2, "run-one")
    run(wh, 3, "run-two")
    with etl_project.connect(wh) as con:
        now = publish.export(con, tmp_path / "now")
        then = publish.export(con, tmp_path / "then", snapshot_id=first.snapshot_id)
        only = publish.export(con, tmp_path / "only", tables=["papers"])
        with pytest.raises(publish.PublishError, match="no table nope in snapshot"):
            publish.export(con, tmp_path / "bad", tables=["nope"])
    assert sorted(p.name for p in (tmp_path / "now").iterdir()) == ["papers.parquet", "source_files.parquet"]
    assert {t: sorted(pl.read_parquet(p).rows(), key=repr) for t, p in now.items()} == rows(3)
    assert {t: sorted(pl.read_parquet(p).rows(), key=repr) for t, p in then.items()} == rows(2)
    assert list(only) == ["papers"] and not (tmp_path / "only" / "source_files.parquet").exists()
    assert pq.ParquetFile(now["papers"]).metadata.row_group(0).column(0).compression == "ZSTD"

    done = subprocess.run([CLI, "export", str(tmp_path / "cli"), "--warehouse", str(wh), "--snapshot", str(first.snapshot_id)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert f"papers: {tmp_path / 'cli' / 'papers.parquet'}" in done.stdout
    assert pl.read_parquet(tmp_path / "cli" / "source_files.parquet").rows() == [("v2.txt", 2)]


def test_a_moved_warehouse_opens_where_it_now_is(tmp_path: Path):
    """Moved with its name (as a project folder moves): connect, ``etl-project sql`` and
    ``duckdb -init warehouse/open.sql`` from the new parent. Renamed: connect and sql (open.sql
    names the folder, relative to its parent, until the next publish rewrites it)."""
    wh = tmp_path / "project" / "warehouse"
    run(wh, 2, "run-one")
    run(wh, 3, "run-two")
    before = snapshot(wh)
    (tmp_path / "elsewhere").mkdir()
    moved = Path(shutil.move(str(wh), str(tmp_path / "elsewhere" / "warehouse")))
    assert not wh.exists()

    assert snapshot(moved) == before
    assert tables(moved, current_snapshot(moved) - 1) == rows(2)
    shell = subprocess.run([DUCKDB_CLI, "-init", "warehouse/open.sql", "-csv", "-noheader"], cwd=moved.parent,
                           input="SELECT count(*) FROM papers;\nSELECT source_file FROM source_files;\n",
                           capture_output=True, text=True, timeout=60)
    assert shell.returncode == 0, shell.stderr
    assert shell.stdout.split() == ["3", "v3.txt"]

    renamed = Path(shutil.move(str(moved), str(tmp_path / "renamed")))
    assert snapshot(renamed) == before
    done = subprocess.run([CLI, "sql", "--warehouse", str(renamed), "SELECT count(*) AS n FROM papers"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert re.search(r"│\s+3\s+│", done.stdout), done.stdout

    # Publishing into the renamed folder keeps what its snapshots list (the orphan cleanup does
    # not take them for strays), writes there, and rewrites open.sql for the new name.
    done = run(renamed, 4, "run-three")
    assert snapshot(renamed) == rows(4)
    assert tables(renamed, done.snapshot_id - 1) == rows(3)
    assert all(p.startswith(str(renamed / "data")) for p in listed_files(renamed))
    shell = subprocess.run([DUCKDB_CLI, "-init", "renamed/open.sql", "-csv", "-noheader"], cwd=tmp_path,
                           input="SELECT count(*) FROM papers;\n", capture_output=True, text=True, timeout=60)
    assert shell.stdout.split() == ["4"], shell.stderr


def test_the_old_layout_is_refused_and_nothing_is_deleted(tmp_path: Path):
    wh = tmp_path / "wh"
    (wh / ".releases" / "20250101T000000000000Z" / "parquet").mkdir(parents=True)
    (wh / ".releases" / "20250101T000000000000Z" / "warehouse.duckdb").write_bytes(b"old database")
    (wh / "current").symlink_to(".releases/20250101T000000000000Z")
    (wh / "warehouse.duckdb").symlink_to("current/warehouse.duckdb")
    listing = sorted(str(p.relative_to(wh)) for p in wh.rglob("*"))
    with pytest.raises(publish.PublishError, match=r"pre-DuckLake layout \(\.releases, current, warehouse\.duckdb\).*"
                                                   r"mkdir old-warehouse && mv .*/\.releases .*/current .*/warehouse\.duckdb old-warehouse/"):
        run(wh, 2, "run-one")
    assert sorted(str(p.relative_to(wh)) for p in wh.rglob("*")) == listing
    assert (wh / "warehouse.duckdb").read_bytes() == b"old database"
    assert not (wh / "catalog.sqlite").exists() and not (wh / "data").exists()


def test_a_table_may_gain_a_column_between_publishes(tmp_path: Path):
    wh = tmp_path / "wh"
    first = run(wh, 2, "run-one")
    wider = frames(3)
    wider["papers"] = wider["papers"].with_columns(pl.Series("year", [2020, 2021, 2022]))
    second = publish.publish(wider, lake.Lake.of(wh), "run-two", publish.Retention())
    with etl_project.connect(wh) as con:
        assert [r[0] for r in con.sql("DESCRIBE papers").fetchall()] == ["paper_id", "abstract", "year"]
        assert con.sql("SELECT max(year) FROM papers").fetchone() == (2022,)
    assert snapshot(wh)["papers"] == sorted(wider["papers"].rows(), key=repr)
    assert tables(wh, first.snapshot_id) == rows(2)  # the old snapshot keeps its columns
    assert second.snapshot_id == first.snapshot_id + 1
    # And back to fewer columns.
    run(wh, 4, "run-three")
    assert snapshot(wh) == rows(4)


def test_publishing_binds_no_python_values_so_pandas_is_never_imported(tmp_path: Path):
    """DuckDB imports pandas (0.3 s) to bind any Python parameter: publish, expiry and history
    inline their values as literals instead, quotes in a run id included."""
    script = f"""
import json
import sys
import polars as pl
from etl_project import lake, publish
target = lake.Lake.of({str(tmp_path / "wh")!r})
keep_one = publish.Retention(snapshots=1, days=0)
for version, run_id in enumerate(["run-1", "it's run 2"], start=1):
    frames = {{"papers": pl.DataFrame({{"paper_id": [str(i) for i in range(version)]}})}}
    published = publish.publish(frames, target, run_id, keep_one)
con = lake.attach(target, read_only=True)
print(json.dumps({{"snapshot": published.snapshot_id, "runs": publish.history(con)["run_id"].to_list(),
                  "expired": any("expired" in n for n in published.notes), "pandas": "pandas" in sys.modules}}))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    result = json.loads(done.stdout)
    assert result["runs"] == ["it's run 2"] and result["expired"] and result["snapshot"] > 1
    assert result["pandas"] is False
