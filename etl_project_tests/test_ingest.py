import codecs
from pathlib import Path

import polars as pl
import pytest

from etl_project import ingest
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
        (TEXT.replace("\n", "\r\n").encode("utf-8"), "utf-8"),
        (TEXT.replace("\n", "\r").encode("utf-8"), "utf-8"),
    ],
)
def test_decode_bytes(data: bytes, encoding: str):
    assert ingest.decode_bytes(data) == (TEXT, encoding)


def test_decode_legacy_single_byte():
    text = "Title\n\n" + "Un résumé « naïf » de l’été, très “curly” — déjà vu à Zürich. " * 5
    decoded, encoding = ingest.decode_bytes(text.encode("cp1252"))
    assert decoded == text
    assert encoding == "cp1252"


def test_decode_rejects_binary():
    with pytest.raises(ValueError, match="binary"):
        ingest.decode_bytes(b"PK\x03\x04\x00\x00binary")


def landed(name: str, text: str) -> ingest.LandedFile:
    return ingest.LandedFile(name, "0" * 64, len(text), "utf-8", text, None)


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


def test_crlf_gives_the_same_records_as_lf():
    lf = ingest.parse_files([landed("a.txt", ingest.decode_bytes(TEXT.encode())[0])]).raw_records
    crlf = ingest.parse_files([landed("a.txt", ingest.decode_bytes(TEXT.replace("\n", "\r\n").encode())[0])]).raw_records
    assert lf.equals(crlf)
    assert lf.height == 2


@pytest.mark.parametrize("text", ["", "   \n\t\n", "Only a title\n\n  \n"])
def test_empty_and_title_only_files(text: str):
    parsed = ingest.parse_files([landed("e.txt", text), landed("ok.txt", TEXT)])
    files = {r["source_file"]: r for r in parsed.source_files.iter_rows(named=True)}
    assert files["e.txt"]["status"] == "empty"
    assert files["e.txt"]["record_count"] == 0
    assert files["ok.txt"]["status"] == "ok"
    assert files["ok.txt"]["record_count"] == 2


def test_implausible_paragraph_is_rejected_and_keeps_its_ordinal():
    text = "T\n\nGood one.\n\nBell \x07 inside.\n\n----\n\nGood two.\n"
    parsed = ingest.parse_files([landed("r.txt", text)])
    assert parsed.raw_records.select("ordinal", "raw_text").rows() == [(1, "Good one."), (4, "Good two.")]
    assert parsed.rejected_records.select("ordinal", "reason").rows() == [
        (2, "control characters in text"),
        (3, "no letters or digits"),
    ]
    assert parsed.source_files["rejected_count"].to_list() == [2]


def test_every_character_is_accounted_for():
    text = "T i t l e\n\nGood one.\n\nBell \x07 inside.\n\n  spaced   out  \n\n"
    parsed = ingest.parse_files([landed("r.txt", text)])

    def count(s: str) -> int:
        return sum(not c.isspace() for c in s)

    accounted = count(parsed.source_files["title"][0]) + sum(
        count(t) for t in [*parsed.raw_records["raw_text"], *parsed.rejected_records["raw_text"]]
    )
    assert parsed.source_files["decoded_chars"].to_list() == [count(text)] == [accounted]


def test_read_landing_folder_ignores_rejects_and_keeps_good(tmp_path: Path):
    landing = tmp_path / "landing"
    landing.mkdir()
    (landing / "good.txt").write_text(TEXT, encoding="utf-8")
    (landing / ".DS_Store").write_bytes(b"\x00\x01")
    (landing / "good.txt~").write_text(TEXT)
    (landing / ".good.txt.swp").write_text(TEXT)
    (landing / "blob.bin").write_bytes(b"\x89PNG\x00\x00\x00")
    outside = tmp_path / "outside.txt"
    outside.write_text(TEXT)
    (landing / "link.txt").symlink_to(outside)
    files = {f.source_file: f for f in ingest.read_landing_folder(landing)}
    assert sorted(files) == ["blob.bin", "good.txt", "link.txt"]
    assert "outside" in files["link.txt"].error
    assert "binary" in files["blob.bin"].error
    parsed = ingest.parse_files(list(files.values()))
    status = dict(parsed.source_files.select("source_file", "status").rows())
    assert status == {"blob.bin": "rejected", "good.txt": "ok", "link.txt": "rejected"}
    assert parsed.raw_records["source_file"].unique().to_list() == ["good.txt"]


def test_oversized_file_is_rejected(tmp_path: Path):
    (tmp_path / "big.txt").write_text(TEXT * 10)
    [big] = ingest.read_landing_folder(tmp_path, max_file_bytes=100)
    assert big.text is None
    assert "too large" in big.error


def test_bundled_seeds():
    parsed = ingest.parse_files(ingest.read_landing_folder(SEEDS))
    assert parsed.source_files.select("title", "record_count").rows() == [
        ("ICML 2025 Papers", 19),
        ("ICML 2025 论文列表", 19),
    ]
    assert parsed.rejected_records.height == 0
    assert parsed.raw_records.filter(pl.col("raw_text").str.contains("\n")).height == 0
