"""paper_topics: tagging from the taxonomy, 'other', evidence; the taxonomy file checked and re-read."""

from pathlib import Path

import polars as pl
import pytest

from etl_project.enrich import topics
from etl_project.enrich.topics import TOPICS_SCHEMA, TaxonomyError, load_taxonomy, tag_topics, taxonomy_version
from etl_project_tests.enrich_seeds import paper_starting, seed_papers

SMALL = """
topics:
  - id: graphs
    label: Graphs
    patterns: ['graphs?', 'GNNs?']
  - id: safety
    label: Safety
    patterns: ['jailbreak\\w*', 'red[- ]teaming']
    min_matches: 2
"""


def write(tmp_path: Path, text: str, name: str = "taxonomy.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def papers(*texts: str) -> pl.DataFrame:
    return pl.DataFrame({"paper_id": [f"p{i}" for i in range(len(texts))], "abstract_plain": list(texts)})


def test_tags_with_evidence_and_other(tmp_path: Path):
    taxonomy = load_taxonomy(write(tmp_path, SMALL))
    tagged = tag_topics(papers(
        "Graph neural networks (GNNs) on graphs. A GNN.",
        "A jailbreak here and red-teaming there; Jailbreaks again.",
        "One jailbreak is not enough for min_matches 2.",
        "Paragraphs about nothing in particular.",  # 'graph' inside a word does not count
    ), taxonomy)
    assert tagged.schema == pl.Schema(TOPICS_SCHEMA)
    assert tagged.select("paper_id", "topic", "match_count", "evidence").rows() == [
        ("p0", "graphs", 4, ["graph", "gnns", "graphs", "gnn"]),
        ("p1", "safety", 3, ["jailbreak", "red-teaming", "jailbreaks"]),
        ("p2", "other", 0, []),
        ("p3", "other", 0, []),
    ]
    assert tagged.filter(pl.col("topic") == "other")["label"].unique().to_list() == ["Other"]


def test_a_paper_gets_every_topic_it_matches(tmp_path: Path):
    taxonomy = load_taxonomy(write(tmp_path, SMALL))
    tagged = tag_topics(papers("Jailbreak attacks on graph models: a jailbreak per graph."), taxonomy)
    assert tagged["topic"].to_list() == ["graphs", "safety"]


def test_edited_taxonomy_retags_and_changes_the_version(tmp_path: Path, monkeypatch):
    path = write(tmp_path, SMALL)
    monkeypatch.setenv(topics.TAXONOMY_ENV, str(path))
    before = taxonomy_version()
    sample = papers("A federated learning method for graphs.")
    assert tag_topics(sample, load_taxonomy())["topic"].to_list() == ["graphs"]
    path.write_text(SMALL + "  - id: federated\n    label: Federated\n    patterns: [federated]\n", encoding="utf-8")
    assert taxonomy_version() != before
    assert tag_topics(sample, load_taxonomy())["topic"].to_list() == ["graphs", "federated"]


def test_the_build_follows_the_taxonomy_bytes_not_its_path(tmp_path: Path, monkeypatch):
    """A checkout moved elsewhere (the bundled taxonomy at another path) is the same build and
    rebuilds nothing; another taxonomy is another build."""
    from etl_project.defs.resources import EtlSettings

    bundled = EtlSettings().build_fingerprint()
    copy = tmp_path / "taxonomy.yaml"
    copy.write_bytes(topics.DEFAULT_TAXONOMY.read_bytes())
    monkeypatch.setenv(topics.TAXONOMY_ENV, str(copy))
    assert EtlSettings().build_fingerprint() == bundled
    copy.write_text(SMALL, encoding="utf-8")
    assert EtlSettings().build_fingerprint() != bundled


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("topics: [", "not valid YAML"),
        ("just a string", "non-empty list under 'topics'"),
        ("topics: []", "non-empty list under 'topics'"),
        ("topics:\n  - id: Bad Id\n    label: x\n    patterns: [x]\n", "lower_snake_case"),
        ("topics:\n  - id: other\n    label: x\n    patterns: [x]\n", "lower_snake_case and not 'other'"),
        ("topics:\n  - id: a\n    label: x\n    patterns: [x]\n  - id: a\n    label: y\n    patterns: [y]\n", "appears twice"),
        ("topics:\n  - id: a\n    label: x\n    patterns: []\n", "non-empty list of strings"),
        ("topics:\n  - id: a\n    label: x\n    patterns: ['(unclosed']\n", "not a valid regular expression"),
        ("topics:\n  - id: a\n    label: x\n    patterns: ['(?<=x)y']\n", "not a valid regular expression"),
        ("topics:\n  - id: a\n    label: x\n    patterns: [x]\n    min_matches: 0\n", "min_matches"),
        ("topics:\n  - id: a\n    label: x\n    pattern: [x]\n", "unknown keys"),
    ],
)
def test_malformed_taxonomy_is_refused_with_a_clear_error(tmp_path: Path, text: str, message: str):
    path = write(tmp_path, text)
    with pytest.raises(TaxonomyError, match=message) as error:
        load_taxonomy(path)
    assert str(path) in str(error.value)


def test_missing_taxonomy(tmp_path: Path):
    with pytest.raises(TaxonomyError, match="cannot read"):
        load_taxonomy(tmp_path / "nope.yaml")
    assert taxonomy_version(tmp_path / "nope.yaml") == "missing"


def test_shipped_taxonomy_on_the_seeds():
    taxonomy = load_taxonomy()
    assert taxonomy.path == topics.DEFAULT_TAXONOMY
    tagged = tag_topics(seed_papers(), taxonomy)
    assert set(tagged["paper_id"]) == set(seed_papers()["paper_id"])  # every paper has a topic
    of = lambda prefix: set(tagged.filter(pl.col("paper_id") == paper_starting(prefix))["topic"])  # noqa: E731
    assert {"llm_safety_alignment", "benchmarks_evaluation"} <= of("Large Language Models (LLMs) require careful safety")
    assert {"interpretability", "graphs"} <= of("Temporal Graph Neural Networks")
    assert {"federated_private"} <= of("Clustering is a cornerstone")
    assert {"adversarial_robustness"} <= of("As machine learning models are deployed in critical")
    assert of("When learning is used to inform decisions") == {"other"}
