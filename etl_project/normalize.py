"""Normalize: derive display text and dedup keys from ``raw_text``, which stays untouched.

- ``text`` (display): invisible characters removed (format characters such as zero-width space,
  soft hyphen, bidi marks and BOM; control characters; Hangul fillers), Unicode NFKC, every
  whitespace run folded to one space, trimmed.
- ``dedup_key``: the display text with typographic quotes and dashes folded to ASCII and
  lower-cased, so that typographic variants of one abstract share a key.
Each is idempotent on any string: applying it to its own output changes nothing.

``display_text`` and ``dedup_key`` define the two columns for any text. ``normalize_records`` gives
the same values faster: most abstracts are ASCII or use only characters that NFKC leaves alone
(``_INERT``), and for those the NFKC passes and the key's second display pass change nothing.
"""

import polars as pl

# Format (Cf) and control (Cc) characters except whitespace, plus the blank Hangul fillers.
_INVISIBLE = r"[[\p{Cf}\p{Cc}\x{115F}\x{1160}\x{3164}\x{FFA0}]--\s]"
# What _INVISIBLE matches among ASCII characters: the controls that are not whitespace.
_ASCII_INVISIBLE = r"[\x00-\x08\x0E-\x1F\x7F]"
# The whitespace that folding to one space changes: runs of two or more, and lone non-spaces.
_UNFOLDED_WHITESPACE = r"\s\s+|[^\S ]"
# Folded to ASCII in the key: typographic single quotes, double quotes, and the hyphens and dashes
# U+2010..U+2015, minus sign and their small/compatibility forms.
_FOLDS = {
    "'": "\u2018\u2019\u201a\u201b\u2032\u2035\u2039\u203a\u0060\u00b4\u02b9\u02bb\u02bc\u02bd",
    '"': "\u201c\u201d\u201e\u201f\u2033\u2036\u00ab\u00bb\u301d\u301e\u301f",
    "-": "\u2010\u2011\u2012\u2013\u2014\u2015\u2212\u2043\ufe58\ufe63\uff0d\u2e3a\u2e3b",
}
_FOLD_MAP = {char: ascii_form for ascii_form, chars in _FOLDS.items() for char in chars}
# Non-ASCII characters on which NFKC is the identity in any string made of them and of ASCII:
# NFKC-stable, no combining mark, never part of a canonical composition but its first character,
# neither whitespace nor invisible, and lower-cased to characters of this set. They are the
# letters, punctuation and symbols of Latin-1, Latin Extended-A, Greek, Cyrillic, General
# Punctuation, arrows, mathematical and technical symbols, box drawing and geometric shapes, CJK
# punctuation, kana, CJK ideographs and Hangul syllables that have these properties.
# test_normalize.py checks every property for every character of the set.
_INERT = (
    r"\x{A1}-\x{A7}\x{A9}\x{AB}-\x{AC}\x{AE}\x{B0}-\x{B1}\x{B6}-\x{B7}\x{BB}\x{BF}-\x{12F}\x{131}"
    r"\x{134}-\x{13E}\x{141}-\x{148}\x{14A}-\x{17E}\x{370}-\x{373}\x{375}-\x{377}\x{37B}-\x{37D}"
    r"\x{37F}\x{386}\x{388}-\x{38A}\x{38C}\x{38E}-\x{3A1}\x{3A3}-\x{3CF}\x{3D7}-\x{3EF}\x{3F3}"
    r"\x{3F6}-\x{3F8}\x{3FA}-\x{482}\x{48A}-\x{4FF}\x{2010}\x{2012}-\x{2016}\x{2018}-\x{2023}\x{2027}"
    r"\x{2030}-\x{2032}\x{2035}\x{2038}-\x{203B}\x{203D}\x{203F}-\x{2046}\x{204A}-\x{2056}"
    r"\x{2058}-\x{205E}\x{2190}-\x{222B}\x{222E}\x{2231}-\x{2328}\x{232B}-\x{23FF}\x{2500}-\x{25FF}"
    r"\x{3001}-\x{3029}\x{3030}-\x{3035}\x{3037}\x{303B}-\x{303F}\x{3041}-\x{3096}\x{309D}-\x{309E}"
    r"\x{30A0}-\x{30FE}\x{4E00}-\x{9FFF}\x{AC00}-\x{D7A3}"
)
# Text that holds only printable ASCII and inert characters, single spaces between them and none
# at either end, is its own display text: a raw text with none of these is already clean.
_NOT_CLEAN = rf"[^\x20-\x7E{_INERT}]|  |^ | $"
# Text outside the fast path: a character that is neither ASCII nor inert.
_NOT_FAST = rf"[^\x00-\x7F{_INERT}]"


def display_text(raw: pl.Expr) -> pl.Expr:
    """Invisible characters removed, NFKC, whitespace runs folded to one space, trimmed."""
    return (
        raw.str.replace_all(_INVISIBLE, "")
        .str.normalize("NFKC")
        .str.replace_all(_INVISIBLE, "")  # NFKC can expose new ones (e.g. from compatibility forms)
        .str.replace_all(_UNFOLDED_WHITESPACE, " ")
        .str.strip_chars()
    )


def dedup_key(text: pl.Expr) -> pl.Expr:
    """The key of any text: its display text first, so that compatibility forms which NFKC turns
    into quotes, dashes or capitals ('‴', '𝕬', '℃') fold like their plain forms."""
    return _key_of_display_text(display_text(text))


def _key_of_display_text(text: pl.Expr) -> pl.Expr:
    # Lower-casing can leave text that is not NFKC-stable; one more display pass keeps it idempotent.
    return display_text(_fold(text).str.to_lowercase())


def _fold(text: pl.Expr) -> pl.Expr:
    return text.str.replace_many(_FOLD_MAP)


def _fold_ascii(text: pl.Expr) -> pl.Expr:
    """``_fold`` for ASCII text: literal replacements, much faster than the full table."""
    for char, ascii_form in _FOLD_MAP.items():
        if char.isascii():
            text = text.str.replace_all(char, ascii_form, literal=True)
    return text


def _display_of_fast_text(raw: pl.Expr) -> pl.Expr:
    """``display_text`` of a text of ASCII and inert characters: NFKC changes nothing there, and
    the only invisible characters it can hold are ASCII controls."""
    return raw.str.replace_all(_ASCII_INVISIBLE, "").str.replace_all(_UNFOLDED_WHITESPACE, " ").str.strip_chars()


def _key_of_fast_display_text(text: pl.Expr) -> pl.Expr:
    """``_key_of_display_text`` of a display text of ASCII and inert characters: folded and
    lower-cased it stays NFKC-stable, with no invisible character or whitespace run, so the second
    display pass is the identity."""
    return _fold(text).str.to_lowercase()


def normalize_records(raw_records: pl.LazyFrame | pl.DataFrame) -> pl.DataFrame:
    """One row per raw record, in input order: ids and provenance, display ``text`` and its
    ``dedup_key`` (``display_text`` and ``dedup_key`` of ``raw_text``), character and word counts.

    Each row gets only the work its characters need. A clean raw text (printable ASCII and inert
    characters, single spaces, none at the ends) is its own display text; other raw texts of
    ASCII and inert characters take ``_display_of_fast_text``; the rest the full definition. A
    display text of ASCII and inert characters (most, even after NFKC: x² becomes x2) takes
    ``_key_of_fast_display_text``; the rest the full definition.
    """
    raw, text, fast = pl.col("raw_text"), pl.col("text"), pl.col("_fast")
    rows = (
        raw_records.lazy()
        .select("record_id", "source_file", "ordinal", "raw_text")
        .with_row_index("_row")
        .with_columns(_clean=~raw.str.contains(_NOT_CLEAN), _ascii=raw.str.len_bytes() == raw.str.len_chars())
        .collect()
    )
    clean = rows.filter("_clean")
    rest = rows.filter(~pl.col("_clean")).with_columns(_fast=~raw.str.contains(_NOT_FAST))
    del rows
    full = rest.filter(~fast).with_columns(text=display_text(raw)).with_columns(_fast=~text.str.contains(_NOT_FAST))
    parts = [
        clean.filter("_ascii").with_columns(text=raw, dedup_key=_fold_ascii(raw).str.to_lowercase()),
        clean.filter(~pl.col("_ascii")).with_columns(text=raw, dedup_key=_key_of_fast_display_text(raw)),
        rest.filter(fast).with_columns(text=_display_of_fast_text(raw)).with_columns(dedup_key=_key_of_fast_display_text(text)),
        full.filter(fast).with_columns(dedup_key=_key_of_fast_display_text(text)),
        full.filter(~fast).with_columns(dedup_key=_key_of_display_text(text)),
    ]
    del clean, rest, full
    columns = ["_row", "record_id", "source_file", "ordinal", "text", "dedup_key"]
    merged = pl.concat([part.select(columns) for part in parts]).sort("_row")
    del parts
    return merged.select(
        "record_id", "source_file", "ordinal", "text", "dedup_key",
        char_count=text.str.len_chars().cast(pl.Int64),
        word_count=word_count(text),
    )


def word_count(text: pl.Expr) -> pl.Expr:
    """Words of a display text, which separates them by single spaces and has none at its ends."""
    # A one-space regex counts faster than the literal search (measured).
    return text.str.count_matches(" ").cast(pl.Int64) + (text.str.len_bytes() > 0).cast(pl.Int64)
