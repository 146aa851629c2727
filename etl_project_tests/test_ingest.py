import codecs
import os
import random
import re
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from etl_project import ingest, settings
from etl_project.quality import suites
from etl_project_tests.conftest import SEEDS

TEXT = "Title\n\nFirst abstract, café “quoted”.\n\nSecond one\nhard wrapped\nover three lines.\n"


@pytest.mark.parametrize(
    ("data", "encoding"),
    [
        (TEXT.encode("utf-8"), "utf-8"),
        (codecs.BOM_UTF8 + TEXT.encode("utf-8"), "utf-8-sig"),
        (codecs.BOM_UTF16_LE + TEXT.encode("utf-16-le"), "utf-16"),
        (codecs.BOM_UTF16_BE + TEXT.encode("utf-16-be"), "utf-16"),
        (codecs.BOM_UTF32_LE + TEXT.encode("utf-32-le"), "utf-32"),
        (codecs.BOM_UTF32_BE + TEXT.encode("utf-32-be"), "utf-32"),
        (TEXT.replace("\n", "\r\n").encode("utf-8"), "utf-8"),
        (TEXT.replace("\n", "\r").encode("utf-8"), "utf-8"),
        (codecs.BOM_UTF16_LE + TEXT.replace("\n", "\r\n").encode("utf-16-le"), "utf-16"),
    ],
)
def test_decode_unicode_with_and_without_bom(data: bytes, encoding: str):
    assert ingest.decode_bytes(data) == ingest.Decoded(TEXT, encoding, "certain")


@pytest.mark.parametrize("codec, bom", [("utf-8", codecs.BOM_UTF8), ("utf-16-le", codecs.BOM_UTF16_LE), ("utf-8", b"")])
def test_only_a_leading_bom_is_a_signature_any_other_stays_in_raw_text(codec: str, bom: bytes):
    # Two files concatenated: the second one's BOM sits at the start of a line inside the text.
    text = "Title\n\nOne abstract here.\n\n\ufeffSecond title\n\nTwo abstracts here.\n"
    decoded = ingest.decode_bytes(bom + text.encode(codec))
    assert decoded.text == text
    parsed = ingest.parse_files([landed_decoded("cat.txt", decoded)])
    assert parsed.raw_records["raw_text"].to_list() == ["One abstract here.", "\ufeffSecond title", "Two abstracts here."]
    assert parsed.source_files["decoded_chars"].item() == ingest.count_non_whitespace(text)
    accounting = suites.source_files_frame(parsed.source_files, parsed.raw_records, parsed.rejected_records)
    assert accounting["decoded_chars"].to_list() == accounting["accounted_chars"].to_list()


def test_the_accounting_check_catches_a_cleaning_step_that_drops_characters(monkeypatch):
    # The old cleaning dropped every U+FEFF after the decoder: the records lost a character
    # the decoder had returned, and the source_files suite's accounting must say so.
    monkeypatch.setattr(ingest, "_clean", lambda text: text.replace("\ufeff", "").replace("\r\n", "\n"))
    data = b"Title\n\nOne abstract here.\n" + codecs.BOM_UTF8 + b"Second title\n\nTwo.\n"
    parsed = ingest.parse_files([landed_decoded("cat.txt", ingest.decode_bytes(data))])
    accounting = suites.source_files_frame(parsed.source_files, parsed.raw_records, parsed.rejected_records)
    assert accounting["decoded_chars"].item() == accounting["accounted_chars"].item() + 1


def test_whitespace_counted_in_python_and_in_polars_agree_on_every_code_point():
    chars = [chr(c) for c in range(0x30000) if not 0xD800 <= c <= 0xDFFF]
    polars_counts = pl.select(ingest.non_whitespace_chars(pl.lit(pl.Series(chars)))).to_series().to_list()
    assert [c for c, n in zip(chars, polars_counts) if n != ingest.count_non_whitespace(c)] == []


# Realistic lengths: a sentence of an abstract. Short snippets are below.
LEGACY = [
    ("cp1252", "cp1252", "We study “robust” learning—a naïve approach fails on the café dataset’s 3–5% noise."),
    ("cp1252", "cp1252", "Transformers “remember” less than we think: Gödel-style prompts, Schrödinger’s cat — 2–3× faster."),
    ("cp1252", "cp1252", "Nous proposons une méthode générale pour l’apprentissage à partir de données bruitées."),
    ("cp1252", "cp1252", "Proponiamo un metodo più efficiente per l’addestramento: la qualità è migliore del 30%."),
    ("latin-1", "cp1252", "Proponemos un método nuevo para el aprendizaje con datos ruidosos en años de evaluación."),
    ("latin-1", "cp1252", "Wir schlagen ein neues Verfahren für das Lernen aus verrauschten Daten vor, größere Modelle."),
    ("cp1251", "cp1251", "Мы предлагаем новый метод обучения на зашумлённых данных и показываем, что он повышает точность."),
    ("koi8-r", "koi8_r", "Глубокие нейронные сети показывают высокую эффективность, однако их обучение требует данных."),
    ("cp1253", "cp1253", "Προτείνουμε μια νέα μέθοδο μάθησης από δεδομένα με θόρυβο και δείχνουμε ότι βελτιώνει την ακρίβεια."),
    ("gb18030", "gb18030", "我们提出了一种从含噪声数据中学习的新方法，并证明它能提高大型语言模型的准确性。"),
    ("big5", "big5", "深度神經網路表現出很高的效率，但其訓練需要大量的標註資料，這使得成本很高。"),
    ("shift_jis", "cp932", "本研究では、ノイズを含むデータから学習する新しい手法を提案し、大規模言語モデルの精度が向上することを示す。"),
    ("euc-kr", "euc_kr", "우리는 잡음이 있는 데이터로부터 학습하는 새로운 방법을 제안하고 대규모 언어 모델의 정확도를 향상시킴을 보인다."),
]


@pytest.mark.parametrize(("codec", "reported", "sentence"), LEGACY)
@pytest.mark.parametrize("shape", ["sentence", "file"])
def test_decode_legacy_encodings(codec: str, reported: str, sentence: str, shape: str):
    text = sentence if shape == "sentence" else "Paper list\n\n" + "\n\n".join([sentence] * 5) + "\n"
    decoded = ingest.decode_bytes(text.encode(codec))
    assert decoded.text == text
    assert decoded.encoding == reported  # cp932 is Microsoft's Shift_JIS; cp1252 reads Latin-1 text identically
    assert decoded.confidence in ("detected", "ambiguous")


@pytest.mark.parametrize("snippet", ["café “quoted”", "Größere Übung", "Title — “A”", "naïve"])
def test_short_cp1252_snippets_decode_as_cp1252_and_are_flagged_ambiguous(snippet: str):
    # Too short for the detector to tell cp1252 from Cyrillic or DOS code pages: the tie-break
    # picks cp1252, and the file says the reading was a guess.
    decoded = ingest.decode_bytes(snippet.encode("cp1252"))
    assert (decoded.text, decoded.encoding, decoded.confidence) == (snippet, "cp1252", "ambiguous")


def test_ascii_file_with_one_legacy_byte_is_read_as_cp1252():
    text = "Title\n\nAn English abstract with one accented word: café, and nothing else.\n"
    decoded = ingest.decode_bytes(text.encode("cp1252"))
    assert (decoded.text, decoded.encoding, decoded.decode_errors) == (text, "cp1252", 0)


def test_utf8_with_a_stray_byte_is_utf8_with_the_byte_replaced():
    good = "Title “ok”\n\nGood abstract, café “quoted”.\n\nBroken XX byte here.\n\nAnother good one — 3–5%.\n"
    data = good.encode("utf-8").replace(b"XX", b"\xe9")  # a lone cp1252 'é' inside UTF-8
    decoded = ingest.decode_bytes(data)
    assert decoded.encoding == "utf-8"
    assert decoded.decode_errors == 1
    assert decoded.text == good.replace("XX", "\ufffd")
    parsed = ingest.parse_files([landed_decoded("mixed.txt", decoded)])
    assert parsed.raw_records["raw_text"].to_list() == ["Good abstract, café “quoted”.", "Another good one — 3–5%."]
    assert parsed.rejected_records.select("ordinal", "raw_text").rows() == [(2, "Broken \ufffd byte here.")]
    assert "U+FFFD" in parsed.rejected_records["reason"][0]
    row = parsed.source_files.row(0, named=True)
    assert (row["status"], row["decode_errors"], row["record_count"], row["rejected_count"]) == ("ok", 1, 2, 1)


def test_decode_rejects_binary_with_nul_bytes():
    with pytest.raises(ValueError, match="binary file: contains NUL bytes"):
        ingest.decode_bytes(b"PK\x03\x04\x00\x00binary")


def test_decode_rejects_binary_without_nul_bytes():
    rng = random.Random(7)
    data = bytes(rng.randrange(1, 256) for _ in range(4096))
    with pytest.raises(ValueError, match="not text"):
        ingest.decode_bytes(data)


def test_bom_that_does_not_decode_is_refused():
    with pytest.raises(ValueError, match="utf-8-sig byte-order mark but does not decode"):
        ingest.decode_bytes(codecs.BOM_UTF8 + b"ok \xff\xfe\xfd")


def landed(name: str, text: str) -> ingest.LandedFile:
    return ingest.LandedFile(name, "0" * 64, len(text), "utf-8", text, None, "certain")


def landed_decoded(name: str, decoded: ingest.Decoded) -> ingest.LandedFile:
    return ingest.LandedFile(
        name, "0" * 64, 0, decoded.encoding, decoded.text, None, decoded.confidence, decoded.decode_errors, decoded.decoded_chars
    )


def test_split_title_paragraphs_and_lines():
    text = "  My Title  \n\nOne line.\n \t \nWrapped line one\nline two\nline three\n\n\n\nLast.\n"
    parsed = ingest.parse_files([landed("a.txt", text)])
    assert parsed.source_files["title"].to_list() == ["My Title"]
    rows = parsed.raw_records.select("record_id", "ordinal", "line_start", "line_end", "raw_text").rows()
    assert rows == [
        ("a.txt:1", 1, 3, 3, "One line."),
        ("a.txt:2", 2, 5, 7, "Wrapped line one\nline two\nline three"),
        ("a.txt:3", 3, 11, 11, "Last."),
    ]


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_line_endings_give_the_same_records(newline: str):
    expected = ingest.parse_files([landed("a.txt", TEXT)]).raw_records
    data = TEXT.replace("\n", newline).encode()
    records = ingest.parse_files([landed("a.txt", ingest.decode_bytes(data).text)]).raw_records
    assert records.equals(expected)
    assert records["raw_text"].to_list() == ["First abstract, café “quoted”.", "Second one\nhard wrapped\nover three lines."]


def test_lines_of_spaces_tabs_and_nbsp_are_blank():
    text = "Title\n \t \nOne.\n\t\t\nTwo.\n\u00a0\u3000\nThree.\n"
    parsed = ingest.parse_files([landed("a.txt", text)])
    assert parsed.raw_records["raw_text"].to_list() == ["One.", "Two.", "Three."]


@pytest.mark.parametrize("text", ["", "   \n\t\n", "Only a title\n\n  \n", "\n\n  Only a title  "])
def test_empty_and_title_only_files(text: str):
    parsed = ingest.parse_files([landed("e.txt", text), landed("ok.txt", TEXT)])
    files = {r["source_file"]: r for r in parsed.source_files.iter_rows(named=True)}
    assert (files["e.txt"]["status"], files["e.txt"]["record_count"], files["e.txt"]["error"]) == ("empty", 0, None)
    assert files["ok.txt"]["status"] == "ok"
    assert files["ok.txt"]["record_count"] == 2
    assert parsed.raw_records["source_file"].unique().to_list() == ["ok.txt"]


def test_implausible_paragraphs_are_rejected_and_keep_their_ordinal():
    huge = "word " * 5000  # 25,000 characters: not an abstract
    text = f"T\n\nGood one.\n\nBell \x07 inside.\n\n----\n\n{huge}\n\nEscape \x1b[31m red.\n\nGood two.\n"
    parsed = ingest.parse_files([landed("r.txt", text)], max_record_chars=20_000)
    assert parsed.raw_records.select("ordinal", "raw_text").rows() == [(1, "Good one."), (6, "Good two.")]
    assert parsed.rejected_records.select("ordinal", "reason").rows() == [
        (2, "control characters in text"),
        (3, "no letters or digits"),
        (4, "longer than 20000 characters"),
        (5, "control characters in text"),
    ]
    assert parsed.rejected_records.filter(pl.col("ordinal") == 4)["raw_text"].to_list() == [huge]  # exactly as decoded
    row = parsed.source_files.row(0, named=True)
    assert (row["status"], row["record_count"], row["rejected_count"]) == ("ok", 2, 4)


def test_file_whose_every_paragraph_is_rejected_is_ok_not_empty():
    parsed = ingest.parse_files([landed("junk.txt", "Title\n\n----\n\n====\n")])
    row = parsed.source_files.row(0, named=True)
    assert (row["status"], row["record_count"], row["rejected_count"]) == ("ok", 0, 2)


def test_every_character_is_accounted_for():
    text = "T i t l e\n\nGood one.\n\nBell \x07 inside.\n\n  spaced   out  \n\n"
    parsed = ingest.parse_files([landed("r.txt", text)])

    def count(s: str) -> int:
        return sum(not c.isspace() for c in s)

    accounted = count(parsed.source_files["title"][0]) + sum(
        count(t) for t in [*parsed.raw_records["raw_text"], *parsed.rejected_records["raw_text"]]
    )
    assert parsed.source_files["decoded_chars"].to_list() == [count(text)] == [accounted]


# --- the landing folder ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [".DS_Store", ".hidden.txt", ".notes.txt.swp", "notes.txt~", "notes.swo", "copy.tmp", "big.txt.part",
     "dl.crdownload", "~$report.docx", "#notes.txt#", "Thumbs.db", "desktop.ini"],
)
def test_ignored_names(name: str):
    assert ingest.is_ignored(name)


@pytest.mark.parametrize("name", ["papers.txt", "a~b.txt", "#1 list.txt", "list.txt.bak", "~list.txt"])
def test_not_ignored_names(name: str):
    assert not ingest.is_ignored(name)


def read_folder(landing: Path, **kwargs) -> dict[str, ingest.LandedFile]:
    return {f.source_file: f for f in ingest.read_landing_folder(landing, **kwargs)}


def test_read_landing_folder_ignores_rejects_and_keeps_good(tmp_path: Path):
    landing = tmp_path / "landing"
    (landing / "sub").mkdir(parents=True)
    (landing / ".git").mkdir()
    (landing / "good.txt").write_text(TEXT, encoding="utf-8")
    (landing / "sub" / "nested.txt").write_text(TEXT, encoding="utf-8")
    (landing / ".git" / "config").write_text(TEXT)  # inside a hidden folder: never read
    (landing / ".DS_Store").write_bytes(b"\x00\x01")
    (landing / "good.txt~").write_text(TEXT)
    (landing / ".good.txt.swp").write_text(TEXT)
    (landing / "blob.bin").write_bytes(b"\x89PNG\x00\x00\x00")
    outside = tmp_path / "outside.txt"
    outside.write_text(TEXT)
    (landing / "link.txt").symlink_to(outside)
    (landing / "inner-link.txt").symlink_to(landing / "good.txt")  # stays inside: followed
    (landing / "dangling.txt").symlink_to(landing / "missing.txt")
    (landing / "dir-link").symlink_to(landing / "sub", target_is_directory=True)
    (landing / "out-dir-link").symlink_to(tmp_path, target_is_directory=True)
    os.mkfifo(landing / "pipe.txt")

    files = read_folder(landing)
    assert sorted(files) == [
        "blob.bin", "dangling.txt", "dir-link", "good.txt", "inner-link.txt", "link.txt",
        "out-dir-link", "pipe.txt", "sub/nested.txt",
    ]
    errors = {name: f.error for name, f in files.items()}
    assert errors["good.txt"] is None and errors["sub/nested.txt"] is None and errors["inner-link.txt"] is None
    assert "binary" in errors["blob.bin"]
    assert "outside the landing folder" in errors["link.txt"]
    assert "outside the landing folder" in errors["out-dir-link"]
    assert "symlink to a missing file" in errors["dangling.txt"]
    assert "symlink to a folder" in errors["dir-link"]
    assert "not a regular file" in errors["pipe.txt"]

    parsed = ingest.parse_files(list(files.values()))
    status = dict(parsed.source_files.select("source_file", "status").rows())
    assert status == {
        "blob.bin": "rejected", "dangling.txt": "rejected", "dir-link": "rejected", "good.txt": "ok",
        "inner-link.txt": "ok", "link.txt": "rejected", "out-dir-link": "rejected", "pipe.txt": "rejected",
        "sub/nested.txt": "ok",
    }
    assert sorted(parsed.raw_records["source_file"].unique()) == ["good.txt", "inner-link.txt", "sub/nested.txt"]
    assert parsed.raw_records.height == 6


def test_hostile_file_names_are_kept_exactly(tmp_path: Path):
    names = [
        "it's \"quoted\".txt", "a; DROP TABLE papers; --.txt", "with  spaces .txt", "résumé 论文.txt",
        "-rf leading dash.txt", "$(touch pwned).txt", "new\nline.txt", "back\\slash.txt", "colon:1.txt",
    ]
    for name in names:
        (tmp_path / name).write_text(TEXT, encoding="utf-8")
    parsed = ingest.parse_files(list(read_folder(tmp_path).values()))
    assert sorted(parsed.source_files["source_file"]) == sorted(names)
    assert set(parsed.source_files["status"]) == {"ok"}
    by_file = parsed.raw_records.group_by("source_file").len()
    assert dict(by_file.rows()) == {name: 2 for name in names}
    assert parsed.raw_records.filter(pl.col("source_file") == "colon:1.txt")["record_id"].to_list() == [
        "colon:1.txt:1", "colon:1.txt:2",
    ]
    assert not (tmp_path / "pwned").exists()


def test_file_name_that_is_not_utf8_is_rejected_under_an_escaped_name(tmp_path: Path):
    raw_name = os.fsencode(tmp_path) + b"/r\xe9sum\xe9.txt"  # a Latin-1 name, as old zip files make
    with open(raw_name, "wb") as handle:
        handle.write(TEXT.encode())
    (tmp_path / "good.txt").write_text(TEXT)
    files = read_folder(tmp_path)
    assert sorted(files) == ["good.txt", "r\\xe9sum\\xe9.txt"]
    [odd] = [p for p in ingest.list_landing_files(tmp_path) if p.name != "good.txt"]
    assert ingest.source_file_name(odd.relative_to(tmp_path).as_posix()) == "r\\xe9sum\\xe9.txt"
    assert "not valid UTF-8" in files["r\\xe9sum\\xe9.txt"].error
    parsed = ingest.parse_files(list(files.values()))  # the name is storable: no crash in Polars
    assert parsed.source_files["status"].to_list() == ["ok", "rejected"]


def test_oversized_file_is_rejected_without_reading_it(tmp_path: Path):
    (tmp_path / "big.txt").write_text(TEXT * 10)
    (tmp_path / "small.txt").write_text(TEXT)
    files = read_folder(tmp_path, max_file_bytes=200)
    big = files["big.txt"]
    assert (big.text, big.sha256, big.size_bytes) == (None, None, len(TEXT.encode()) * 10)
    assert big.error.startswith(f"file too large: {big.size_bytes:,} bytes, the limit is 200 (ETL_MAX_FILE_BYTES")
    assert files["small.txt"].error is None


def test_max_file_bytes_from_the_environment(monkeypatch):
    monkeypatch.setenv(settings.MAX_FILE_BYTES_ENV, "1000")
    assert settings.max_file_bytes() == 1000
    monkeypatch.setenv(settings.MAX_FILE_BYTES_ENV, "")
    assert settings.max_file_bytes() == settings.DEFAULT_MAX_FILE_BYTES
    monkeypatch.setenv(settings.MAX_FILE_BYTES_ENV, "10MB")
    with pytest.raises(ValueError, match="whole number of bytes"):
        settings.max_file_bytes()


def test_file_that_vanishes_between_listing_and_reading(tmp_path: Path):
    (tmp_path / "gone.txt").write_text(TEXT)
    [path] = ingest.list_landing_files(tmp_path)
    path.unlink()
    gone = ingest.read_landing_file(path, tmp_path)
    assert (gone.text, gone.error) == (None, "vanished before it could be read")


def test_unreadable_file_is_rejected_with_the_os_reason(tmp_path: Path, monkeypatch):
    # Tests run as root here, so chmod 000 would not stop the read: the refusal is simulated.
    (tmp_path / "locked.txt").write_text(TEXT)
    (tmp_path / "open.txt").write_text(TEXT)
    real_open = os.open

    def deny(path, flags, *args, **kwargs):
        if os.fspath(path).endswith("locked.txt"):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(ingest.os, "open", deny)
    files = read_folder(tmp_path)
    assert files["locked.txt"].error == "cannot read: Permission denied"
    assert files["open.txt"].error is None


def test_folder_that_cannot_be_listed_is_reported(tmp_path: Path, monkeypatch):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.txt").write_text(TEXT)
    (tmp_path / "b.txt").write_text(TEXT)
    real_scandir = os.scandir

    def deny(path="."):
        if os.fspath(path).endswith("sub"):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", deny)
    files = read_folder(tmp_path)
    assert sorted(files) == ["b.txt", "sub"]
    assert files["sub"].error == "cannot list this folder: Permission denied"


def test_bundled_seeds():
    parsed = ingest.parse_files(ingest.read_landing_folder(SEEDS))
    assert parsed.source_files.select("title", "record_count", "encoding", "encoding_confidence").rows() == [
        ("ICML 2025 Papers", 19, "utf-8", "certain"),
        ("ICML 2025 论文列表", 19, "utf-8", "certain"),
    ]
    assert parsed.rejected_records.height == 0
    assert parsed.raw_records.filter(pl.col("raw_text").str.contains("\n")).height == 0


# --- splitting against a plain reference ----------------------------------------------------

# Unicode's White_Space (PropList.txt): what regex \s and strip_chars treat as whitespace. Python's
# str.isspace differs (it counts U+001C..U+001F), so the reference spells it out.
WHITE_SPACE = "\t\n\x0b\x0c\r \x85\xa0\u1680" + "".join(map(chr, range(0x2000, 0x200B))) + "\u2028\u2029\u202f\u205f\u3000"


def test_blank_lines_use_unicode_white_space():
    every = pl.DataFrame({"c": [chr(code) for code in range(0x110000) if not 0xD800 <= code <= 0xDFFF]})
    blank = every.filter(pl.col("c").str.strip_chars() == "")["c"].to_list()
    assert "".join(blank) == WHITE_SPACE
    assert every.filter(~pl.col("c").str.contains(r"\S"))["c"].to_list() == blank


def reference_parse(texts: dict[str, str], max_record_chars: int) -> tuple[list, list, list]:
    """The splitting rules of the module docstring, line by line in plain Python."""
    files, records, rejected = [], [], []
    for name in sorted(texts):
        text = texts[name]
        title, paragraphs = None, []
        current = None
        for number, line in enumerate(text.split("\n"), start=1):
            if not line.strip(WHITE_SPACE):
                current = None
            elif title is None:
                title = line.strip(WHITE_SPACE)
            elif current is None:
                current = [number, number, [line]]
                paragraphs.append(current)
            else:
                current[1] = number
                current[2].append(line)
        kept = 0
        for ordinal, (start, end, lines) in enumerate(paragraphs, start=1):
            raw = "\n".join(lines)
            if re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f]", raw):
                reason = "control characters in text"
            elif "\ufffd" in raw:
                reason = "holds U+FFFD: bytes that did not decode (here or in an earlier conversion)"
            elif len(raw) > max_record_chars:
                reason = f"longer than {max_record_chars} characters"
            elif not any(c.isalnum() for c in raw):
                reason = "no letters or digits"
            else:
                reason = None
            if reason is None:
                kept += 1
                records.append((f"{name}:{ordinal}", name, ordinal, start, end, raw))
            else:
                rejected.append((name, ordinal, start, end, reason, raw))
        non_whitespace = sum(c not in WHITE_SPACE for c in text)
        status = "ok" if paragraphs else "empty"
        files.append((name, title, kept, len(paragraphs) - kept, status, non_whitespace))
    return files, records, rejected


# Line breaks, every kind of blank, letters and digits (ASCII and not), controls (one of them,
# U+0085, also whitespace), U+FFFD and punctuation: the characters the rules tell apart.
LINE_ALPHABET = list("\n\n\n\n    \t\x0b\x0c\r\xa0\u3000\u2028\x85\x1c\x07\ufffd" "aZ7é中٣-.")


@hypothesis_settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(st.text(alphabet="ab:é ", min_size=1, max_size=4), st.text(alphabet=st.sampled_from(LINE_ALPHABET), max_size=60), max_size=6),
    st.integers(min_value=1, max_value=12),
)
def test_parse_files_matches_the_reference(texts: dict[str, str], max_record_chars: int):
    parsed = ingest.parse_files([landed(name, text) for name, text in texts.items()], max_record_chars)
    files, records, rejected = reference_parse(texts, max_record_chars)
    columns = ("source_file", "title", "record_count", "rejected_count", "status", "decoded_chars")
    assert parsed.source_files.select(columns).rows() == files
    assert parsed.raw_records.rows() == records
    assert parsed.rejected_records.rows() == rejected


@hypothesis_settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("\r\n\ufeffa é中")) | st.characters(codec="utf-8", exclude_characters="\x00")))
def test_utf8_text_loses_only_a_leading_bom_and_carriage_returns(text: str):
    expected = text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    decoded = ingest.decode_bytes(text.encode("utf-8"))
    assert decoded.text == expected
    assert decoded.decoded_chars == ingest.count_non_whitespace(expected)


def test_file_that_grows_while_read_is_read_to_the_limit(tmp_path: Path, monkeypatch):
    (tmp_path / "growing.txt").write_text(TEXT)
    real_fstat = os.fstat

    def smaller(fd):  # the size seen before reading: the file then grows by the rest of TEXT
        info = real_fstat(fd)
        return os.stat_result((info.st_mode, *info[1:6], 5, *info[7:10]))

    monkeypatch.setattr(ingest.os, "fstat", smaller)
    assert ingest.read_landing_file(tmp_path / "growing.txt", tmp_path).text == TEXT
    size = len(TEXT.encode())
    grown = ingest.read_landing_file(tmp_path / "growing.txt", tmp_path, max_file_bytes=size - 1)
    assert (grown.text, grown.size_bytes) == (None, size)
    assert grown.error.endswith("(it grew while being read)")
