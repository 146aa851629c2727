"""stage.stage_parts: a table restaged from the previous one's parts, writing only what changed."""

from pathlib import Path

import polars as pl
from polars.testing import assert_frame_equal

from etl_project import stage


def rows(*ids: str) -> pl.DataFrame:
    return pl.DataFrame({"paper_id": list(ids), "text": [f"text of {i}" for i in ids]}, schema={"paper_id": pl.String, "text": pl.String})


def read(folder: Path) -> pl.DataFrame:
    return pl.read_parquet(folder).sort("paper_id")


def inodes(folder: Path) -> set[int]:
    return {path.stat().st_ino for path in folder.glob("*.parquet")}


def test_parts_that_keep_every_row_are_linked_the_others_rewritten_and_fresh_rows_added(tmp_path: Path):
    first = stage.stage_parts(tmp_path / "1", None, "paper_id", pl.Series([], dtype=pl.String), rows("a", "b", "c", "d", "e"), 2, 8)
    assert first == stage.PartsStaged(linked=0, rewritten=0, written=3)
    assert_frame_equal(read(tmp_path / "1"), rows("a", "b", "c", "d", "e"))

    # "c" changed (its new row is fresh), "e" is gone, "f" is new: a/b's part is linked.
    second = stage.stage_parts(tmp_path / "2", tmp_path / "1", "paper_id", pl.Series(["a", "b", "d"]),
                               rows("c", "f").with_columns(text=pl.lit("new")), 2, 8)
    assert second == stage.PartsStaged(linked=1, rewritten=1, written=1)
    expected = pl.concat([rows("a", "b", "d"), rows("c", "f").with_columns(text=pl.lit("new"))]).sort("paper_id")
    assert_frame_equal(read(tmp_path / "2"), expected)
    assert len(inodes(tmp_path / "1") & inodes(tmp_path / "2")) == 1  # the same bytes, not a copy


def test_a_part_left_with_no_row_goes_and_an_empty_table_keeps_its_columns(tmp_path: Path):
    stage.stage_parts(tmp_path / "1", None, "paper_id", pl.Series([], dtype=pl.String), rows("a", "b"), 1, 8)
    gone = stage.stage_parts(tmp_path / "2", tmp_path / "1", "paper_id", pl.Series(["b"]), rows(), 1, 8)
    assert gone == stage.PartsStaged(linked=1, rewritten=0, written=0)
    assert read(tmp_path / "2")["paper_id"].to_list() == ["b"]
    empty = stage.stage_parts(tmp_path / "3", tmp_path / "2", "paper_id", pl.Series([], dtype=pl.String), rows(), 1, 8)
    assert empty.linked == empty.rewritten == 0 and len(list((tmp_path / "3").glob("*.parquet"))) == 1
    assert pl.read_parquet(tmp_path / "3").schema == rows().schema and pl.read_parquet(tmp_path / "3").is_empty()


def test_beyond_max_parts_the_smallest_are_merged_but_never_beyond_a_fresh_parts_size(tmp_path: Path):
    stage.stage_parts(tmp_path / "1", None, "paper_id", pl.Series([], dtype=pl.String), rows(*"abcde"), 2, 3)
    assert len(list((tmp_path / "1").glob("*.parquet"))) == 3  # ab, cd, e
    staged = stage.stage_parts(tmp_path / "2", tmp_path / "1", "paper_id", pl.Series(list("abcde")), rows("f"), 2, 3)
    assert staged.written == 2  # f, then e and f merged
    assert sorted(pl.read_parquet(path).height for path in (tmp_path / "2").glob("*.parquet")) == [2, 2, 2]
    assert_frame_equal(read(tmp_path / "2"), rows(*"abcdef"))
    full = stage.stage_parts(tmp_path / "3", tmp_path / "2", "paper_id", pl.Series(list("abcdef")), rows(), 2, 1)
    assert full == stage.PartsStaged(linked=3, rewritten=0, written=0)  # parts as large as fresh ones stay apart


def test_a_part_of_other_columns_is_rewritten_to_the_fresh_rows_columns(tmp_path: Path):
    """A previous table of another schema (an older release) is never linked as it is: the
    lake registers every part of a table under one schema."""
    (tmp_path / "old.parquet").parent.mkdir(exist_ok=True)
    rows("a").with_columns(extra=pl.lit(1)).write_parquet(tmp_path / "old.parquet")
    staged = stage.stage_parts(tmp_path / "new", tmp_path / "old.parquet", "paper_id", pl.Series(["a"]), rows("b"), 2, 8)
    assert staged == stage.PartsStaged(linked=0, rewritten=1, written=1)
    assert_frame_equal(read(tmp_path / "new"), rows("a", "b"))


def test_the_placement_says_which_part_holds_each_key_and_rows_of_reads_only_those(tmp_path: Path):
    table = pl.DataFrame({"paper_id": list("aabbbc"), "text": [f"row {n}" for n in range(6)]})  # several rows per key
    stage.stage_parts(tmp_path / "1", None, "paper_id", pl.Series([], dtype=pl.String), table, 2, 8)
    placed = stage.placement(tmp_path / "1", "paper_id")
    # Fresh parts of 2 rows: b's rows lie in two of them, and both are named.
    assert placed.group_by("paper_id").len().sort("paper_id").rows() == [("a", 1), ("b", 2), ("c", 1)]
    for paper_id, part in placed.rows():
        assert paper_id in pl.read_parquet(tmp_path / "1" / part)["paper_id"].to_list()
    assert_frame_equal(stage.rows_of(tmp_path / "1", "paper_id", pl.Series(["b"]), "text"),
                       table.filter(pl.col("paper_id") == "b").select("text"))
    assert stage.rows_of(tmp_path / "1", "paper_id", pl.Series(["x"]), "text").schema == {"text": pl.String}
    # Only the parts holding the keys asked for are read: another part may be anything.
    [a_part] = placed.filter(pl.col("paper_id") == "a")["part"].to_list()
    (tmp_path / "1" / a_part).unlink()
    (tmp_path / "1" / a_part).write_bytes(b"not parquet")
    assert stage.rows_of(tmp_path / "1", "paper_id", pl.Series(["c"]), "text")["text"].to_list() == ["row 5"]


def test_the_next_run_takes_the_keys_from_the_placement_and_one_naming_a_missing_part_is_not_used(tmp_path: Path):
    stage.stage_parts(tmp_path / "1", None, "paper_id", pl.Series([], dtype=pl.String), rows(*"abcd"), 2, 8)
    placed = stage.placement(tmp_path / "1", "paper_id")
    ab, cd = (placed.filter(pl.col("paper_id") == key)["part"].item() for key in "ac")
    # A placement that puts b in c's part (never so in a real one: part names are never reused)
    # shows which the next run reads: it rewrites c's part and links a's, where the parts'
    # own keys would have it rewrite a's part and link c's.
    placed.with_columns(part=pl.when(pl.col("paper_id") == "b").then(pl.lit(cd)).otherwise("part")).write_parquet(
        stage.placement_path(tmp_path / "1"))
    stage.stage_parts(tmp_path / "2", tmp_path / "1", "paper_id", pl.Series(list("acd")), rows(), 2, 8)
    assert (tmp_path / "2" / ab).stat().st_ino == (tmp_path / "1" / ab).stat().st_ino
    assert not (tmp_path / "2" / cd).exists()
    # A placement that names a part the folder lacks is not used: the parts' keys are read instead.
    placed.with_columns(part=pl.lit("gone.parquet")).write_parquet(stage.placement_path(tmp_path / "1"))
    assert stage.placement(tmp_path / "1", "paper_id") is None
    staged = stage.stage_parts(tmp_path / "3", tmp_path / "1", "paper_id", pl.Series(list("acd")), rows(), 2, 8)
    assert staged == stage.PartsStaged(linked=1, rewritten=1, written=0)
    assert (tmp_path / "3" / cd).stat().st_ino == (tmp_path / "1" / cd).stat().st_ino and not (tmp_path / "3" / ab).exists()
    assert_frame_equal(read(tmp_path / "3"), rows(*"acd"))
    assert_frame_equal(stage.placement(tmp_path / "3", "paper_id").sort("paper_id").select("paper_id"), rows(*"acd").select("paper_id"))
