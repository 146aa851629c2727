"""Deterministic generator of labeled paper-abstract corpora in the seeds' file format.

Each file is a title line, a blank line, then one abstract per paragraph. Abstracts come from a
grammar of ML-abstract sentences (context, problem, proposal, method details, theory,
experiments, conclusion, code URL) with slot vocabularies, so texts have realistic length,
structure and shared boilerplate phrases. Records are streamed file by file (bounded memory: only
one int per base abstract is kept); every abstract is regenerated from its id when it is copied.

Every record is one of:
  original       a new base abstract (a new true cluster);
  hard_negative  a new base abstract on its parent's topic (same field, task, datasets and
                 sentence plan, about half of the parent's sentences, a different method name):
                 a different paper that shares many phrases, hence its own cluster;
  exact          a verbatim copy of an earlier base;
  near:<kinds>   an earlier base changed by 1-3 typed perturbations: typo, swap (adjacent words),
                 drop (a sentence), add (a sentence), latex (LaTeX <-> Unicode/markdown forms),
                 reflow (hard-wrapped lines), case (a sentence upper-cased), url (code-URL line
                 removed).
The labels file (CSV) gives each record's source_file, ordinal, true cluster (its base id), kind
and, for hard negatives, the parent base.

    python benchmarks/corpus.py --records 100000 --files 500 --out DIR --seed 1
"""

import argparse
import csv
import string
import sys
import time
from array import array
from pathlib import Path

_MASK = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15

# Share of records of each kind (the first record is always an original).
MIX = (("original", 0.55), ("hard_negative", 0.08), ("exact", 0.15), ("near", 0.22))
PERTURBATIONS = ("typo", "swap", "drop", "add", "latex", "reflow", "case", "url")
LABELS_FILE = "labels.csv"


def _mix64(z: int) -> int:
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return z ^ (z >> 31)


class Rng:
    """splitmix64 stream keyed by integers: stable across Python versions, free to seed."""

    __slots__ = ("state",)

    def __init__(self, *keys: int):
        state = 0
        for key in keys:
            state = (state * 0x100000001B3 + key + 1) & _MASK
        self.state = _mix64(state)

    def next(self) -> int:
        self.state = (self.state + _GOLDEN) & _MASK
        return _mix64(self.state)

    def below(self, n: int) -> int:
        return self.next() % n

    def chance(self, p: float) -> bool:
        return self.next() < p * 18446744073709551616

    def choice(self, items):
        return items[self.next() % len(items)]


# --- vocabulary -----------------------------------------------------------------------------

W = {
    "field": (
        "reinforcement learning", "graph neural networks", "large language models", "diffusion models",
        "federated learning", "causal inference", "combinatorial optimization", "computer vision",
        "speech recognition", "time series forecasting", "Bayesian optimization", "differential privacy",
        "adversarial robustness", "representation learning", "meta-learning", "continual learning",
        "protein design", "molecular property prediction", "recommender systems", "neural architecture search",
        "in-context learning", "model compression", "knowledge distillation", "out-of-distribution detection",
        "uncertainty quantification", "multi-agent systems", "offline reinforcement learning",
        "contrastive learning", "self-supervised learning", "object detection", "semantic segmentation",
        "machine translation", "question answering", "code generation", "mechanistic interpretability",
        "algorithmic fairness", "kernel methods", "optimal transport", "stochastic optimization",
        "online learning", "bandit algorithms", "physics-informed learning", "neural operators",
        "point cloud processing", "video understanding", "text-to-image generation",
        "retrieval-augmented generation", "tabular learning", "anomaly detection", "active learning",
        "domain adaptation", "graph generation", "quantization", "sparse training", "mixture-of-experts models",
        "state space models", "imitation learning", "symbolic regression", "neural rendering", "weather modeling",
    ),
    "task": (
        "image classification", "link prediction", "policy evaluation", "node classification",
        "long-horizon planning", "density estimation", "structured prediction", "dense retrieval",
        "mathematical reasoning", "program synthesis", "protein folding", "trajectory forecasting",
        "semi-supervised classification", "preference alignment", "reward modeling", "feature attribution",
        "hyperparameter tuning", "vehicle routing", "job-shop scheduling", "causal discovery",
        "instance segmentation", "depth estimation", "speech enhancement", "text summarization",
        "visual question answering", "molecule generation", "drug-target interaction prediction",
        "few-shot adaptation", "test-time adaptation", "data valuation", "membership inference",
        "watermark detection", "model editing", "uncertainty calibration", "conformal prediction",
        "survival analysis", "treatment effect estimation", "matrix completion", "sparse recovery",
        "low-rank approximation", "sequential recommendation", "multi-label classification",
        "open-vocabulary detection", "3D reconstruction", "motion generation", "tool use",
    ),
    "app": (
        "healthcare", "autonomous driving", "robotics", "finance", "drug discovery", "climate science",
        "education", "e-commerce", "materials design", "genomics", "cybersecurity", "energy systems",
        "legal document analysis", "scientific discovery", "manufacturing", "agriculture",
        "social networks", "satellite imaging", "logistics", "personalized medicine",
    ),
    "models": (
        "deep neural networks", "transformers", "large language models", "vision transformers",
        "graph neural networks", "diffusion models", "Gaussian processes", "kernel machines",
        "recurrent networks", "normalizing flows", "energy-based models", "foundation models",
        "vision-language models", "implicit neural representations", "spiking neural networks",
        "tree ensembles", "state space models", "variational autoencoders",
    ),
    "methods": (
        "methods", "approaches", "algorithms", "techniques", "baselines", "heuristics", "estimators",
        "training schemes", "RL-based methods", "gradient-based methods", "sampling-based methods",
    ),
    "aspect": (
        "the decision-making process", "the generalization behavior", "the robustness", "the sample efficiency",
        "the calibration", "the training dynamics", "the inductive bias", "the computational cost",
        "the memorization behavior", "the scaling behavior", "the internal representation",
        "the optimization landscape", "the expressive power", "the stability", "the privacy leakage",
        "the failure modes", "the data efficiency", "the latency",
    ),
    "limitation": (
        "low sample efficiency", "sparse rewards", "high memory consumption", "quadratic complexity",
        "poor calibration", "distribution shift", "catastrophic forgetting", "mode collapse",
        "over-smoothing", "exposure bias", "reward hacking", "label noise", "slow convergence",
        "high variance gradients", "limited context length", "spurious correlations",
        "hallucinated content", "sensitivity to initialization", "weak theoretical guarantees",
    ),
    "mechanism": (
        "a best-anchored preference pair construction", "an objective-guided pairwise loss",
        "a learnable sparsification of the input", "a hierarchical attention mechanism",
        "a low-rank adapter", "a contrastive objective over augmented views", "a variance-reduced estimator",
        "a mixture of lightweight experts", "a differentiable relaxation of the discrete search space",
        "an adaptive step-size schedule", "a memory-efficient replay buffer", "a calibrated uncertainty head",
        "a graph rewiring step", "a score-based denoising process", "a dual formulation of the objective",
        "a curriculum over task difficulty", "a retrieval module over a large corpus", "a learned reward model",
        "a kernel two-sample test", "an optimal transport coupling", "a neural surrogate of the simulator",
        "a tree-based estimator", "a randomized smoothing scheme", "a sparse mixture of subspaces",
        "a token merging strategy", "a prompt optimization loop", "a Lagrangian constraint handler",
        "a conformal calibration set", "a spectral filter on the graph Laplacian", "a diffusion prior",
    ),
    "goal": (
        "reduce the training cost", "improve robustness to distribution shift", "preserve privacy",
        "scale to millions of nodes", "avoid catastrophic forgetting", "produce calibrated predictions",
        "remove the need for reward models", "explore and exploit solutions", "match human preferences",
        "estimate arbitrary partial dependence functions", "accelerate inference", "stabilize training",
        "recover the causal graph", "identify influential training examples", "generalize to unseen tasks",
        "handle missing modalities", "certify robustness", "compress the model without retraining",
    ),
    "adj": (
        "simple", "scalable", "principled", "lightweight", "general", "unified", "modular",
        "training-free", "provably efficient", "architecture-agnostic", "data-efficient", "robust",
        "plug-and-play", "theoretically grounded", "fully differentiable", "model-agnostic",
    ),
    "framework": ("framework", "method", "algorithm", "training paradigm", "estimator", "architecture", "approach", "pipeline"),
    "verb": ("leverages", "combines", "introduces", "learns", "exploits", "integrates", "relies on", "builds on"),
    "setting": (
        "limited supervision", "non-stationary environments", "heterogeneous clients", "long contexts",
        "high-dimensional inputs", "adversarial perturbations", "partial observability",
        "heavy-tailed noise", "strict latency budgets", "extreme class imbalance", "resource-constrained devices",
        "multiple objectives", "missing data", "streaming data",
    ),
    "assumption": (
        "convexity of the loss", "i.i.d. data", "bounded gradients", "a known noise model",
        "access to the full dataset", "a well-specified model", "smooth reward functions",
        "linear function approximation", "full observability", "a fixed data distribution",
    ),
    "dataset": (
        "ImageNet", "CIFAR-10", "CIFAR-100", "COCO", "MNIST", "WikiText-103", "GLUE", "SuperGLUE", "MMLU",
        "GSM8K", "HumanEval", "OGB", "Cora", "PubMed", "D4RL", "Atari", "MuJoCo", "LibriSpeech", "ShapeNet",
        "KITTI", "nuScenes", "ADE20K", "Kinetics-400", "SQuAD", "Natural Questions", "BEIR", "MovieLens",
        "ZINC", "QM9", "PDEBench", "ETTh1", "M4", "CelebA", "FFHQ", "MS MARCO", "TriviaQA", "ARC",
        "HellaSwag", "BIG-bench", "SWE-bench", "MATH", "Procgen", "Meta-World", "ModelNet40", "ScanNet",
        "the Job-shop Scheduling Problem (JSP)", "the Traveling Salesman Problem (TSP)",
    ),
    "baselines": (
        "state-of-the-art baselines", "strong baselines", "existing neural methods", "prior work",
        "competitive methods", "the best published results", "recent specialized methods",
    ),
    "metric": ("accuracy", "the F1 score", "the success rate", "sample efficiency", "the optimality gap", "calibration error", "throughput", "the win rate"),
    "insight": (
        "sparse rewards can be replaced by relative comparisons between solutions",
        "most of the useful signal lies in a low-dimensional subspace",
        "the failure stems from a mismatch between training and test objectives",
        "interaction effects can be separated from main effects",
        "memorization and generalization compete for the same capacity",
        "small changes in the data ordering have a large effect on the final model",
        "the attention pattern reveals which inputs the model relies on",
        "uncertainty estimates are informative only after recalibration",
    ),
    "user": ("lab-ml", "deepgroup", "ai4science", "opt-lab", "mlsys", "trustml", "graphml", "rl-team", "vision-lab", "nlp-uni"),
}

# Forms that a LaTeX <-> Unicode/markdown swap changes: (LaTeX, Unicode).
MATH = {
    "param": (("$\\lambda$", "λ"), ("$\\alpha$", "α"), ("$\\beta$", "β"), ("$\\tau$", "τ"), ("$\\epsilon$", "ε"), ("$k$", "k")),
    "complexity": (
        ("$O(n \\log n)$", "O(n log n)"), ("$O(1/\\sqrt{T})$", "O(1/√T)"), ("$O(d^2)$", "O(d²)"),
        ("$O(\\log T)$", "O(log T)"), ("$O(n)$", "O(n)"), ("$\\Theta(\\sqrt{n})$", "Θ(√n)"),
    ),
    "factor": (("$2\\times$", "2×"), ("$3\\times$", "3×"), ("$10\\times$", "10×"), ("$1.5\\times$", "1.5×")),
    "cmp": (("$\\leq$", "≤"), ("$\\geq$", "≥"), ("$\\approx$", "≈")),
}

TEMPLATES = {
    "context": (
        "{Field} has emerged as a promising approach for {task}, with applications ranging from {app} to {app2}.",
        "Recent advances in {field} have enabled impressive progress on {task}, yet {aspect} of {models} remains poorly understood.",
        "{Task} is a fundamental problem in {field} and underpins many real-world applications such as {app} and {app2}.",
        "Understanding {aspect} of {models} provides valuable insights into {task} and the reasons behind their failures.",
        "A central challenge in {field} is to {goal} while keeping {aspect} of {models} under control.",
        "Modern {models} achieve strong performance on {task}, but {aspect} is still limited in {setting}.",
        "The success of {models} in {field} has sparked interest in {task} under {setting}.",
        "{Task} under {setting} arises naturally in {app}, {app2} and many other domains.",
        "Many systems in {app} rely on {task}, where {aspect} is critical for deployment.",
        "Despite significant progress, {task} with {models} remains challenging in {setting}.",
    ),
    "problem": (
        "However, existing {methods} suffer from {limitation} and {limitation2}, which limits their applicability to {setting}.",
        "Prior work typically assumes {assumption}, an assumption that rarely holds in {app}.",
        "Current {methods} either ignore {limitation} or require {assumption}, leading to brittle behavior in {setting}.",
        "Unfortunately, {methods} for {task} often degrade under {setting} because of {limitation}.",
        "These {methods} incur {limitation} and are sensitive to hyperparameters, which hinders their use in {app}.",
        "A key obstacle is that {aspect} of {models} cannot be measured without {assumption}.",
        "As a result, {limitation} remains a major bottleneck for {task} at scale.",
        "Moreover, theoretical guarantees for {methods} are only known under {assumption}.",
    ),
    "proposal": (
        "In this work, we propose {N}, a {adj} {framework} for {task} that {verb} {mechanism}.",
        "We introduce {N}, a {adj} {framework} that {verb} {mechanism} to {goal}.",
        "To address these issues, we present {N}, which {verb} {mechanism} and {mechanism2}.",
        "This paper develops {N}, a {adj} {framework} for {task} based on {mechanism}.",
        "Our key insight is that {insight}; building on it, we design {N}, a {adj} {framework} for {task}.",
        "We propose {N}, a {adj} {framework} for {field} that {verb} {mechanism} with a regularization weight {param}.",
    ),
    "detail": (
        "{NAME} {verb} {mechanism} to {goal}, and {mechanism2} to {goal2}.",
        "Specifically, {NAME} {verb} {mechanism} whose strength is controlled by {param}.",
        "The method {verb} {mechanism}, which allows it to {goal} at a cost of {complexity} per step.",
        "It consists of two components: {mechanism} that helps to {goal} and {mechanism2} that helps to {goal2}.",
        "Unlike prior {methods}, {NAME} does not require {assumption} and scales to {setting}.",
        "We further show how {NAME} can be combined with {models} to handle {setting}.",
        "The design is {adj} and introduces only {param} as an additional hyperparameter.",
        "In addition, {NAME} {verb} {mechanism2}, so that it can {goal2} without retraining.",
    ),
    "theory": (
        "Theoretically, we prove that {NAME} converges at a rate of {complexity} under {assumption}.",
        "We establish finite-sample guarantees and show that the error is {cmp} {complexity}, which is tight up to logarithmic factors.",
        "Our analysis reveals that {insight}, which explains the behavior of existing {methods}.",
        "We derive a lower bound of {complexity} and show that {NAME} improves on prior results by a factor of {factor}.",
    ),
    "experiments": (
        "Experiments on {dataset}, {dataset2} and {dataset3} show that {NAME} outperforms {baselines} by {pct} on average.",
        "Extensive experiments on {dataset} and {dataset2} demonstrate that {NAME} improves {metric} by up to {pct}.",
        "On {dataset}, {NAME} reduces the error from {pct} to {pct2} while being {factor} faster than {baselines}.",
        "Empirically, {NAME} matches {baselines} on {dataset} and improves {metric} by {pct} on {dataset2}.",
        "We evaluate {NAME} on {dataset} and {dataset2}, where it reaches {metric} of {pct} with a {factor} smaller memory footprint.",
    ),
    "conclusion": (
        "These results suggest that {insight}.",
        "Our findings highlight the importance of {aspect} for {task} and open new directions for {field}.",
        "{NAME} is {adj}, enabling seamless integration with existing {models}.",
        "Overall, this work establishes {NAME} as a {adj} {framework} for {task}.",
    ),
    "url": (
        "Code is available at https://github.com/{user}/{repo}.",
        "Our code and data are publicly available at https://github.com/{user}/{repo}.",
        "The implementation is released at https://{user}.github.io/{repo}.",
    ),
}
_NAME_HEAD = ("Flow", "Graph", "Sparse", "Meta", "Neuro", "Diff", "Quant", "Trans", "Hyper", "Causal", "Robust",
              "Fed", "Prox", "Lin", "Deep", "Auto", "Cross", "Multi", "Omni", "Dyna", "Kern", "Opti", "Spec",
              "Tensor", "Vec", "Bo", "Fast", "Mono", "Poly", "Astra")
_NAME_TAIL = ("Net", "Former", "Mix", "Fusion", "Prompt", "Align", "Boost", "Tune", "Search", "Guard", "Bench",
              "Rank", "PD", "Lite", "Scale", "Path", "Gen", "Match", "Map", "PO", "Edit", "Cast")
_NAME_SUFFIX = ("", "", "", "-2", "++", "-XL", "-R", "v2")


# --- abstracts ------------------------------------------------------------------------------

class Topic:
    """What one base abstract is about; hard negatives inherit all of it but the name."""

    __slots__ = ("field", "task", "app", "models", "datasets", "plan", "repo")

    def __init__(self, rng: Rng):
        self.field = rng.choice(W["field"])
        self.task = rng.choice(W["task"])
        self.app = _distinct(rng, W["app"], 2)
        self.models = rng.choice(W["models"])
        self.datasets = _distinct(rng, W["dataset"], 3)
        plan = ["context"] + ["problem"] * (1 + rng.below(2)) + ["proposal"] + ["detail"] * (1 + rng.below(3))
        if rng.chance(0.5):
            plan.append("theory")
        plan.append("experiments")
        if rng.chance(0.6):
            plan.append("conclusion")
        if rng.chance(0.35):
            plan.append("url")
        self.plan = tuple(plan)
        self.repo = f"{rng.choice(_NAME_HEAD).lower()}-{rng.choice(_NAME_TAIL).lower()}-{rng.below(1000)}"


def _distinct(rng: Rng, items: tuple, n: int) -> tuple:
    """n different items (a list rarely names the same dataset twice)."""
    first = rng.below(len(items))
    steps = [1 + rng.below(len(items) - 1) for _ in range(n - 1)]
    picked = [first]
    for step in steps:
        nxt = (picked[-1] + step) % len(items)
        while nxt in picked:
            nxt = (nxt + 1) % len(items)
        picked.append(nxt)
    return tuple(items[i] for i in picked)


def _name(rng: Rng) -> str:
    return rng.choice(_NAME_HEAD) + rng.choice(_NAME_TAIL) + rng.choice(_NAME_SUFFIX)


_SLOTS = {
    template: tuple(dict.fromkeys(f for _, f, _, _ in string.Formatter().parse(template) if f))
    for templates in TEMPLATES.values() for template in templates
}
_TOPIC_SLOTS = {"field", "Field", "task", "Task", "app", "app2", "models", "dataset", "dataset2", "dataset3", "NAME", "N", "repo"}
_SECOND = {"limitation2": "limitation", "mechanism2": "mechanism", "goal2": "goal"}


def _sentence(role: str, topic: Topic, name: str, rng: Rng, latex: bool) -> str:
    """One sentence of ``role``; only the slots its template uses draw random numbers."""
    template = rng.choice(TEMPLATES[role])
    form = 0 if latex else 1
    values = {}
    for slot in _SLOTS[template]:
        if slot in _TOPIC_SLOTS:
            values[slot] = _topic_slot(slot, topic, name, latex)
        elif slot in MATH:
            values[slot] = rng.choice(MATH[slot])[form]
        elif slot in ("pct", "pct2"):
            values[slot] = f"{1 + rng.below(60)}.{rng.below(10)}" + ("\\%" if latex else "%")
        else:
            values[slot] = rng.choice(W[_SECOND.get(slot, slot)])
    return template.format_map(values)


def _topic_slot(slot: str, topic: Topic, name: str, latex: bool) -> str:
    if slot in ("Field", "Task"):
        value = getattr(topic, slot.lower())
        return value[0].upper() + value[1:]
    if slot in ("app", "app2"):
        return topic.app[slot == "app2"]
    if slot.startswith("dataset"):
        return topic.datasets[int(slot[-1]) - 1 if slot[-1].isdigit() else 0]
    if slot == "NAME":
        return name
    if slot == "N":
        return f"\\emph{{{name}}}" if latex else f"*{name}*"
    return getattr(topic, slot)


class Generator:
    """Abstracts as pure functions of (seed, base id): any base can be rebuilt when copied."""

    def __init__(self, seed: int):
        self.seed = seed
        self.parent = array("q")  # per base: -1 for an original, else the hard negative's parent

    def new_base(self, parent: int = -1) -> int:
        self.parent.append(parent)
        return len(self.parent) - 1

    def _topic_root(self, base: int) -> int:
        while self.parent[base] >= 0:
            base = self.parent[base]
        return base

    def topic(self, base: int) -> Topic:
        return Topic(Rng(self.seed, 1, self._topic_root(base)))

    def _sentence_source(self, base: int, index: int, role: str) -> int:
        """Which base's random stream writes sentence ``index``: a hard negative keeps about half
        of its parent's sentences (with its own method name in them), never its proposal or its
        experiments: a different paper makes a different contribution with different results."""
        parent = self.parent[base]
        if parent >= 0 and role not in ("proposal", "experiments") and Rng(self.seed, 7, base, index).chance(0.5):
            return self._sentence_source(parent, index, role)
        return base

    def sentences(self, base: int, latex: bool, topic: Topic | None = None) -> list[str]:
        topic = topic or self.topic(base)
        name = _name(Rng(self.seed, 2, base))
        return [
            _sentence(role, topic, name, Rng(self.seed, 3, self._sentence_source(base, i, role), i), latex)
            for i, role in enumerate(topic.plan)
        ]

    def latex_style(self, base: int) -> bool:
        return Rng(self.seed, 4, base).chance(0.5)

    def text(self, base: int) -> str:
        return " ".join(self.sentences(base, self.latex_style(base)))

    def near(self, base: int, rng: Rng) -> tuple[str, str]:
        """A perturbed copy of ``base`` and the perturbations applied."""
        kinds = []
        count = 1 + (rng.next() % 100 >= 50) + (rng.next() % 100 >= 85)
        while len(kinds) < count:
            kind = rng.choice(PERTURBATIONS)
            if kind not in kinds:
                kinds.append(kind)
        latex = self.latex_style(base)
        if "latex" in kinds:
            latex = not latex
        topic = self.topic(base)
        sentences = self.sentences(base, latex, topic)
        if "url" in kinds and topic.plan[-1] == "url":
            sentences.pop()
        elif "url" in kinds:
            kinds[kinds.index("url")] = "typo"
        if "drop" in kinds and len(sentences) > 3:
            sentences.pop(1 + rng.below(len(sentences) - 1))
        if "add" in kinds:
            extra = _sentence(rng.choice(("detail", "theory", "conclusion")), topic, _name(Rng(self.seed, 2, base)), rng, latex)
            sentences.insert(1 + rng.below(len(sentences)), extra)
        if "typo" in kinds:
            for _ in range(1 + rng.below(3)):
                _typo(sentences, rng)
        if "swap" in kinds:
            for _ in range(1 + rng.below(2)):
                _swap(sentences, rng)
        if "case" in kinds:
            i = rng.below(len(sentences))
            sentences[i] = sentences[i].upper()
        text = " ".join(sentences)
        if "reflow" in kinds:
            text = _reflow(text, 60 + rng.below(30))
        return text, "near:" + "+".join(sorted(kinds))


def _typo(sentences: list[str], rng: Rng) -> None:
    i = rng.below(len(sentences))
    words = sentences[i].split(" ")
    j = rng.below(len(words))
    word = words[j]
    if len(word) < 4:
        return
    k = 1 + rng.below(len(word) - 2)
    op = rng.below(4)
    if op == 0:
        word = word[:k] + word[k + 1:]
    elif op == 1:
        word = word[:k] + word[k] + word[k:]
    elif op == 2:
        word = word[:k - 1] + word[k] + word[k - 1] + word[k + 1:]
    else:
        word = word[:k] + "etaoinshrdlu"[rng.below(12)] + word[k + 1:]
    words[j] = word
    sentences[i] = " ".join(words)


def _swap(sentences: list[str], rng: Rng) -> None:
    i = rng.below(len(sentences))
    words = sentences[i].split(" ")
    if len(words) < 3:
        return
    j = rng.below(len(words) - 1)
    words[j], words[j + 1] = words[j + 1], words[j]
    sentences[i] = " ".join(words)


def _reflow(text: str, width: int) -> str:
    lines, line = [], []
    length = 0
    for word in text.split(" "):
        if line and length + 1 + len(word) > width:
            lines.append(" ".join(line))
            line, length = [], 0
        length += len(word) + (1 if line else 0)
        line.append(word)
    lines.append(" ".join(line))
    return "\n".join(lines)


# --- files ----------------------------------------------------------------------------------

def generate(out: Path, records: int, files: int, seed: int) -> dict:
    """Write ``files`` text files holding ``records`` abstracts, plus labels.csv. Returns counts."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    files = max(1, min(files, records))
    gen = Generator(seed)
    counts: dict[str, int] = {}
    thresholds, total = [], 0.0
    for kind, share in MIX:
        total += share
        thresholds.append((total, kind))
    with open(out / LABELS_FILE, "w", newline="", encoding="utf-8") as labels_file:
        labels = csv.writer(labels_file)
        labels.writerow(["source_file", "ordinal", "cluster", "kind", "parent"])
        record = 0
        for f in range(files):
            name = f"{f:05d}_{_mix64(seed * 1_000_003 + f) & 0xFFFFFFFFFFFF:012x}.txt"
            n = records * (f + 1) // files - records * f // files
            paragraphs = []
            for ordinal in range(1, n + 1):
                rng = Rng(seed, 5, record)
                draw = rng.next() / 18446744073709551616 * total
                kind = next(k for t, k in thresholds if draw < t) if gen.parent else "original"
                parent = -1
                if kind == "original":
                    base = gen.new_base()
                    text = gen.text(base)
                elif kind == "hard_negative":
                    parent = rng.below(len(gen.parent))
                    base = gen.new_base(parent)
                    text = gen.text(base)
                elif kind == "exact":
                    base = rng.below(len(gen.parent))
                    text = gen.text(base)
                else:
                    base = rng.below(len(gen.parent))
                    text, kind = gen.near(base, rng)
                counts[kind.split(":")[0]] = counts.get(kind.split(":")[0], 0) + 1
                paragraphs.append(text)
                labels.writerow([name, ordinal, base, kind, parent if parent >= 0 else ""])
                record += 1
            body = f"Synthetic ICML Papers {f:05d}\n\n" + "\n\n".join(paragraphs) + "\n"
            (out / name).write_text(body, encoding="utf-8")
    return {"records": records, "files": files, "bases": len(gen.parent), **counts}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, required=True)
    parser.add_argument("--files", type=int, default=100)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    summary = generate(args.out, args.records, args.files, args.seed)
    seconds = time.perf_counter() - started
    size = sum(p.stat().st_size for p in args.out.glob("*.txt"))
    print(f"{summary} in {seconds:.1f} s ({args.records / seconds:,.0f} records/s, {size / 1e6:,.1f} MB)", file=sys.stderr)


if __name__ == "__main__":
    main()
