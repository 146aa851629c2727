"""Enrichment that follows what changed.

Each paper's links, names and topics are a function of that paper's own texts and nothing else
(the rules and the taxonomy aside, which the build fingerprint covers). So a run computes them
only for the papers whose texts are new or changed, takes every other paper's rows from the
previous run's table (staged as parts, which keep them where they are:
etl_project.stage.stage_parts), and gets the rows a full computation gives (a table's rows have
no order).

A paper's texts are told apart by two independently seeded 64-bit Polars hashes of each text,
hashed again over the paper's texts in order: stable within one Polars version, which is part of
the build fingerprint the caller compares before reusing anything.
"""

from collections.abc import Callable
from dataclasses import dataclass

import polars as pl

from etl_project.dedup_memo import SEED_A, SEED_B, Delta, text_hash

FINGERPRINT_SCHEMA = {"paper_id": pl.String, "fp_a": pl.UInt64, "fp_b": pl.UInt64}


@dataclass(frozen=True)
class Computed:
    fresh: pl.DataFrame  # the rows of the papers computed now
    fingerprints: pl.DataFrame  # FINGERPRINT_SCHEMA: what to hand to the next run
    reused: int  # papers whose rows are the previous table's
    computed: int  # papers computed now
    # When the previous table gives the other papers' rows (None: it gives none): the papers
    # computed now, and the previous table's papers whose rows go (computed again, or gone).
    asked: pl.Series | None = None
    dropped: pl.Series | None = None


def fingerprints(inputs: pl.DataFrame | pl.LazyFrame, text: str) -> pl.DataFrame:
    """``(paper_id, fp_a, fp_b)`` of each paper of ``inputs``: its texts (one row each, in order)."""
    return combine(inputs.lazy().select("paper_id", *text_hash(text)))


def combine(hashes: pl.DataFrame | pl.LazyFrame) -> pl.DataFrame:
    """``(paper_id, fp_a, fp_b)`` of each paper of ``hashes``: the ``text_hash`` (hash_a, hash_b)
    of its texts, one row each, in order. Equal to ``fingerprints`` of those texts, so hashes kept
    from an earlier step (etl_project.dedup_memo.paper_variants) stand in for reading the texts."""
    return (
        hashes.lazy()
        .group_by("paper_id", maintain_order=True)
        .agg("hash_a", "hash_b")
        .select("paper_id", fp_a=pl.col("hash_a").hash(SEED_A), fp_b=pl.col("hash_b").hash(SEED_B))
        .collect()
    )


def text_fingerprints(hashes: pl.DataFrame, before: pl.DataFrame | None = None, same: pl.Series | None = None) -> pl.DataFrame:
    """Each paper's fingerprints from the ``text_hash`` (paper_id, hash_a, hash_b) of its distinct
    texts, one row each, its canonical text first (dedup.variant_hashes): of its canonical text
    alone (``canonical_a``/``canonical_b``), of all its texts in order (``texts_*``) and of its
    other texts, its near-duplicate variants, in hash order (``variants_*``; null without any).
    Worked out once per deduplication, for the enrichment steps to compare; ``before``'s rows (an
    earlier deduplication's) are taken for the papers in ``same``, whose texts are those it saw."""
    if before is not None and same is not None and not same.is_empty():
        kept = before.filter(pl.col("paper_id").is_in(same.implode()))
        if kept.height != same.len():  # a paper left out would look gone to the enrichment steps
            raise RuntimeError("the earlier fingerprints lack papers whose texts are the same: they are of another deduplication")
        return pl.concat([kept, text_fingerprints(hashes.filter(~pl.col("paper_id").is_in(same.implode())))])
    first = hashes["paper_id"].is_first_distinct()
    variants = hashes.filter(~first).sort("paper_id", "hash_a", "hash_b")
    return (
        combine(hashes.filter(first)).rename({"fp_a": "canonical_a", "fp_b": "canonical_b"})
        .join(combine(hashes).rename({"fp_a": "texts_a", "fp_b": "texts_b"}), on="paper_id", maintain_order="left")
        .join(combine(variants).rename({"fp_a": "variants_a", "fp_b": "variants_b"}), on="paper_id", how="left",
              maintain_order="left")
    )


def pick(fingerprints: pl.DataFrame, which: str) -> pl.DataFrame:
    """FINGERPRINT_SCHEMA of every paper, from ``which`` (canonical, texts or variants) of its
    ``text_fingerprints``."""
    return fingerprints.select("paper_id", fp_a=f"{which}_a", fp_b=f"{which}_b")


def stand_in(fingerprints: pl.DataFrame, text: str) -> pl.DataFrame:
    """``fingerprints`` (of other texts standing in for ``text``: the raw text a plain text is
    made from, say) hashed again with ``text``'s name, so they never equal the ``fingerprints``
    of ``text`` itself, even where the two texts are the same."""
    return fingerprints.select("paper_id", fp_a=pl.struct(pl.lit(text), "fp_a").hash(SEED_A),
                               fp_b=pl.struct(pl.lit(text), "fp_b").hash(SEED_B))


def compute_for_changes(current: pl.DataFrame, compute: Callable[[pl.Series | None], pl.DataFrame],
                        previous: pl.DataFrame | Delta | None = None) -> Computed:
    """The rows of the papers of ``current`` (FINGERPRINT_SCHEMA) that a table computed from
    ``previous`` (the fingerprints an earlier run of this same code computed its table from, or
    the Delta from those to ``current``; None: no table) lacks: ``compute(paper_ids)`` gives the
    rows of those papers (None: of every paper), and is asked only for the papers whose
    fingerprint differs. The previous table's rows of every other paper and these make the table
    of every paper."""
    if previous is None:
        return Computed(compute(None), current, 0, current.height)
    if isinstance(previous, Delta):
        todo, dropped = previous.changed, pl.concat([previous.changed, previous.gone])
    else:
        same = current.join(previous, on=["paper_id", "fp_a", "fp_b"], how="semi").select("paper_id")
        todo = current.join(same, on="paper_id", how="anti", maintain_order="left")["paper_id"]
        dropped = previous.join(same, on="paper_id", how="anti")["paper_id"]
    fresh = compute(todo)
    if fresh.filter(~pl.col("paper_id").is_in(todo.implode())).height:
        raise RuntimeError("computing some papers gave rows of papers it was not given")
    return Computed(fresh, current, current.height - todo.len(), todo.len(), todo, dropped)
