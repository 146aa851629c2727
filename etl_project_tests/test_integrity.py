"""The publish-time cross-table guard finds every kind of mismatch, and nothing in tables that agree."""

import polars as pl
import pytest

from etl_project.integrity import cross_table_problems


def consistent() -> dict[str, pl.DataFrame]:
    record_ids = ["a.txt:1", "a.txt:2", "b.txt:1"]
    return {
        "source_files": pl.DataFrame({"source_file": ["a.txt", "b.txt"], "record_count": [2, 1]}),
        "raw_records": pl.DataFrame({"source_file": ["a.txt", "a.txt", "b.txt"], "ordinal": [1, 2, 1], "record_id": record_ids}),
        "records": pl.DataFrame({"record_id": record_ids}),
        "paper_occurrences": pl.DataFrame({"record_id": record_ids, "paper_id": ["p1", "p1", "p2"]}),
        "papers": pl.DataFrame({"paper_id": ["p1", "p2"]}),
        "paper_terms": pl.DataFrame({"paper_id": ["p1", "p1"], "term": ["graph", "learn"]}),  # p2: no terms
        "paper_links": pl.DataFrame({"paper_id": ["p2"], "url": ["https://example.org"]}),
        "paper_names": pl.DataFrame({"paper_id": ["p1", "p2", "p1"], "name": ["BERT", "GPT", "T5"]}),
        "paper_topics": pl.DataFrame({"paper_id": ["p1", "p2"], "topic": ["nlp", "other"]}),
    }


def test_tables_that_agree_have_no_problems():
    assert cross_table_problems(consistent()) == []
    assert cross_table_problems(consistent() | {"paper_terms": pl.DataFrame({"paper_id": ["p2"], "term": ["x"]})}) == []
    assert cross_table_problems({name: frame.lazy() for name, frame in consistent().items()}) == []


@pytest.mark.parametrize(
    ("table", "frame", "expected"),
    [
        ("records", {"record_id": ["a.txt:1", "a.txt:2", "b.txt:9"]}, "records does not hold exactly"),
        (
            "paper_occurrences",
            {"record_id": ["a.txt:1", "a.txt:2", "c.txt:1"], "paper_id": ["p1", "p1", "p2"]},
            "paper_occurrences does not hold exactly",
        ),
        # p2 gone from papers: its occurrence, link, name and topic are rows of no paper
        ("papers", {"paper_id": ["p1", "p3"]}, ("paper_occurrences and papers disagree", "paper_links holds papers that papers does not: 'p2'",
                                                "paper_names holds papers that papers does not: 'p2'",
                                                "paper_topics holds papers that papers does not: 'p2'")),
        ("papers", {"paper_id": ["p1", "p2", "p3"]}, "paper_occurrences and papers disagree"),
        # a paper without terms is fine (no text but stopwords), a term of no paper is not
        ("paper_terms", {"paper_id": ["p1", "p9"], "term": ["graph", "graph"]}, "paper_terms holds papers that papers does not: 'p9'"),
        # the per-paper checks validate the papers a run worked out: a row of a paper that is gone,
        # or of none, is found here
        ("paper_links", {"paper_id": ["p2", "p7"], "url": ["https://a.org", "https://b.org"]},
         "paper_links holds papers that papers does not: 'p7'"),
        ("paper_names", {"paper_id": ["p1", None], "name": ["BERT", "GPT"]}, "paper_names holds papers that papers does not: None"),
        ("paper_topics", {"paper_id": ["p3", "p1", "p2"], "topic": ["nlp", "nlp", "other"]},
         "paper_topics holds papers that papers does not: 'p3'"),
    ],
)
def test_each_id_mismatch_is_found(table, frame, expected):
    tables = consistent() | {table: pl.DataFrame(frame)}
    problems = cross_table_problems(tables)
    expected = (expected,) if isinstance(expected, str) else expected
    assert len(problems) == len(expected) and all(p.startswith(e) for p, e in zip(problems, expected, strict=True)), problems


def test_a_file_whose_record_count_is_off_is_named():
    tables = consistent()
    tables["source_files"] = tables["source_files"].with_columns(record_count=pl.Series([2, 5]))
    assert cross_table_problems(tables) == ["raw_records disagree with source_files for 'b.txt'"]


def test_a_null_id_is_no_id_even_where_both_tables_hold_one():
    tables = consistent()
    for table in ("raw_records", "records", "paper_occurrences"):
        tables[table] = tables[table].with_columns(record_id=pl.Series(["a.txt:1", "a.txt:2", None]))
    problems = cross_table_problems(tables)
    assert "records does not hold exactly the raw records' record_ids" in problems, problems
    assert "paper_occurrences does not hold exactly the raw records' record_ids" in problems, problems


@pytest.mark.parametrize(
    ("table", "change", "expected"),
    [
        ("source_files", lambda f: pl.concat([f, f.tail(1)]), "source_files repeats source_file: 'b.txt'"),
        ("raw_records", lambda f: f.with_columns(record_id=pl.Series(["a.txt:1", "a.txt:1", "b.txt:1"])),
         "raw_records repeats record_id: 'a.txt:1'"),
        ("raw_records", lambda f: f.with_columns(ordinal=pl.Series([1, 1, 1])), "raw_records repeats source_file, ordinal: 'a.txt:1'"),
        # as many ids as raw_records, fewer distinct ones
        ("records", lambda f: f.with_columns(record_id=pl.Series(["a.txt:1", "a.txt:1", "a.txt:2"])),
         "records repeats record_id: 'a.txt:1'"),
        # a paper a run changed beside the same paper kept from the previous table
        ("papers", lambda f: pl.concat([f, f.head(1)]), "papers repeats paper_id: 'p1'"),
        # a record in two papers: each paper's occurrences alone look right
        ("paper_occurrences", lambda f: pl.concat([f, f.tail(1).with_columns(paper_id=pl.lit("p1"))]),
         "paper_occurrences repeats record_id: 'b.txt:1'"),
    ],
)
def test_what_must_hold_across_files_is_checked_over_the_whole_tables(table, change, expected):
    """The landing suites validate only new files' rows, the per-paper suites only the papers a
    run worked out: a repeat across them is found here."""
    tables = consistent()
    tables[table] = change(tables[table])
    problems = cross_table_problems(tables)
    assert expected in problems, problems
