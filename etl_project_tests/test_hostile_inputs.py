"""A landing folder holding every kind of hostile input, run once through the whole graph.

Each test below owns one class of input (the files it adds are listed next to it in ``FILES``)
and asserts both halves of "nothing lost": every good record is published with its exact text,
and every bad file or paragraph is recorded with a reason. All blocking checks, the accounting
invariant among them, must pass with all of it in the folder at once.
"""

import codecs
import os
import random
from pathlib import Path

import duckdb
import dagster as dg
import polars as pl
import pytest

from etl_project import ingest
from etl_project_tests.conftest import materialize_all


def abstracts(tag: str, n: int = 2) -> list[str]:
    """``n`` distinct, plausible abstracts for the file ``tag``."""
    return [f"Abstract {i} of {tag}: we study how models learn from noisy data and report results." for i in range(1, n + 1)]


def paper_list(title: str, records: list[str], newline: str = "\n") -> str:
    return newline.join([title, "", *(f"{r}{newline}" for r in records)])


FR = ["Nous proposons une méthode générale pour l’apprentissage à partir de données bruitées.",
      "Les réseaux de neurones profonds sont très efficaces, mais leur entraînement coûte “cher” — 3–5×."]
DE = ["Wir schlagen ein neues Verfahren für das Lernen aus verrauschten Daten vor, größere Modelle.",
      "Große Sprachmodelle können Halluzinationen erzeugen; wir schlagen eine Prüfung für Übersetzungen vor."]
RU = ["Мы предлагаем новый метод обучения на зашумлённых данных и показываем, что он повышает точность.",
      "Глубокие нейронные сети показывают высокую эффективность, однако их обучение требует данных."]
ZH = ["我们提出了一种从含噪声数据中学习的新方法，并证明它能提高大型语言模型的准确性。",
      "深度神经网络表现出很高的效率，但其训练需要大量的标注数据，这使得成本很高。我们提出一种半监督方法。"]
UNI = ["Unicode “quotes”, café, naïve, 论文 and emoji-free text survive every UTF.", "A second record — with a dash."]

# source_file -> (bytes, expected good records in order, expected encoding or None)
ENCODINGS = {
    "enc/utf8.txt": (paper_list("UTF-8", UNI).encode("utf-8"), UNI, "utf-8"),
    "enc/utf8-bom.txt": (codecs.BOM_UTF8 + paper_list("UTF-8 BOM", abstracts("bom")).encode(), abstracts("bom"), "utf-8-sig"),
    "enc/utf16le.txt": (codecs.BOM_UTF16_LE + paper_list("UTF-16 LE", abstracts("16le") + UNI[:1]).encode("utf-16-le"),
                        abstracts("16le") + UNI[:1], "utf-16"),
    "enc/utf16be.txt": (codecs.BOM_UTF16_BE + paper_list("UTF-16 BE", abstracts("16be")).encode("utf-16-be"), abstracts("16be"), "utf-16"),
    "enc/utf32.txt": (codecs.BOM_UTF32_LE + paper_list("UTF-32", abstracts("32")).encode("utf-32-le"), abstracts("32"), "utf-32"),
    "enc/cp1252.txt": (paper_list("Résumés “choisis”", FR).encode("cp1252"), FR, "cp1252"),
    "enc/latin1.txt": (paper_list("Zusammenfassungen", DE).encode("latin-1"), DE, "cp1252"),
    "enc/cp1251.txt": (paper_list("Список статей", RU).encode("cp1251"), RU, "cp1251"),
    "enc/gb18030.txt": (paper_list("论文列表", ZH).encode("gb18030"), ZH, "gb18030"),
}
STRAY_BYTE = paper_list("Mostly UTF-8", ["Good one, café “ok”.", "Broken XX here.", "Good two — fine."]).encode().replace(b"XX", b"\xe9")
LINES = {
    "lines/crlf.txt": (paper_list("CRLF", abstracts("crlf"), "\r\n").encode(), abstracts("crlf")),
    "lines/cr.txt": (paper_list("CR", abstracts("cr"), "\r").encode(), abstracts("cr")),
    "lines/blank-lines.txt": (b"Spaces\n \t \n" + abstracts("sp")[0].encode() + b"\n\t\t\n\xc2\xa0\n" + abstracts("sp")[1].encode() + b"\n",
                              abstracts("sp")),
    "lines/wrapped.txt": (b"Wrapped\n\nA hard-wrapped abstract\r\nover three\r\nlines of text.\r\n\r\nAnd one more line.\n",
                          ["A hard-wrapped abstract\nover three\nlines of text.", "And one more line."]),
    "lines/concatenated-boms.txt": (codecs.BOM_UTF8 + b"First\n\n" + abstracts("cat")[0].encode() + b"\n\n" + codecs.BOM_UTF8 + abstracts("cat")[1].encode() + b"\n",
                                    # the second BOM is text, not a signature: kept as decoded
                                    [abstracts("cat")[0], "\ufeff" + abstracts("cat")[1]]),
}
EMPTY = {"empty/zero.txt": b"", "empty/blank.txt": b"  \n\t\n\r\n   ", "empty/title-only.txt": b"Just a title\r\n\r\n  \r\n"}
HUGE = "word " * 6000
IMPLAUSIBLE_TEXT = paper_list("Mixed quality", [abstracts("mix")[0], HUGE.strip(), "Bell \x07 and escape \x1b[0m inside.", "-----", abstracts("mix")[1]])
HOSTILE_NAMES = [
    "names/it's \"quoted\".txt", "names/a; DROP TABLE papers; --.txt", "names/ spaces  around .txt",
    "names/résumé 论文 ü.txt", "names/-rf --leading-dash.txt", "names/$(touch pwned) `id`.txt", "names/new\nline.txt",
]

FILES = {
    **{name: data for name, (data, _, _) in ENCODINGS.items()},
    "enc/stray-byte.txt": STRAY_BYTE,
    **{name: data for name, (data, _) in LINES.items()},
    **EMPTY,
    "junk/binary.pdf": b"%PDF-1.4\n\x00\x01\x02binary\x00",
    "junk/noise.dat": random.Random(3).randbytes(4096).replace(b"\x00", b"\x01"),
    "records/mixed.txt": IMPLAUSIBLE_TEXT.encode(),
    **{name: paper_list(f"Title of {name!r}", abstracts(name)).encode() for name in HOSTILE_NAMES},
    ".DS_Store": b"\x00\x00\x00\x01Bud1", "names/notes.txt~": b"backup", "names/.notes.txt.swp": b"swap", ".git/HEAD": b"ref",
}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    landing = root / "landing"
    for name, data in FILES.items():
        path = landing / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    with open(landing / "junk" / "too-large.txt", "wb") as handle:  # sparse: no disk, no read
        handle.truncate(ingest.DEFAULT_MAX_FILE_BYTES + 1)
    (root / "outside.txt").write_bytes(paper_list("Outside", abstracts("outside")).encode())
    (landing / "links").mkdir()
    (landing / "links" / "escape.txt").symlink_to(root / "outside.txt")
    (landing / "links" / "to-etc").symlink_to("/etc", target_is_directory=True)
    with open(os.fsencode(landing / "names") + b"/latin1-\xe9.txt", "wb") as handle:
        handle.write(paper_list("Bad name", abstracts("badname")).encode())

    result = materialize_all(landing, root / "warehouse")
    assert result.success
    checks = result.get_asset_check_evaluations()
    # Every blocking (ERROR) check passes, the character accounting among them; the short test
    # abstracts fail the WARN size expectations, which is what WARN is for.
    failed = [c for c in checks if not c.passed and c.severity == dg.AssetCheckSeverity.ERROR]
    assert checks and not failed, [(c.check_name, c.metadata) for c in failed]
    parquet = root / "warehouse" / "parquet"
    tables = {name: pl.read_parquet(parquet / f"{name}.parquet") for name in ("source_files", "raw_records", "rejected_records", "records")}
    return root, tables


def file_row(tables, name: str) -> dict:
    [row] = tables["source_files"].filter(pl.col("source_file") == name).rows(named=True)
    return row


def records_of(tables, name: str) -> list[str]:
    return tables["raw_records"].filter(pl.col("source_file") == name).sort("ordinal")["raw_text"].to_list()


def rejected_of(tables, name: str) -> list[tuple[int, str]]:
    return tables["rejected_records"].filter(pl.col("source_file") == name).sort("ordinal").select("ordinal", "reason").rows()


def test_encodings_decode_to_the_exact_text_and_are_recorded(run):
    _, tables = run
    for name, (_, expected, encoding) in ENCODINGS.items():
        row = file_row(tables, name)
        assert (row["status"], row["encoding"], row["record_count"]) == ("ok", encoding, len(expected)), name
        assert records_of(tables, name) == expected, name
        assert "\ufeff" not in (row["title"] or "")
    assert file_row(tables, "enc/cp1252.txt")["title"] == "Résumés “choisis”"
    assert file_row(tables, "enc/utf8.txt")["encoding_confidence"] == "certain"


def test_stray_invalid_byte_rejects_only_its_record(run):
    _, tables = run
    row = file_row(tables, "enc/stray-byte.txt")
    assert (row["status"], row["encoding"], row["decode_errors"], row["record_count"]) == ("ok", "utf-8", 1, 2)
    assert records_of(tables, "enc/stray-byte.txt") == ["Good one, café “ok”.", "Good two — fine."]
    [(ordinal, reason)] = rejected_of(tables, "enc/stray-byte.txt")
    assert ordinal == 2 and "U+FFFD" in reason


def test_line_endings_blank_lines_wrapping_and_boms(run):
    _, tables = run
    for name, (_, expected) in LINES.items():
        assert file_row(tables, name)["status"] == "ok", name
        assert records_of(tables, name) == expected, name
    assert file_row(tables, "lines/concatenated-boms.txt")["title"] == "First"
    assert not tables["raw_records"]["raw_text"].str.contains("\r").any()
    # Only a leading BOM is dropped (an encoding signature); normalization removes the others.
    with_bom = tables["raw_records"].filter(pl.col("raw_text").str.contains("\ufeff"))
    assert with_bom["source_file"].to_list() == ["lines/concatenated-boms.txt"]
    assert not tables["records"]["text"].str.contains("\ufeff").any()


def test_empty_whitespace_and_title_only_files(run):
    _, tables = run
    for name in EMPTY:
        row = file_row(tables, name)
        assert (row["status"], row["record_count"], row["error"]) == ("empty", 0, None), name
        assert records_of(tables, name) == [] and rejected_of(tables, name) == []
    assert file_row(tables, "empty/title-only.txt")["title"] == "Just a title"


def test_binary_noise_and_too_large_files_are_refused_with_a_reason(run):
    _, tables = run
    assert "binary file: contains NUL bytes" in file_row(tables, "junk/binary.pdf")["error"]
    assert "not text" in file_row(tables, "junk/noise.dat")["error"]
    too_large = file_row(tables, "junk/too-large.txt")
    assert too_large["error"].startswith(f"file too large: {ingest.DEFAULT_MAX_FILE_BYTES + 1:,} bytes")
    for name in ("junk/binary.pdf", "junk/noise.dat", "junk/too-large.txt"):
        assert file_row(tables, name)["status"] == "rejected"
        assert records_of(tables, name) == [] and rejected_of(tables, name) == []


def test_implausible_records_are_rejected_with_reasons_and_the_rest_kept(run):
    _, tables = run
    assert records_of(tables, "records/mixed.txt") == abstracts("mix")
    assert rejected_of(tables, "records/mixed.txt") == [
        (2, "longer than 20000 characters"), (3, "control characters in text"), (4, "no letters or digits"),
    ]
    row = file_row(tables, "records/mixed.txt")
    assert (row["record_count"], row["rejected_count"]) == (2, 3)


def test_accounting_every_character_is_in_a_title_a_record_or_a_rejected_record(run):
    _, tables = run

    def non_ws(text: str) -> int:
        return sum(not c.isspace() for c in text)

    decoded = {"records/mixed.txt": IMPLAUSIBLE_TEXT, "enc/cp1252.txt": paper_list("Résumés “choisis”", FR)}
    for name, text in decoded.items():
        row = file_row(tables, name)
        parts = [row["title"], *records_of(tables, name),
                 *tables["rejected_records"].filter(pl.col("source_file") == name)["raw_text"]]
        assert sum(non_ws(p) for p in parts) == non_ws(text) == row["decoded_chars"], name


def test_hostile_names_are_kept_exactly_and_queried_with_parameters(run):
    root, tables = run
    for name in HOSTILE_NAMES:
        assert file_row(tables, name)["status"] == "ok", name
        assert records_of(tables, name) == abstracts(name)
    with duckdb.connect(str(root / "warehouse" / "warehouse.duckdb"), read_only=True) as con:
        for name in HOSTILE_NAMES:
            count = con.execute("SELECT count(*) FROM raw_records WHERE source_file = ?", [name]).fetchone()
            assert count == (2,), name
        assert con.sql("SELECT count(*) FROM papers").fetchone()[0] > 0  # the table survived "DROP TABLE papers"
    assert not (Path.cwd() / "pwned").exists() and not (root / "landing" / "names" / "pwned").exists()


def test_non_utf8_name_links_out_of_the_folder_and_ignored_files(run):
    _, tables = run
    names = set(tables["source_files"]["source_file"])
    assert "outside" in file_row(tables, "links/escape.txt")["error"]
    assert "outside" in file_row(tables, "links/to-etc")["error"]
    assert "not valid UTF-8" in file_row(tables, "names/latin1-\\xe9.txt")["error"]
    for ignored in (".DS_Store", "names/notes.txt~", "names/.notes.txt.swp", ".git/HEAD"):
        assert ignored not in names
    assert not tables["raw_records"]["raw_text"].str.contains("outside").any()


def test_every_good_record_is_published_and_normalized(run):
    _, tables = run
    expected = (
        sum(len(e) for _, e, _ in ENCODINGS.values()) + 2  # + the stray-byte file's two good records
        + sum(len(e) for _, e in LINES.values()) + 2 + 2 * len(HOSTILE_NAMES)
    )
    assert tables["raw_records"].height == expected
    assert tables["records"].height == expected
    assert tables["rejected_records"].height == 4
