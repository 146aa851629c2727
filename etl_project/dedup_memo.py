"""What a deduplication worked out that the next one looks up instead of working out again.

Every entry but ``clusters`` is a function of texts alone, given the build (code, settings,
library versions, the near-duplicate settings among them: the caller keeps a memo only for the
build that wrote it):

- ``keys``: each record's id, file and ordinal, key hashes (``text_hash`` of its ``dedup_key``)
  and text hashes (of its ``text``: what enrichment tells a paper's texts apart by, see
  :func:`paper_variants`), valid while its file's bytes (``files``: source_file, sha256) are the
  same;
- ``bands``: each distinct key's LSH band hashes, or that it is too short for near matching;
- ``pairs``: the exact Jaccard of pairs of distinct keys, as verification and the chain guard
  asked for them;
- ``clusters``: each distinct key's near cluster (canonical key, similarity) and connected
  component, with the record it was first seen at: a function of all the keys and their order,
  kept for the components a change cannot reach (:func:`near_clusters` says which those are);
- ``papers``: a canonical record's paper columns (text, key, counts, paper_id), while its file is
  the same: the staged ``papers`` table itself.

So a deduplication that looks entries up gives exactly what computing them gives; only the time
differs. A run with no memo (the first, a full refresh, another build) starts from ``Memo.empty``
and computes everything, and every run writes the memo the next one starts from.

``bands`` and ``pairs`` are staged as folders of parts that grow: the next memo links the
previous one's parts and adds one of the rows it worked out (:class:`Growth`), so a run writes
those, not the 200 MB the two hold at a million records. The rows of keys that are gone stay
behind in the linked parts: still true (each is a function of texts alone), and never asked
for but when a text comes back. Once they pass STALE_SHARE of the live rows, or the parts
MAX_PARTS, the tables are written again with the live rows alone.
"""

import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl

from etl_project import stage
from etl_project.near_dedup import (
    Clusters,
    NearConfig,
    ShingleSets,
    Similarity,
    candidate_pairs,
    candidate_pairs_within,
    cluster_candidates,
    jaccard,
    lsh_bands,
)

KEY = ["hash_a", "hash_b"]
PAIR = ["a_a", "a_b", "b_a", "b_b"]
PARTS = ("build", "files", "keys", "bands", "pairs", "clusters")
VARIANTS = "variants"  # staged beside the memo for enrichment, not looked up by the next deduplication
FINGERPRINTS = "fingerprints"  # likewise: reuse.text_fingerprints of the variants
CHANGES = "changes"  # likewise: which papers' fingerprints changed since the papers the memo came with
CHANGE_KINDS = ("canonical", "texts")  # of reuse.text_fingerprints, what paper_changes tells changes of
PAPER_COLUMNS = ["canonical_record_id", "first_source_file", "paper_id", "abstract", "dedup_key", "word_count", "char_count"]
FILES_SCHEMA = {"source_file": pl.String, "sha256": pl.String}
KEYS_SCHEMA = {"record_id": pl.String, "source_file": pl.String, "ordinal": pl.UInt32, "hash_a": pl.UInt64, "hash_b": pl.UInt64,
               "text_a": pl.UInt64, "text_b": pl.UInt64}
SEED_A, SEED_B = 0x9E3779B97F4A7C15, 0x632BE59BD9B4E019
BAND_SLICE = 65_536  # rows of the memo's band hashes read into the band matrix at a time
GROWN = ("bands", "pairs")  # staged as folders of parts that grow (Growth)
STALE_SHARE = 0.25  # rows no lookup finds, against the live ones, beyond which a grown table is written again
MAX_PARTS = 32  # parts of a grown table beyond which it is written again as one
PAIRS_SCHEMA = {**dict.fromkeys(PAIR, pl.UInt64), "jaccard": pl.Float64}
# ``component``: hash_a of the earliest key of the key's connected component; it only groups keys,
# so two components sharing one (odds ~n²/2^65) are merely worked out again together.
CLUSTERS_SCHEMA = {
    "hash_a": pl.UInt64, "hash_b": pl.UInt64, "source_file": pl.String, "ordinal": pl.UInt32,
    "component": pl.UInt64, "canonical_a": pl.UInt64, "canonical_b": pl.UInt64, "similarity": pl.Float64,
}


def text_hash(column: str, names: tuple[str, str] = ("hash_a", "hash_b")) -> list[pl.Expr]:
    """Two independently seeded 64-bit hashes of a text column (``hash_a``, ``hash_b``), to tell
    texts apart without holding them: a collision between two of n distinct texts has odds of
    about n²/2^129 (1e-25 for ten million), far below any hardware error rate. Polars' hash is
    stable within one Polars version only, which the build a memo is kept for includes."""
    return [pl.col(column).hash(seed=SEED_A).alias(names[0]), pl.col(column).hash(seed=SEED_B).alias(names[1])]


def _bands_schema(config: NearConfig | None) -> dict:
    width = config.bands if config else 1
    return {"hash_a": pl.UInt64, "hash_b": pl.UInt64, "eligible": pl.Boolean, "bands": pl.Array(pl.UInt64, width)}


@dataclass(frozen=True)
class Growth:
    """A table of the next memo as the previous memo's parts (``before``), linked as they are,
    and the rows this deduplication ``added`` to them."""

    before: tuple[Path, ...]
    added: pl.DataFrame


def grow(before: tuple[Path, ...], added: pl.DataFrame, live_rows: int) -> Growth | None:
    """How the next memo's table extends the previous memo's ``before`` with ``added``, when it
    holds ``live_rows`` rows a lookup can find; None when it is to be written again instead:
    there is no previous table, or the rows left behind would pass STALE_SHARE of the live ones,
    or the parts MAX_PARTS."""
    if not before or len(before) >= MAX_PARTS:
        return None
    total = sum(pl.scan_parquet(path).select(pl.len()).collect().item() for path in before) + added.height
    return Growth(before, added) if total - live_rows <= STALE_SHARE * live_rows else None


@dataclass(frozen=True)
class Memo:
    """A memo read from the stage holds scans of its files, not their rows (a few hundred MB at a
    million records): each step of a deduplication reads what it looks up, and a memo written
    from one streams what it keeps of the previous one's files into the next."""

    files: pl.DataFrame  # FILES_SCHEMA: the landing files whose records ``keys`` holds
    keys: pl.LazyFrame  # KEYS_SCHEMA
    bands: pl.LazyFrame  # _bands_schema: ``eligible`` false (bands 0) for texts too short to match
    pairs: pl.LazyFrame  # PAIRS_SCHEMA, each pair once: (a_a, a_b) < (b_a, b_b)
    clusters: pl.LazyFrame  # CLUSTERS_SCHEMA, one row per distinct key
    papers: pl.LazyFrame  # the papers the memo was written with (none are looked up unless it has dedup.COLUMNS)
    # Of a memo read from the stage: the parts of each GROWN table. Of a memo to write: how each
    # GROWN table extends the previous memo's, when it does (the others are written whole,
    # without their stale rows).
    parts: Mapping[str, tuple[Path, ...]] = field(default_factory=dict)
    growth: Mapping[str, Growth] = field(default_factory=dict)

    @classmethod
    def empty(cls, config: NearConfig | None) -> "Memo":
        return cls(
            pl.DataFrame(schema=FILES_SCHEMA), pl.LazyFrame(schema=KEYS_SCHEMA),
            pl.LazyFrame(schema=_bands_schema(config)), pl.LazyFrame(schema=PAIRS_SCHEMA),
            pl.LazyFrame(schema=CLUSTERS_SCHEMA),
            pl.LazyFrame(schema={c: pl.String for c in PAPER_COLUMNS[:-2]} | {"word_count": pl.Int64, "char_count": pl.Int64}),
        )

    def write(self, folder: Path, build: str) -> None:
        """Stage the memo beside the papers it was written with (``papers`` itself is not copied),
        each part streamed, or a GROWN table as its growth. ``folder`` is never the previous
        memo's, which the parts may read."""
        stage.write(pl.DataFrame({"build": [build]}), _path(folder, "build"))
        for part in PARTS[1:]:
            if part not in GROWN:
                stage.write(getattr(self, part).lazy(), _path(folder, part))
                continue
            target = _path(folder, part)
            shutil.rmtree(target, ignore_errors=True)  # a retried step's
            target.mkdir(parents=True)
            growth = self.growth.get(part)
            if growth is None:
                stage.write(getattr(self, part).lazy(), target / f"{stage.new_batch_id()}.parquet")
                continue
            for path in growth.before:
                stage.link_or_copy(path, target / path.name)
            if growth.added.height:
                stage.write(growth.added, target / f"{stage.new_batch_id()}.parquet")

    @classmethod
    def read(cls, papers_file: Path, build: str, config: NearConfig | None) -> "Memo | None":
        """The memo staged beside ``papers_file`` when the same build wrote it, else None."""
        folder = papers_file.parent
        if not all(_path(folder, part).exists() for part in PARTS):
            return None
        if pl.read_parquet(_path(folder, "build"))["build"].to_list() != [build]:
            return None
        parts = {part: _parts(_path(folder, part)) for part in GROWN}
        if not all(parts.values()):
            return None
        keys, (bands, pairs) = pl.scan_parquet(_path(folder, "keys")), (pl.scan_parquet(list(parts[part])) for part in GROWN)
        if keys.collect_schema() != pl.Schema(KEYS_SCHEMA) or bands.collect_schema() != pl.Schema(_bands_schema(config)):
            return None
        return cls(
            pl.read_parquet(_path(folder, "files")), keys, bands, pairs, pl.scan_parquet(_path(folder, "clusters")),
            pl.scan_parquet(papers_file), parts,
        )


def _parts(table: Path) -> tuple[Path, ...]:
    """The Parquet files of a memo table: a folder's parts (an empty table is one empty part),
    or a file, as an earlier release staged it."""
    return tuple(sorted(table.glob("*.parquet"))) if table.is_dir() else (table,)


def write_variants(folder: Path, variants: pl.DataFrame, fingerprints: pl.DataFrame) -> None:
    """Stage the papers' variant hashes (dedup.Deduplicated.variants) and their fingerprints
    (etl_project.enrich.reuse.text_fingerprints) beside the memo."""
    stage.write(variants, _path(folder, VARIANTS))
    stage.write(fingerprints, _path(folder, FINGERPRINTS))


@dataclass(frozen=True)
class Delta:
    """What changed between the papers a table was computed from and those there are now, as
    the deduplication worked it out (paper_changes): the papers whose texts' fingerprint (of the
    kind the table is computed from) is new or differs, and those that are gone."""

    changed: pl.Series
    gone: pl.Series


def write_changes(folder: Path, since: Path | None, then: pl.DataFrame | None, now: pl.DataFrame) -> None:
    """Stage beside the memo which papers' texts changed since the deduplication that staged the
    papers ``since``: ``then`` and ``now`` are the two runs' reuse.text_fingerprints. One row per
    paper that is new, changed (a CHANGE_KINDS column true for each fingerprint that differs) or
    gone (``gone``); ``since`` in the file's metadata. None staged without ``then`` (a retried
    step's is removed)."""
    path = _path(folder, CHANGES)
    path.unlink(missing_ok=True)
    if since is None or then is None:
        return
    joined = now.join(then, on="paper_id", how="full", coalesce=True, suffix="_then")
    gone = pl.col("canonical_a").is_null()
    changes = joined.select(
        "paper_id",
        *((~gone & ~(pl.col(f"{kind}_a").eq_missing(pl.col(f"{kind}_a_then"))
                     & pl.col(f"{kind}_b").eq_missing(pl.col(f"{kind}_b_then")))).alias(kind) for kind in CHANGE_KINDS),
        gone=gone,
    ).filter(pl.any_horizontal(*CHANGE_KINDS, "gone"))
    stage.write(changes, path, {"since": str(since)})


def paper_changes(papers_file: Path, build: str, kind: str, since: str) -> Delta | None:
    """The Delta of ``kind`` (CHANGE_KINDS) that the deduplication that staged ``papers_file``
    staged beside it (write_changes), when ``build`` wrote it and it is since the papers named
    ``since`` (None: otherwise)."""
    changes = _staged(papers_file, build, CHANGES)
    if changes is None or pl.read_parquet_metadata(_path(papers_file.parent, CHANGES)).get("since") != since:
        return None
    return Delta(changes.filter(kind)["paper_id"], changes.filter("gone")["paper_id"])


def paper_variants(papers_file: Path, build: str) -> pl.DataFrame | None:
    """``(paper_id, record_id, hash_a, hash_b)``: the ``text_hash`` of every distinct text of every
    paper (dedup.variant_hashes, canonical text first) of the deduplication that staged
    ``papers_file``, from beside it, when ``build`` wrote it (None: otherwise). What enrichment
    fingerprints a paper's texts by without reading them: the same hash (the build holds the
    Polars version) over the same texts (a paper's ``abstract`` is its canonical record's
    ``text``), and that build made the papers' other columns."""
    return _staged(papers_file, build, VARIANTS)


def paper_fingerprints(papers_file: Path, build: str) -> pl.DataFrame | None:
    """The reuse.text_fingerprints of :func:`paper_variants`, staged with them."""
    return _staged(papers_file, build, FINGERPRINTS)


def _staged(papers_file: Path, build: str, part: str) -> pl.DataFrame | None:
    folder = papers_file.parent
    path = _path(folder, part)
    if not path.exists() or not _path(folder, "build").exists():
        return None
    if pl.read_parquet(_path(folder, "build"))["build"].to_list() != [build]:
        return None
    return pl.read_parquet(path)


def _path(folder: Path, part: str) -> Path:
    return folder / f"dedup_memo.{part}.parquet"


def unchanged_files(files: pl.DataFrame, memo: Memo) -> pl.Series:
    """The files whose bytes the memo's entries were computed from (``files``: source_file,
    sha256 of every landing file now)."""
    return files.filter(pl.col("sha256").is_not_null()).join(memo.files, on=["source_file", "sha256"], how="semi")["source_file"]


def key_hashes(records: pl.LazyFrame, same: pl.Series, memo: Memo) -> pl.DataFrame:
    """KEYS_SCHEMA for every record: looked up for the files in ``same``, hashed for the rest
    (reading only their rows: the records are stored in file order, so row-group statistics skip
    the others)."""
    fresh = (
        records.filter(~pl.col("source_file").is_in(same.implode()))
        .select("record_id", "source_file", "ordinal", *text_hash("dedup_key"), *text_hash("text", ("text_a", "text_b")))
        .collect(engine="streaming")
        .cast(KEYS_SCHEMA)
    )
    return pl.concat([memo.keys.filter(pl.col("source_file").is_in(same.implode())).collect(engine="streaming"), fresh])


class Texts:
    """Keys of the representatives (priority order) read on demand; the last read is kept, so a
    full build, which reads them all for their bands, reads them once."""

    def __init__(self, read: Callable[[np.ndarray], pl.Series]):
        self._read, self._rows, self._texts = read, np.zeros(0, dtype=np.int64), None

    def at(self, rows: np.ndarray) -> tuple[pl.Series, np.ndarray | None]:
        """The texts at ``rows`` (ascending), as a Series and the positions in it of those rows
        (None: the Series is exactly them). Kept texts are not copied."""
        if self._texts is not None and len(rows) and np.isin(rows, self._rows).all():
            return self._texts, np.searchsorted(self._rows, rows)
        self._rows, self._texts = rows, self._read(rows)
        return self._texts, None


def bands_of(hashes: pl.DataFrame, memo: Memo, texts: Texts,
             config: NearConfig) -> tuple[np.ndarray, np.ndarray, pl.LazyFrame, pl.DataFrame]:
    """(eligible indices, their band hashes, the bands table for the next memo, the computed
    rows of it) of the distinct keys ``hashes`` (hash_a, hash_b, in priority order): looked up,
    or computed from their text. The table is the memo's rows of these keys and the computed
    ones, streamed when the next memo writes it whole (else it grows by the computed rows: Growth)."""
    keys = hashes.select(KEY)
    rows = keys.with_row_index("row")
    found = rows.lazy().join(memo.bands.select(*KEY, "eligible"), on=KEY).select("row", "eligible").collect(engine="streaming")
    at = found["row"].to_numpy()
    known, eligible = np.zeros(hashes.height, dtype=bool), np.zeros(hashes.height, dtype=bool)
    known[at], eligible[at] = True, found["eligible"].to_numpy()
    missing = np.flatnonzero(~known)
    local, computed = np.zeros(0, dtype=np.int64), np.zeros((0, config.bands), dtype=np.uint64)
    if len(missing):
        read, positions = texts.at(missing)
        local, computed = lsh_bands(read if positions is None else read.gather(positions), config)
        eligible[missing[local]] = True
    # The eligible keys' bands in priority order, each put at its place among them: the memo's,
    # streamed a slice at a time into the matrix (joined whole, they were a second copy of it),
    # then the computed ones.
    place = np.cumsum(eligible) - 1
    matrix = np.empty((int(eligible.sum()), config.bands), dtype=np.uint64)
    del found
    for part in memo.bands.filter("eligible").select(*KEY, "bands").collect_batches(chunk_size=BAND_SLICE):
        part = rows.join(part, on=KEY).select("row", "bands")
        matrix[place[part["row"].to_numpy()]] = part["bands"].to_numpy()
    matrix[place[missing[local]]] = computed
    # The computed keys' rows of the next memo: the eligible ones' bands, zeros for the others.
    is_short = np.ones(len(missing), dtype=bool)
    is_short[local] = False
    short = np.flatnonzero(is_short)
    width = pl.Array(pl.UInt64, config.bands)
    computed_rows = pl.concat([
        keys[missing[local]].with_columns(eligible=pl.lit(True), bands=pl.Series(computed, dtype=width)),
        keys[missing[short]].with_columns(
            eligible=pl.lit(False), bands=pl.Series(np.zeros((len(short), config.bands), dtype=np.uint64), dtype=width)),
    ])
    del computed
    table = pl.concat([memo.bands.join(keys.lazy(), on=KEY, how="semi"), computed_rows.lazy()])
    return np.flatnonzero(eligible), matrix, table, computed_rows


class PairSimilarity:
    """Jaccard of pairs of representatives: looked up in the memo's pairs, computed from the
    shingle sets of the texts the memo lacks; remembers every pair asked for (the next memo)."""

    def __init__(self, hashes: pl.DataFrame, memo: Memo, texts: Texts, config: NearConfig):
        self._a, self._b = hashes["hash_a"].to_numpy(), hashes["hash_b"].to_numpy()
        self._known, self._texts, self._config = memo.pairs, texts, config
        self._asked: list[pl.DataFrame] = []
        self._new: list[pl.DataFrame] = []  # the asked pairs the memo lacked, with their computed Jaccard
        # Shingle sets of the texts at these rows, kept: the chain guard asks about the texts
        # verification already needed.
        self._rows, self._sets = np.zeros(0, dtype=np.int64), None

    def _shingle_sets(self, rows: np.ndarray) -> ShingleSets:
        if self._sets is None or not np.isin(rows, self._rows).all():
            self._rows = np.union1d(rows, self._rows)
            texts, positions = self._texts.at(self._rows)
            self._sets = ShingleSets.of_texts(texts, self._config, rows=positions)
        return self._sets

    def __call__(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        swap = (self._a[a] > self._a[b]) | ((self._a[a] == self._a[b]) & (self._b[a] > self._b[b]))
        low, high = np.where(swap, b, a), np.where(swap, a, b)
        pairs = pl.DataFrame({"a_a": self._a[low], "a_b": self._b[low], "b_a": self._a[high], "b_b": self._b[high]})
        # The memo's rows of these pairs, read from its files (millions of rows, not held): they
        # probe a table of these few, rather than being hashed into one at every call.
        known = self._known.join(pairs.lazy(), on=PAIR, how="semi").collect(engine="streaming")
        result = pairs.join(known, on=PAIR, how="left", maintain_order="left")["jaccard"].to_numpy().copy()
        missing = np.flatnonzero(np.isnan(result))
        if len(missing):
            sets = self._shingle_sets(np.unique(np.concatenate([low[missing], high[missing]])))
            result[missing] = jaccard(sets, np.searchsorted(self._rows, low[missing]), np.searchsorted(self._rows, high[missing]),
                                      self._config.pair_chunk)
            self._new.append(pairs[missing].with_columns(jaccard=pl.Series(result[missing])))
        self._asked.append(pairs.with_columns(jaccard=pl.Series(result)))
        return result

    def table(self) -> pl.DataFrame:
        """Every pair asked about, for the next memo."""
        return pl.concat([pl.DataFrame(schema=PAIRS_SCHEMA), *self._asked]).unique(PAIR)

    def new_pairs(self) -> pl.DataFrame:
        """The pairs asked about that the memo lacked."""
        return pl.concat([pl.DataFrame(schema=PAIRS_SCHEMA), *self._new]).unique(PAIR)

    def factory(self) -> Callable[[np.ndarray], Similarity]:
        return lambda rows: self


@dataclass(frozen=True)
class NearResult:
    merged: pl.DataFrame  # near_dedup.MERGED_SCHEMA: the keys merged into an earlier one
    bands: pl.LazyFrame  # the next memo's parts
    pairs: pl.LazyFrame
    clusters: pl.LazyFrame
    reclustered: int  # keys long enough for near matching whose cluster was worked out, not kept
    redone: np.ndarray  # per key (bool): its cluster was worked out, not taken from the memo's
    growth: Mapping[str, Growth] = field(default_factory=dict)  # of bands and pairs (Memo.growth)


def near_clusters(keys: pl.DataFrame, memo: Memo, texts: Texts, config: NearConfig) -> NearResult:
    """Near clusters of the distinct ``keys`` (hash_a, hash_b and the source_file and ordinal of
    the record each was first seen at, in priority order), as ``near_dedup.clusters_of`` gives
    them over all of them, working out again only the components the change can reach.

    Why that is exact: candidate pairs come from LSH buckets, and a bucket that holds no key that
    is new, gone or moved in the priority order (a "changed" key) holds the same keys in the same
    order as before, so it gives the same pairs, and their Jaccard is a function of the texts.
    Every verified edge lies in a bucket of both its keys, so every edge the change can add, drop
    or re-order lies in a bucket holding a changed key ("touched"). A connected component none
    of whose keys is in a touched bucket therefore has the same edges and order as before, and
    the same clusters (the chain guard works within a component). The components that have such
    a key are clustered again, whole, with the pairs among their keys from their buckets taken
    whole (:func:`near_dedup.candidate_pairs_within`): an edge leaving them would lie in an
    untouched bucket, so it was an edge before, inside one component. Every other key keeps its
    cluster and component from the memo, which by the same argument are what working them out
    gives, labels included (a component's earliest key cannot change while it is kept)."""
    hashes = keys.select(KEY)
    eligible, bands, band_table, computed = bands_of(hashes, memo, texts, config)
    similarity = PairSimilarity(hashes, memo, texts, config)
    indexed = keys.select(*KEY, "source_file", "ordinal").with_row_index("index")
    if not memo.clusters.select(pl.len()).collect().item():  # no memo: every key
        candidates = candidate_pairs(bands, config.max_bucket)
        del bands  # the largest array here (eligible keys x bands): verification reads texts next
        found = cluster_candidates(eligible, candidates, similarity.factory(), config)
        clusters = _clusters_table(indexed, found)
        return NearResult(_merged(clusters, indexed), band_table, similarity.table().lazy(), clusters.drop("index").lazy(),
                          len(eligible), np.ones(len(indexed), dtype=bool))
    # Each key's memo row, and whether the key is changed: new, or first seen at another record.
    then = (
        indexed.lazy().join(memo.clusters.rename(lambda c: c if c in KEY else f"{c}_then"), on=KEY, how="left",
                            maintain_order="left")
        .select(
            "component_then", "canonical_a_then", "canonical_b_then", "similarity_then",
            changed=(pl.col("component_then").is_null() | (pl.col("source_file") != pl.col("source_file_then"))
                     | (pl.col("ordinal") != pl.col("ordinal_then"))).fill_null(True),
        )
        .collect(engine="streaming")
    )
    changed = then["changed"]
    gone = memo.clusters.select(KEY).join(hashes.lazy(), on=KEY, how="anti").collect(engine="streaming")
    # The band values of the changed keys, now, and of the keys that are gone, before.
    touched = bands[changed.gather(eligible).to_numpy()]
    if gone.height:
        gone_bands = memo.bands.join(gone.lazy(), on=KEY, how="semi").filter("eligible").select("bands").collect(engine="streaming")["bands"]
        if gone_bands.len():
            touched = np.concatenate([touched, gone_bands.to_numpy()])
    in_touched = np.zeros(len(eligible), dtype=bool)
    for j in range(bands.shape[1]):
        in_touched |= pl.Series(bands[:, j]).is_in(pl.Series(touched[:, j]).implode()).to_numpy()
    # Whole components: every eligible key whose component (as the memo has it) has a key in a
    # touched bucket, and the new keys (in_touched, as their own bands are touched).
    component_then = then["component_then"].gather(eligible)
    reached = component_then.filter(pl.Series(in_touched)).drop_nulls().unique()
    reclustered = in_touched | component_then.is_in(reached.implode()).fill_null(False).to_numpy()
    candidates = candidate_pairs_within(bands, reclustered, config.max_bucket)
    del bands  # as above
    found = cluster_candidates(eligible, candidates, similarity.factory(), config)
    worked_out = np.zeros(len(indexed), dtype=bool)
    worked_out[eligible[reclustered]] = True
    # Changed keys too short for near matching: their own cluster, as they have no memo row.
    redone = pl.Series(worked_out) | changed
    clusters = _clusters_table(indexed, found, then, redone)
    # The live pairs: those of two keys there are now. While the memo grows (Growth), those of
    # keys that are gone stay behind with their bands, and go when the bands do.
    live = hashes.lazy()
    kept = memo.pairs.join(live.select(a_a="hash_a", a_b="hash_b"), on=["a_a", "a_b"], how="semi").join(
        live.select(b_a="hash_a", b_b="hash_b"), on=["b_a", "b_b"], how="semi")
    new_pairs = similarity.new_pairs()
    growth = {}
    if bands_growth := grow(memo.parts.get("bands", ()), computed, hashes.height):
        growth = {"bands": bands_growth, "pairs": Growth(memo.parts["pairs"], new_pairs)}
    return NearResult(_merged(clusters, indexed), band_table, pl.concat([kept, new_pairs.lazy()]),
                      clusters.drop("index").lazy(), int(reclustered.sum()), redone.to_numpy(), growth)


def _clusters_table(indexed: pl.DataFrame, found: Clusters, then: pl.DataFrame | None = None,
                    worked_out: pl.Series | None = None) -> pl.DataFrame:
    """CLUSTERS_SCHEMA (and ``index``) of every key: the memo's row (``then``, its columns
    suffixed ``_then``) where ``worked_out`` is false; otherwise from ``found``, or a cluster of
    its own for a key ``found`` does not hold."""
    hash_a, hash_b = indexed["hash_a"].to_numpy(), indexed["hash_b"].to_numpy()
    canonical = np.arange(len(indexed), dtype=np.int64)
    canonical[found.nodes] = found.canonical
    similarity = np.ones(len(indexed), dtype=np.float64)
    similarity[found.nodes] = found.similarity
    component = hash_a.copy()
    component[found.nodes] = hash_a[found.component]
    now = indexed.select(*KEY, "source_file", "ordinal", "index").with_columns(
        component=pl.Series(component), canonical_a=pl.Series(hash_a[canonical]), canonical_b=pl.Series(hash_b[canonical]),
        similarity=pl.Series(similarity),
    )
    if then is not None:
        now = now.with_columns(
            pl.when(worked_out).then(now[column]).otherwise(then[f"{column}_then"]).alias(column)
            for column in ("component", "canonical_a", "canonical_b", "similarity")
        )
    return now.select(*CLUSTERS_SCHEMA, "index").cast(CLUSTERS_SCHEMA)


def _merged(clusters: pl.DataFrame, indexed: pl.DataFrame) -> pl.DataFrame:
    """MERGED_SCHEMA from the clusters table: each key whose canonical is another key."""
    merged = (
        clusters.filter((pl.col("canonical_a") != pl.col("hash_a")) | (pl.col("canonical_b") != pl.col("hash_b")))
        .join(indexed.select(canonical_a="hash_a", canonical_b="hash_b", canonical="index"), on=["canonical_a", "canonical_b"],
              how="left")
        .select(pl.col("index").cast(pl.Int64), pl.col("canonical").cast(pl.Int64), "similarity")
        .sort("index")
    )
    if merged["canonical"].null_count():  # the reasoning in near_clusters does not allow it
        raise RuntimeError("a near cluster kept from the dedup memo names a canonical key that is gone")
    return merged
