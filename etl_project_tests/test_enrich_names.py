"""paper_names: names a paper introduces, found by pattern; tools it only mentions are not."""

import polars as pl
import pytest

from etl_project.enrich.names import NAMES_SCHEMA, PATTERNS, extract_names
from etl_project_tests.enrich_seeds import paper_starting, seed_papers


def names_of(abstract: str) -> pl.DataFrame:
    return extract_names(pl.DataFrame({"paper_id": ["p"], "abstract": [abstract]}))


@pytest.mark.parametrize(
    ("abstract", "name", "long_name", "pattern", "markup"),
    [
        ("Here we propose FooNet, a network for bar.", "FooNet", None, "we propose X", None),
        ("This paper introduces GraphX-2 to solve it.", "GraphX-2", None, "we propose X", None),
        ("We propose *Low-Rank Adaptation (LoRA)*, which adapts models.", "LoRA", "Low-Rank Adaptation", "we propose X", "*"),
        ("We propose SaP–short for Safety Polytope–a geometric approach.", "SaP", "Safety Polytope", "X—short for …", None),
        ("We propose SaP (short for Safety Polytope), a geometric approach.", "SaP", "Safety Polytope", "X—short for …", None),
        ("we present CoDy—Counterfactual Explainer for Dynamic Graphs—a model-agnostic method.", "CoDy",
         "Counterfactual Explainer for Dynamic Graphs", "X—<long form>—", None),
        ("we propose a new tree-based estimator, `FastPD`, which estimates PD functions.", "FastPD", None,
         "we propose a <noun>, X", "`"),
        ("We first construct a multimodal test dataset, GridToM, which has tasks.", "GridToM", None,
         "we propose a <noun>, X", None),
        ("In this work we obtain a new framework termed Data-Specific Indistinguishability (DSI) to select.",
         "DSI", "Data-Specific Indistinguishability", "termed X", None),
        ("Our method, called \\textbf{MSA}, is fast.", "MSA", None, "termed X", "\\textbf"),
        ("We call our proposed network ANOVA Tensor Product Neural Network (ANOVA-TPNN) since it is new.",
         "ANOVA-TPNN", "ANOVA Tensor Product Neural Network", "we call … X", None),
    ],
)
def test_introduced_names_are_found(abstract, name, long_name, pattern, markup):
    found = names_of(abstract)
    assert found.select("name", "long_name", "pattern", "markup").rows() == [(name, long_name, pattern, markup)]
    assert name in found["evidence"].item()


@pytest.mark.parametrize(
    "abstract",
    [
        # Tools the paper uses or compares against, not ones it introduces.
        "Notable methods include Shapley additive explanations (SHAP) and fast estimators such as `TreeSHAP`.",
        "Using GPT-4o to implement queries, we showcase our approach on two datasets.",
        "We compare against LoRA, a popular method, and QLoRA.",
        "Prior work proposed a method called LoRA for adaptation.",
        "We note that prior work proposed a method called LoRA for adaptation.",
        "We generalize the measure of Disparate Conditional Prediction (DCP), originally suggested by others.",
        # Introductions without a name, or with a phrase that is not one.
        "We propose a method that performs inherently interpretable predictions.",
        "We introduce five new techniques to score the quality of interpretations.",
        "we identify *creative composition tasks* as a prevalent usage category.",
        "we propose a new task, corrupted capabilities, where models are fine-tuned.",
        "We propose Bayesian inference for this problem.",
        "We present LLMs with a new prompt.",
        "We introduce Transformer, a model.",
    ],
)
def test_names_not_introduced_are_not_reported(abstract: str):
    assert names_of(abstract).height == 0


def test_several_names_are_ranked_by_position():
    found = names_of("We propose ShieldAgent, the first guardrail agent. We introduce ShieldAgent-Bench, a dataset.")
    assert found.select("name_rank", "name").rows() == [(1, "ShieldAgent"), (2, "ShieldAgent-Bench")]


def test_schema_and_patterns():
    found = names_of("No names here.")
    assert found.height == 0 and found.schema == pl.Schema(NAMES_SCHEMA)
    assert set(extract_names(seed_papers())["pattern"]) <= set(PATTERNS)


def test_names_of_seed_papers():
    found = extract_names(seed_papers())
    by_paper = {pid: sorted(group["name"].to_list()) for (pid,), group in found.group_by("paper_id")}
    expected = {
        "Neural Combinatorial Optimization (NCO)": ["BOPO"],
        "We introduce AutoAdvExBench": ["AutoAdvExBench"],
        "Temporal Graph Neural Networks": ["CoDy"],
        "Federated learning (FL)": ["UEFL"],
        "Interpretability for machine learning": ["ANOVA-TPNN"],
        "Many existing interpretation methods": ["FastPD"],
        "Autonomous agents powered": ["ShieldAgent", "ShieldAgent-Bench"],
        "Large language models (LLMs) have emerged": ["SaP"],
        "As large language models evolve": ["GridToM"],
        "This paper studies a range of AI/ML trust": ["DSI"],
        # Papers that introduce no name have no row.
        "Understanding the decision-making process": None,
        "Can the relative performance": None,
        "A key task in certain democratic processes": None,
        "Foundation models that are capable": None,
    }
    for prefix, names in expected.items():
        assert by_paper.get(paper_starting(prefix)) == names, prefix
    long_names = dict(zip(found["name"], found["long_name"]))
    assert long_names["BOPO"] == "Best-anchored and Objective-guided Preference Optimization"
    assert long_names["UEFL"] == "Uncertainty-Based Extensible-Codebook Federated Learning"
