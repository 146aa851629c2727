"""Ingest: read the landing folder's bytes, decode them and split them into paragraphs.

File format: a title line, a blank line, then one record per paragraph (paragraphs are separated
by lines that are empty or hold only whitespace; a hard-wrapped paragraph is one record).

Which files (rules applied in this order):
- Files in subfolders are read too, named by their path relative to the landing folder.
- Ignored (no row at all): hidden names starting with ``.`` at any depth (``.DS_Store``, ``.git/``,
  vim's ``.x.swp``), Office lock files ``~$*``, emacs autosaves ``#*#``, names ending in ``~``,
  ``.swp``, ``.swo``, ``.swx``, ``.tmp``, ``.part`` or ``.crdownload`` (backups, swap files and
  copies still in progress), and ``Thumbs.db``, ``desktop.ini``, ``__MACOSX``.
- Rejected (a ``source_files`` row with status ``rejected`` and the reason in ``error``, no
  records): a name that is not valid UTF-8 (recorded with ``\\x`` escapes), a symlink or path that
  resolves outside the landing folder (never followed), a symlink to a folder, anything that is
  not a regular file (pipe, device), a broken symlink, a file that vanished or cannot be read, a
  file larger than ``max_file_bytes`` (default 64 MiB; ``ETL_MAX_FILE_BYTES`` or the ``etl``
  resource's ``max_file_bytes`` change it), NUL bytes outside a UTF-16/32 file with a BOM, and
  bytes that no encoding turns into readable text (binary data).

Decoding (``decode_bytes``), first rule that applies:
1. A byte-order mark decides: UTF-8, UTF-16 or UTF-32 (``encoding_confidence`` 'certain').
2. Valid UTF-8 is UTF-8 ('certain'); plain ASCII is reported as 'utf-8'.
3. Mostly UTF-8: if the file holds at least as many valid multi-byte UTF-8 characters as invalid
   byte sequences, it is UTF-8 with a few stray bytes. Each invalid sequence becomes U+FFFD, the
   count goes to ``source_files.decode_errors``, and every paragraph holding a U+FFFD goes to
   ``rejected_records`` (the rest of the file is kept): only the affected records are lost
   from ``raw_records``, and they stay visible with the reason.
4. Otherwise a legacy encoding, guessed by charset-normalizer. Its scores often tie: short texts
   carry no language evidence, and mostly-ASCII Western text decodes equally well as cp1252,
   cp1250 or cp1257 when only a few letters differ. Every encoding tied with the best match
   (including those in a match's ``could_be_from_charset``, which decode to the same text) is a
   candidate, and the first of ``PREFERRED_LEGACY`` wins: cp1252 first (the WHATWG default for
   unlabelled Western text; Latin-1 text decodes identically), then by how common each encoding
   is. ``encoding_confidence`` is 'detected' when one reading won, 'ambiguous' when readings that
   give different text tied (check those files). Known limit, measured by
   ``benchmarks/encoding_detection.py``: Central European (cp1250, ISO-8859-2) and Turkish
   (cp1254) files can be read as cp1252, by the detector alone as by this rule; save such files
   as UTF-8.
Only a leading byte-order mark is an encoding signature (the codec drops it); any other U+FEFF
(files concatenated with their BOMs) stays in the text and in ``raw_text``, exactly as decoded
(normalization removes it from ``text`` and the dedup keys). CRLF and CR become LF.
``decoded_chars`` counts the non-whitespace characters of the decoder's output before that, so
the accounting check (every such character is in a title, a raw or a rejected record) would
catch a cleaning step that lost any.

Splitting: the title is the first non-blank line. Every later paragraph is numbered 1, 2, ... in
file order; a paragraph that is not a plausible record (control characters, U+FFFD, longer than
``max_record_chars``, no letter or digit) goes to ``rejected_records`` with its reason and keeps
its number, so ``(source_file, ordinal)`` names one paragraph across both tables. A file with no
paragraph after its title is ``empty``; a read file with paragraphs is ``ok`` even when all of
them were rejected.
"""

import codecs
import hashlib
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

import charset_normalizer
import polars as pl
import xxhash

from etl_project import normalize, settings

DEFAULT_MAX_FILE_BYTES = settings.max_file_bytes()
DEFAULT_MAX_RECORD_CHARS = 20_000

_IGNORED_PREFIXES = (".", "~$")
_IGNORED_SUFFIXES = ("~", ".swp", ".swo", ".swx", ".tmp", ".part", ".crdownload")
_IGNORED_NAMES = frozenset({"Thumbs.db", "desktop.ini", "__MACOSX"})
_BOMS = (  # UTF-32 first: its little-endian BOM starts with UTF-16's.
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
# Tie-break order for legacy encodings. cp1252 stands for ISO-8859-1 too; the rest follow their
# share of non-UTF-8 web pages (W3Techs), Windows code pages before their ISO twins.
PREFERRED_LEGACY = (
    "cp1252", "cp1251", "cp932", "shift_jis", "euc_jp", "gb18030", "gbk", "gb2312", "euc_kr",
    "big5", "cp1250", "iso8859_2", "cp1256", "cp1254", "cp1253", "cp1257", "cp1255", "cp874",
    "koi8_r", "cp1258",
)
# charset-normalizer scores that count as a tie. Coherence (language fit) is noisy at the length
# of an abstract: French cp1252 text scored 0.667 as cp1257 and 0.611 as cp1252 (measured with
# benchmarks/encoding_detection.py, which also shows what this margin costs).
_CHAOS_TIE = 0.005
_COHERENCE_TIE = 0.06
# Control characters other than tab and the line break: never part of a real abstract.
_CONTROL_CHARS = r"[\x00-\x08\x0B-\x1F\x7F-\x9F]"
_OTHER_WHITESPACE = r"[^\S ]"  # whitespace but the space

SOURCE_FILES_SCHEMA = {
    "source_file": pl.String,
    "sha256": pl.String,
    "size_bytes": pl.Int64,
    "encoding": pl.String,
    "encoding_confidence": pl.String,  # 'certain', 'detected' or 'ambiguous' (see decode_bytes)
    "decode_errors": pl.UInt32,  # invalid UTF-8 sequences replaced by U+FFFD
    "title": pl.String,
    "record_count": pl.UInt32,
    "rejected_count": pl.UInt32,
    "status": pl.String,
    "error": pl.String,
    "decoded_chars": pl.Int64,  # non-whitespace characters the decoder returned (accounting)
}


@dataclass(frozen=True)
class Decoded:
    """Text with LF line endings, the encoding it was read with and how sure that is."""

    text: str
    encoding: str
    confidence: str
    decode_errors: int = 0
    # Non-whitespace characters of the decoder's output, counted before line endings are
    # normalized (the accounting check compares it with what the tables hold).
    decoded_chars: int | None = field(default=None, compare=False)


@dataclass(frozen=True)
class LandedFile:
    """One file of the landing folder after decoding; ``text`` is None when it was rejected."""

    source_file: str
    sha256: str | None
    size_bytes: int | None
    encoding: str | None
    text: str | None
    error: str | None
    encoding_confidence: str | None = None
    decode_errors: int = 0
    decoded_chars: int | None = None  # from Decoded; None: counted from ``text``


class LandingFolderError(OSError):
    """The landing folder is missing, is not a folder or cannot be listed: an error, never an
    empty folder (a mistyped path or an unmounted share must not look like "no files")."""


def check_landing_folder(root: Path) -> None:
    if root.is_file():
        raise LandingFolderError(f"landing folder {root} is a file, not a folder")
    if not root.is_dir():
        raise LandingFolderError(f"landing folder does not exist: {root}")
    try:
        with os.scandir(root):
            pass
    except OSError as exc:
        raise LandingFolderError(f"cannot list the landing folder {root}: {exc.strerror or exc}") from exc


def is_ignored(name: str) -> bool:
    """True for hidden files, editor leftovers and OS clutter (see the module docstring)."""
    return (
        name.startswith(_IGNORED_PREFIXES)
        or name.endswith(_IGNORED_SUFFIXES)
        or name in _IGNORED_NAMES
        or (len(name) > 1 and name.startswith("#") and name.endswith("#"))
    )


def list_landing_files(root: Path, errors: list[OSError] | None = None) -> list[Path]:
    """Every candidate path under ``root`` (files, and symlinks to folders, which are reported
    rather than walked), sorted by relative name. Ignored names are skipped at any depth, and
    their folders are not even walked. Folders that cannot be listed are appended to ``errors``."""
    found: list[Path] = []
    check_landing_folder(root)
    for dirpath, dirnames, filenames in os.walk(root, onerror=None if errors is None else errors.append):
        here = Path(dirpath)  # os.walk never descends into symlinked folders
        dirnames[:] = [d for d in dirnames if not is_ignored(d)]
        found.extend(here / d for d in dirnames if (here / d).is_symlink())
        found.extend(here / f for f in filenames if not is_ignored(f))
    return sorted(found, key=lambda p: p.relative_to(root).as_posix())


def source_file_name(relative: str) -> str:
    """The ``source_file`` of a path relative to the landing folder: the name itself, or for a
    name that is not valid UTF-8 (Linux allows any bytes) the name with ``\\xNN`` escapes."""
    return os.fsencode(relative).decode("utf-8", errors="backslashreplace")


def decode_bytes(data: bytes) -> Decoded:
    """Decode raw bytes by the rules of the module docstring.

    Raises ValueError with a human-readable reason when the bytes are not text.
    """
    for bom, codec in _BOMS:
        if data.startswith(bom):
            try:
                return _decoded(data.decode(codec), codec, "certain")
            except UnicodeDecodeError as exc:
                raise ValueError(f"starts with a {codec} byte-order mark but does not decode: {exc.reason}") from exc
    if b"\x00" in data:
        raise ValueError("binary file: contains NUL bytes (UTF-16/32 text needs a byte-order mark)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    else:
        return _decoded(text, "utf-8", "certain")
    mostly_utf8 = _decode_mostly_utf8(data)
    if mostly_utf8 is not None:
        return mostly_utf8
    legacy = _decode_legacy(data)
    if legacy is None:
        raise ValueError("not text: no character encoding turns these bytes into readable text (binary data?)")
    return legacy


def _decode_mostly_utf8(data: bytes) -> Decoded | None:
    text = data.decode("utf-8", errors="replace")
    # Each maximal invalid sequence became one U+FFFD; ASCII bytes always decode to themselves.
    invalid = text.count("\ufffd") - data.count("\ufffd".encode())
    ascii_bytes = len(data) - len(data.translate(None, delete=bytes(range(128))))
    valid_multibyte = len(text) - ascii_bytes - invalid
    if valid_multibyte < invalid:
        return None
    return _decoded(text, "utf-8", "detected", decode_errors=invalid)


def _decode_legacy(data: bytes) -> Decoded | None:
    matches = charset_normalizer.from_bytes(data)
    best = matches.best()
    if best is None:
        return None
    tied = [m for m in matches if _ties(m, best)]
    candidates = {name for m in tied for name in m.could_be_from_charset}
    ordered = [name for name in PREFERRED_LEGACY if name in candidates] + [m.encoding for m in matches]
    # The detector may judge large files from samples: a candidate can still fail on the whole.
    for encoding in dict.fromkeys(ordered):
        try:
            text = data.decode(encoding)
        except UnicodeDecodeError:
            continue
        confidence = "ambiguous" if len(tied) > 1 else "detected"
        return _decoded(text, encoding, confidence)
    return None


def _ties(match, best) -> bool:
    """As good as the best match: chaos (lower is better) and coherence (higher is better) within
    the tie margins of it, or better."""
    return match.chaos <= best.chaos + _CHAOS_TIE and match.coherence >= best.coherence - _COHERENCE_TIE


def _decoded(text: str, encoding: str, confidence: str, decode_errors: int = 0) -> Decoded:
    """The decoder's output with LF line endings, and its non-whitespace characters counted
    before (a leading BOM is already gone: the BOM codecs drop it as the signature it is)."""
    chars = count_non_whitespace(text)
    return Decoded(_clean(text), encoding, confidence, decode_errors, chars)


def _clean(text: str) -> str:
    """Only line endings: CRLF and CR become LF. Nothing but whitespace changes; most files need
    nothing (a search for one character is fast)."""
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text


# Unicode's White_Space property: what ``\s`` matches in Polars (Rust regex) and so what
# non_whitespace_chars leaves out; the tests check that the two agree on every code point.
WHITE_SPACE = "\t\n\x0b\x0c\r \x85\xa0\u1680" + "".join(map(chr, range(0x2000, 0x200B))) + "\u2028\u2029\u202f\u205f\u3000"


def count_non_whitespace(text: str) -> int:
    """What non_whitespace_chars counts, for one Python string: a count per whitespace character
    the text holds (``in`` is a memchr-fast search, so absent ones cost little; faster than a
    Polars frame of one row)."""
    return len(text) - sum(text.count(char) for char in WHITE_SPACE if char in text)


def read_landing_file(path: Path, root: Path, max_file_bytes: int = DEFAULT_MAX_FILE_BYTES) -> LandedFile:
    """Read and decode one file; every failure becomes a LandedFile with an ``error``."""
    relative = path.relative_to(root).as_posix()
    name = source_file_name(relative)

    def rejected(reason: str, sha: str | None = None, size: int | None = None) -> LandedFile:
        return LandedFile(name, sha, size, None, None, reason)

    if name != relative:
        return rejected("file name is not valid UTF-8 (shown here with \\x escapes); rename the file")
    if path.is_dir() and not path.is_symlink():  # listed only when its contents could not be
        return rejected("a folder that cannot be listed (check its permissions)")
    try:
        real = path.resolve()
    except (OSError, RuntimeError) as exc:  # RuntimeError: a symlink loop (Python < 3.13)
        return rejected(f"cannot resolve the path: {exc}")
    if not real.is_relative_to(root.resolve()):
        return rejected("path leads outside the landing folder (symlink not followed)")
    try:
        data, size = _read_regular_file(real, max_file_bytes)
    except _Refused as exc:
        return rejected(str(exc), size=exc.size)
    except FileNotFoundError:
        gone = "symlink to a missing file" if path.is_symlink() else "vanished before it could be read"
        return rejected(gone)
    except OSError as exc:
        return rejected(f"cannot read: {exc.strerror or exc}")
    sha = hashlib.sha256(data).hexdigest()
    try:
        decoded = decode_bytes(data)
    except ValueError as exc:
        return rejected(str(exc), sha, size)
    return LandedFile(
        name, sha, size, decoded.encoding, decoded.text, None, decoded.confidence, decoded.decode_errors, decoded.decoded_chars
    )


class _Refused(Exception):
    def __init__(self, reason: str, size: int | None = None):
        super().__init__(reason)
        self.size = size


def _read_regular_file(real: Path, max_file_bytes: int) -> tuple[bytes, int]:
    """The bytes of a regular file, checked on the opened descriptor (no race with a swap)."""
    # O_NOFOLLOW: a symlink swapped in after resolve() is refused; O_NONBLOCK: a pipe does not hang.
    fd = os.open(real, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise _Refused("a symlink to a folder (folders are only walked directly)")
        if not stat.S_ISREG(info.st_mode):
            raise _Refused("not a regular file (a pipe, socket or device)")
        if info.st_size > max_file_bytes:
            raise _Refused(_too_large(info.st_size, max_file_bytes), info.st_size)
        with open(fd, "rb", closefd=False) as handle:
            # Sized by the file rather than the limit (no buffer of the limit's size per file),
            # then on to one byte past the limit if the file grew meanwhile.
            data = handle.read(info.st_size + 1)
            if len(data) > info.st_size:
                data += handle.read(max_file_bytes + 1 - len(data))
    finally:
        os.close(fd)
    if len(data) > max_file_bytes:
        raise _Refused(_too_large(len(data), max_file_bytes) + " (it grew while being read)", len(data))
    return data, len(data)


def _too_large(size: int, limit: int) -> str:
    return (f"file too large: {size:,} bytes, the limit is {limit:,} "
            f"({settings.MAX_FILE_BYTES_ENV} or the max_file_bytes setting)")


def read_landing_folder(root: Path, max_file_bytes: int = DEFAULT_MAX_FILE_BYTES) -> list[LandedFile]:
    """Every file of the landing folder, read and decoded, sorted by name (refusals included).
    Raises LandingFolderError when the folder itself is missing or cannot be listed."""
    errors: list[OSError] = []
    files = [read_landing_file(p, root, max_file_bytes) for p in list_landing_files(root, errors)]
    for error in errors:  # a subfolder that could not be listed: say so rather than skip it
        name = source_file_name(Path(error.filename).relative_to(root).as_posix())
        files.append(LandedFile(name, None, None, None, None, f"cannot list this folder: {error.strerror or error}"))
    return sorted(files, key=lambda f: f.source_file)


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
    # Windows and sorts run on a small integer that orders like the name (rank: equal names share one).
    decoded = decoded.with_columns(file=pl.col("source_file").rank("dense").cast(pl.UInt32))
    names = decoded.select("file", "source_file").unique("file")
    # Counted by the decoder, before line endings were normalized; text handed in directly
    # (a LandedFile made without decoding) is counted here.
    counted = [f.decoded_chars for f in files if f.text is not None]
    if None in counted:
        counted = [n if n is not None else count_non_whitespace(f.text) for n, f in zip(counted, (f for f in files if f.text is not None))]
    chars = decoded.select("source_file").with_columns(decoded_chars=pl.Series(counted, dtype=pl.Int64))
    lines = _split_lines(decoded.select("file", "text"))
    del decoded  # the lines hold the text now
    titles = lines.filter("is_title").select("file", title=pl.col("line").str.strip_chars())
    paragraphs = (
        _paragraphs(lines.lazy())
        .with_columns(reason=rejection_reason(pl.col("raw_text"), max_record_chars))
        .collect()
    )
    del lines
    # In file and ordinal order, which is source_file and ordinal order.
    paragraphs = paragraphs.join(names, on="file", how="left", maintain_order="left")
    raw_records = (
        paragraphs.filter(pl.col("reason").is_null())
        .select(
            record_id=record_id(pl.col("source_file"), pl.col("ordinal")),
            source_file="source_file", ordinal="ordinal",
            line_start="line_start", line_end="line_end", raw_text="raw_text",
        )
    )
    rejected = (
        paragraphs.filter(pl.col("reason").is_not_null())
        .select("source_file", "ordinal", "line_start", "line_end", "reason", "raw_text")
    )
    counts = (
        paragraphs.group_by("source_file")
        .agg(
            record_count=pl.col("reason").is_null().sum().cast(pl.UInt32),
            rejected_count=pl.col("reason").is_not_null().sum().cast(pl.UInt32),
        )
    )
    del paragraphs
    meta_columns = ("source_file", "sha256", "size_bytes", "encoding", "encoding_confidence", "decode_errors", "error")
    meta = pl.DataFrame(
        {column: [getattr(f, column) for f in files] for column in meta_columns},
        schema={column: SOURCE_FILES_SCHEMA[column] for column in meta_columns},
    )
    source_files = (
        meta.join(titles.join(names, on="file").drop("file"), on="source_file", how="left")
        .join(counts, on="source_file", how="left")
        .join(chars, on="source_file", how="left")
        .with_columns(pl.col("record_count", "rejected_count").fill_null(0))
        .with_columns(
            status=pl.when(pl.col("error").is_not_null()).then(pl.lit("rejected"))
            .when(pl.col("record_count") + pl.col("rejected_count") == 0).then(pl.lit("empty"))
            .otherwise(pl.lit("ok"))
        )
        .select(list(SOURCE_FILES_SCHEMA))
        .cast(SOURCE_FILES_SCHEMA)
        .sort("source_file")
    )
    return Parsed(source_files, raw_records, rejected)


def _split_lines(decoded: pl.DataFrame) -> pl.DataFrame:
    """One row per line of each ``file``'s ``text``: its number, whether it is blank, the title or
    a separator (blank or title), and the ordinal of the paragraph it belongs to."""
    blank, separator = pl.col("blank"), pl.col("separator")
    return (
        decoded.lazy()
        .select("file", line=pl.col("text").str.split("\n"))
        .explode("line")
        .with_columns(
            line_no=(pl.int_range(pl.len(), dtype=pl.UInt32) + 1).over("file"),
            blank=~pl.col("line").str.contains(r"\S"),  # whitespace only: the same \s as strip_chars
        )
        .with_columns(is_title=~blank & ((~blank).cum_sum().over("file") == 1))
        .with_columns(separator=blank | pl.col("is_title"))
        .with_columns(starts=~separator & separator.shift(1, fill_value=True).over("file"))
        .with_columns(ordinal=pl.col("starts").cast(pl.UInt32).cum_sum().over("file"))
        .collect()
    )


def _paragraphs(lines: pl.LazyFrame) -> pl.LazyFrame:
    """One row per paragraph: ``file``, ``ordinal``, ``line_start``, ``line_end`` and ``raw_text``
    (its lines joined), sorted by file and ordinal. Most paragraphs are one line: only the others
    are grouped."""
    separator = pl.col("separator")
    text_lines = (
        lines.with_columns(one_line=pl.col("starts") & separator.shift(-1, fill_value=True).over("file"))
        .filter(~separator)
    )
    single = text_lines.filter("one_line").select(
        "file", "ordinal", line_start="line_no", line_end="line_no", raw_text="line",
    )
    wrapped = (
        text_lines.filter(~pl.col("one_line"))
        .group_by("file", "ordinal")
        .agg(
            line_start=pl.col("line_no").first(),  # first/last: a group keeps its rows' order
            line_end=pl.col("line_no").last(),
            raw_text=pl.col("line").str.join("\n"),
        )
    )
    return pl.concat([single, wrapped]).sort("file", "ordinal")


def record_id(source_file: pl.Expr, ordinal: pl.Expr) -> pl.Expr:
    """``<source_file>:<ordinal>``: readable, stable and unique (the ordinal follows the last colon)."""
    return pl.concat_str(source_file, pl.lit(":"), ordinal.cast(pl.String))


def non_whitespace_chars(text: pl.Expr) -> pl.Expr:
    # Spaces apart: counting the frequent literal and scanning for the rare rest is faster than \s.
    spaces, other_whitespace = text.str.count_matches(" "), text.str.count_matches(_OTHER_WHITESPACE)
    return (text.str.len_chars() - spaces - other_whitespace).cast(pl.Int64)


def rejection_reason(raw_text: pl.Expr, max_record_chars: int) -> pl.Expr:
    """Why a decoded paragraph is not a plausible record, or null when it is one."""
    return (
        pl.when(raw_text.str.contains(_CONTROL_CHARS))
        .then(pl.lit("control characters in text"))
        .when(raw_text.str.contains("\ufffd", literal=True))
        .then(pl.lit("holds U+FFFD: bytes that did not decode (here or in an earlier conversion)"))
        .when(raw_text.str.len_chars() > max_record_chars)
        .then(pl.lit(f"longer than {max_record_chars} characters"))
        .when(~raw_text.str.contains(r"[\p{L}\p{N}]"))
        .then(pl.lit("no letters or digits"))
        .otherwise(pl.lit(None, dtype=pl.String))
    )


def file_tables(files: list[LandedFile], max_record_chars: int = DEFAULT_MAX_RECORD_CHARS) -> dict[str, pl.DataFrame]:
    """The per-file tables of these files: ``source_files``, ``raw_records``, ``rejected_records``
    and ``records`` (the raw records normalized). With no files, each table empty with its schema."""
    parsed = parse_files(files, max_record_chars)
    return {
        "source_files": parsed.source_files,
        "raw_records": parsed.raw_records,
        "rejected_records": parsed.rejected_records,
        "records": normalize.normalize_records(parsed.raw_records),
    }


def file_tables_version() -> str:
    """A short hash of the per-file tables' schemas: staged tables of another version (written
    by an older release of this code) are parsed again rather than mixed in."""
    schemas = {name: list(frame.schema.items()) for name, frame in file_tables([]).items()}
    return xxhash.xxh3_64_hexdigest(repr(schemas).encode())[:8]
