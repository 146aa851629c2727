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
