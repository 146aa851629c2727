"""Enrichment computed only for papers whose texts changed equals computing every paper."""

import tempfile
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings, strategies as st
from polars.testing import assert_frame_equal

from etl_project import dedup_memo, stage
from etl_project.enrich import links, names, reuse, topics

TEXTS = [
    "We propose FooNet, a model for graphs. Code: https://github.com/foo/foonet.",
    "We introduce BarSet, a benchmark of 10k items; data at https://huggingface.co/datasets/bar/set",
    "A study of things without any link or name in it, long enough to be an abstract of sorts.",
    "Termed BazGAN, our method beats baselines. See https://example.org/baz and http://x.io/y.",
    # Ties: a URL that is a prefix of an earlier one, and a name inside an earlier one, share a position.
    "Code: https://github.com/org/repo-v2 and https://github.com/org/repo. We propose FooNetX; FooNet is older.",
    "We propose FooNet. We introduce FooNet (FN) again, termed FooNet.",
]
papers = st.lists(st.tuples(st.sampled_from("abcdef"), st.sampled_from(TEXTS)), min_size=0, max_size=8)


def frame(rows: list[tuple[str, str]]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema={"paper_id": pl.String, "abstract": pl.String}, orient="row")  # papers interleaved, as variant_texts gives them


def compute_changed(inputs: pl.DataFrame, compute, previous=None) -> tuple[reuse.Computed, pl.DataFrame]:
    """``compute(inputs)`` through reuse: the texts fingerprinted, and only the changed papers' rows
    given to ``compute``; with the table they make with the ``previous`` ``(fingerprints, table)``,
    staged as the enrichment steps stage it (stage.stage_parts, in parts of two rows: a paper's
    rows may lie in two), read back in paper_id order."""
    def compute_for(paper_ids: pl.Series | None) -> pl.DataFrame:
        return compute(inputs if paper_ids is None else inputs.filter(pl.col("paper_id").is_in(paper_ids.implode())))

    computed = reuse.compute_for_changes(reuse.fingerprints(inputs, "abstract"), compute_for,
                                         None if previous is None else previous[0])
    with tempfile.TemporaryDirectory() as work:
        before = None
        if previous is not None:
            before = Path(work) / "before"
            stage.stage_parts(before, None, "paper_id", pl.Series([], dtype=pl.String), previous[1], 2, 3)
        stage.stage_parts(Path(work) / "after", before, "paper_id", None, computed.fresh, 2, 3, dropped=computed.dropped)
        table = pl.read_parquet(Path(work) / "after")
    order = [column for column in ("paper_id", "link_rank", "name_rank", "topic") if column in table.columns]
    return computed, table.sort(order)


@settings(max_examples=60, deadline=None)
@given(before=papers, after=papers)
def test_reusing_the_previous_rows_gives_what_computing_every_paper_gives(before, after):
    taxonomy = topics.load_taxonomy()
    for compute in (links.extract_links, names.extract_names, lambda f: topics.tag_topics(f, taxonomy, text_column="abstract")):
        first, table = compute_changed(frame(before), compute)
        seen = []

        def counting(changed: pl.DataFrame, compute=compute) -> pl.DataFrame:
            seen.append(changed)
            return compute(changed)

        again, again_table = compute_changed(frame(after), counting, (first.fingerprints, table))
        assert_frame_equal(again_table, compute(frame(after)), check_exact=True)
        # Only the papers whose texts are not exactly as before were computed again.
        fp_before = dict(zip(first.fingerprints["paper_id"], first.fingerprints.select("fp_a", "fp_b").rows()))
        changed = {p for p, fp in zip(again.fingerprints["paper_id"], again.fingerprints.select("fp_a", "fp_b").rows())
                   if fp_before.get(p) != fp}
        assert set(seen[0]["paper_id"]) == changed
        assert (again.computed, again.reused) == (len(changed), again.fingerprints.height - len(changed))
        assert set(again.asked) == changed and set(again.dropped) == set(first.fingerprints["paper_id"]) - (
            set(again.fingerprints["paper_id"]) - changed)  # every earlier paper but those kept
        # Told what changed (dedup_memo.Delta), not the earlier fingerprints, it gives the same table.
        fingerprints = again.fingerprints.rename({"fp_a": "canonical_a", "fp_b": "canonical_b"})
        delta_table = _table_with_delta(frame(after), compute, first, table, fingerprints)
        assert_frame_equal(delta_table, again_table, check_exact=True)


def _table_with_delta(inputs: pl.DataFrame, compute, first: reuse.Computed, table: pl.DataFrame,
                      fingerprints: pl.DataFrame) -> pl.DataFrame:
    """compute_changed's table, the previous fingerprints handed over as the Delta that
    dedup_memo.write_changes stages and paper_changes reads (fingerprints of the "canonical" kind)."""
    with tempfile.TemporaryDirectory() as work:
        folder, then = Path(work), first.fingerprints.rename({"fp_a": "canonical_a", "fp_b": "canonical_b"})
        wide = [pl.col("canonical_a").alias(f"{c}_a") for c in ("texts", "variants")] + [
            pl.col("canonical_b").alias(f"{c}_b") for c in ("texts", "variants")]
        stage.write(pl.DataFrame({"build": ["b"]}), folder / "dedup_memo.build.parquet")
        dedup_memo.write_changes(folder, folder / "before.parquet", then.with_columns(wide), fingerprints.with_columns(wide))
        delta = dedup_memo.paper_changes(folder / "papers.parquet", "b", "canonical", str(folder / "before.parquet"))
        assert delta is not None and dedup_memo.paper_changes(folder / "papers.parquet", "b", "canonical", "elsewhere") is None
        return compute_changed(inputs, compute, (delta, table))[1]


def test_a_paper_whose_variant_texts_change_order_is_computed_again():
    first, table = compute_changed(frame([("a", TEXTS[0]), ("a", TEXTS[3])]), links.extract_links)
    swapped = frame([("a", TEXTS[3]), ("a", TEXTS[0])])
    again, again_table = compute_changed(swapped, links.extract_links, (first.fingerprints, table))
    assert again.computed == 1
    assert again_table["url"].to_list() == links.extract_links(swapped)["url"].to_list()


def test_a_compute_that_gives_rows_of_papers_it_was_not_given_is_refused():
    """Such rows would hide among the rows taken over, which the checks do not validate again."""
    first, table = compute_changed(frame([("a", TEXTS[0]), ("b", TEXTS[1])]), links.extract_links)
    def strays(changed: pl.DataFrame) -> pl.DataFrame:  # also finds a link for paper a, not asked for
        return links.extract_links(frame([("a", TEXTS[3]), *changed.rows()]))

    with pytest.raises(RuntimeError, match="not given"):
        compute_changed(frame([("a", TEXTS[0]), ("b", TEXTS[2])]), strays, (first.fingerprints, table))


def test_fingerprints_taken_from_the_canonical_text_never_match_those_of_the_plain_text(tmp_path):
    """Topics and search terms fingerprint a paper's plain text by its canonical record's text
    hash when this build deduplicated the papers, else by the plain text itself. Where the two
    texts are the same (an abstract without markup), the fingerprints must still differ: rows
    computed from an earlier build's plain text must not be taken over by this build's."""
    from etl_project import dedup, dedup_memo
    from etl_project.defs.enrich import _text_fingerprints
    from etl_project_tests.conftest import normalized_records

    records = normalized_records([("a.txt", 1, TEXTS[2]), ("a.txt", 2, TEXTS[0])])
    done = dedup.deduplicate_with_memo(records)
    papers = tmp_path / "papers.parquet"
    done.papers.with_columns(abstract_plain=pl.col("abstract")).write_parquet(papers)  # plain text = raw text
    done.memo.write(tmp_path, "build")
    dedup_memo.write_variants(tmp_path, done.variants, reuse.text_fingerprints(done.variants))
    standing_in = _text_fingerprints(papers, "build", "abstract_plain")  # this build's deduplication
    own = _text_fingerprints(papers, "another build", "abstract_plain")  # the plain text itself
    assert own.equals(reuse.fingerprints(done.papers.select("paper_id", abstract_plain="abstract"), "abstract_plain"))
    assert standing_in.height == own.height == 2
    assert standing_in.join(own, on=["paper_id", "fp_a", "fp_b"]).is_empty()
    assert standing_in.join(own, on=["paper_id", "fp_a"]).is_empty() and standing_in.join(own, on=["paper_id", "fp_b"]).is_empty()
