"""Deduplication that looks up an earlier run's memo gives exactly what working everything out gives."""

import hashlib
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from etl_project import dedup, dedup_memo
from etl_project.dedup_memo import Memo
from etl_project.enrich import reuse
from etl_project.enrich.markup import with_plain_text
from etl_project.near_dedup import NearConfig, near_duplicates
from etl_project_tests.conftest import normalized_records

BASE = ("we study robust training of graph neural networks under label noise and propose a method that "
        "reweights samples by their agreement with neighbours with experiments on citation benchmarks")
OTHER = ("a compiler for sparse tensor algebra that fuses loops across kernels and schedules them for "
         "modern accelerators reaching the speed of hand written code on many workloads")
# Near variants of each of three bases, a chain (each step a few words from the last, the ends far
# apart), exact copies that differ in case only, and texts too short for near matching.
CHAIN = [BASE]
for old, new in [("robust", "stable"), ("graph", "hyper"), ("label", "tag"), ("citation", "social"),
                 ("samples", "nodes"), ("neighbours", "peers"), ("method", "scheme")]:
    CHAIN.append(CHAIN[-1].replace(old, new))
THIRD = ("an empirical study of language models trained on source code showing that scaling data and "
         "parameters together improves pass rates on programming benchmarks across many languages")
TEXTS = [*CHAIN, OTHER, OTHER.replace("sparse", "dense"), OTHER.upper(), BASE.upper(), THIRD,
         THIRD.replace("empirical", "systematic"), "Too short to match.", "Also short."]
NAMES = ["a.txt", "b.txt", "c.txt", "sub/d.txt", "e.txt"]
CONFIGS = [NearConfig(), NearConfig(max_bucket=2), NearConfig(threshold=0.6, chain_guard=0.3)]

folders = st.dictionaries(st.sampled_from(NAMES), st.lists(st.sampled_from(TEXTS), min_size=1, max_size=5), min_size=1)
operations = st.one_of(
    st.tuples(st.just("write"), st.sampled_from(NAMES), st.lists(st.sampled_from(TEXTS), min_size=0, max_size=5)),
    st.tuples(st.just("remove"), st.sampled_from(NAMES), st.just(None)),
    st.tuples(st.just("rename"), st.sampled_from(NAMES), st.sampled_from(NAMES)),
)


def tables(folder: dict[str, list[str]]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(records, files) of a landing folder given as {file: texts}."""
    rows = [(name, ordinal, text) for name in sorted(folder) for ordinal, text in enumerate(folder[name], start=1)]
    files = pl.DataFrame(
        [(name, hashlib.sha256("\n\n".join(texts).encode()).hexdigest()) for name, texts in folder.items()],
        schema=dedup_memo.FILES_SCHEMA, orient="row",
    )
    return normalized_records(rows) if rows else normalized_records([("x", 1, "x")]).clear(), files


def round_trip(done: dedup.Deduplicated, folder: Path, build: str, config: NearConfig) -> Memo:
    """The memo as the next run reads it: staged beside the papers, then read back."""
    folder.mkdir(parents=True, exist_ok=True)
    done.papers.write_parquet(folder / "papers.parquet")
    done.memo.write(folder, build)
    dedup_memo.write_variants(folder, done.variants, reuse.text_fingerprints(done.variants))
    memo = Memo.read(folder / "papers.parquet", build, config)
    assert memo is not None
    return memo


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(start=folders, steps=st.lists(operations, min_size=1, max_size=4), config=st.sampled_from(CONFIGS))
def test_any_sequence_of_changes_gives_what_a_fresh_deduplication_gives(tmp_path_factory, start, steps, config):
    root = tmp_path_factory.mktemp("memo")
    folder = dict(start)
    records, files = tables(folder)
    done = dedup.deduplicate_with_memo(records, config, files)
    for number, (kind, name, arg) in enumerate(steps):
        memo = round_trip(done, root / str(number), "build", config)
        # The staged bands and pairs (grown or written again): each key's or pair's row once, every
        # live one there, and the rows left behind by keys that are gone few.
        stored, live = memo.bands.collect(), done.memo.bands.collect()
        assert not stored.select(dedup_memo.KEY).is_duplicated().any() and not memo.pairs.collect().select(dedup_memo.PAIR).is_duplicated().any()
        assert live.join(stored, on=dedup_memo.KEY, how="anti").is_empty()
        assert stored.height - live.height <= dedup_memo.STALE_SHARE * live.height
        if kind == "write":
            folder[name] = arg
        elif kind == "remove":
            folder.pop(name, None)
        elif kind == "rename" and name in folder:
            folder[arg] = folder.pop(name)
        records, files = tables(folder)
        before = done.occurrences
        done = dedup.deduplicate_with_memo(records.lazy(), config, files, memo)
        fresh = dedup.deduplicate_with_memo(records, config, files)
        # The occurrences of the papers no change reached are the previous run's, row for row:
        # what lets the paper_occurrences checks validate the others only.
        untouched = done.occurrences.filter(~pl.col("paper_id").is_in(done.reworked.implode()))
        assert untouched.join(before, on=untouched.columns, how="anti", nulls_equal=True).is_empty()
        assert done.fresh["paper_id"].is_in(done.reworked.implode()).all()
        assert_frame_equal(done.papers, fresh.papers, check_exact=True)
        assert_frame_equal(done.occurrences, fresh.occurrences, check_exact=True)
        # What the next run keeps, component labels included, is what working it out gives.
        assert_frame_equal(done.memo.clusters.collect(), fresh.memo.clusters.collect(), check_exact=True)
        # The bands it keeps are those of the keys there are now: none is lost, none of a key gone stays.
        assert_frame_equal(done.memo.bands.collect().sort(dedup_memo.KEY), fresh.memo.bands.collect().sort(dedup_memo.KEY),
                           check_exact=True)
        # Each record's text hash, looked up or not, is its text's: what enrichment fingerprints by.
        texts = records.select("record_id", *dedup_memo.text_hash("text", ("text_a", "text_b"))).sort("record_id")
        assert_frame_equal(done.memo.keys.select("record_id", "text_a", "text_b").sort("record_id").collect(), texts, check_exact=True)
        assert_frame_equal(done.variants, fresh.variants, check_exact=True)  # what enrichment fingerprints by
        # The fingerprints, the untouched papers' taken from the previous run's, are a fresh run's.
        before_fingerprints = dedup_memo.paper_fingerprints(root / str(number) / "papers.parquet", "build")
        assert_frame_equal(reuse.text_fingerprints(done.variants, before_fingerprints, done.untouched).sort("paper_id"),
                           reuse.text_fingerprints(fresh.variants).sort("paper_id"), check_exact=True)


def test_a_change_works_out_only_what_it_brings_and_looks_up_the_rest(tmp_path, monkeypatch):
    folder = {"a.txt": CHAIN[:3], "b.txt": [OTHER, CHAIN[0]], "c.txt": [TEXTS[-2], BASE.upper()]}
    records, files = tables(folder)
    first = dedup.deduplicate_with_memo(records, NearConfig(), files)
    memo = round_trip(first, tmp_path, "build", NearConfig())
    banded, hashed = [], []
    lsh_bands, key_hashes = dedup_memo.lsh_bands, dedup_memo.key_hashes
    monkeypatch.setattr(dedup_memo, "lsh_bands", lambda texts, config: (banded.extend(texts), lsh_bands(texts, config))[1])
    monkeypatch.setattr(dedup_memo, "key_hashes", lambda records, same, memo: (
        hashed.append(records.filter(~pl.col("source_file").is_in(same.implode())).collect().height),
        key_hashes(records, same, memo))[1])

    variant = BASE.replace("benchmarks", "datasets")
    folder["d.txt"] = [variant, OTHER]  # one new text, one known
    records, files = tables(folder)
    second = dedup.deduplicate_with_memo(records, NearConfig(), files, memo)
    assert banded == [variant]  # only the new text is hashed into bands
    assert hashed == [2]  # only the new file's records are hashed into keys
    assert second.papers_reused == first.papers.height  # every earlier paper's columns looked up
    papers, occurrences = dedup.deduplicate(records)
    assert second.papers.equals(papers) and second.occurrences.equals(occurrences)
    assert second.papers["variant_count"].max() == 4  # the new variant joined the cluster

    banded.clear()
    del folder["a.txt"]  # the cluster's canonical goes: the cluster is worked out again, nothing read
    records, files = tables(folder)
    third = dedup.deduplicate_with_memo(records, NearConfig(), files, round_trip(second, tmp_path / "2", "build", NearConfig()))
    assert banded == []
    papers, occurrences = dedup.deduplicate(records)
    assert third.papers.equals(papers) and third.occurrences.equals(occurrences)


def test_only_the_near_clusters_a_change_reaches_are_worked_out_again(tmp_path):
    """Two clusters apart: a change to one works out its keys only; taking out the middle of a
    chain splits its cluster there, as a fresh deduplication does."""
    other_variant = OTHER.replace("sparse", "dense")
    folder = {"a.txt": CHAIN[:3], "b.txt": [OTHER, other_variant], "c.txt": [TEXTS[-2]]}
    records, files = tables(folder)
    first = dedup.deduplicate_with_memo(records, NearConfig(), files)
    assert first.near_worked_out == 5  # every key long enough for near matching
    memo = round_trip(first, tmp_path / "1", "build", NearConfig())

    folder["d.txt"] = [other_variant.replace("modern", "current")]  # joins b.txt's cluster
    records, files = tables(folder)
    second = dedup.deduplicate_with_memo(records, NearConfig(), files, memo)
    assert second.near_worked_out == 3  # b.txt's two keys and the new one; a.txt's chain is kept
    papers, occurrences = dedup.deduplicate(records)
    assert second.papers.equals(papers) and second.occurrences.equals(occurrences)

    unchanged = dedup.deduplicate_with_memo(records, NearConfig(), files, round_trip(second, tmp_path / "2", "build", NearConfig()))
    assert unchanged.near_worked_out == 0 and unchanged.papers.equals(papers)

    folder["a.txt"] = [CHAIN[0], CHAIN[2]]  # CHAIN[1], the link between the two, goes
    records, files = tables(folder)
    third = dedup.deduplicate_with_memo(records, NearConfig(), files, round_trip(unchanged, tmp_path / "3", "build", NearConfig()))
    assert third.near_worked_out == 2 and third.papers.height == second.papers.height + 1  # the chain split
    papers, occurrences = dedup.deduplicate(records)
    assert third.papers.equals(papers) and third.occurrences.equals(occurrences)


def test_the_bands_and_pairs_grow_by_a_part_and_are_written_again_once_stale(tmp_path):
    """A run links the previous memo's bands and pairs and adds a part of what it worked out;
    once the rows of keys that are gone pass STALE_SHARE of the live ones, it writes them again
    without those."""
    folder = {"a.txt": CHAIN[:4], "b.txt": [OTHER, THIRD], "c.txt": [TEXTS[-2]]}
    records, files = tables(folder)
    memo = round_trip(dedup.deduplicate_with_memo(records, NearConfig(), files), tmp_path / "1", "build", NearConfig())
    assert [len(memo.parts[part]) for part in dedup_memo.GROWN] == [1, 1]

    variant = THIRD.replace("empirical", "systematic")
    folder["d.txt"] = [variant]  # one new key, near THIRD: one new pair at least
    records, files = tables(folder)
    second = dedup.deduplicate_with_memo(records, NearConfig(), files, memo)
    grown = round_trip(second, tmp_path / "2", "build", NearConfig())
    for part in dedup_memo.GROWN:
        before, after = memo.parts[part], grown.parts[part]
        assert len(after) == 2 and before[0].stat().st_ino in {path.stat().st_ino for path in after}  # linked, not copied
    added = pl.read_parquet([path for path in grown.parts["bands"] if path.name != memo.parts["bands"][0].name])
    assert added.select(dedup_memo.KEY).equals(records.filter(pl.col("text") == variant).select(dedup_memo.text_hash("dedup_key")))

    del folder["a.txt"]  # four of the eight keys go: more than STALE_SHARE of the four left
    records, files = tables(folder)
    third = dedup.deduplicate_with_memo(records, NearConfig(), files, grown)
    assert third.memo.growth == {}
    written = round_trip(third, tmp_path / "3", "build", NearConfig())
    assert [len(written.parts[part]) for part in dedup_memo.GROWN] == [1, 1]
    fresh = dedup.deduplicate_with_memo(records, NearConfig(), files)
    assert_frame_equal(written.bands.collect().sort(dedup_memo.KEY), fresh.memo.bands.collect().sort(dedup_memo.KEY), check_exact=True)
    pairs, now = written.pairs.collect(), fresh.memo.bands.collect().select(dedup_memo.KEY)
    assert not pairs.is_empty() and all(  # the pairs of keys that are gone went too
        pairs.select(hash_a=f"{side}_a", hash_b=f"{side}_b").join(now, on=dedup_memo.KEY, how="anti").is_empty() for side in "ab")
    assert third.papers.equals(fresh.papers)


def test_earlier_fingerprints_that_lack_an_untouched_paper_are_an_error(tmp_path):
    """Such a paper would look gone to the enrichment steps, which would drop its rows."""
    folder = {"a.txt": CHAIN[:3], "b.txt": [OTHER, CHAIN[0]]}
    records, files = tables(folder)
    memo = round_trip(dedup.deduplicate_with_memo(records, NearConfig(), files), tmp_path, "build", NearConfig())
    folder["c.txt"] = [TEXTS[-2]]
    records, files = tables(folder)
    done = dedup.deduplicate_with_memo(records, NearConfig(), files, memo)
    assert not done.untouched.is_empty()
    earlier = dedup_memo.paper_fingerprints(tmp_path / "papers.parquet", "build")
    assert_frame_equal(reuse.text_fingerprints(done.variants, earlier, done.untouched).sort("paper_id"),
                       reuse.text_fingerprints(done.variants).sort("paper_id"), check_exact=True)
    with pytest.raises(RuntimeError, match="fingerprints lack papers"):
        reuse.text_fingerprints(done.variants, earlier.filter(pl.col("paper_id") != done.untouched[0]), done.untouched)


def test_a_memo_of_another_build_or_near_setting_is_not_used(tmp_path):
    records, files = tables({"a.txt": CHAIN[:2]})
    done = dedup.deduplicate_with_memo(records, NearConfig(), files)
    round_trip(done, tmp_path, "build one", NearConfig())
    assert Memo.read(tmp_path / "papers.parquet", "build two", NearConfig()) is None
    assert Memo.read(tmp_path / "papers.parquet", "build one", NearConfig(bands=10, rows=10)) is None
    assert Memo.read(tmp_path / "nowhere" / "papers.parquet", "build one", NearConfig()) is None


def test_unchanged_rows_are_kept_and_derived_columns_worked_out_only_for_canonical_records_read(tmp_path):
    """A paper whose canonical record and counts are unchanged keeps its row (``kept``); one
    whose counts changed gets a fresh row from the memo's columns; only a paper whose canonical
    record was read gets its derived columns computed."""
    folder = {"a.txt": [CHAIN[0], "*Bold* claim about compilers and $\\alpha$ values in sparse tensor kernels today"], "b.txt": [OTHER]}
    computed = []

    def plain(papers: pl.DataFrame) -> pl.DataFrame:
        computed.extend(papers["abstract"])
        return with_plain_text(papers, "abstract", "abstract_plain")

    derived = dedup.Derived(("abstract_plain",), plain)
    records, files = tables(folder)
    first = dedup.deduplicate_with_memo(records, NearConfig(), files, None, derived)
    assert first.kept.is_empty() and first.fresh.height == 3 and len(computed) == 3
    memo = round_trip(first, tmp_path / "one", "build", NearConfig())

    computed.clear()
    folder["b.txt"] = [OTHER.replace("compiler", "Compiler*")]  # b.txt's paper changes
    folder["c.txt"] = [CHAIN[0]]  # a copy: a.txt's first paper gains an occurrence
    records, files = tables(folder)
    second = dedup.deduplicate_with_memo(records, NearConfig(), files, memo, derived)
    bold = first.papers.filter(pl.col("abstract").str.starts_with("*Bold*"))["paper_id"]
    assert second.kept.to_list() == bold.to_list()  # unchanged: canonical record and counts
    assert sorted(second.fresh["first_source_file"]) == ["a.txt", "b.txt"]  # new counts; a new canonical
    assert computed == [folder["b.txt"][0]]  # only the canonical record read
    expected = with_plain_text(dedup.deduplicate(records)[0], "abstract", "abstract_plain")
    assert second.papers.equals(expected)
    assert dedup.deduplicate_with_memo(records, NearConfig(), files, None, derived).papers.equals(expected)
    assert dedup.deduplicate_with_memo(records, NearConfig(), files, memo).papers.equals(expected.drop("abstract_plain"))


@settings(max_examples=40, deadline=None)
@given(texts=st.lists(st.sampled_from(TEXTS), min_size=1, max_size=len(TEXTS), unique=True), config=st.sampled_from(CONFIGS))
def test_clusters_from_the_memo_are_near_duplicates_own(texts, config):
    """dedup_memo.near_clusters (what deduplicate runs) against near_dedup.near_duplicates
    itself: with no memo, computing everything; with the bands and pairs of that run, reading no
    text; with its clusters too, clustering nothing again."""
    series = pl.Series(texts)
    expected = near_duplicates(series, config)
    keys = series.to_frame("t").select(dedup_memo.text_hash("t")).with_columns(
        source_file=pl.lit("a.txt"), ordinal=pl.int_range(1, pl.len() + 1, dtype=pl.UInt32))

    computed = dedup_memo.near_clusters(keys, Memo.empty(config), dedup_memo.Texts(series.gather), config)
    assert computed.merged.equals(expected)

    def nothing_read(rows):
        raise AssertionError(f"read texts {rows} that the memo holds")

    empty = Memo.empty(config)
    memo = Memo(empty.files, empty.keys, computed.bands, computed.pairs, empty.clusters, empty.papers)
    looked_up = dedup_memo.near_clusters(keys, memo, dedup_memo.Texts(nothing_read), config)
    assert looked_up.merged.equals(expected) and looked_up.clusters.collect().equals(computed.clusters.collect())
    memo = Memo(empty.files, empty.keys, computed.bands, computed.pairs, computed.clusters, empty.papers)
    kept = dedup_memo.near_clusters(keys, memo, dedup_memo.Texts(nothing_read), config)
    assert kept.merged.equals(expected) and kept.clusters.collect().equals(computed.clusters.collect()) and kept.reclustered == 0
