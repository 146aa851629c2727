"""Names: what a paper calls the method, model, benchmark or dataset it introduces.

Precision first: a name is reported only where the abstract itself says it introduces it, in one
of these patterns (``pattern`` column), on the display text ``abstract``:

- ``we propose X``: *we* / *this paper* / *this work* / *our work* (an adverb such as *first* or
  *further* may follow) + propose, introduce, present, develop, design, construct, build, create,
  release, curate, devise or unveil + the name, followed by punctuation or a clause word
  (``, : ; ( — .`` or *which, that, to, for, as, with, ...*). "We propose BOPO, a ...".
- ``X—short for …``: the same, when the name is followed by "—short for <long form>—" or "(short
  for ...)". Also ``X—<long form>—``: "we present CoDy—Counterfactual Explainer for Dynamic Graphs—a".
- ``we propose a <noun>, X``: the verb, an article and up to eight words ending in a head noun
  (method, model, framework, benchmark, dataset, ...; singular), a comma and the name: "we propose
  a new tree-based estimator, `FastPD`, which".
- ``termed X``: termed, called, dubbed, named, coined, known as or referred to as + the name, in a
  sentence where *we*, *our* or *this paper/work/study* comes first, with no word between them that
  makes it someone else's (*prior, previous, existing, popular, classic, they, their, ...*).
- ``we call … X``: "We call our proposed neural network ANOVA Tensor Product Neural Network
  (ANOVA-TPNN)".
The name may be wrapped in markup (``*X*``, ``**X**``, `` `X` ``, ``\\emph{X}``, ``\\textbf{X}``...;
the ``markup`` column says which). "Long Form (ACRONYM)" gives the acronym as ``name`` and the long
form as ``long_name``. A name must look like one: two capitals (``BOPO``, ``CoDy``, ``CASE-Bench``),
or a lower-case letter followed by a capital (``LapSum``), or letters and digits (``GPT-4o``); a
capitalized ordinary word (``Transformer``) or an acronym plural (``LLMs``) is not a name.
Not reported: names a sentence merely uses or compares against ("such as `TreeSHAP`", "Using
GPT-4o to ...", "Shapley additive explanations (SHAP)"), emphasized phrases in lower case
(``*creative composition tasks*``), names in quotes.
"""

import polars as pl

NAMES_SCHEMA = {
    "paper_id": pl.String, "name_rank": pl.UInt32, "name": pl.String, "long_name": pl.String,
    "pattern": pl.String, "markup": pl.String, "evidence": pl.String,
}
PATTERNS = ("we propose X", "X—short for …", "X—<long form>—", "we propose a <noun>, X", "termed X", "we call … X")

_NAME = r"[\p{Lu}\d][\p{L}\d]*(?:[-+.][\p{L}\d]+)*"
_LONG_WORD = r"[\p{Lu}\d][\p{L}\d]*(?:-[\p{L}\d]+)*"
_CONNECTOR = r"(?:and|of|for|with|in|on|the|to|via|by|from|a|an|&)"
_LONG = rf"{_LONG_WORD}(?:\s+(?:{_CONNECTOR}\s+)*{_LONG_WORD}){{0,12}}"
# After a trigger word the long form may be lower case: "termed multi-scale attention (MSA)".
_LONG_ANY = r"[\p{L}\d][\p{L}\d-]*(?:\s+[\p{L}\d][\p{L}\d-]*){0,9}"
_OPEN = r"(?P<open>\*\*|\*|`|\\(?:emph|textbf|textit|textsc|texttt|mathrm|mathbf)\{)?"
_CLOSE = r"(?:\*\*|\*|`|\})?"
_SUBJECT = r"\b(?:[Ww]e|[Tt]his (?:paper|work|study|article)|[Oo]ur (?:paper|work|study))"
_ADVERBS = r"(?:\s+(?:first|also|further|then|now|here|therefore|thus|hence|additionally|finally|\p{Ll}+ly))*"
_VERB = r"\s+(?:propose|introduce|present|develop|design|construct|build|create|release|curate|devise|unveil)s?"
_FOLLOW = (
    r"(?:\s*[,:;(—–]|\s+-{1,3}\s|\s*\.(?:\s|$)|$"
    r"|\s+(?:which|that|to|for|as|with|is|in|on|and|achieves|outperforms|enables|uses|can)\b)"
)
_HEAD = (
    r"(?:method|model|framework|benchmark|dataset|algorithm|approach|architecture|estimator|system|"
    r"tool|toolkit|library|technique|metric|measure|agent|pipeline|suite|loss|objective|paradigm|"
    r"network|corpus|environment|simulator|platform|package|language|protocol|mechanism|module|"
    r"optimizer|attack|defense|procedure|strategy|scheme|solver|score|test|task|variant|index|"
    r"criterion|regularizer|planner|policy|generator|detector|classifier|transformer|encoder|decoder)"
)
_EXPANSION = (
    rf"(?:\s*(?:[—–]|-{{2,3}}|\()\s*(?P<short>short for\s+)?(?P<long_after>{_LONG})\s*(?:[—–]|-{{2,3}}|\)))?"
)


def _name_then_boundary(long: str) -> str:
    """The name (or "Long Form (ACRONYM)"), its markup and an optional expansion, closing the
    ``evidence`` group; then the text that must follow a bare name (checked after matching)."""
    return (
        rf"{_OPEN}(?:(?P<long>{long})\s*\(\s*(?P<acronym>{_NAME})\s*\)|(?P<name>{_NAME})){_CLOSE}{_EXPANSION})"
        rf"(?P<follow>{_FOLLOW})?"
    )


# (pattern label, regex); groups: evidence, open, long, acronym, name, short, long_after, follow.
_RULES = (
    ("we propose X", rf"(?P<evidence>{_SUBJECT}{_ADVERBS}{_VERB}\s+{_name_then_boundary(_LONG)}"),
    ("we propose a <noun>, X",
     rf"(?P<evidence>{_SUBJECT}{_ADVERBS}{_VERB}\s+(?:a|an|the|our)\s+(?:[\p{{L}}\d'’-]+\s+){{0,8}}?{_HEAD},\s+"
     rf"(?:(?:called|named|termed|dubbed|known as)\s+)?{_name_then_boundary(_LONG)}"),
    ("termed X",
     rf"(?P<span>\b(?:[Ww]e|[Oo]ur|[Tt]his (?:paper|work|study))\b[^.!?]{{0,200}}?)"
     rf"(?P<evidence>\b(?:termed|called|dubbed|named|coined|known as|referred to as)\s+{_name_then_boundary(_LONG_ANY)}"),
    ("we call … X",
     rf"(?P<evidence>\b[Ww]e\s+(?:call|name|term|dub|coin)\s+(?:it|this|them|these|(?:our|the|this|such)\b[^.,;:!?]{{0,80}}?)\s+"
     rf"{_name_then_boundary(_LONG)}"),
)
_GROUPS = ("open", "long", "acronym", "name", "evidence", "short", "long_after", "follow", "span")
# Between "we" and "termed X", words that make X someone else's: "we note that prior work ... called X".
_OTHERS_WORK = r"(?i)\b(?:prior|previous|existing|earlier|recent|popular|standard|classic|conventional|widely[- ]used|well[- ]known|they|their|others)\b"


def extract_names(papers: pl.DataFrame, text_column: str = "abstract") -> pl.DataFrame:
    """One row per distinct name per paper (``NAMES_SCHEMA``), ranked by where it first appears."""
    text = papers.lazy().select("paper_id", text=pl.col(text_column))
    found = []
    for priority, (label, regex) in enumerate(_RULES):
        groups = [g for g in _GROUPS if f"?P<{g}>" in regex]
        found.append(
            text.with_columns(match=pl.col("text").str.extract_all(regex))
            .explode("match")
            .drop_nulls("match")
            # Re-running the rule on its own match yields the groups of that match.
            .with_columns(groups=pl.col("match").str.extract_groups(regex))
            .select("paper_id", "text", *(pl.col("groups").struct.field(g) for g in groups))
            .with_columns(pl.lit(None, pl.String).alias(g) for g in _GROUPS if g not in groups)
            # A bare name must be followed by punctuation or a clause word; "(ACRONYM)" or an
            # expansion delimits it by itself.
            .filter(pl.col("follow").is_not_null() | pl.col("acronym").is_not_null() | pl.col("long_after").is_not_null())
            .filter(~pl.col("span").fill_null("").str.contains(_OTHERS_WORK))
            .select(
                "paper_id", "text",
                priority=pl.lit(priority),
                pattern=pl.when(pl.col("short").is_not_null()).then(pl.lit("X—short for …"))
                .when(pl.col("long_after").is_not_null()).then(pl.lit("X—<long form>—"))
                .otherwise(pl.lit(label)),
                name=pl.coalesce("acronym", "name"),
                long_name=pl.coalesce("long", "long_after"),
                markup=pl.col("open").str.replace(r"^\\(\w+)\{$", r"\$1"),
                evidence=pl.col("evidence").str.strip_chars(),
            )
        )
    names = (
        pl.concat(found)
        .filter(looks_like_a_name(pl.col("name")))
        .with_columns(position=pl.col("text").str.find(pl.col("name"), literal=True))
        # Stable sorts: names can share a position ("FooNetX ... FooNet"), and each paper's rows
        # must not depend on the other papers in the frame (enrich/reuse.py).
        .sort("paper_id", "priority", "position", maintain_order=True)
        .unique(["paper_id", "name"], keep="first", maintain_order=True)
        .sort("paper_id", "position", "priority", maintain_order=True)
        .with_columns(name_rank=pl.int_range(1, pl.len() + 1, dtype=pl.UInt32).over("paper_id"))
        .collect()
    )
    return names.select(list(NAMES_SCHEMA)).cast(NAMES_SCHEMA)


def looks_like_a_name(name: pl.Expr) -> pl.Expr:
    """Two capitals, a lower-case letter before a capital, or letters with digits; not an acronym
    plural ("LLMs"); 2 to 40 characters."""
    shaped = (
        (name.str.count_matches(r"\p{Lu}") >= 2)
        | name.str.contains(r"\p{Ll}\p{Lu}")
        | (name.str.contains(r"\p{L}") & name.str.contains(r"\d"))
    )
    length = name.str.len_chars()
    return shaped & ~name.str.contains(r"^\p{Lu}+s$") & length.is_between(2, 40)
