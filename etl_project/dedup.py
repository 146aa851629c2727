"""Deduplicate: group records into papers, by exact key and then by near-duplicate text.

1. Exact: records sharing a ``dedup_key`` form an exact group.
2. Near: one representative per exact group (its earliest record) goes through
   :mod:`etl_project.near_dedup`; a near cluster of exact groups becomes one paper.

Canonical rule: the canonical record of a paper is its first by ``(source_file, ordinal)`` (file
names compared by code point), over the whole near cluster. Its display text is the paper's
``abstract``, its key the paper's ``dedup_key``, and ``paper_id`` is the first 16 hex digits of
XXH3-64 over that UTF-8 key: stable across runs, machines and library versions (never Polars' or
Python's own hash), and unchanged for a paper that has no near duplicates.

``paper_occurrences.match_kind``: ``canonical`` for that record, ``exact`` for records with its
key, ``near`` for every record of the other exact groups of the cluster, whose ``similarity`` is
the verified Jaccard of their text to the canonical one (1.0 otherwise).
"""

import difflib

import polars as pl
import xxhash

from etl_project.near_dedup import NearConfig, near_duplicates

DEFAULT_NEAR = NearConfig()


def paper_id_of(key: str) -> str:
    return xxhash.xxh3_64_hexdigest(key.encode("utf-8"))


def _paper_ids(keys: pl.Series) -> pl.Series:
    return pl.Series([paper_id_of(k) for k in keys], dtype=pl.String)


def near_groups(keys: pl.Series, near: NearConfig | None = DEFAULT_NEAR) -> pl.DataFrame:
    """For distinct ``keys`` in order of first occurrence: the ``paper_id`` of each one's paper
    (XXH3-64 of its canonical key), its ``similarity`` to the canonical and whether it was merged
    by near matching (``near``). Keys are hashed once each and never copied: ids are gathered by
    position, not joined on the (long) keys."""
    schema = {"index": pl.Int64, "canonical": pl.Int64, "similarity": pl.Float64}
    merged = near_duplicates(keys, near) if near else pl.DataFrame(schema=schema)
    return (
        pl.DataFrame({"own_id": _paper_ids(keys)})
        .with_row_index("index")
        .with_columns(pl.col("index").cast(pl.Int64))
        .join(merged, on="index", how="left", maintain_order="left")
        .select(
            dedup_key=keys,
            paper_id=pl.col("own_id").gather(pl.col("canonical").fill_null(pl.col("index"))),
            similarity=pl.col("similarity").fill_null(1.0),
            near=pl.col("canonical").is_not_null() & (pl.col("canonical") != pl.col("index")),
        )
    )


def deduplicate(records: pl.DataFrame | pl.LazyFrame, near: NearConfig | None = DEFAULT_NEAR) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Exact then near dedup (``near=None``: exact only); returns ``(papers, paper_occurrences)``.

    Memory: only the ids and keys of all records are held; texts are read for canonical records
    only (``records`` may be a scan of staged Parquet)."""
    keys = records.lazy().select("record_id", "source_file", "ordinal", "dedup_key").collect()
    # Each record's position in (source_file, ordinal) order, found without moving the long keys:
    # the inverse of the sorting permutation.
    keys = keys.with_columns(
        position=pl.arg_sort_by("source_file", "ordinal").arg_sort().cast(pl.UInt32)
    ).with_columns(first=pl.col("position").min().over("dedup_key"))  # the key's earliest record
    firsts = keys.select(pl.int_range(pl.len()).alias("row"), "position", "first").filter(
        pl.col("position") == pl.col("first")
    ).sort("position")
    representatives = pl.DataFrame({"position": firsts["position"], "dedup_key": keys["dedup_key"].gather(firsts["row"])})
    keys = keys.drop("dedup_key").sort("position")  # the keys are held once, by the representatives
    groups = near_groups(representatives["dedup_key"], near).select(
        "paper_id", "similarity", "near", first=representatives["position"]
    )
    linked = keys.lazy().join(groups.lazy(), on="first", how="left", maintain_order="left")
    occurrences = linked.select(
        "paper_id", "record_id", "source_file", "ordinal",
        match_kind=pl.when(pl.col("near")).then(pl.lit("near"))
        .when(pl.col("position") == pl.col("first")).then(pl.lit("canonical"))
        .otherwise(pl.lit("exact")),
        similarity=pl.col("similarity"),
    ).collect()
    per_paper = (
        linked.group_by("paper_id")
        .agg(
            position=pl.col("position").min(),  # the canonical record: first by (source_file, ordinal)
            occurrence_count=pl.len().cast(pl.Int64),
            source_count=pl.col("source_file").n_unique().cast(pl.Int64),
            variant_count=pl.col("first").n_unique().cast(pl.Int64),  # one first record per distinct key
            sources=pl.col("source_file").unique().sort(),
        )
        .join(
            keys.lazy().select(
                "position", first_source_file="source_file", first_ordinal="ordinal", canonical_record_id="record_id"
            ),
            on="position",
        )
        .join(representatives.lazy(), on="position")  # a canonical record is its key's first
        .collect()
    )
    del keys, linked, representatives
    texts = (
        records.lazy()
        .select(canonical_record_id="record_id", abstract="text", word_count="word_count", char_count="char_count")
        .join(per_paper.lazy().select("canonical_record_id"), on="canonical_record_id", how="semi")
        .collect(engine="streaming")
    )
    papers = (
        per_paper.join(texts, on="canonical_record_id")
        .sort("first_source_file", "first_ordinal")
        .select(
            "paper_id", "abstract", "dedup_key", "word_count", "char_count", "occurrence_count", "source_count",
            "variant_count", "first_source_file", "first_ordinal", "canonical_record_id", "sources",
        )
    )
    return papers, occurrences


def source_overlap(occurrences: pl.DataFrame | pl.LazyFrame) -> pl.DataFrame:
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


def near_clusters_report(
    papers: pl.DataFrame | pl.LazyFrame, occurrences: pl.DataFrame | pl.LazyFrame, records: pl.DataFrame | pl.LazyFrame, samples: int = 5
) -> dict:
    """What near matching merged, for a person to judge: cluster count, how many distinct texts
    (variants) the clusters hold, the similarity spread, and the ``samples`` least similar near
    members beside their canonical record (the merges most worth a look). Reads only what it
    reports on: texts of the sampled records, not of every record."""
    clusters = papers.lazy().filter(pl.col("variant_count") > 1).select("variant_count").collect()
    near = occurrences.lazy().filter(pl.col("match_kind") == "near").collect()
    sizes = clusters.group_by(variants="variant_count").agg(clusters=pl.len().cast(pl.Int64)).sort("variants")
    weakest = (
        near.lazy()
        .sort("similarity", "source_file", "ordinal")
        .unique("paper_id", keep="first", maintain_order=True)  # one sample per paper
        .head(samples)
        .join(records.lazy().select("record_id", member_text="text"), on="record_id", how="left")
        .join(papers.lazy().select("paper_id", "abstract", "canonical_record_id"), on="paper_id", how="left")
        .collect()
    )
    pairs = [
        {
            "paper_id": row["paper_id"],
            "canonical": row["canonical_record_id"],
            "member": row["record_id"],
            "similarity": round(row["similarity"], 3),
            "difference": difference_excerpt(row["abstract"] or "", row["member_text"] or ""),
        }
        for row in weakest.iter_rows(named=True)
    ]
    return {
        "near_clusters": clusters.height,
        "near_records": near.height,
        "largest_cluster_variants": int(clusters["variant_count"].max() or 0),
        "min_similarity": float(near["similarity"].min()) if near.height else None,
        "median_similarity": float(near["similarity"].median()) if near.height else None,
        "sizes": sizes,
        "samples": pl.DataFrame(pairs, schema={
            "paper_id": pl.String, "canonical": pl.String, "member": pl.String,
            "similarity": pl.Float64, "difference": pl.String,
        }),
    }


def difference_excerpt(canonical: str, member: str, context: int = 5, max_changes: int = 3) -> str:
    """The first word-level differences of ``member`` against ``canonical``, with a little context:
    ``… shared words [-removed-] [+added+] shared words …``."""
    a, b = canonical.split(), member.split()
    parts = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        removed = f"[-{' '.join(a[i1:i2])}-]" if i2 > i1 else ""
        added = f"[+{' '.join(b[j1:j2])}+]" if j2 > j1 else ""
        parts.append(" ".join(["…", *a[max(0, i1 - context): i1], removed, added, *a[i2: i2 + context], "…"]).replace("  ", " "))
        if len(parts) == max_changes:
            break
    return " ".join(parts) if parts else "(same words; differs only in case, spacing or symbols)"


def variant_texts(papers: pl.DataFrame, occurrences: pl.DataFrame, records: pl.DataFrame) -> pl.DataFrame:
    """``(paper_id, abstract)`` for every distinct text of every paper: the canonical abstract
    first, then the texts of its other records in (source_file, ordinal) order. A near duplicate
    can carry what its canonical lacks (a "Code is available at ..." line, say)."""
    others = (
        occurrences.lazy()
        .filter(pl.col("match_kind") != "canonical")
        .join(records.lazy().select("record_id", abstract="text"), on="record_id")
        .sort("source_file", "ordinal")
        .select("paper_id", "abstract")
    )
    return (
        pl.concat([papers.lazy().select("paper_id", "abstract"), others])
        .unique(["paper_id", "abstract"], keep="first", maintain_order=True)
        .collect()
    )
