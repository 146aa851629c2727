import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from etl_project import normalize


def display(values: list[str]) -> list[str]:
    return pl.DataFrame({"v": values}, schema={"v": pl.String}).select(normalize.display_text(pl.col("v")))["v"].to_list()


def key(values: list[str]) -> list[str]:
    return pl.DataFrame({"v": values}, schema={"v": pl.String}).select(normalize.dedup_key(pl.col("v")))["v"].to_list()


def record_keys(raw_texts: list[str]) -> list[str]:
    n = len(raw_texts)
    raw = pl.DataFrame({
        "record_id": [f"f:{i}" for i in range(n)], "source_file": ["f"] * n, "ordinal": list(range(1, n + 1)),
        "raw_text": raw_texts,
    }, schema={"record_id": pl.String, "source_file": pl.String, "ordinal": pl.UInt32, "raw_text": pl.String})
    return normalize.normalize_records(raw)["dedup_key"].to_list()


def test_display_text_removes_invisible_and_folds_whitespace():
    assert display(["zero\u200bwidth soft\u00adhyphen \ufeffbom"]) == ["zerowidth softhyphen bom"]
    assert display(["  a\u00a0\u00a0b \n\n\t c  "]) == ["a b c"]
    assert display(["Ｆｕｌｌ ﬁne"]) == ["Full fine"]


def test_dedup_key_folds_case_quotes_and_dashes():
    assert key(["“Quoted” ‘single’ a–b c—d e\u2212f g\u2010h"]) == ['"quoted" \'single\' a-b c-d e-f g-h']


def test_typographic_variants_share_a_key_and_others_do_not():
    a = "We show that “LLMs” can’t reason—at all—on 3–5 tasks."
    b = 'we show that "LLMs" can\'t  reason-at all-on 3-5 TASKS.\u200b'
    c = "We show that LLMs can reason on 3-5 tasks."
    ka, kb, kc = key([a, b, c])
    assert ka == kb
    assert kc != ka


def test_normalize_records_keeps_raw_text():
    raw = pl.DataFrame({
        "record_id": ["f:1"], "source_file": ["f"], "ordinal": [1],
        "line_start": [3], "line_end": [4], "raw_text": ["Line one\u200b\n  line  two"],
    })
    records = normalize.normalize_records(raw)
    assert records["text"].to_list() == ["Line one line two"]
    assert records["word_count"].to_list() == [4]
    assert raw["raw_text"].to_list() == ["Line one\u200b\n  line  two"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(), min_size=1, max_size=20))
def test_display_text_is_idempotent(values):
    once = display(values)
    assert display(once) == once


def test_dedup_key_folds_compatibility_forms_on_raw_text():
    # NFKC turns these into capitals, primes and dashes; the key must fold them in one application.
    assert key(["𝕬𝖇𝖈", "‴", "\ufe31", "\uff40x", "℃"]) == ["abc", "'''", "-", "'x", "°c"]


@settings(max_examples=500, deadline=None)
@given(st.lists(st.text(alphabet=st.characters(codec="utf-8")), min_size=1, max_size=20))
def test_dedup_key_is_idempotent_on_any_text(values):
    once = key(values)
    assert key(once) == once


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet=st.characters(codec="utf-8")), min_size=1, max_size=20))
def test_records_key_equals_dedup_key_of_raw_text(values):
    assert record_keys(values) == key(values)


def test_inert_characters_are_inert():
    # Every property normalize_records' fast path relies on, checked for every character of _INERT
    # with the same Polars functions that the full path uses.
    every = pl.DataFrame({"c": [chr(code) for code in range(0x110000) if not 0xD800 <= code <= 0xDFFF]})
    c = pl.col("c")
    # A character can join the one before it in a canonical composition only if it is a later
    # character of some canonical decomposition.
    joining = set(every.select(c.str.normalize("NFD").str.slice(1).str.split("")).to_series().explode().to_list())
    joining -= {"", None}
    inert = every.filter(c.str.contains(f"^[{normalize._INERT}]$"))
    assert inert.height > 30_000
    fast_text = rf"^[\x00-\x7F{normalize._INERT}]*$"
    props = inert.select(
        "c",
        stable=c.str.normalize("NFKC") == c,
        nfkd_first=c.str.normalize("NFKD").str.slice(0, 1),
        starter=~c.str.normalize("NFKD").str.slice(0, 1).str.contains(r"\p{M}"),
        mark=c.str.contains(r"\p{M}"),
        space=c.str.contains(r"\s"),
        invisible=c.str.contains(normalize._INVISIBLE),
        lower_inert=c.str.to_lowercase().str.contains(fast_text)
        & (pl.lit("a") + c).str.to_lowercase().str.contains(fast_text),  # context forms such as final sigma
    )
    assert props.filter(~pl.col("stable")).height == 0
    assert props.filter(pl.col("mark") | pl.col("space") | pl.col("invisible")).height == 0
    assert props.filter(~pl.col("starter") | ~pl.col("lower_inert")).height == 0
    assert not joining & set(props["c"])
    assert not joining & set(props["nfkd_first"])


# Characters of every path: clean and dirty ASCII, inert, and what needs the full definitions
# (combining marks, compatibility forms, Hangul jamo, invisible and non-ASCII whitespace, and
# capitals whose lower case is not inert).
TRICKY = list(
    "abcXYZ 09.,;`'\"-" "\t\n\x0b\x0c\r\x1c\x01\x7f" "éÉΘΣς’“”–—≤×中한カß"
    "\u0301\u0307\u3099\u030c" "²ﬁ…ΩK℃𝕬‴" "\u1100\u1161\u11a8" "\u200b\u00ad\ufeff\u2060\u115f"
    "\u00a0\u3000\u2028\u0085\u2003" "İẞJ"
)


def reference_records(raw: pl.DataFrame) -> pl.DataFrame:
    text = normalize.display_text(pl.col("raw_text"))
    return raw.select(
        "record_id", "source_file", "ordinal", text=text, dedup_key=normalize.dedup_key(pl.col("raw_text")),
        char_count=text.str.len_chars().cast(pl.Int64), word_count=text.str.count_matches(r"\S+").cast(pl.Int64),
    )


def raw_frame(raw_texts: list[str]) -> pl.DataFrame:
    n = len(raw_texts)
    return pl.DataFrame({
        "record_id": [f"f:{i}" for i in range(n)], "source_file": ["f"] * n, "ordinal": list(range(1, n + 1)),
        "raw_text": raw_texts,
    }, schema={"record_id": pl.String, "source_file": pl.String, "ordinal": pl.UInt32, "raw_text": pl.String})


def test_records_of_every_path_keep_their_order():
    # J + combining caron has no capital precomposed form; lower-cased it composes to U+01F0.
    raw = raw_frame(["Plain “text”.", "needs\tfolding  ", "Ｆｕｌｌ width", "", "ΣΟΦΙΑ and x²", "Clean `x`", "J\u030cX"])
    records = normalize.normalize_records(raw)
    assert records.equals(reference_records(raw))
    assert records["text"].to_list() == ["Plain “text”.", "needs folding", "Full width", "", "ΣΟΦΙΑ and x2", "Clean `x`", "J\u030cX"]
    assert records["dedup_key"].to_list() == ['plain "text".', "needs folding", "full width", "", "σοφια and x2", "clean 'x'", "\u01f0x"]
    assert records["word_count"].to_list() == [2, 2, 2, 0, 3, 2, 1]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(alphabet=st.sampled_from(TRICKY) | st.characters(codec="utf-8"), max_size=12), min_size=1, max_size=30))
def test_records_equal_the_definitions_on_any_text(values):
    raw = raw_frame(values)
    assert normalize.normalize_records(raw).equals(reference_records(raw))
