"""File keys, fingerprints, change detection and plans of the landing folder (no Dagster)."""

import os
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from etl_project import landing


def test_plain_names_are_their_own_keys():
    for name in ["000_0f293dacb70f2eae.txt", "sub/dir/list 2025.txt", "ICML 论文.txt", "it's; a \"name\".txt"]:
        assert landing.file_key(name) == name
        assert landing.file_name(name) == name


def test_names_dagster_refuses_are_escaped_reversibly():
    assert landing.file_key("wait... what.txt") == "wait..%2E what.txt"
    assert landing.file_key("100%.txt") == "100%25.txt"
    assert landing.file_key("tab\there") == "tab%09here"
    latin1_name = b"caf\xe9.txt".decode("utf-8", "surrogateescape")
    assert landing.file_key(latin1_name) == "caf%E9.txt"
    for name in ["wait... what.txt", "100%.txt", "tab\there", latin1_name, "....", "%2E"]:
        assert landing.file_name(landing.file_key(name)) == name


names = st.text(st.characters(codec="utf-8") | st.sampled_from(["%", ".", "\udce9", "\n"]), max_size=30)


@given(names)
def test_keys_round_trip_and_are_plain_text(name):
    key = landing.file_key(name)
    assert landing.file_name(key) == name
    assert "..." not in key and all(0x20 <= ord(char) != 0x7F for char in key)  # no control characters
    assert not any(0xDC80 <= ord(char) <= 0xDCFF for char in key)  # valid UTF-8: any tool can store it


def write(folder: Path, name: str, text: str, mtime: int | None = None) -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    if mtime is not None:
        os.utime(path, ns=(mtime, mtime))
    return path


def test_scan_skips_ignored_names(tmp_path: Path):
    write(tmp_path, "a.txt", "A")
    write(tmp_path, ".hidden", "H")
    write(tmp_path, "a.txt~", "backup")
    assert sorted(landing.scan(tmp_path)) == ["a.txt"]


def test_detect_changes_by_content_not_by_touch(tmp_path: Path):
    a = write(tmp_path, "a.txt", "same")
    write(tmp_path, "b.txt", "old")
    write(tmp_path, "c.txt", "new file")
    known = {"a.txt": landing.sha256_of(a), "b.txt": "0" * 64, "gone.txt": "1" * 64}
    os.utime(a, ns=(1, 1))  # touched: same bytes, other mtime
    changes, seen = landing.detect_changes(tmp_path, landing.scan(tmp_path), known)
    assert (changes.new, changes.changed, changes.removed, changes.unchanged) == (["c.txt"], ["b.txt"], ["gone.txt"], ["a.txt"])
    assert changes.to_parse == ["b.txt", "c.txt"]
    assert seen["c.txt"].sha256 == landing.sha256_of(tmp_path / "c.txt")


def test_a_growing_file_waits_until_it_settles(tmp_path: Path):
    now = 10**18
    write(tmp_path, "big.txt", "first half", mtime=now - 10**9)
    first, seen = landing.detect_changes(tmp_path, landing.scan(tmp_path), {}, previous={}, now_ns=now, settle_seconds=5)
    assert first.growing == ["big.txt"] and not first.to_parse
    write(tmp_path, "big.txt", "first half and the rest", mtime=now)
    second, seen = landing.detect_changes(tmp_path, landing.scan(tmp_path), {}, previous=seen, now_ns=now + 1, settle_seconds=5)
    assert second.growing == ["big.txt"]  # it changed since the last look
    third, seen = landing.detect_changes(tmp_path, landing.scan(tmp_path), {}, previous=seen, now_ns=now + 2, settle_seconds=5)
    assert third.growing == ["big.txt"]  # unchanged, but not yet old enough
    fourth, seen = landing.detect_changes(tmp_path, landing.scan(tmp_path), {}, previous=seen, now_ns=now + 6 * 10**9, settle_seconds=5)
    assert fourth.new == ["big.txt"]
    assert seen["big.txt"].sha256 == landing.sha256_of(tmp_path / "big.txt")


def test_an_unreadable_file_counts_as_changed_so_ingest_records_why(tmp_path: Path):
    (tmp_path / "dangling.txt").symlink_to(tmp_path / "nowhere")
    changes, _ = landing.detect_changes(tmp_path, landing.scan(tmp_path), {"dangling.txt": "0" * 64})
    assert changes.changed == ["dangling.txt"]


def test_a_folder_that_cannot_be_listed_is_refused_not_skipped(tmp_path: Path, monkeypatch):
    from etl_project import ingest

    write(tmp_path, "a.txt", "A\n\nOne abstract.\n")
    (tmp_path / "locked").mkdir()
    real_list = ingest.list_landing_files

    def list_with_a_locked_folder(root, errors=None):  # as os.walk reports it (tests run as root)
        errors.append(PermissionError(13, "Permission denied", str(root / "locked")))
        return [p for p in real_list(root) if p.name != "locked"]

    monkeypatch.setattr(ingest, "list_landing_files", list_with_a_locked_folder)
    assert sorted(landing.scan(tmp_path)) == ["a.txt", "locked"]
    refused = ingest.read_landing_file(tmp_path / "locked", tmp_path)
    assert refused.text is None and "cannot be listed" in refused.error


# --- the landing folder itself: an error, never "no files" ----------------------------------

def test_a_missing_folder_a_file_or_an_unlistable_folder_is_an_error_not_empty(tmp_path: Path, monkeypatch):
    import pytest

    from etl_project import ingest

    with pytest.raises(ingest.LandingFolderError, match="does not exist"):
        landing.scan(tmp_path / "nope")
    write(tmp_path, "list.txt", "A\n\nOne abstract.\n")
    with pytest.raises(ingest.LandingFolderError, match="is a file, not a folder"):
        landing.scan(tmp_path / "list.txt")
    real_walk = os.walk

    def walk_of_an_unreadable_root(root, onerror=None):  # as os.walk reports it (tests run as root)
        onerror(PermissionError(13, "Permission denied", str(root)))
        return iter(())

    monkeypatch.setattr(ingest.os, "walk", walk_of_an_unreadable_root)
    with pytest.raises(ingest.LandingFolderError, match="cannot list the landing folder"):
        landing.scan(tmp_path)
    monkeypatch.setattr(ingest.os, "walk", real_walk)


# --- removal_refusal: a landing folder that lost most of the warehouse's files ---------------

def plan_removing(published: list[str], still_there: list[str], new: list[str] = ()) -> landing.Plan:
    removed = sorted(set(published) - set(still_there))
    changes = landing.Changes(new=sorted(new), unchanged=sorted(still_there), removed=removed)
    return landing.make_plan(changes, published=published)


def test_removing_every_published_file_is_refused():
    refusal = landing.removal_refusal(plan_removing(["a", "b"], []))
    assert refusal and "all 2 published file(s)" in refusal
    # New files do not make an emptied warehouse acceptable: every published file still goes.
    assert "all 2" in landing.removal_refusal(plan_removing(["a", "b"], [], new=["c"]))
    assert "all 1" in landing.removal_refusal(plan_removing(["a"], []))


def test_removing_more_than_half_is_refused_exactly_half_is_allowed():
    refusal = landing.removal_refusal(plan_removing(["a", "b", "c", "d"], ["d"]))
    assert refusal and "3 of the 4 published files, more than half" in refusal
    assert landing.removal_refusal(plan_removing(["a", "b", "c", "d"], ["c", "d"])) is None
    assert landing.removal_refusal(plan_removing(["a", "b", "c"], ["b", "c"])) is None


def test_a_first_run_or_a_run_removing_nothing_published_is_never_refused():
    assert landing.removal_refusal(plan_removing([], [], new=["a"])) is None
    assert landing.removal_refusal(plan_removing([], [])) is None
    # Files parsed but never published do not count: the warehouse holds nothing to lose.
    plan = landing.make_plan(landing.Changes(removed=["a", "b"]), published=[])
    assert plan.removed == ["a", "b"] and landing.removal_refusal(plan) is None
    # The published set can be handed in (e.g. the rows of source_files).
    assert landing.removal_refusal(plan, published=["a", "b", "c"]) is not None
