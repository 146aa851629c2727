import polars as pl
import pytest

from etl_project import dedup, dedup_memo
from etl_project.dedup_memo import text_hash
from etl_project.enrich import reuse
from etl_project_tests.conftest import normalized_records


def test_paper_id_is_fixed():
    assert dedup.paper_id_of("hello world") == "d447b1ea40e6988b"
    assert dedup.paper_id_of("we propose x.") == dedup.paper_id_of("we propose x.")


ROWS = [
    ("b.txt", 1, "We propose “X”."),
    ("a.txt", 2, "We propose \"X\"."),
    ("a.txt", 1, "Another abstract."),
    ("c.txt", 5, "WE PROPOSE “X”."),
    ("b.txt", 2, "Another abstract."),
]


def test_exact_dedup_and_canonical_rule():
    papers, occurrences = dedup.deduplicate(normalized_records(ROWS))
    assert papers.select("abstract", "occurrence_count", "source_count", "first_source_file", "first_ordinal").rows() == [
        ("Another abstract.", 2, 2, "a.txt", 1),
        ('We propose "X".', 3, 3, "a.txt", 2),
    ]
    kinds = dict(occurrences.select("record_id", "match_kind").rows())
    assert kinds == {"a.txt:1": "canonical", "a.txt:2": "canonical", "b.txt:1": "exact", "b.txt:2": "exact", "c.txt:5": "exact"}
    assert occurrences["record_id"].is_unique().all()
    assert set(occurrences["paper_id"]) == set(papers["paper_id"])
    assert papers["paper_id"].str.contains(r"^[0-9a-f]{16}$").all()


def test_dedup_is_deterministic_under_reordering():
    first, _ = dedup.deduplicate(normalized_records(ROWS))
    second, _ = dedup.deduplicate(normalized_records(list(reversed(ROWS))))
    assert first.equals(second)


def test_source_overlap():
    # "one" twice in a: a file's paper counts once.
    rows = [("a", 1, "one"), ("a", 2, "two"), ("a", 3, "one"), ("b", 1, "one"), ("b", 2, "two"), ("c", 1, "two"),
            ("d", 1, "four")]
    papers, occurrences = dedup.deduplicate(normalized_records(rows))
    overlap = dedup.source_overlap(papers)
    assert overlap.select("file_a", "file_b", "shared_papers", "papers_a", "papers_b").rows() == [
        ("a", "b", 2, 2, 2),
        ("a", "c", 1, 2, 1),
        ("b", "c", 1, 2, 1),
    ]
    assert overlap["jaccard"].to_list() == [1.0, 0.5, 0.5]
    # What the occurrences say, file by file.
    files: dict[str, set[str]] = {}
    for paper_id, source_file in occurrences.select("paper_id", "source_file").iter_rows():
        files.setdefault(source_file, set()).add(paper_id)
    assert overlap.select("file_a", "file_b", "shared_papers", "papers_a", "papers_b").rows() == sorted(
        (a, b, len(files[a] & files[b]), len(files[a]), len(files[b])) for a in files for b in files if a < b and files[a] & files[b])


def test_same_result_from_a_scan_and_from_any_row_order(tmp_path):
    # Long columns are read back by row number: from a Parquet scan in file order (no reordering
    # needed) and from frames in any other order, the papers and occurrences must be the same.
    stems = ["We propose “X” for graphs.", "Another abstract here.", "A third one, quite different.", "WE PROPOSE “X” FOR GRAPHS."]
    rows = [(f"f{i % 7}.txt", i // 7 + 1, f"{stems[i % 4]} {['', 'v2'][i % 3 == 0]}".strip()) for i in range(60)]
    in_order = normalized_records(sorted(rows)).sort("source_file", "ordinal")
    in_order.write_parquet(tmp_path / "records.parquet")
    for near in (None, dedup.DEFAULT_NEAR):
        expected = dedup.deduplicate(in_order, near)
        assert expected[0].height < 8 and expected[1].height == 60  # duplicates were merged
        for records in (pl.scan_parquet(tmp_path / "records.parquet"), in_order.reverse(), in_order.sample(fraction=1.0, shuffle=True, seed=3)):
            papers, occurrences = dedup.deduplicate(records, near)
            assert papers.equals(expected[0]) and occurrences.equals(expected[1])


def test_variant_texts_are_each_papers_distinct_texts_canonical_first():
    # Same key, other text (case, quotes): exact duplicates whose texts still differ.
    rows = [("b.txt", 1, "We propose “X”."), ("a.txt", 2, 'We propose "X".'), ("c.txt", 5, "WE PROPOSE “X”."),
            ("a.txt", 1, "Another abstract."), ("b.txt", 2, "Another abstract."), ("c.txt", 1, "We propose “X”.")]
    records = normalized_records(rows)
    papers, occurrences = dedup.deduplicate(records)
    expected, seen = [], set()
    for pair in papers.select("paper_id", "abstract").iter_rows():
        expected.append(pair)
        seen.add(pair)
    text_of = dict(records.select("record_id", "text").iter_rows())
    others = occurrences.filter(pl.col("match_kind") != "canonical").sort("source_file", "ordinal")
    for paper_id, record_id in others.select("paper_id", "record_id").iter_rows():
        if (paper_id, text_of[record_id]) not in seen:
            expected.append((paper_id, text_of[record_id]))
            seen.add((paper_id, text_of[record_id]))
    assert len(expected) == 4  # two papers; one of them written three ways
    assert dedup.variant_texts(occurrences, records).rows() == expected
    shuffled = occurrences.sample(fraction=1.0, shuffle=True, seed=1)
    assert dedup.variant_texts(shuffled.lazy(), records.reverse().lazy()).rows() == expected


def test_variant_hashes_are_the_variant_texts_hashed_and_read_back_only_when_they_match(tmp_path):
    rows = [("b.txt", 1, "We propose “X”."), ("a.txt", 2, 'We propose "X".'), ("c.txt", 5, "WE PROPOSE “X”."),
            ("a.txt", 1, "Another abstract."), ("b.txt", 2, "Another abstract."), ("c.txt", 1, "We propose “X”.")]
    records = normalized_records(rows)
    done = dedup.deduplicate_with_memo(records)
    texts = dedup.variant_texts(done.occurrences, records)
    # The hashes the deduplication keeps, as the enrichment steps read them beside the papers.
    done.papers.write_parquet(tmp_path / "papers.parquet")
    done.memo.write(tmp_path, "build")
    dedup_memo.write_variants(tmp_path, done.variants, reuse.text_fingerprints(done.variants))
    kept = dedup_memo.paper_variants(tmp_path / "papers.parquet", "build")
    assert dedup_memo.paper_variants(tmp_path / "papers.parquet", "another build") is None  # another build's hashes
    assert dedup_memo.paper_fingerprints(tmp_path / "papers.parquet", "another build") is None
    assert kept.equals(dedup.variant_hashes(done.occurrences, records.select("record_id", *text_hash("text"))))
    assert kept.select("paper_id", "hash_a", "hash_b").equals(texts.select("paper_id", *text_hash("abstract")))
    # The fingerprints staged with them are those of the texts themselves.
    staged = dedup_memo.paper_fingerprints(tmp_path / "papers.parquet", "build")
    assert reuse.pick(staged, "texts").equals(reuse.fingerprints(texts, "abstract"))
    first = texts["paper_id"].is_first_distinct()
    assert reuse.pick(staged, "canonical").equals(reuse.fingerprints(texts.filter(first), "abstract"))
    variants = texts.filter(~first).select("paper_id", *text_hash("abstract")).sort("paper_id", "hash_a", "hash_b")
    assert reuse.pick(staged, "variants").drop_nulls().sort("paper_id").equals(reuse.combine(variants).sort("paper_id"))
    assert staged.filter(pl.col("variants_a").is_null())["paper_id"].to_list() == [texts["paper_id"][0]]  # "Another abstract."
    one = texts["paper_id"][-1]
    assert dedup.variant_texts(done.occurrences, records, kept, pl.Series([one])).equals(texts.filter(pl.col("paper_id") == one))
    # Records whose texts are no longer those the deduplication hashed are refused, not read.
    edited = records.with_columns(text=pl.col("text") + " Edited.")
    with pytest.raises(RuntimeError, match="materialize papers again"):
        dedup.variant_texts(done.occurrences, edited, kept)


def test_reading_rows_back_finds_them_in_any_order_and_refuses_a_missing_or_repeated_record():
    records = normalized_records(ROWS)
    wanted = records[[3, 0]]
    ids, files = wanted["record_id"], wanted["source_file"]
    for shuffled in (records, records.reverse(), records.sample(fraction=1.0, shuffle=True, seed=2)):
        assert dedup._rows_of(shuffled.lazy(), ids, files, ["text"])["text"].to_list() == wanted["text"].to_list()
    for broken in (records.filter(pl.col("record_id") != ids[0]), pl.concat([records, records[[3]]])):
        with pytest.raises(RuntimeError, match="once"):
            dedup._rows_of(broken.lazy(), ids, files, ["text"])
