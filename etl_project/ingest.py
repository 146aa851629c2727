"""Ingest: read the landing folder's bytes, decode them and split them into paragraphs.

File format: a title line, a blank line, then one record per paragraph (paragraphs are separated
by lines that are empty or hold only whitespace; a hard-wrapped paragraph is one record).

Rules, in order:
- Ignored (no row at all): names starting with ``.`` (``.DS_Store``, ``.x.swp``), editor
  leftovers ending in ``~``, ``.swp``, ``.swo`` or ``.tmp``.
- Rejected (a ``source_files`` row with status ``rejected`` and the reason, no records): symlinks
  or paths that resolve outside the landing folder, files over ``max_file_bytes``, files holding
  NUL bytes outside a UTF-16/32 encoding, bytes no encoding decodes.
- Decoding: a BOM decides (UTF-8/16/32, the BOM is dropped); else strict UTF-8; else the best
  guess of charset-normalizer (cp1252 winning near ties). Line endings CRLF and CR become LF.
- The title is the first non-blank line. Every later paragraph is numbered 1, 2, ... in file order;
  a paragraph that is not a plausible record goes to ``rejected_records`` with its reason and
  keeps its number, so ``(source_file, ordinal)`` names one paragraph across both tables.
"""

import codecs
import hashlib
from dataclasses import dataclass
from pathlib import Path

import charset_normalizer
import polars as pl

DEFAULT_MAX_FILE_BYTES = 64 * 1024 * 1024
DEFAULT_MAX_RECORD_CHARS = 20_000

_IGNORED_SUFFIXES = ("~", ".swp", ".swo", ".tmp")
_BOMS = (  # UTF-32 first: its little-endian BOM starts with UTF-16's.
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
# Control characters other than tab and the line break: never part of a real abstract.
_CONTROL_CHARS = r"[\x00-\x08\x0B-\x1F\x7F-\x9F]"
_NON_WHITESPACE = r"\s+"
_TIE_CHAOS = 0.1  # charset-normalizer scores: chaos (lower is better) and coherence (higher)
_TIE_COHERENCE = 0.05

SOURCE_FILES_SCHEMA = {
    "source_file": pl.String,
    "sha256": pl.String,
    "size_bytes": pl.Int64,
    "encoding": pl.String,
    "title": pl.String,
    "record_count": pl.UInt32,
    "rejected_count": pl.UInt32,
    "status": pl.String,
    "error": pl.String,
    "decoded_chars": pl.Int64,  # non-whitespace characters of the decoded text (accounting)
}


@dataclass(frozen=True)
class LandedFile:
    """One file of the landing folder after decoding; ``text`` is None when it was rejected."""

    source_file: str
    sha256: str | None
    size_bytes: int | None
    encoding: str | None
    text: str | None
    error: str | None


def is_ignored(name: str) -> bool:
    return name.startswith(".") or name.endswith(_IGNORED_SUFFIXES)


def list_landing_files(root: Path) -> list[Path]:
    """Every candidate file under ``root``, sorted by relative name; directories are not followed
    through symlinks, and ignored names (at any depth) are skipped."""
    found = []
    for path in root.rglob("*"):
        rel = path.relative_to(root)
        if any(is_ignored(part) for part in rel.parts):
            continue
        if path.is_symlink() or path.is_file():
            found.append(path)
    return sorted(found, key=lambda p: p.relative_to(root).as_posix())


def decode_bytes(data: bytes) -> tuple[str, str]:
    """Decode raw bytes to text with LF line endings; returns ``(text, encoding)``.

    Raises ValueError with a human-readable reason when the bytes are not text.
    """
    for bom, codec in _BOMS:
        if data.startswith(bom):
            try:
                return _normalize_newlines(data.decode(codec)), codec
            except UnicodeDecodeError as exc:
                raise ValueError(f"starts with a {codec} byte-order mark but does not decode: {exc.reason}") from exc
    if b"\x00" in data:
        raise ValueError("binary file: contains NUL bytes")
    try:
        return _normalize_newlines(data.decode("utf-8")), "utf-8"
    except UnicodeDecodeError:
        pass
    best = _guess_legacy_encoding(data)
    if best is None:
        raise ValueError("not text: no character encoding decodes these bytes")
    return _normalize_newlines(str(best)), best.encoding


def _guess_legacy_encoding(data: bytes):
    """charset-normalizer's best match, except that cp1252 wins a near tie: for short Western
    texts the detector often scores a Baltic or Central European code page a hair better
    (seen: French cp1252 text read as cp1257), while cp1252 is by far the commonest legacy
    encoding (browsers read even 'latin-1' as cp1252)."""
    matches = charset_normalizer.from_bytes(data)
    best = matches.best()
    if best is None:
        return None
    for match in matches:
        near_tie = match.chaos <= best.chaos + _TIE_CHAOS and match.coherence >= best.coherence - _TIE_COHERENCE
        if match.encoding == "cp1252" and near_tie:
            return match
    return best


def _normalize_newlines(text: str) -> str:
    return text.lstrip("\ufeff").replace("\r\n", "\n").replace("\r", "\n")


def read_landing_file(path: Path, root: Path, max_file_bytes: int = DEFAULT_MAX_FILE_BYTES) -> LandedFile:
    """Read and decode one file; every failure becomes a LandedFile with an ``error``."""
    name = path.relative_to(root).as_posix()

    def rejected(reason: str, sha: str | None = None, size: int | None = None) -> LandedFile:
        return LandedFile(name, sha, size, None, None, reason)

    real = path.resolve()
    if not real.is_relative_to(root.resolve()):
        return rejected("path leads outside the landing folder (symlink not followed)")
    if not real.is_file():
        return rejected("not a regular file")
    size = real.stat().st_size
    if size > max_file_bytes:
        return rejected(f"file too large: {size} bytes, limit is {max_file_bytes}", size=size)
    try:
        data = real.read_bytes()
    except OSError as exc:
        return rejected(f"cannot read: {exc.strerror or exc}", size=size)
    sha = hashlib.sha256(data).hexdigest()
    try:
        text, encoding = decode_bytes(data)
    except ValueError as exc:
        return rejected(str(exc), sha, len(data))
    return LandedFile(name, sha, len(data), encoding, text, None)


def read_landing_folder(root: Path, max_file_bytes: int = DEFAULT_MAX_FILE_BYTES) -> list[LandedFile]:
    if not root.is_dir():
        raise FileNotFoundError(f"landing folder does not exist: {root}")
    return [read_landing_file(p, root, max_file_bytes) for p in list_landing_files(root)]


@dataclass(frozen=True)
class Parsed:
    source_files: pl.DataFrame
    raw_records: pl.DataFrame
    rejected_records: pl.DataFrame


def parse_files(files: list[LandedFile], max_record_chars: int = DEFAULT_MAX_RECORD_CHARS) -> Parsed:
    """Split decoded files into title + paragraphs, all files at once, as Polars expressions."""
    decoded = pl.DataFrame(
        {"source_file": [f.source_file for f in files if f.text is not None],
         "text": [f.text for f in files if f.text is not None]},
        schema={"source_file": pl.String, "text": pl.String},
    )
    lines = (
        decoded.lazy()
        .select("source_file", pl.col("text").str.split("\n").alias("line"))
        .explode("line")
        .with_columns(line_no=(pl.int_range(pl.len(), dtype=pl.UInt32) + 1).over("source_file"))
        .with_columns(blank=pl.col("line").str.strip_chars().str.len_chars() == 0)
        .with_columns(is_title=~pl.col("blank") & ((~pl.col("blank")).cum_sum().over("source_file") == 1))
        .with_columns(separator=pl.col("blank") | pl.col("is_title"))
        .with_columns(
            starts=~pl.col("separator")
            & pl.col("separator").shift(1, fill_value=True).over("source_file")
        )
        .with_columns(ordinal=pl.col("starts").cast(pl.UInt32).cum_sum().over("source_file"))
    )
    titles = lines.filter("is_title").select("source_file", title=pl.col("line").str.strip_chars())
    paragraphs = (
        lines.filter(~pl.col("separator"))
        .group_by("source_file", "ordinal", maintain_order=True)
        .agg(
            line_start=pl.col("line_no").min(),
            line_end=pl.col("line_no").max(),
            raw_text=pl.col("line").str.join("\n"),
        )
        .with_columns(reason=rejection_reason(pl.col("raw_text"), max_record_chars))
        .collect()
    )
    raw_records = (
        paragraphs.filter(pl.col("reason").is_null())
        .select(
            record_id=record_id(pl.col("source_file"), pl.col("ordinal")),
            source_file="source_file", ordinal="ordinal",
            line_start="line_start", line_end="line_end", raw_text="raw_text",
        )
        .sort("source_file", "ordinal")
    )
    rejected = (
        paragraphs.filter(pl.col("reason").is_not_null())
        .select("source_file", "ordinal", "line_start", "line_end", "reason", "raw_text")
        .sort("source_file", "ordinal")
    )
    counts = (
        paragraphs.group_by("source_file")
        .agg(
            record_count=pl.col("reason").is_null().sum().cast(pl.UInt32),
            rejected_count=pl.col("reason").is_not_null().sum().cast(pl.UInt32),
        )
    )
    chars = decoded.select("source_file", decoded_chars=non_whitespace_chars(pl.col("text")))
    meta = pl.DataFrame(
        {
            "source_file": [f.source_file for f in files],
            "sha256": [f.sha256 for f in files],
            "size_bytes": [f.size_bytes for f in files],
            "encoding": [f.encoding for f in files],
            "error": [f.error for f in files],
        },
        schema={k: SOURCE_FILES_SCHEMA[k] for k in ("source_file", "sha256", "size_bytes", "encoding", "error")},
    )
    source_files = (
        meta.join(titles.collect(), on="source_file", how="left")
        .join(counts, on="source_file", how="left")
        .join(chars, on="source_file", how="left")
        .with_columns(pl.col("record_count", "rejected_count").fill_null(0))
        .with_columns(
            status=pl.when(pl.col("error").is_not_null()).then(pl.lit("rejected"))
            .when(pl.col("record_count") == 0).then(pl.lit("empty"))
            .otherwise(pl.lit("ok"))
        )
        .select(list(SOURCE_FILES_SCHEMA))
        .cast(SOURCE_FILES_SCHEMA)
        .sort("source_file")
    )
    return Parsed(source_files, raw_records, rejected)


def record_id(source_file: pl.Expr, ordinal: pl.Expr) -> pl.Expr:
    """``<source_file>:<ordinal>``: readable, stable and unique (the ordinal follows the last colon)."""
    return pl.concat_str(source_file, pl.lit(":"), ordinal.cast(pl.String))


def non_whitespace_chars(text: pl.Expr) -> pl.Expr:
    return text.str.replace_all(_NON_WHITESPACE, "").str.len_chars().cast(pl.Int64)


def rejection_reason(raw_text: pl.Expr, max_record_chars: int) -> pl.Expr:
    """Why a decoded paragraph is not a plausible record, or null when it is one."""
    return (
        pl.when(raw_text.str.contains(_CONTROL_CHARS))
        .then(pl.lit("control characters in text"))
        .when(raw_text.str.len_chars() > max_record_chars)
        .then(pl.lit(f"longer than {max_record_chars} characters"))
        .when(~raw_text.str.contains(r"[\p{L}\p{N}]"))
        .then(pl.lit("no letters or digits"))
        .otherwise(pl.lit(None, dtype=pl.String))
    )
