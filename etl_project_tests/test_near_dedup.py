"""Near-duplicate detection: tokens, stable hashes, banding, verification, clustering, pipeline."""

import re

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from etl_project import dedup, near_dedup
from etl_project.near_dedup import NearConfig
from etl_project_tests.conftest import SEEDS, materialize_all, normalized_records

CONFIG = NearConfig()

BASE = (
    "Neural Combinatorial Optimization (NCO) has emerged as a promising approach for NP-hard problems. "
    "However, prevailing RL-based methods suffer from low sample efficiency due to sparse rewards and "
    "underused solutions. We propose *Best-anchored and Objective-guided Preference Optimization (BOPO)*, "
    "a training paradigm that leverages solution preferences via objective values. Experiments on the "
    "Job-shop Scheduling Problem show that BOPO reduces the optimality gap by 3\\% with $\\alpha \\leq 0.5$. "
    "Code is available at https://github.com/example/bopo."
)
# The same abstract as a scraper might give it again.
TYPO = BASE.replace("promising", "promisng").replace("sparse rewards", "sparse reward")
UNICODE = BASE.replace("3\\%", "3%").replace("$\\alpha \\leq 0.5$", "α ≤ 0.5").replace("*Best", "Best").replace("(BOPO)*", "(BOPO)")
NO_URL = BASE.rsplit(" Code is", 1)[0]
REFLOWED_UPPER = BASE.upper().replace(". ", ".\n")
# Same topic, many shared phrases, a different paper.
HARD_NEGATIVE = (
    "Neural Combinatorial Optimization (NCO) has emerged as a promising approach for NP-hard problems. "
    "We study vehicle routing with time windows and introduce a graph transformer that predicts which "
    "customers to serve next from partial tours. Trained by imitation of an exact solver, it generalizes "
    "from fifty to one thousand customers and halves the gap of constructive heuristics on CVRPLIB instances."
)


def _reference_shingles(text: str, k: int) -> list[int]:
    """Shingle hashes of one text computed the slow, obvious way from the documented formulas."""
    reduced = pl.select(near_dedup.token_text(pl.lit(text))).item()
    words = re.findall(r"[0-9A-Za-z\u0080-\U0010FFFF]+", reduced)
    mask = (1 << 64) - 1

    def token(word: str) -> int:
        acc = sum(b * pow(near_dedup._POLY, i, 1 << 64) for i, b in enumerate(word.encode("utf-8"))) & mask
        return int(near_dedup.splitmix64(np.array([acc], dtype=np.uint64))[0])

    hashes = [token(w) for w in words]
    mix = [int(c) for c in near_dedup._constants(CONFIG.seed, 2, k) | np.uint64(1)]
    out = []
    for i in range(len(hashes) - k + 1):
        combined = sum(h * m for h, m in zip(hashes[i: i + k], mix)) & mask
        out.append(int(near_dedup.splitmix64(np.array([combined], dtype=np.uint64))[0]) >> 32)
    return out


# --- tokens and hashes ----------------------------------------------------------------------

def _token_text(text: str) -> str:
    reduced = pl.select(near_dedup.token_text(pl.lit(text))).item()
    return " ".join(re.findall(r"[0-9a-z\u0080-\U0010FFFF]+", reduced))


def test_tokens_fold_what_scrapes_change():
    assert _token_text("3\\% at $\\alpha \\leq 0.5$ with \\emph{BOPO}") == _token_text("3% at α ≤ 0.5 with *BOPO*")
    assert _token_text("`FastPD` is\nFAST--really.") == "fastpd is fast really"
    assert _token_text("数据集 ok") == "数 据 集 ok"  # CJK: one token per character
    assert _token_text("Müller’s naïve") == "müller s naïve"


def test_signature_values_are_fixed():
    text = "We propose a simple method for near-duplicate detection of paper abstracts that is stable on every machine."
    sh = near_dedup.shingles(pl.Series([text]), CONFIG)
    assert sh.token_counts.tolist() == [18]
    assert sh.hashes[:4].tolist() == [421834135, 618352011, 490571995, 3979280526]
    signature = near_dedup.minhash(sh.offsets, sh.hashes, CONFIG)
    assert signature.shape == (1, 100)
    assert signature[0, :8].tolist() == [154571353, 558347145, 77587681, 1008560536, 70597234, 354962751, 18289205, 603787670]
    assert near_dedup.band_hashes(signature, CONFIG)[0, :2].tolist() == [1641173149101073461, 10174390853049191135]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(alphabet=st.sampled_from(list("ab cdé中,.-$\\{}*\n\t3α≤’")), max_size=60), max_size=8),
       st.sampled_from([16, 64, 1 << 22]))
def test_vectorized_shingles_match_reference(texts, chunk_bytes):
    config = NearConfig(chunk_bytes=chunk_bytes)
    sh = near_dedup.shingles(pl.Series(texts, dtype=pl.String), config)
    assert len(sh.offsets) == len(texts) + 1
    for i, text in enumerate(texts):
        assert sh.hashes[sh.offsets[i]: sh.offsets[i + 1]].tolist() == _reference_shingles(text, config.shingle_size)


# --- banding and verification ---------------------------------------------------------------

def _pairs(packed: np.ndarray) -> list[tuple[int, int]]:
    return [(int(p >> np.uint64(32)), int(p & np.uint64(0xFFFFFFFF))) for p in packed]


def test_bucket_pairs_all_pairs_and_star():
    keys = np.array([5, 3, 5, 7, 3, 5], dtype=np.uint64)
    assert sorted(_pairs(near_dedup.bucket_pairs(keys, max_bucket=64))) == [(0, 2), (0, 5), (1, 4), (2, 5)]
    # Above max_bucket each member pairs with the bucket's first member only.
    assert sorted(_pairs(near_dedup.bucket_pairs(keys, max_bucket=2))) == [(0, 2), (0, 5), (1, 4)]


@settings(max_examples=200, deadline=None)
@given(keys=st.lists(st.integers(0, 6), max_size=40), max_bucket=st.integers(2, 5))
def test_bucket_pairs_are_every_pair_of_a_bucket_or_its_star(keys, max_bucket):
    """Against a plain grouping: all pairs of a bucket up to max_bucket rows, the first row with
    each other above; unique keys (left out before sorting) pair with nothing."""
    buckets: dict[int, list[int]] = {}
    for row, key in enumerate(keys):
        buckets.setdefault(key, []).append(row)
    expected = sorted(
        pair for rows in buckets.values()
        for pair in ([(a, b) for i, a in enumerate(rows) for b in rows[i + 1:]] if len(rows) <= max_bucket
                     else [(rows[0], b) for b in rows[1:]])
    )
    got = near_dedup.bucket_pairs(np.array(keys, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15), max_bucket)
    assert sorted(_pairs(got)) == expected


def test_candidate_pairs_union_over_bands():
    bands = np.array([[1, 9], [1, 8], [2, 8], [3, 7]], dtype=np.uint64)
    assert _pairs(near_dedup.candidate_pairs(bands, 64)) == [(0, 1), (1, 2)]


@settings(max_examples=200, deadline=None)
@given(rows=st.lists(st.tuples(st.integers(0, 4), st.integers(0, 4), st.booleans()), max_size=30),
       max_bucket=st.integers(2, 4))
def test_candidate_pairs_within_rows_are_candidate_pairs_between_them(rows, max_bucket):
    """Buckets are taken whole: a bucket above max_bucket whose first row is outside ``within``
    pairs none of the rows inside it."""
    bands = np.array([[a, b] for a, b, _ in rows], dtype=np.uint64).reshape(len(rows), 2) * np.uint64(0x9E3779B97F4A7C15)
    within = np.array([inside for _, _, inside in rows], dtype=bool)
    expected = [(a, b) for a, b in _pairs(near_dedup.candidate_pairs(bands, max_bucket)) if within[a] and within[b]]
    assert _pairs(near_dedup.candidate_pairs_within(bands, within, max_bucket)) == expected


def test_s_curve_and_config_validation():
    assert CONFIG.permutations == CONFIG.bands * CONFIG.rows
    assert 0.5 < CONFIG.s_curve_midpoint() < CONFIG.threshold
    assert CONFIG.candidate_probability(CONFIG.threshold) > 0.97
    assert CONFIG.candidate_probability(0.3) < 0.05
    with pytest.raises(ValueError, match="chain_guard"):
        NearConfig(threshold=0.6, chain_guard=0.8)
    with pytest.raises(ValueError, match="min_words"):
        NearConfig(shingle_size=5, min_words=3)


def test_jaccard_is_exact():
    sets_by_doc = [{1, 2, 3, 4}, {3, 4, 5}, {9}, {1, 2, 3, 4}, set()]
    flat = [sorted(s) for s in sets_by_doc]
    sh = near_dedup.Shingles(
        offsets=np.cumsum([0] + [len(s) for s in flat]),
        hashes=np.array([h for s in flat for h in s], dtype=np.uint32),
        token_counts=np.zeros(len(flat), dtype=np.int64),
    )
    sets = near_dedup.ShingleSets.build([(0, sh)])
    a, b = np.array([0, 0, 1, 2, 4, 1]), np.array([1, 3, 2, 1, 1, 0])
    assert near_dedup.jaccard(sets, a, b, pair_chunk=2).tolist() == [2 / 5, 1.0, 0.0, 0.0, 0.0, 2 / 5]


# --- clustering -----------------------------------------------------------------------------

def _merged(texts: list[str], config: NearConfig = CONFIG) -> dict[int, tuple[int, float]]:
    frame = near_dedup.near_duplicates(pl.Series(texts), config)
    return {i: (c, s) for i, c, s in frame.iter_rows()}


def test_true_near_duplicates_merge_and_hard_negatives_stay_apart():
    merged = _merged([BASE, HARD_NEGATIVE, TYPO, UNICODE, NO_URL, REFLOWED_UPPER])
    assert set(merged) == {2, 3, 4, 5}
    assert all(canonical == 0 for canonical, _ in merged.values())
    assert merged[3][1] == 1.0 and merged[5][1] == 1.0  # only symbols, case and line breaks differ
    assert CONFIG.threshold <= merged[2][1] < 1.0
    assert CONFIG.threshold <= merged[4][1] < 1.0


def test_short_texts_go_to_exact_matching_only():
    shorts = ["Abstract withdrawn.", "Abstract withdrawn by the authors.", "Abstract withdrawn by authors.",
              "No abstract available for this paper.", "No abstract available for this paper yet."]
    assert _merged(shorts) == {}
    # The same texts, long enough, do cluster.
    assert _merged([BASE, TYPO] + shorts) == {1: _merged([BASE, TYPO])[1]}


def _drifting_chain(steps: int) -> list[str]:
    """Each text rewrites a fresh block of 6 words of the previous one: neighbours are near
    duplicates, far ends are not."""
    words = [f"w{i}" for i in range(100)]
    chain = [" ".join(words)]
    for step in range(steps):
        for j in range(step * 12, step * 12 + 6):
            words[j] = f"x{step}_{j}"
        chain.append(" ".join(words))
    return chain


def test_chain_is_split_not_merged_whole():
    chain = _drifting_chain(7)
    merged = _merged(chain)
    canonical = [merged.get(i, (i, 1.0))[0] for i in range(len(chain))]
    assert canonical[1] == 0
    assert len(set(canonical)) > 1  # the far end of the chain is not in the first text's paper
    sets = near_dedup.ShingleSets.of_texts(pl.Series(chain), CONFIG)
    for i, (c, similarity) in merged.items():
        assert c < i and canonical[c] == c  # canonicals are the earliest of their cluster
        exact = near_dedup.jaccard(sets, np.array([i]), np.array([c]))[0]
        assert similarity == exact >= CONFIG.chain_guard


def test_cluster_chain_guard_on_a_hand_made_graph():
    # Path 0-1-2-3-4; 3 and 4 are far from 0 but close to each other.
    similarity = {(1, 0): 0.9, (2, 0): 0.6, (3, 0): 0.3, (4, 0): 0.2, (4, 3): 0.9}
    canonical, sim = near_dedup.cluster(
        5, np.array([0, 1, 2, 3]), np.array([1, 2, 3, 4]),
        lambda members, canonicals: np.array([similarity[(int(m), int(c))] for m, c in zip(members, canonicals)]),
        chain_guard=0.5,
    )
    assert canonical.tolist() == [0, 0, 0, 3, 3]
    assert sim.tolist() == [1.0, 0.9, 0.6, 1.0, 0.9]


def test_chunking_does_not_change_results():
    texts = [BASE, HARD_NEGATIVE, TYPO, UNICODE, NO_URL, *_drifting_chain(5)]
    small = near_dedup.near_duplicates(pl.Series(texts), NearConfig(chunk_bytes=300, pair_chunk=7))
    assert small.equals(near_dedup.near_duplicates(pl.Series(texts), CONFIG))


# --- dedup with near matching ---------------------------------------------------------------

ROWS = [
    ("b.txt", 1, TYPO), ("a.txt", 1, BASE), ("c.txt", 1, BASE), ("c.txt", 2, UNICODE),
    ("a.txt", 2, HARD_NEGATIVE), ("b.txt", 2, TYPO),
]


def test_deduplicate_merges_near_groups_under_the_earliest_record():
    papers, occurrences = dedup.deduplicate(normalized_records(ROWS))
    assert papers.height == 2
    bopo = papers.filter(pl.col("first_source_file") == "a.txt", pl.col("first_ordinal") == 1).row(0, named=True)
    assert bopo["paper_id"] == dedup.paper_id_of(bopo["dedup_key"])
    assert (bopo["occurrence_count"], bopo["variant_count"], bopo["source_count"]) == (5, 3, 3)
    kinds = {r: (k, s) for r, k, s in occurrences.select("record_id", "match_kind", "similarity").iter_rows()}
    assert kinds["a.txt:1"] == ("canonical", 1.0)
    assert kinds["c.txt:1"] == ("exact", 1.0)
    assert kinds["c.txt:2"] == ("near", 1.0)
    assert kinds["b.txt:1"][0] == kinds["b.txt:2"][0] == "near"
    assert CONFIG.threshold <= kinds["b.txt:1"][1] == kinds["b.txt:2"][1] < 1.0
    assert kinds["a.txt:2"] == ("canonical", 1.0)
    # Exact-only dedup keeps the three variants apart.
    exact_papers, _ = dedup.deduplicate(normalized_records(ROWS), near=None)
    assert exact_papers.height == 4


def test_deduplicate_is_deterministic_under_reordering():
    first = dedup.deduplicate(normalized_records(ROWS))
    second = dedup.deduplicate(normalized_records(list(reversed(ROWS))))
    assert first[0].equals(second[0]) and first[1].equals(second[1])


def test_near_clusters_report():
    records = normalized_records(ROWS)
    papers, occurrences = dedup.deduplicate(records)
    report = dedup.near_clusters_report(papers, occurrences, records, samples=5)
    assert (report["near_clusters"], report["near_records"], report["largest_cluster_variants"]) == (1, 3, 3)
    assert report["sizes"].rows() == [(3, 1)]
    sample = report["samples"].row(0, named=True)  # one sample per paper: its least similar member
    assert sample["member"] == "b.txt:1" and sample["canonical"] == "a.txt:1"
    assert "[-promising-] [+promisng+]" in sample["difference"]


# --- through the pipeline -------------------------------------------------------------------

def test_perturbed_seed_abstract_in_a_third_file_joins_its_original(seeds_copy, tmp_path):
    import etl_project

    seed_file = sorted(SEEDS.glob("*.txt"))[0]
    original = seed_file.read_text(encoding="utf-8").split("\n\n")[2].strip()
    # A spelling change, a word changed and hard-wrapped lines.
    perturbed = original.replace("Optimization", "Optimisation", 1).replace("objective values", "objective value")
    perturbed = perturbed.replace(". ", ".\n")
    (seeds_copy / "002_perturbed.txt").write_text(f"Another list\n\n{perturbed}\n", encoding="utf-8")
    result = materialize_all(seeds_copy, tmp_path / "warehouse")
    assert result.success
    evaluations = {e.check_name: e for e in result.get_asset_check_evaluations()}
    assert all(e.passed for e in evaluations.values())
    assert evaluations["near_duplicate_clusters"].metadata["near_clusters"].value == 1
    with etl_project.connect(tmp_path / "warehouse") as con:
        rows = con.sql(
            "SELECT o.source_file, o.ordinal, o.match_kind, o.similarity, p.variant_count "
            "FROM paper_occurrences o JOIN papers p USING (paper_id) "
            "WHERE p.paper_id = (SELECT paper_id FROM paper_occurrences WHERE source_file = '002_perturbed.txt') "
            "ORDER BY o.source_file, o.ordinal"
        ).fetchall()
        assert con.sql("SELECT count(*) FROM papers").fetchone() == (31,)
        assert con.sql("SELECT count(*) FROM papers WHERE source_count > 1").fetchone() == (8,)
    assert rows[0][:3] == (seed_file.name, 2, "canonical")
    assert rows[-1][:3] == ("002_perturbed.txt", 1, "near")
    assert CONFIG.threshold <= rows[-1][3] < 1.0
    assert rows[-1][4] == 2


def test_the_etl_resource_turns_near_matching_off_or_moves_its_threshold():
    from etl_project.defs.resources import EtlSettings

    assert EtlSettings(near_duplicates=False).near_config() is None
    strict = EtlSettings(near_threshold=0.9).near_config()
    assert (strict.threshold, strict.chain_guard) == (0.9, CONFIG.chain_guard)
    loose = EtlSettings(near_threshold=0.4).near_config()
    assert (loose.threshold, loose.chain_guard) == (0.4, 0.4)  # the guard never exceeds the threshold
    rows = [("a.txt", 1, BASE), ("b.txt", 1, TYPO)]
    merged, _ = dedup.deduplicate(normalized_records(rows), EtlSettings().near_config())
    apart, _ = dedup.deduplicate(normalized_records(rows), EtlSettings(near_duplicates=False).near_config())
    assert (merged.height, apart.height) == (1, 2)
