"""Deduplicate: group records into papers by their dedup key.

Canonical rule: of the records sharing a key, the canonical one is the first by
``(source_file, ordinal)`` (file names compared by code point). Its display text is the paper's
``abstract``. ``paper_id`` is the first 16 hex digits of XXH3-64 over the UTF-8 key: stable across
runs, machines and library versions (never Polars' or Python's own hash).
"""

import polars as pl
import xxhash

PAPER_ID_LENGTH = 16


def paper_id_of(key: str) -> str:
    return xxhash.xxh3_64_hexdigest(key.encode("utf-8"))


def _paper_ids(keys: pl.Series) -> pl.Series:
    return pl.Series([paper_id_of(k) for k in keys], dtype=pl.String)


def deduplicate(records: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Exact dedup on ``dedup_key``; returns ``(papers, paper_occurrences)``."""
    ranked = (
        records.lazy()
        .sort("source_file", "ordinal")
        .with_columns(rank=pl.int_range(pl.len()).over("dedup_key"))
    )
    # Hash each distinct key once (the Python loop runs over papers, not records).
    keys = ranked.filter(pl.col("rank") == 0).select("dedup_key").collect()
    keys = keys.with_columns(paper_id=_paper_ids(keys["dedup_key"]))
    with_ids = ranked.join(keys.lazy(), on="dedup_key", how="left").collect().lazy()
    occurrences = (
        with_ids.select(
            "paper_id", "record_id", "source_file", "ordinal",
            match_kind=pl.when(pl.col("rank") == 0).then(pl.lit("canonical")).otherwise(pl.lit("exact")),
            similarity=pl.lit(1.0),
        )
        .sort("source_file", "ordinal")
        .collect()
    )
    papers = (
        with_ids.group_by("paper_id")
        .agg(
            abstract=pl.col("text").sort_by("rank").first(),
            dedup_key=pl.col("dedup_key").first(),
            word_count=pl.col("word_count").sort_by("rank").first(),
            char_count=pl.col("char_count").sort_by("rank").first(),
            occurrence_count=pl.len().cast(pl.Int64),
            source_count=pl.col("source_file").n_unique().cast(pl.Int64),
            first_source_file=pl.col("source_file").sort_by("rank").first(),
            first_ordinal=pl.col("ordinal").sort_by("rank").first(),
            canonical_record_id=pl.col("record_id").sort_by("rank").first(),
            sources=pl.col("source_file").unique().sort(),
        )
        .sort("first_source_file", "first_ordinal")
        .collect()
    )
    return papers, occurrences


def source_overlap(occurrences: pl.DataFrame) -> pl.DataFrame:
    """For each pair of files sharing at least one paper: how many they share, and the Jaccard
    index of their paper sets. Pairs sharing none are left out (n files make n² pairs)."""
    per_file = occurrences.lazy().select("paper_id", "source_file").unique()
    sizes = per_file.group_by("source_file").agg(papers=pl.len().cast(pl.Int64))
    pairs = (
        per_file.join(per_file, on="paper_id", suffix="_b")
        .filter(pl.col("source_file") < pl.col("source_file_b"))
        .group_by(file_a="source_file", file_b="source_file_b")
        .agg(shared_papers=pl.len().cast(pl.Int64))
    )
    return (
        pairs.join(sizes.rename({"source_file": "file_a", "papers": "papers_a"}), on="file_a")
        .join(sizes.rename({"source_file": "file_b", "papers": "papers_b"}), on="file_b")
        .with_columns(
            jaccard=pl.col("shared_papers")
            / (pl.col("papers_a") + pl.col("papers_b") - pl.col("shared_papers"))
        )
        .select("file_a", "file_b", "shared_papers", "papers_a", "papers_b", "jaccard")
        .sort("file_a", "file_b")
        .collect()
    )
