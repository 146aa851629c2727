"""Near-duplicate detection: MinHash + LSH candidates, exact Jaccard verification, clusters.

Input is a batch of texts in priority order (index 0 is the earliest record); output says, for
every text merged into an earlier one, which text is its cluster's canonical and their verified
Jaccard similarity. Everything is vectorized over the batch (Polars string kernels, then NumPy over
the Arrow byte buffer); Python loops run over chunks, permutations, bands and chain-guard rounds,
never over documents.

Tokens (what the perturbations of a scraped abstract change but its meaning does not):
  1. lower-case (Unicode);
  2. math symbols and Greek letters become their LaTeX names (``α`` -> ``alpha``, ``≤`` -> ``leq``,
     ``×`` -> ``times``), so ``$\\alpha$`` and ``α`` give the same token;
  3. LaTeX commands that wrap an argument lose their name (``\\emph{x}`` -> ``x``,
     ``\\mathbf{W}`` -> ``w``);
  4. every character that is not a letter, digit or mark separates tokens: backslashes, ``$``,
     ``%``, braces, markdown ``*``/``_``/backticks, punctuation and whitespace (so reflowed lines,
     ``3\\%`` vs ``3%`` and ``*BOPO*`` vs ``BOPO`` do not matter);
  5. each Han, Hiragana or Katakana character is a token of its own (those scripts have no spaces).
Shingles are ``shingle_size`` consecutive tokens of one text.

Hashing (stable across runs, machines and library versions; no ``pl.Expr.hash`` or ``hash()``):
  token = splitmix64(sum_i byte_i * P**i) over its UTF-8 bytes, P a fixed odd 64-bit constant
  (uint64 wrap-around); shingle = high 32 bits of splitmix64(sum_j token_j * C_j), C_j odd
  constants.
  MinHash permutation k is ``a_k * x + b_k mod 2**32`` with odd ``a_k`` (a bijection; the
  "affine32" scheme datasketch 2 uses), constants drawn from splitmix64 of ``seed``. A band hash
  is splitmix64 over its ``rows`` values. All arithmetic is unsigned integer, so bit-identical
  everywhere.

Pipeline:
  1. texts with fewer than ``min_words`` tokens are left to exact matching (a typo in a short text
     changes most of its shingles, and short boilerplate would otherwise chain into one giant
     cluster);
  2. MinHash signatures (``bands * rows`` permutations), band hashes; docs sharing a band hash
     are candidate pairs (all pairs in a bucket up to ``max_bucket`` members, each member with the
     bucket's first beyond that);
  3. every candidate pair is verified by the exact Jaccard of its shingle sets; pairs at or above
     ``threshold`` are edges;
  4. clusters are connected components of the edges; the canonical is the lowest index (the
     earliest record). Chain guard: a member whose Jaccard to its canonical is below
     ``chain_guard`` is split off; the split-off members are clustered again among themselves
     (their own edges, their own earliest canonical), round after round, until every member of
     every cluster is within ``chain_guard`` of its canonical.

LSH S-curve: a pair of Jaccard ``s`` becomes a candidate with probability
``1 - (1 - s**rows)**bands``; its 50% point is about ``(1/bands)**(1/rows)``. Defaults
(``bands=20, rows=5``: 100 permutations, 50% at 0.55) sit a little below the 0.7 threshold on
purpose: a false candidate costs one exact Jaccard, a missed one is lost for good.

    Jaccard s          0.3    0.4    0.5    0.6    0.7    0.8    0.9
    P(candidate)     0.047  0.186  0.470  0.802  0.975  1.000  1.000

Other defaults: 3-token shingles, because abstracts are short (~150 words) and an edit then
destroys 3 shingles rather than 5 (on the benchmark corpus, pair recall 0.98 with 3, 0.94 with 5,
precision >= 0.999 for both); threshold 0.7, above nearly all same-topic different papers of that
corpus; chain_guard 0.5; min_words 10 (8 shingles). ``benchmarks/near_dedup_bench.py`` measures
them against datasketch.
"""

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import polars as pl
import scipy.sparse
from scipy.sparse.csgraph import connected_components

U64 = np.uint64
_MASK32 = U64(0xFFFFFFFF)

# Unicode math symbols and Greek letters -> LaTeX command names (spaces keep them separate tokens).
_SYMBOL_NAMES = {
    "α": "alpha", "β": "beta", "γ": "gamma", "δ": "delta", "ε": "epsilon", "ϵ": "epsilon",
    "ζ": "zeta", "η": "eta", "θ": "theta", "ϑ": "theta", "ι": "iota", "κ": "kappa", "λ": "lambda",
    "μ": "mu", "µ": "mu", "ν": "nu", "ξ": "xi", "π": "pi", "ρ": "rho", "σ": "sigma", "ς": "sigma",
    "τ": "tau", "υ": "upsilon", "φ": "phi", "ϕ": "phi", "χ": "chi", "ψ": "psi", "ω": "omega",
    "≤": "leq", "⩽": "leq", "≥": "geq", "⩾": "geq", "≠": "neq", "≈": "approx", "∼": "sim",
    "×": "times", "·": "cdot", "⋅": "cdot", "±": "pm", "∞": "infty", "→": "rightarrow",
    "←": "leftarrow", "⇒": "rightarrow", "∈": "in", "∉": "notin", "⊂": "subset", "⊆": "subseteq",
    "∑": "sum", "∏": "prod", "√": "sqrt", "∂": "partial", "∇": "nabla", "∀": "forall", "∃": "exists",
    "∩": "cap", "∪": "cup", "∫": "int", "ℓ": "ell",
}
_SYMBOL_NAMES = {k: f" {v} " for k, v in _SYMBOL_NAMES.items()}
# \emph{, \textbf{, \mathcal{ ... (the argument stays, the command name goes).
_LATEX_WRAPPER = r"\\[a-z]+\*?\{"
# One pass: a CJK character gets spaces around it; any other non-ASCII non-word character becomes
# a separator (ASCII separators are classified byte-wise in NumPy, which is much faster).
_CJK_OR_NON_WORD = r"([\p{Han}\p{Hiragana}\p{Katakana}])|[^\p{L}\p{N}\p{M}\x00-\x7F]"

# Byte classes of the token text: ASCII letters/digits and every byte of a (remaining, hence
# letter/digit/mark) non-ASCII character are token bytes; all other ASCII bytes separate.
_TOKEN_BYTE = np.zeros(256, dtype=bool)
_TOKEN_BYTE[ord("0"): ord("9") + 1] = True
_TOKEN_BYTE[ord("a"): ord("z") + 1] = True
_TOKEN_BYTE[ord("A"): ord("Z") + 1] = True
_TOKEN_BYTE[0x80:] = True


@dataclass(frozen=True)
class NearConfig:
    """Parameters of near-duplicate detection (defaults documented in the module docstring).

    shingle_size: tokens per shingle. bands x rows: LSH banding (permutations = bands * rows).
    threshold: verified Jaccard at or above which two texts are near duplicates.
    chain_guard: minimum Jaccard of every cluster member to its canonical (<= threshold).
    min_words: texts with fewer tokens go to exact matching only.
    max_bucket: LSH buckets up to this size give all pairs, larger ones a star (see docstring).
    seed: fixes every hash constant. chunk_bytes: text bytes hashed per step (bounds memory).
    """

    shingle_size: int = 3
    bands: int = 20
    rows: int = 5
    threshold: float = 0.7
    chain_guard: float = 0.5
    min_words: int = 10
    max_bucket: int = 64
    seed: int = 20250701
    chunk_bytes: int = 1 << 21
    pair_chunk: int = 1 << 20

    def __post_init__(self):
        if self.shingle_size < 1 or self.bands < 1 or self.rows < 1:
            raise ValueError("shingle_size, bands and rows must be >= 1")
        if not 0.0 < self.chain_guard <= self.threshold <= 1.0:
            raise ValueError("need 0 < chain_guard <= threshold <= 1")
        if self.min_words < self.shingle_size:
            raise ValueError("min_words must be >= shingle_size (a text needs at least one shingle)")
        if self.max_bucket < 2 or self.chunk_bytes < 1 or self.pair_chunk < 1:
            raise ValueError("max_bucket must be >= 2; chunk sizes >= 1")

    @property
    def permutations(self) -> int:
        return self.bands * self.rows

    def candidate_probability(self, similarity: float) -> float:
        """Probability that a pair of this Jaccard similarity shares at least one band."""
        return 1.0 - (1.0 - similarity**self.rows) ** self.bands

    def s_curve_midpoint(self) -> float:
        """Approximate Jaccard at which a pair becomes a candidate half of the time."""
        return (1.0 / self.bands) ** (1.0 / self.rows)


# --- stable hashing -------------------------------------------------------------------------

def splitmix64(x: np.ndarray) -> np.ndarray:
    """The splitmix64 finalizer, element-wise on uint64 (wrap-around arithmetic)."""
    x = x.astype(U64, copy=True)
    x += U64(0x9E3779B97F4A7C15)
    x ^= x >> U64(30)
    x *= U64(0xBF58476D1CE4E5B9)
    x ^= x >> U64(27)
    x *= U64(0x94D049BB133111EB)
    x ^= x >> U64(31)
    return x


def _constants(seed: int, purpose: int, n: int) -> np.ndarray:
    """``n`` fixed pseudo-random uint64 values for one purpose, from the seed alone."""
    base = splitmix64(np.array([seed, purpose], dtype=U64))
    return splitmix64(np.arange(n, dtype=U64) * U64(0x9E3779B97F4A7C15) + (base[0] ^ base[1]))


def token_text(text: pl.Expr) -> pl.Expr:
    """Text reduced for tokenizing (steps 1-3 and 5 of the module docstring)."""
    return (
        text.str.to_lowercase()
        .str.replace_many(_SYMBOL_NAMES)
        .str.replace_all(_LATEX_WRAPPER, " ")
        .str.replace_all(_CJK_OR_NON_WORD, " $1 ")
    )


@dataclass
class Shingles:
    """Shingle hashes of a batch: text ``i`` owns ``hashes[offsets[i]:offsets[i + 1]]``."""

    offsets: np.ndarray  # int64, len n + 1
    hashes: np.ndarray  # uint32
    token_counts: np.ndarray  # int64, len n


_POLY = 0x9FB21C651E98DF25  # odd, so invertible modulo 2**64
_POLY_INVERSE = pow(_POLY, -1, 1 << 64)
_BLOCK = 1 << 12


def _power_tables(base: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """``base**i`` (mod 2**64) for i < _BLOCK, and ``base**(_BLOCK * j)`` for j <= n // _BLOCK.

    ``base**i`` is then ``high[i >> 12] * low[i & 4095]``: two short serial products instead of
    one of length n (a multiply-accumulate cannot be vectorized).
    """
    low = np.full(_BLOCK, base, dtype=U64)
    low[0] = 1
    low = np.multiply.accumulate(low)
    step = U64(pow(base, _BLOCK, 1 << 64))
    high = np.full(n // _BLOCK + 1, step, dtype=U64)
    high[0] = 1
    return np.multiply.accumulate(high), low


def _token_hashes(data: np.ndarray, doc_offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Hash every token of a byte buffer; returns (token hashes, token count per document).

    A token's hash is splitmix64 of the polynomial ``sum byte_i * P**i`` over its bytes, computed
    for all tokens at once: a segment sum of ``byte_j * P**j`` (separators weigh 0) times
    ``P**-start``. Arithmetic is modulo 2**64 (uint64 wrap-around).
    """
    is_token = _TOKEN_BYTE[data]
    starts_mask = is_token.copy()
    starts_mask[1:] &= ~is_token[:-1]
    doc_starts = doc_offsets[:-1][doc_offsets[:-1] < len(data)]
    starts_mask[doc_starts] = is_token[doc_starts]  # a token never spans two documents
    starts = np.flatnonzero(starts_mask)
    token_counts = np.diff(np.searchsorted(starts, doc_offsets)).astype(np.int64)
    if len(starts) == 0:
        return np.zeros(0, dtype=U64), token_counts
    high, low = _power_tables(_POLY, len(data))
    blocks = -(-len(data) // _BLOCK)
    padded = np.zeros(blocks * _BLOCK, dtype=np.uint8)
    np.multiply(data, is_token, out=padded[: len(data)])  # separators weigh 0
    # Byte j weighs P**j = high[j >> 12] * low[j & 4095].
    weighted = np.multiply(padded.reshape(blocks, _BLOCK), high[:blocks, None], dtype=U64)
    weighted *= low[None, :]
    raw = np.add.reduceat(weighted.reshape(-1), starts)
    high_inverse, low_inverse = _power_tables(_POLY_INVERSE, len(data))
    raw *= high_inverse[starts >> 12] * low_inverse[starts & (_BLOCK - 1)]
    return splitmix64(raw), token_counts


def _shingle_hashes(token_hashes: np.ndarray, token_counts: np.ndarray, k: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Combine k consecutive token hashes of one document; returns (shingle counts, hashes)."""
    counts = np.maximum(token_counts - k + 1, 0)
    if counts.sum() == 0:
        return counts, np.zeros(0, dtype=np.uint32)
    mix = _constants(seed, 2, k) | U64(1)
    n = len(token_hashes) - k + 1
    combined = token_hashes[:n] * mix[0]
    for j in range(1, k):
        combined += token_hashes[j: j + n] * mix[j]
    # Keep windows that start inside a document and end in the same one.
    keep = _ranges(np.cumsum(token_counts) - token_counts, counts)
    return counts, (splitmix64(combined[keep]) >> U64(32)).astype(np.uint32)


def _chunks(byte_offsets: np.ndarray, chunk_bytes: int) -> list[tuple[int, int]]:
    """Split documents into consecutive ranges of about ``chunk_bytes`` text each."""
    n = len(byte_offsets) - 1
    targets = np.arange(chunk_bytes, byte_offsets[-1], chunk_bytes)
    cuts = np.searchsorted(byte_offsets, targets, side="left")  # first document starting there
    bounds = np.unique(np.concatenate([[0], cuts, [n]]))
    return [(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:])]


def _arrow_bytes(texts: pl.Series) -> tuple[np.ndarray, np.ndarray]:
    """(uint8 data, int64 offsets) of a string Series without nulls, from its Arrow buffers."""
    array = texts.rechunk().to_arrow()
    _, offsets, data = array.buffers()
    offsets = np.frombuffer(offsets, dtype=np.int64)[array.offset: array.offset + len(array) + 1]
    data = np.frombuffer(data, dtype=np.uint8) if data is not None else np.zeros(0, dtype=np.uint8)
    return data, offsets


def iter_shingles(texts: pl.Series, config: NearConfig, rows: np.ndarray | None = None):
    """Yield ``(first_index, Shingles)`` chunk by chunk over ``texts`` (or over ``texts[rows]``,
    gathered a chunk at a time); memory stays bounded by ``chunk_bytes``."""
    lengths = texts.fill_null("").str.len_bytes().cast(pl.Int64).to_numpy()
    if rows is not None:
        lengths = lengths[rows]
    byte_offsets = np.concatenate([[0], np.cumsum(lengths)])
    for lo, hi in _chunks(byte_offsets, config.chunk_bytes):
        chunk = texts.slice(lo, hi - lo) if rows is None else texts.gather(rows[lo:hi])
        reduced = chunk.to_frame("t").select(token_text(pl.col("t").fill_null(""))).to_series()
        data, offsets = _arrow_bytes(reduced)
        token_hashes, token_counts = _token_hashes(data, offsets - offsets[0])
        counts, hashes = _shingle_hashes(token_hashes, token_counts, config.shingle_size, config.seed)
        yield lo, Shingles(np.concatenate([[0], np.cumsum(counts)]), hashes, token_counts)


def shingles(texts: pl.Series, config: NearConfig) -> Shingles:
    """Shingle hashes of every text (all chunks concatenated)."""
    parts = [part for _, part in iter_shingles(texts, config)]
    if not parts:
        return Shingles(np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.uint32), np.zeros(0, dtype=np.int64))
    counts = np.concatenate([np.diff(p.offsets) for p in parts])
    return Shingles(
        np.concatenate([[0], np.cumsum(counts)]),
        np.concatenate([p.hashes for p in parts]),
        np.concatenate([p.token_counts for p in parts]),
    )


# --- MinHash and LSH ------------------------------------------------------------------------

def minhash(offsets: np.ndarray, hashes: np.ndarray, config: NearConfig) -> np.ndarray:
    """MinHash signatures (docs x permutations, uint32) of documents with at least one shingle."""
    constants = _constants(config.seed, 3, config.permutations)
    a = ((constants >> U64(32)) | U64(1)).astype(np.uint32)
    b = (constants & _MASK32).astype(np.uint32)
    starts = offsets[:-1]
    if np.any(np.diff(offsets) <= 0):
        raise ValueError("every document needs at least one shingle")
    signatures = np.empty((len(starts), config.permutations), dtype=np.uint32)
    permuted = np.empty(len(hashes), dtype=np.uint32)
    for k in range(config.permutations):
        np.multiply(hashes, a[k], out=permuted)
        permuted += b[k]
        signatures[:, k] = np.minimum.reduceat(permuted, starts)
    return signatures


def band_hashes(signatures: np.ndarray, config: NearConfig) -> np.ndarray:
    """One uint64 per (document, band): splitmix64 over the band's ``rows`` signature values."""
    mix = _constants(config.seed, 4, config.rows) | U64(1)
    out = np.empty((len(signatures), config.bands), dtype=U64)
    for band in range(config.bands):
        block = signatures[:, band * config.rows: (band + 1) * config.rows].astype(U64)
        out[:, band] = splitmix64((block * mix).sum(axis=1, dtype=U64) + U64(band))
    return out


def _sorted_unique(values: np.ndarray) -> np.ndarray:
    """np.unique for integers, by sort (much faster than NumPy's hash-based unique here)."""
    values = np.sort(values)
    return values[np.concatenate([[True], values[1:] != values[:-1]])] if len(values) else values


def _ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Concatenation of ``arange(s, s + l)`` for every (s, l), vectorized."""
    total = int(lengths.sum())
    return np.repeat(starts - (np.cumsum(lengths) - lengths), lengths) + np.arange(total)


def bucket_pairs(keys: np.ndarray, max_bucket: int) -> np.ndarray:
    """Pairs (i, j), i < j, of rows with equal ``keys``, as an array of uint64 ``i << 32 | j``,
    each pair once, in no particular order (every row is in one bucket, so no pair repeats).
    Buckets above ``max_bucket`` rows pair each row with the bucket's first."""
    order = np.argsort(keys, kind="stable")
    ordered = keys[order]
    starts = np.flatnonzero(np.concatenate([[True], ordered[1:] != ordered[:-1]]))
    sizes = np.diff(np.append(starts, len(keys)))
    small = (sizes >= 2) & (sizes <= max_bucket)
    s, m = starts[small], sizes[small]
    members = _ranges(s, m)
    after = np.repeat(s + m, m) - members - 1  # rows after this one in its bucket
    left = np.repeat(members, after)
    right = _ranges(members + 1, after)
    big = sizes > max_bucket
    star_first = np.repeat(starts[big], sizes[big] - 1)
    star_rest = _ranges(starts[big] + 1, sizes[big] - 1)
    a = order[np.concatenate([left, star_first])].astype(U64)
    b = order[np.concatenate([right, star_rest])].astype(U64)
    return np.minimum(a, b) << U64(32) | np.maximum(a, b)


def candidate_pairs(bands: np.ndarray, max_bucket: int) -> np.ndarray:
    """Unique candidate pairs over all bands (uint64 ``i << 32 | j``), sorted. Pairs repeat
    only across bands, so one sort of them all is the only one needed."""
    per_band = [bucket_pairs(bands[:, j], max_bucket) for j in range(bands.shape[1])]
    return _sorted_unique(np.concatenate(per_band)) if per_band else np.zeros(0, dtype=U64)


def candidate_pairs_within(bands: np.ndarray, within: np.ndarray, max_bucket: int) -> np.ndarray:
    """The pairs of :func:`candidate_pairs` whose rows are both in ``within`` (a boolean mask),
    reading only the buckets those rows are in. Each such bucket is taken whole, rows outside
    ``within`` included, so a bucket above ``max_bucket`` pairs its rows with the same first row
    as it does in :func:`candidate_pairs`. Bucket members are found by a hash look-up (Polars
    ``is_in``), not by sorting the band."""
    per_band, inside = [], pl.Series(within)
    for j in range(bands.shape[1]):
        column = pl.Series(bands[:, j])
        members = np.flatnonzero(column.is_in(column.filter(inside).implode()).to_numpy())
        first, second = _split_pairs(bucket_pairs(bands[members, j], max_bucket))
        first, second = members[first], members[second]  # ascending members: first < second still
        keep = within[first] & within[second]
        per_band.append(first[keep].astype(U64) << U64(32) | second[keep].astype(U64))
    return _sorted_unique(np.concatenate(per_band)) if per_band else np.zeros(0, dtype=U64)


def _split_pairs(pairs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return (pairs >> U64(32)).astype(np.int64), (pairs & _MASK32).astype(np.int64)


# --- verification ---------------------------------------------------------------------------

@dataclass
class ShingleSets:
    """Each document's shingle set, sorted: ``values[offsets[i]:offsets[i + 1]]`` (uint32)."""

    values: np.ndarray
    offsets: np.ndarray

    @classmethod
    def of_texts(cls, texts: pl.Series, config: NearConfig, rows: np.ndarray | None = None) -> "ShingleSets":
        """Shingle sets of ``texts`` (or of ``texts[rows]``; local ids 0..n-1), chunk by chunk."""
        return cls.build(iter_shingles(texts, config, rows))

    @classmethod
    def build(cls, parts) -> "ShingleSets":
        """From ``(first_index, Shingles)`` parts in order (see :func:`iter_shingles`)."""
        values, counts = [], []
        for _, part in parts:
            n = len(part.offsets) - 1
            doc = np.repeat(np.arange(n, dtype=U64), np.diff(part.offsets))
            unique = _sorted_unique(doc << U64(32) | part.hashes.astype(U64))
            values.append((unique & _MASK32).astype(np.uint32))
            counts.append(np.bincount((unique >> U64(32)).astype(np.int64), minlength=n))
        if not values:
            return cls(np.zeros(0, dtype=np.uint32), np.zeros(1, dtype=np.int64))
        return cls(np.concatenate(values), np.concatenate([[0], np.cumsum(np.concatenate(counts))]))


def jaccard(sets: ShingleSets, a: np.ndarray, b: np.ndarray, pair_chunk: int = 1 << 20) -> np.ndarray:
    """Exact Jaccard similarity of the shingle sets of docs ``a[i]`` and ``b[i]`` (local ids)."""
    size = np.diff(sets.offsets)
    small_first = size[a] <= size[b]
    a, b = np.where(small_first, a, b), np.where(small_first, b, a)
    # Look up the smaller set's shingles in the larger one; pairs grouped by the larger one, so a
    # chunk of pairs needs the sets of few documents.
    order = np.argsort(b, kind="stable")
    result = np.empty(len(a), dtype=np.float64)
    result[order] = _jaccard_ordered(sets, a[order], b[order], pair_chunk, size)
    return result


def _jaccard_ordered(sets: ShingleSets, a: np.ndarray, b: np.ndarray, pair_chunk: int, size: np.ndarray) -> np.ndarray:
    """:func:`jaccard` for pairs whose ``a`` is the smaller set, sorted by ``b``, in chunks of
    about ``pair_chunk`` look-ups."""
    out = np.empty(len(a), dtype=np.float64)
    work = np.cumsum(size[a])
    lo = 0
    while lo < len(a):
        done = work[lo - 1] if lo else 0
        hi = max(lo + 1, int(np.searchsorted(work, done + pair_chunk, side="right")))
        ca, cb = a[lo:hi], b[lo:hi]
        # Sorted keys (rank of b << 32 | shingle) of the chunk's distinct b documents only
        # (``cb`` is sorted: its distinct values are its runs).
        new_target = np.concatenate([[True], cb[1:] != cb[:-1]])
        targets, rank = cb[new_target], np.cumsum(new_target) - 1
        target_keys = np.repeat(np.arange(len(targets), dtype=U64), size[targets]) << U64(32)
        target_keys |= sets.values[_ranges(sets.offsets[targets], size[targets])].astype(U64)
        query = np.repeat(rank.astype(U64), size[ca]) << U64(32)
        query |= sets.values[_ranges(sets.offsets[ca], size[ca])].astype(U64)
        found = np.minimum(np.searchsorted(target_keys, query), max(len(target_keys) - 1, 0))
        hit = target_keys[found] == query if len(target_keys) else np.zeros(len(query), dtype=bool)
        inter = np.bincount(np.repeat(np.arange(len(ca)), size[ca]), weights=hit, minlength=len(ca))
        out[lo:hi] = inter / np.maximum(size[ca] + size[cb] - inter, 1)  # two empty sets: 0.0
        lo = hi
    return out


# --- clustering -----------------------------------------------------------------------------

def _earliest_in_component(n: int, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """For each of ``n`` nodes, the lowest node index of its connected component."""
    graph = scipy.sparse.coo_matrix((np.ones(len(a), dtype=np.int8), (a, b)), shape=(n, n)).tocsr()
    _, labels = connected_components(graph, directed=False)
    lowest = np.full(labels.max() + 1 if n else 0, n, dtype=np.int64)
    np.minimum.at(lowest, labels, np.arange(n))
    return lowest[labels]


def cluster(n: int, a: np.ndarray, b: np.ndarray, similarity_to, chain_guard: float) -> tuple[np.ndarray, np.ndarray]:
    """Clusters of ``n`` nodes from edges (a, b) with the chain guard.

    ``similarity_to(members, canonicals)`` gives their Jaccard. Returns (canonical of each node,
    its similarity to that canonical); a node alone is its own canonical with similarity 1.0.
    """
    canonical = np.arange(n, dtype=np.int64)
    similarity = np.ones(n, dtype=np.float64)
    pending = np.ones(n, dtype=bool)
    while len(a):
        earliest = _earliest_in_component(n, a, b)
        members = np.flatnonzero(pending & (earliest != np.arange(n)))
        sims = similarity_to(members, earliest[members])
        ok = sims >= chain_guard
        canonical[members[ok]] = earliest[members[ok]]
        similarity[members[ok]] = sims[ok]
        stray = np.zeros(n, dtype=bool)
        stray[members[~ok]] = True
        pending = stray
        keep = stray[a] & stray[b]  # strays cluster again, among themselves only
        a, b = a[keep], b[keep]
    return canonical, similarity


def lsh_bands(texts: pl.Series, config: NearConfig) -> tuple[np.ndarray, np.ndarray]:
    """Steps 1-2 for ``texts``: the indices of the texts with at least ``min_words`` tokens, and
    their band hashes (one row each, uint64). A text's bands depend on it and ``config`` only."""
    eligible_parts, band_parts = [], []
    for lo, part in iter_shingles(texts, config):
        ok = np.flatnonzero(part.token_counts >= config.min_words)
        if len(ok) == 0:
            continue
        counts = np.diff(part.offsets)[ok]
        hashes = part.hashes[_ranges(part.offsets[ok], counts)]
        signatures = minhash(np.concatenate([[0], np.cumsum(counts)]), hashes, config)
        eligible_parts.append(ok + lo)
        band_parts.append(band_hashes(signatures, config))
    if not eligible_parts:
        return np.zeros(0, dtype=np.int64), np.zeros((0, config.bands), dtype=U64)
    return np.concatenate(eligible_parts), np.concatenate(band_parts)


# Jaccard of texts ``a[i]`` and ``b[i]`` (indices in priority order), for a batch of pairs.
Similarity = Callable[[np.ndarray, np.ndarray], np.ndarray]


# What clusters_of returns: each text merged into an earlier one (see near_duplicates).
MERGED_SCHEMA = {"index": pl.Int64, "canonical": pl.Int64, "similarity": pl.Float64}


@dataclass(frozen=True)
class Clusters:
    """Steps 3-4 for the texts in a candidate pair (``nodes``, indices in priority order,
    ascending): each one's canonical (an index) and similarity to it, and its ``component``: the
    earliest index of its connected component over the verified edges, before the chain guard
    splits it. Texts in no candidate pair are their own cluster and not listed."""

    nodes: np.ndarray
    canonical: np.ndarray
    similarity: np.ndarray
    component: np.ndarray

    def merged(self) -> pl.DataFrame:
        """One row per text merged into an earlier one, as :func:`near_duplicates` returns them."""
        rows = np.flatnonzero(self.canonical != self.nodes)
        return pl.DataFrame(
            {"index": self.nodes[rows], "canonical": self.canonical[rows], "similarity": self.similarity[rows]},
            schema=MERGED_SCHEMA,
        )


def clusters_of(eligible: np.ndarray, bands: np.ndarray, similarity_for: Callable[[np.ndarray], Similarity],
                config: NearConfig) -> pl.DataFrame:
    """Steps 2-4 from band hashes (``lsh_bands``' output, or the same kept from an earlier run):
    candidates, their verification and clusters, as :func:`near_duplicates` returns them.
    ``similarity_for(rows)`` gives the Jaccard of pairs among ``rows``, the candidate texts
    (ascending indices); it is called once."""
    pairs = candidate_pairs(bands, config.max_bucket) if len(eligible) else np.zeros(0, dtype=U64)
    return cluster_candidates(eligible, pairs, similarity_for, config).merged()


def cluster_candidates(eligible: np.ndarray, pairs: np.ndarray, similarity_for: Callable[[np.ndarray], Similarity],
                       config: NearConfig) -> Clusters:
    """Steps 3-4 for candidate ``pairs`` (as :func:`candidate_pairs` gives them, of rows of
    ``eligible``, the texts' indices): ``similarity_for`` as in :func:`clusters_of`."""
    if len(pairs) == 0:
        empty = np.zeros(0, dtype=np.int64)
        return Clusters(empty, empty, np.zeros(0, dtype=np.float64), empty)
    first, second = _split_pairs(pairs)
    involved = eligible[_sorted_unique(np.concatenate([first, second]))]  # ascending: priority order
    la, lb = np.searchsorted(involved, eligible[first]), np.searchsorted(involved, eligible[second])
    similarity = similarity_for(involved)
    edge = similarity(involved[la], involved[lb]) >= config.threshold

    def similarity_to(members, canonicals):
        return similarity(involved[members], involved[canonicals])

    canonical, similar = cluster(len(involved), la[edge], lb[edge], similarity_to, config.chain_guard)
    component = _earliest_in_component(len(involved), la[edge], lb[edge])
    return Clusters(involved, involved[canonical], similar, involved[component])


def shingle_similarity(texts: pl.Series, rows: np.ndarray, config: NearConfig) -> Similarity:
    """Exact Jaccard between texts of ``texts`` at ``rows`` (ascending), from their shingle sets."""
    sets = ShingleSets.of_texts(texts, config, rows=rows)

    def similarity(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return jaccard(sets, np.searchsorted(rows, a), np.searchsorted(rows, b), config.pair_chunk)

    return similarity


def near_duplicates(texts: pl.Series, config: NearConfig = NearConfig()) -> pl.DataFrame:
    """Near-duplicate clusters of ``texts`` (in priority order: index 0 is the earliest).

    Returns one row per text merged into an earlier one: ``index``, ``canonical`` (index of the
    cluster's earliest text) and ``similarity`` (their verified Jaccard), sorted by ``index``.
    """
    eligible, bands = lsh_bands(texts, config)
    return clusters_of(eligible, bands, lambda rows: shingle_similarity(texts, rows, config), config)
