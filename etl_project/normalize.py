"""Normalize: derive display text and dedup keys from ``raw_text``, which stays untouched.

- ``text`` (display): invisible characters removed (format characters such as zero-width space,
  soft hyphen, bidi marks and BOM; control characters; Hangul fillers), Unicode NFKC, every
  whitespace run folded to one space, trimmed.
- ``dedup_key``: the display text with typographic quotes and dashes folded to ASCII and
  lower-cased, so that typographic variants of one abstract share a key.
Each is idempotent on any string: applying it to its own output changes nothing.
"""

import polars as pl

# Format (Cf) and control (Cc) characters except whitespace, plus the blank Hangul fillers.
_INVISIBLE = r"[[\p{Cf}\p{Cc}\x{115F}\x{1160}\x{3164}\x{FFA0}]--\s]"
_SINGLE_QUOTES = r"[\x{2018}\x{2019}\x{201A}\x{201B}\x{2032}\x{2035}\x{2039}\x{203A}\x{0060}\x{00B4}\x{02B9}\x{02BB}\x{02BC}\x{02BD}]"
_DOUBLE_QUOTES = r"[\x{201C}\x{201D}\x{201E}\x{201F}\x{2033}\x{2036}\x{00AB}\x{00BB}\x{301D}\x{301E}\x{301F}]"
# Hyphens and dashes U+2010..U+2015, minus sign, and their small/compatibility forms.
_DASHES = r"[\x{2010}-\x{2015}\x{2212}\x{2043}\x{FE58}\x{FE63}\x{FF0D}\x{2E3A}\x{2E3B}]"


def display_text(raw: pl.Expr) -> pl.Expr:
    """Invisible characters removed, NFKC, whitespace runs folded to one space, trimmed."""
    return (
        raw.str.replace_all(_INVISIBLE, "")
        .str.normalize("NFKC")
        .str.replace_all(_INVISIBLE, "")  # NFKC can expose new ones (e.g. from compatibility forms)
        .str.replace_all(r"\s+", " ")
        .str.strip_chars()
    )


def dedup_key(text: pl.Expr) -> pl.Expr:
    """The key of any text: its display text first, so that compatibility forms which NFKC turns
    into quotes, dashes or capitals ('‴', '𝕬', '℃') fold like their plain forms."""
    return _key_of_display_text(display_text(text))


def _key_of_display_text(text: pl.Expr) -> pl.Expr:
    folded = (
        text.str.replace_all(_SINGLE_QUOTES, "'")
        .str.replace_all(_DOUBLE_QUOTES, '"')
        .str.replace_all(_DASHES, "-")
        .str.to_lowercase()
    )
    # Lower-casing can leave text that is not NFKC-stable; one more display pass keeps it idempotent.
    return display_text(folded)


def normalize_records(raw_records: pl.LazyFrame | pl.DataFrame) -> pl.DataFrame:
    """One row per raw record: ids and provenance, display ``text`` and its ``dedup_key``."""
    return (
        raw_records.lazy()
        .select("record_id", "source_file", "ordinal", text=display_text(pl.col("raw_text")))
        .with_columns(dedup_key=_key_of_display_text(pl.col("text")))  # = dedup_key(raw_text), one NFKC pass less
        .with_columns(
            char_count=pl.col("text").str.len_chars().cast(pl.Int64),
            word_count=word_count(pl.col("text")),
        )
        .collect()
    )


def word_count(text: pl.Expr) -> pl.Expr:
    return text.str.count_matches(r"\S+").cast(pl.Int64)
