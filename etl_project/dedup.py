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
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import polars as pl
import xxhash

from etl_project import dedup_memo
from etl_project.dedup_memo import Memo, text_hash
from etl_project.near_dedup import MERGED_SCHEMA, NearConfig

DEFAULT_NEAR = NearConfig()


def paper_id_of(key: str) -> str:
    return xxhash.xxh3_64_hexdigest(key.encode("utf-8"))


def _paper_ids(keys: pl.Series) -> pl.Series:
    return pl.Series([paper_id_of(k) for k in keys], dtype=pl.String)


def _rows_of(records: pl.LazyFrame, record_ids: pl.Series, files: pl.Series, columns: list[str]) -> pl.DataFrame:
    """``columns`` of the records ``record_ids`` (of the files ``files``, one per id), in that
    order. Only the row groups of those files are read (the records are stored in file order, so
    row-group statistics skip the rest), and of them the rows asked for. A record that is missing
    or held twice is an error, not a silently wrong text."""
    found = (
        records.filter(pl.col("source_file").is_in(files.unique().implode()), pl.col("record_id").is_in(record_ids.implode()))
        .select("record_id", *columns)
        .collect()
    )
    if found.height != record_ids.len() or found["record_id"].is_duplicated().any():
        raise RuntimeError("records no longer hold each record the deduplication asked for once")
    return record_ids.to_frame("record_id").join(found, on="record_id", how="left", maintain_order="left").select(columns)


COLUMNS = ["paper_id", "abstract", "dedup_key", "word_count", "char_count", "occurrence_count", "source_count",
           "variant_count", "first_source_file", "first_ordinal", "canonical_record_id", "sources"]
# What a paper's row holds beside its canonical record's columns; a row whose canonical record
# and these are unchanged is unchanged.
COUNTS = ["occurrence_count", "source_count", "variant_count", "sources"]
# The staged papers table's parts (etl_project.stage.stage_parts): a run rewrites the parts its
# changed papers leave, and those lie anywhere (a removed file's papers), so parts are small
# enough that a few dozen changed papers leave most parts as they are, and few enough for the
# lake (each is a data file registered at every publish).
PART_PAPERS = 10_000
MAX_PARTS = 128


@dataclass(frozen=True)
class Derived:
    """Columns of papers that are functions of the canonical record's text (its plain text,
    say): carried from the memo's papers while that record is unchanged, else computed."""

    columns: tuple[str, ...]
    # Papers' canonical columns (paper_id, abstract, dedup_key, word_count, char_count, and more)
    # with ``columns`` added, in the same order.
    compute: Callable[[pl.DataFrame], pl.DataFrame]


@dataclass(frozen=True)
class Deduplicated:
    """The papers as what changed since the memo's: ``kept``, the memo's papers whose rows stay as
    they were, and ``fresh``, the rows of every other paper (in canonical order); with no memo,
    every paper is fresh. So a run writes the rows that changed and keeps the rest where they are
    (etl_project.stage.stage_parts); ``papers`` is the whole table in memory."""

    fresh: pl.DataFrame
    kept: pl.Series  # paper_id
    occurrences: pl.DataFrame
    memo: Memo | None  # what the next run looks up (etl_project.dedup_memo); its papers are these; None once staged
    papers_reused: int  # papers whose canonical columns came from the memo
    near_worked_out: int  # distinct keys whose near cluster was worked out, not looked up
    variants: pl.DataFrame  # variant_hashes of every paper: what enrichment fingerprints texts by
    # paper_id of the papers whose clusters a change could reach (_reworked_clusters; every paper
    # without a memo): every other paper has the memo's records, matches and similarities.
    reworked: pl.Series

    def stage_memo(self, folder: Path, build: str) -> "Deduplicated":
        """Stage the memo (Memo.write) and return these papers without it: it holds the hashes of
        every record and the near cluster of every key, most of what a deduplication keeps."""
        self.memo.write(folder, build)
        return replace(self, memo=None)

    @property
    def untouched(self) -> pl.Series:
        """paper_id of the papers no change reached: the memo's, with its records and texts."""
        return self.kept.filter(~self.kept.is_in(self.reworked.implode()))

    @property
    def papers(self) -> pl.DataFrame:
        """Every paper, in canonical order (the order a deduplication without memo gives), in
        memory; the kept rows are read from the memo's papers, so while those are staged (and
        before stage_memo)."""
        if self.kept.is_empty():
            return self.fresh
        if self.memo is None:
            raise RuntimeError("the papers kept from the memo are not held once the memo is staged: read the staged papers")
        return self.memo.papers.collect().sort("first_source_file", "first_ordinal")


def deduplicate(records: pl.DataFrame | pl.LazyFrame, near: NearConfig | None = DEFAULT_NEAR) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Exact then near dedup (``near=None``: exact only); returns ``(papers, paper_occurrences)``."""
    done = deduplicate_with_memo(records, near)
    return done.papers, done.occurrences


def deduplicate_with_memo(records: pl.DataFrame | pl.LazyFrame, near: NearConfig | None = DEFAULT_NEAR,
                          files: pl.DataFrame | None = None, memo: Memo | None = None, derived: Derived | None = None) -> Deduplicated:
    """:func:`deduplicate`, looking up in ``memo`` (an earlier run's, of the same build) what it
    holds for the records of the files it was written from (``files``: source_file and sha256 of
    every landing file now) instead of computing it again; the papers and occurrences are the same
    either way (what differs is which papers' rows are ``fresh``: all of them without a memo).
    ``derived``: more columns of papers, carried from the memo's papers or computed.

    Memory: the keys are grouped by a 128-bit hash, never held for every record; the long
    columns are read back only for the rows that need them (one key per exact group for near
    matching, the canonical record's text and key per paper). ``records`` may be a scan."""
    records = records.lazy()
    files = pl.DataFrame(schema=dedup_memo.FILES_SCHEMA) if files is None else files
    memo = Memo.empty(near) if memo is None else memo
    same = dedup_memo.unchanged_files(files, memo)
    hashes = dedup_memo.key_hashes(records, same, memo)
    # The memo holds the records of the files it was written from, as their bytes are the same.
    if hashes.height != records.select(pl.len()).collect().item():
        raise RuntimeError("the dedup memo does not hold the records of the files it says are unchanged")
    keys = hashes.select("record_id", "source_file", "ordinal", "hash_a", "hash_b", "text_a", "text_b")
    # Each record's position in (source_file, ordinal) order, found without sorting the table:
    # the inverse of the sorting permutation.
    keys = keys.with_columns(
        position=pl.arg_sort_by("source_file", "ordinal").arg_sort().cast(pl.UInt32),
    ).with_columns(first=pl.col("position").min().over("hash_a", "hash_b"))
    # One representative per exact group, its earliest record, in (source_file, ordinal) order.
    representatives = (
        keys.filter(pl.col("position") == pl.col("first"))
        .select("position", "record_id", "source_file", "ordinal", "hash_a", "hash_b")
        .sort("position")
    )
    keys = keys.drop("hash_a", "hash_b")
    near_result = _near_clusters(records, representatives, memo, near)
    merged = near_result.merged
    # A near cluster is named by its canonical (earliest) representative.
    groups = (
        representatives.with_row_index("index").with_columns(pl.col("index").cast(pl.Int64))
        .join(merged, on="index", how="left", maintain_order="left")
        .select(
            first="position",
            cluster=pl.col("position").gather(pl.col("canonical").fill_null(pl.col("index"))),
            similarity=pl.col("similarity").fill_null(1.0),
            near=pl.col("canonical").is_not_null() & (pl.col("canonical") != pl.col("index")),
        )
    )
    linked = keys.sort("position").join(groups, on="first", how="left", maintain_order="left")
    carried = _carried(memo, derived)
    reworked = _reworked_clusters(keys, representatives, groups, memo, same, near_result.redone) if carried else None
    del keys, representatives, groups
    # The papers the memo holds as they are: every cluster but those reworked, by its canonical record.
    untouched = (
        linked.filter(pl.col("position") == pl.col("cluster"))
        .filter(~pl.col("cluster").is_in(reworked.implode()))
        .select("cluster", canonical_record_id="record_id")
        .join(memo.papers.select("canonical_record_id", "paper_id").collect(engine="streaming"), on="canonical_record_id")
        .select("cluster", "paper_id")
    ) if reworked is not None else pl.DataFrame(schema={"cluster": pl.UInt32, "paper_id": pl.String})
    per_paper = (
        linked.lazy().filter(~pl.col("cluster").is_in(untouched["cluster"].implode()))
        .group_by("cluster")
        .agg(
            occurrence_count=pl.len().cast(pl.Int64),
            source_count=pl.col("source_file").n_unique().cast(pl.Int64),
            variant_count=pl.col("first").n_unique().cast(pl.Int64),  # one first record per distinct key
            sources=pl.col("source_file").unique().sort(),
        )
        # The canonical record: the cluster's earliest, which is where it is named.
        .join(
            linked.lazy().select(
                cluster="position", first_source_file="source_file", first_ordinal="ordinal",
                canonical_record_id="record_id",
            ),
            on="cluster",
        )
        .sort("cluster")
        .collect()
    )
    changes = _changed_papers(records, per_paper, same, memo, derived)
    paper_ids = pl.concat([untouched, per_paper.select("cluster", paper_id=changes.paper_ids)])
    occurrences = (
        linked.lazy()
        .join(paper_ids.lazy(), on="cluster", how="left", maintain_order="left")
        .select(
            "paper_id", "record_id", "source_file", "ordinal",
            match_kind=pl.when(pl.col("near")).then(pl.lit("near"))
            .when(pl.col("position") == pl.col("first")).then(pl.lit("canonical"))
            .otherwise(pl.lit("exact")),
            similarity=pl.col("similarity"),
            hash_a="text_a", hash_b="text_b",
        )
        .collect()
    )
    variants = _distinct_texts(occurrences.lazy())
    occurrences = occurrences.drop("hash_a", "hash_b")
    files_now = files.filter(pl.col("sha256").is_not_null()).select(dedup_memo.FILES_SCHEMA.keys())
    kept = pl.concat([untouched["paper_id"], changes.kept])
    papers = changes.fresh.lazy()
    if kept.len():
        papers = pl.concat([memo.papers.filter(pl.col("paper_id").is_in(kept.implode())).select(changes.fresh.columns), papers])
    next_memo = Memo(files_now, hashes.select(dedup_memo.KEYS_SCHEMA.keys()).lazy(), near_result.bands, near_result.pairs,
                     near_result.clusters, papers, growth=near_result.growth)
    return Deduplicated(changes.fresh, kept, occurrences, next_memo, untouched.height + changes.looked_up,
                        near_result.reclustered, variants, changes.paper_ids)


def _reworked_clusters(keys: pl.DataFrame, representatives: pl.DataFrame, groups: pl.DataFrame, memo: Memo,
                       same: pl.Series, redone: np.ndarray) -> pl.Series:
    """The clusters (by position) whose papers may differ from the memo's: those holding an exact
    group (a key) with a record in a file that is new or changed now, or was changed or removed
    since the memo, or whose near cluster was worked out again. Every other cluster has the same
    records as it had: its keys' records are those of the same files, and its keys kept their
    clusters (near_clusters works out again whole components, so a key that left or joined a
    cluster takes its old cluster-mates with it). So its paper, counts and canonical record are
    the memo's."""
    key = ["hash_a", "hash_b"]
    then = memo.keys.filter(~pl.col("source_file").is_in(same.implode())).select(key).unique().collect(engine="streaming")
    firsts = pl.concat([
        keys.filter(~pl.col("source_file").is_in(same.implode()))["first"],
        representatives.join(then, on=key, how="semi")["position"],
        representatives["position"].filter(pl.Series(redone)),
    ])
    return groups.filter(pl.col("first").is_in(firsts.implode()))["cluster"].unique()


def _near_clusters(records: pl.LazyFrame, representatives: pl.DataFrame, memo: Memo,
                   near: NearConfig | None) -> dedup_memo.NearResult:
    """near_dedup's clusters of the representatives' keys (dedup_memo.near_clusters: what the
    memo holds is looked up, and only the clusters a change can reach are worked out again)."""
    if not near or not representatives.height:  # no near cluster is worked out, none taken from the memo
        return dedup_memo.NearResult(pl.DataFrame(schema=MERGED_SCHEMA), memo.bands.clear(), memo.pairs.clear(),
                                     memo.clusters.clear(), 0, np.zeros(representatives.height, dtype=bool))
    texts = dedup_memo.Texts(lambda rows: _rows_of(
        records, representatives["record_id"].gather(rows), representatives["source_file"].gather(rows), ["dedup_key"]
    ).to_series())
    return dedup_memo.near_clusters(representatives, memo, texts, near)


@dataclass(frozen=True)
class _Changes:
    fresh: pl.DataFrame  # the rows of the papers whose row is not the memo's, in per_paper's order
    kept: pl.Series  # paper_id of the memo's papers whose row stays
    paper_ids: pl.Series  # every paper's, in per_paper's order
    looked_up: int  # papers whose canonical columns came from the memo


def _carried(memo: Memo, derived: Derived | None) -> bool:
    """Whether the memo's papers hold every column this deduplication makes (an earlier build may
    have derived fewer): only then are their rows carried over."""
    return set(COLUMNS + list(derived.columns if derived else ())) <= set(memo.papers.collect_schema().names())


def _changed_papers(records: pl.LazyFrame, per_paper: pl.DataFrame, same: pl.Series, memo: Memo,
                    derived: Derived | None) -> _Changes:
    """Which papers of ``per_paper`` have the row the memo's papers hold, and the rows (COLUMNS
    and the ``derived`` ones) of the others. A paper's canonical columns come from the memo's
    papers while its canonical record's file is unchanged (the texts are read only for those
    whose counts changed), else from ``records``."""
    extra = list(derived.columns) if derived else []
    wanted = per_paper.with_row_index("_row")
    key = ["canonical_record_id", "first_source_file"]
    looked_up = pl.DataFrame(schema={"_row": pl.UInt32, "paper_id": pl.String, "same": pl.Boolean})
    if _carried(memo, derived):
        looked_up = (
            memo.papers.select(*key, "paper_id", *COUNTS).filter(pl.col("first_source_file").is_in(same.implode()))
            .join(wanted.lazy().select("_row", *key, *COUNTS), on=key, suffix="_now")
            .select("_row", "paper_id", same=pl.all_horizontal(pl.col(c).eq_missing(pl.col(f"{c}_now")) for c in COUNTS))
            .collect(engine="streaming")
        )
    changed = looked_up.filter(~pl.col("same"))
    canonical = ["paper_id", "abstract", "dedup_key", "word_count", "char_count", *extra]
    texts = changed.select("_row", "paper_id").join(
        memo.papers.filter(pl.col("paper_id").is_in(changed["paper_id"].implode())).select(canonical).collect(engine="streaming"),
        on="paper_id", how="left") if changed.height else None
    missing = wanted.join(looked_up, on="_row", how="anti", maintain_order="left")
    read = _rows_of(records, missing["canonical_record_id"], missing["first_source_file"], ["text", "dedup_key", "word_count", "char_count"])
    read = read.select(_row=missing["_row"], paper_id=_paper_ids(read["dedup_key"]), abstract="text", dedup_key="dedup_key",
                       word_count="word_count", char_count="char_count")
    if derived is not None:
        read = derived.compute(read)
    canonical_rows = read if texts is None else pl.concat([texts.select(read.columns), read]).sort("_row")
    if canonical_rows.height == wanted.height:  # every paper (no memo): in order already, nothing copied
        rows = pl.concat([wanted, canonical_rows.drop("_row")], how="horizontal")
    else:
        rows = wanted.join(canonical_rows, on="_row", maintain_order="right")
    paper_ids = pl.concat([looked_up.select("_row", "paper_id"), read.select("_row", "paper_id")]).sort("_row")["paper_id"]
    return _Changes(rows.select(*COLUMNS, *extra), looked_up.filter("same")["paper_id"], paper_ids, looked_up.height)


def source_overlap(papers: pl.DataFrame | pl.LazyFrame) -> pl.DataFrame:
    """For each pair of files sharing at least one paper: how many they share, and the Jaccard
    index of their paper sets, from each paper's ``sources`` (the distinct files of its
    occurrences). Pairs sharing none are left out (n files make n² pairs)."""
    papers = papers.lazy()
    # Each file once, numbered in name order (so numbers compare as names do), with its papers:
    # the pairs are joined, grouped and sorted by numbers, and named at the end.
    files = (
        papers.select(source_file="sources").explode("source_file")
        .group_by("source_file").agg(papers=pl.len().cast(pl.Int64))
        .sort("source_file").with_row_index("file")
        .collect()
    )
    # Only papers in several files make pairs.
    shared = (
        papers.filter(pl.col("source_count") > 1).select("sources").with_row_index("paper").explode("sources")
        .join(files.lazy().select("file", sources="source_file"), on="sources")
        .select("paper", "file")
    )
    pairs = (
        shared.join(shared, on="paper", suffix="_b")
        .filter(pl.col("file") < pl.col("file_b"))
        .group_by(pair=pl.col("file").cast(pl.UInt64) * (1 << 32) + pl.col("file_b"))
        .agg(shared_papers=pl.len().cast(pl.Int64))
        .sort("pair")
        .collect()
    )
    a, b = (pairs["pair"] // (1 << 32)).cast(pl.UInt32), (pairs["pair"] % (1 << 32)).cast(pl.UInt32)
    return pl.DataFrame({
        "file_a": files["source_file"].gather(a), "file_b": files["source_file"].gather(b),
        "shared_papers": pairs["shared_papers"], "papers_a": files["papers"].gather(a), "papers_b": files["papers"].gather(b),
    }).with_columns(jaccard=pl.col("shared_papers") / (pl.col("papers_a") + pl.col("papers_b") - pl.col("shared_papers")))


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
        .collect()
    )
    # Filters, not joins: a scan reads the long columns of the matching rows only.
    member_texts = records.lazy().filter(pl.col("record_id").is_in(weakest["record_id"].implode()))
    canonicals = papers.lazy().filter(pl.col("paper_id").is_in(weakest["paper_id"].implode()))
    weakest = (
        weakest.lazy()
        .join(member_texts.select("record_id", member_text="text"), on="record_id", how="left")
        .join(canonicals.select("paper_id", "abstract", "canonical_record_id"), on="paper_id", how="left")
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


def variant_hashes(occurrences: pl.DataFrame | pl.LazyFrame, text_hashes: pl.DataFrame | pl.LazyFrame) -> pl.DataFrame:
    """``(paper_id, record_id, hash_a, hash_b)`` of every distinct text of every paper, in the
    order of ``variant_texts``, without reading a text: ``text_hashes`` holds each record's
    (``record_id``, ``text_hash`` of its text), as the dedup memo's keys keep them. The canonical
    record is its paper's first by (source_file, ordinal), so one order serves both: canonical
    records first (the papers' own order), then every other record."""
    hashed = (
        occurrences.lazy().select("paper_id", "record_id", "source_file", "ordinal", "match_kind")
        .join(text_hashes.lazy().select("record_id", "hash_a", "hash_b"), on="record_id", how="left")
        .sort("source_file", "ordinal")
    )
    kept = _distinct_texts(hashed)
    if kept["hash_a"].null_count():
        raise RuntimeError("the text hashes lack records of the occurrences: they are of another deduplication")
    return kept


def _distinct_texts(occurrences: pl.LazyFrame) -> pl.DataFrame:
    """:func:`variant_hashes` of ``occurrences`` with their text hashes (hash_a, hash_b), in
    (source_file, ordinal) order: the canonical records first, keeping that order (a stable
    sort), then each paper's first record of every other text."""
    return (
        occurrences.sort(pl.col("match_kind") != "canonical", maintain_order=True)
        .unique(["paper_id", "hash_a", "hash_b"], keep="first", maintain_order=True)
        .select("paper_id", "record_id", "hash_a", "hash_b")
        .collect()
    )


def variant_texts(occurrences: pl.DataFrame | pl.LazyFrame, records: pl.DataFrame | pl.LazyFrame,
                  kept: pl.DataFrame | None = None, paper_ids: pl.Series | None = None) -> pl.DataFrame:
    """``(paper_id, abstract)`` for every distinct text of every paper (of ``paper_ids`` only,
    when given): the canonical abstract first, then the texts of its other records in
    (source_file, ordinal) order. A near duplicate can carry what its canonical lacks (a "Code is
    available at ..." line, say).

    Texts are told apart by a 128-bit hash (as dedup keys are): ``kept`` is ``variant_hashes``
    when the caller has it, else the records' texts are hashed as they stream by; either way only
    the texts that are kept are ever held. A paper's ``abstract`` is its canonical record's
    ``text``, so every text is read from ``records``."""
    if kept is None:
        kept = variant_hashes(occurrences, records.lazy().select("record_id", *text_hash("text")).collect(engine="streaming"))
    if paper_ids is not None:
        kept = kept.filter(pl.col("paper_id").is_in(paper_ids.implode()))
    texts = (
        records.lazy().filter(pl.col("record_id").is_in(kept["record_id"].implode()))
        .select("record_id", "text", *text_hash("text", ("read_a", "read_b")))
        .collect(engine="streaming")
    )
    found = kept.join(texts, on="record_id", how="left", maintain_order="left")
    if found.filter((pl.col("read_a") != pl.col("hash_a")) | (pl.col("read_b") != pl.col("hash_b")) | pl.col("text").is_null()).height:
        raise RuntimeError("records no longer hold the texts the deduplication saw: materialize papers again")
    return found.select("paper_id", abstract="text")
