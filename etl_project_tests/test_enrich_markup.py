"""abstract_plain: LaTeX and markdown markup to plain text."""

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from etl_project.enrich.markup import plain_text, with_plain_text


def plain(text: str) -> str:
    return pl.select(plain_text(pl.lit(text))).item()


@pytest.mark.parametrize(
    ("marked", "expected"),
    [
        # The cases of the issue, as they appear in the seeds.
        ("($p<$0.0001 from a z-test)", "(p<0.0001 from a z-test)"),
        (r"termed \emph{Uncertainty-Based Federated Learning (UEFL)}.", "termed Uncertainty-Based Federated Learning (UEFL)."),
        (r"accuracy (by 3\%--22.1\%) and", "accuracy (by 3%–22.1%) and"),
        ("We propose *Best-anchored Preference Optimization (BOPO)*, a", "We propose Best-anchored Preference Optimization (BOPO), a"),
        ("a new tree-based estimator, `FastPD`, which", "a new tree-based estimator, FastPD, which"),
        # More LaTeX.
        (r"The input data matrix $\boldsymbol{X}$ is drawn", "The input data matrix X is drawn"),
        (r"computed in $O(n \log n)$ time", "computed in O(n log n) time"),
        (r"with $\alpha_i \leq \beta^{2}$", "with α_i ≤ β^2"),
        (r"$\alpha\beta\leq\infty$ and \int_0^1 but \inf and \input", "αβ≤∞ and ∫_0^1 but inf and input"),
        (r"\textbf{\emph{nested}} commands", "nested commands"),
        (r"Schr\"{o}dinger, Erd\H{o}s and \'Etienne", "Schrödinger, Erdős and Étienne"),
        (r"ratio \frac{a}{b} and 10---20 items", "ratio a/b and 10—20 items"),
        ("``quoted'' text", "“quoted” text"),
        (r"costs \$5 per run", "costs $5 per run"),
        # More markdown.
        ("**bold** and *it* and _under_", "bold and it and under"),
        ("see [the code](https://github.com/a/b).", "see the code (https://github.com/a/b)."),
    ],
)
def test_markup_becomes_plain_text(marked: str, expected: str):
    assert plain(marked) == expected


@pytest.mark.parametrize(
    "text",
    [
        "costs $5 and $10 per run",  # money, not math: the pair's content ends with a space
        "2 * 3 * 4 = 24",  # a lone asterisk is not emphasis
        "snake_case_name and a*b*c",  # intraword delimiters are not emphasis
        "https://x.org/a--b_c_",  # a double hyphen inside a word or URL stays
        "plain text, 中文 and émigré.",
    ],
)
def test_text_that_only_looks_like_markup_stays(text: str):
    assert plain(text) == text


_NO_MARKUP = st.text(alphabet=st.characters(exclude_characters="\\$*_`~[]-'\"{}^", exclude_categories=("Cs", "Cc")))


@settings(deadline=None, max_examples=30)
@given(st.lists(_NO_MARKUP, min_size=1, max_size=50))
def test_text_without_markup_characters_only_has_whitespace_folded(texts: list[str]):
    frame = pl.DataFrame({"text": texts}).with_columns(pl.col("text").str.normalize("NFC"))
    folded = frame.select(pl.col("text").str.replace_all(r"\s+", " ").str.strip_chars())["text"]
    assert frame.select(plain_text(pl.col("text")))["text"].to_list() == folded.to_list()


def test_null_stays_null():
    assert pl.DataFrame({"t": [None, "x"]}, schema={"t": pl.String}).select(plain_text(pl.col("t")))["t"].to_list() == [None, "x"]


# Pieces of markup and of plain text, glued at random: most rows hold no markup character at all,
# as in real abstracts; the rest hold every kind, alone or next to each other.
_PIECES = [
    "plain words ", "Zürich ", "x² ", "ﬁne ", "  ", "\t", "\n", "é", "e\u0301", "İ", "(", ")", "'", '"',
    "\\", "\\emph{", "}", "{", "$", "$x^{2}$", "\\alpha", "`", "``", "''", "*", "**", "_", "__", "-", "--",
    "---", "$n$", " *a* ", " _b_ ", "`c`", "[a](https://x.y/z)", "[", "]", "\\%", "\\'e", "\ue000", "\ue001alpha\ue002", "^",
]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(st.sampled_from(_PIECES), max_size=12).map("".join), min_size=1, max_size=30))
def test_only_marked_rows_take_the_markup_passes_and_the_result_is_the_same(texts: list[str]):
    frame = pl.DataFrame({"id": range(len(texts)), "text": texts}).vstack(
        pl.DataFrame({"id": [len(texts)], "text": [None]}, schema={"id": pl.Int64, "text": pl.String})
    )
    expected = frame.with_columns(plain=plain_text(pl.col("text")))
    assert with_plain_text(frame, "text", "plain").equals(expected)
