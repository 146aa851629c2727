"""Expectation suites, one per table, as plain data (no GX import here).

Each suite is run on a narrow frame built by the function beside it: ids, counts and lengths,
never the long text columns, so validation stays cheap at a million records. Cross-table facts
(accounting, every record mapped to one paper) are computed with Polars joins into such a frame
and then asserted by GX.
"""

from collections.abc import Callable
from dataclasses import dataclass, field

import polars as pl

from etl_project.enrich import links as enrich_links
from etl_project.enrich import names as enrich_names
from etl_project.enrich import topics as enrich_topics
from etl_project.ingest import non_whitespace_chars

ERROR = "ERROR"
WARN = "WARN"
# The frame builders below take tables or scans of them (the checks hand over scans) and return
# the frame a suite validates, eager or lazy: run_suite collects only the columns it reads.
Frame = pl.DataFrame | pl.LazyFrame
SHA256_HEX = r"^[0-9a-f]{64}$"
PAPER_ID_HEX = r"^[0-9a-f]{16}$"


@dataclass(frozen=True)
class Rule:
    """One GX expectation: its class name in ``great_expectations.expectations`` and kwargs."""

    expectation: str
    kwargs: dict = field(default_factory=dict)
    severity: str = ERROR

    def describe(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.kwargs.items())
        return f"{self.expectation}({args})"

    def columns(self) -> list[str]:
        k = self.kwargs
        cols = [k.get("column"), k.get("column_A"), k.get("column_B"), *k.get("column_list", [])]
        return [c for c in cols if c]


@dataclass(frozen=True)
class Suite:
    name: str
    rules: tuple[Rule, ...]

    def columns(self) -> list[str]:
        return list(dict.fromkeys(c for r in self.rules for c in r.columns()))


def _unique_not_null(column: str) -> tuple[Rule, Rule]:
    return (
        Rule("ExpectColumnValuesToNotBeNull", {"column": column}),
        Rule("ExpectColumnValuesToBeUnique", {"column": column}),
    )


# --- source_files ---------------------------------------------------------------------------

SOURCE_FILES = Suite("source_files", (
    *_unique_not_null("source_file"),
    Rule("ExpectColumnValuesToBeInSet", {"column": "status", "value_set": ["ok", "empty", "rejected"]}),
    Rule("ExpectColumnValuesToMatchRegex", {"column": "sha256", "regex": SHA256_HEX}),
    Rule("ExpectColumnValuesToBeBetween", {"column": "size_bytes", "min_value": 0}),
    # A rejected file says why; a file that was read has no error.
    Rule("ExpectColumnPairValuesToBeEqual", {"column_A": "is_rejected", "column_B": "has_error"}),
    # Accounting: every non-whitespace character the decoder returned (U+FEFF and other
    # invisible characters included; counted before any cleaning, see ingest.decode_bytes) is in
    # the file's title, a raw record or a rejected record, exactly once.
    Rule("ExpectColumnPairValuesToBeEqual", {"column_A": "decoded_chars", "column_B": "accounted_chars"}),
    Rule("ExpectColumnPairValuesToBeEqual", {"column_A": "record_count", "column_B": "raw_records_found"}),
))


def source_files_frame(source_files: Frame, raw_records: Frame, rejected: Frame) -> Frame:
    def chars_by_file(frame: pl.DataFrame, name: str) -> pl.LazyFrame:
        return frame.lazy().group_by("source_file").agg(
            non_whitespace_chars(pl.col("raw_text")).sum().alias(name), pl.len().alias(f"{name}_rows")
        )

    return (
        source_files.lazy()
        .join(chars_by_file(raw_records, "record_chars"), on="source_file", how="left")
        .join(chars_by_file(rejected, "rejected_chars"), on="source_file", how="left")
        .select(
            "source_file", "status", "sha256", "size_bytes", "record_count",
            is_rejected=pl.col("status") == "rejected",
            has_error=pl.col("error").is_not_null(),
            decoded_chars=pl.col("decoded_chars").fill_null(0),
            accounted_chars=non_whitespace_chars(pl.col("title").fill_null(""))
            + pl.col("record_chars").fill_null(0)
            + pl.col("rejected_chars").fill_null(0),
            raw_records_found=pl.col("record_chars_rows").fill_null(0).cast(pl.UInt32),
        )
        .collect()
    )


# --- raw_records ----------------------------------------------------------------------------

RAW_RECORDS = Suite("raw_records", (
    *_unique_not_null("record_id"),
    Rule("ExpectCompoundColumnsToBeUnique", {"column_list": ["source_file", "ordinal"]}),
    Rule("ExpectColumnValuesToBeBetween", {"column": "ordinal", "min_value": 1}),
    Rule("ExpectColumnPairValuesAToBeGreaterThanB", {"column_A": "line_end", "column_B": "line_start", "or_equal": True}),
    Rule("ExpectColumnValuesToBeBetween", {"column": "raw_chars", "min_value": 1}),
))


def raw_records_frame(raw_records: Frame) -> Frame:
    return raw_records.select(
        "record_id", "source_file", "ordinal", "line_start", "line_end",
        raw_chars=pl.col("raw_text").str.len_chars(),
    )


# --- records --------------------------------------------------------------------------------

def records_suite(raw_record_count: int) -> Suite:
    return Suite("records", (
        *_unique_not_null("record_id"),
        Rule("ExpectTableRowCountToEqual", {"value": raw_record_count}),
        Rule("ExpectColumnValuesToNotBeNull", {"column": "dedup_key"}),
        Rule("ExpectColumnValuesToBeBetween", {"column": "char_count", "min_value": 1}),
        Rule("ExpectColumnValuesToBeBetween", {"column": "key_chars", "min_value": 1}),
    ))


def records_frame(records: Frame) -> Frame:
    return records.select("record_id", "dedup_key", "char_count", key_chars=pl.col("dedup_key").str.len_chars())


# --- papers ---------------------------------------------------------------------------------

PAPERS = Suite("papers", (
    *_unique_not_null("paper_id"),
    Rule("ExpectColumnValuesToMatchRegex", {"column": "paper_id", "regex": PAPER_ID_HEX}),
    Rule("ExpectColumnValuesToBeUnique", {"column": "dedup_key"}),
    Rule("ExpectColumnValuesToBeBetween", {"column": "occurrence_count", "min_value": 1}),
    Rule("ExpectColumnPairValuesAToBeGreaterThanB",
         {"column_A": "occurrence_count", "column_B": "source_count", "or_equal": True}),
    Rule("ExpectColumnValuesToBeBetween", {"column": "source_count", "min_value": 1}),
    # Sane abstract size, mostly: a few short or long ones are worth a look, not a stop.
    Rule("ExpectColumnValuesToBeBetween",
         {"column": "word_count", "min_value": 30, "max_value": 1000, "mostly": 0.95}, WARN),
    Rule("ExpectColumnValuesToBeBetween",
         {"column": "char_count", "min_value": 200, "max_value": 10_000, "mostly": 0.95}, WARN),
))


def papers_frame(papers: Frame) -> Frame:
    return papers.select("paper_id", "dedup_key", "occurrence_count", "source_count", "word_count", "char_count")


# --- paper_occurrences ----------------------------------------------------------------------

PAPER_OCCURRENCES = Suite("paper_occurrences", (
    # Each record validated is in exactly one paper, which exists. That every raw record has an
    # occurrence, and none two across the whole table, etl_project/integrity.py checks.
    Rule("ExpectColumnValuesToBeBetween", {"column": "papers_per_record", "min_value": 1, "max_value": 1}),
    Rule("ExpectColumnValuesToBeInSet", {"column": "paper_exists", "value_set": [True]}),
    Rule("ExpectColumnValuesToBeInSet", {"column": "match_kind", "value_set": ["canonical", "exact", "near"]}),
    Rule("ExpectColumnValuesToBeBetween", {"column": "similarity", "min_value": 0.0, "max_value": 1.0}),
    # One canonical occurrence per paper.
    Rule("ExpectColumnValuesToBeBetween", {"column": "canonicals_of_paper", "min_value": 1, "max_value": 1}),
))


def paper_occurrences_frame(occurrences: Frame, papers: Frame) -> Frame:
    """One row per record of the occurrences. Its rules hold paper by paper (SuiteCheck.per_paper)."""
    # A record normally has one occurrence: only repeated record_ids are grouped (grouping all
    # of them by their text was most of this suite's time).
    occurrences = occurrences.with_columns(_repeated=pl.col("record_id").is_duplicated())
    once = occurrences.filter(~pl.col("_repeated")).select(
        "record_id", pl.lit(1, pl.UInt32).alias("papers_per_record"), "paper_id", "match_kind", "similarity"
    )
    repeated = occurrences.filter(pl.col("_repeated")).group_by("record_id").agg(
        papers_per_record=pl.col("paper_id").n_unique(),
        paper_id=pl.col("paper_id").first(),
        match_kind=pl.col("match_kind").first(),
        similarity=pl.col("similarity").min(),
    )
    per_record = pl.concat([once, repeated])
    canonicals = occurrences.group_by("paper_id").agg(canonicals_of_paper=(pl.col("match_kind") == "canonical").sum())
    return (
        per_record
        .join(canonicals, on="paper_id", how="left")
        .join(papers.select("paper_id", paper_exists=pl.lit(True)), on="paper_id", how="left")
        .with_columns(
            pl.col("canonicals_of_paper").fill_null(0),
            pl.col("paper_exists").fill_null(False),
        )
    )


# --- source_overlap -------------------------------------------------------------------------

SOURCE_OVERLAP = Suite("source_overlap", (
    Rule("ExpectCompoundColumnsToBeUnique", {"column_list": ["file_a", "file_b"]}),
    Rule("ExpectColumnPairValuesAToBeGreaterThanB", {"column_A": "file_b", "column_B": "file_a"}),
    Rule("ExpectColumnValuesToBeBetween", {"column": "shared_papers", "min_value": 1}),
    Rule("ExpectColumnValuesToBeBetween", {"column": "jaccard", "min_value": 0.0, "max_value": 1.0}),
))


# --- enrichment: papers.abstract_plain, paper_links, paper_names, paper_topics ---------------

PAPERS_PLAIN_TEXT = Suite("papers_plain_text", (
    Rule("ExpectColumnValuesToNotBeNull", {"column": "plain_chars"}),
    Rule("ExpectColumnValuesToBeBetween", {"column": "plain_chars", "min_value": 1}),
    # LaTeX commands or $...$ math left over: the markup rules may need one more case.
    Rule("ExpectColumnValuesToBeInSet", {"column": "markup_left", "value_set": [False], "mostly": 0.99}, WARN),
))


def papers_plain_text_frame(papers: Frame) -> Frame:
    plain = pl.col("abstract_plain")
    return papers.select(
        "paper_id",
        plain_chars=plain.str.len_chars(),
        markup_left=plain.str.contains(r"\\[A-Za-z]+\{|\$[^\s$][^$]*[^\s$]\$"),
    )


def _paper_exists(frame: pl.LazyFrame, papers: pl.DataFrame) -> pl.DataFrame:
    return frame.join(papers.lazy().select("paper_id", paper_exists=pl.lit(True)), on="paper_id", how="left").with_columns(
        pl.col("paper_exists").fill_null(False)
    ).collect()


PAPER_LINKS = Suite("paper_links", (
    Rule("ExpectColumnValuesToNotBeNull", {"column": "paper_id"}),
    Rule("ExpectColumnValuesToBeInSet", {"column": "paper_exists", "value_set": [True]}),
    Rule("ExpectCompoundColumnsToBeUnique", {"column_list": ["paper_id", "url"]}),
    Rule("ExpectCompoundColumnsToBeUnique", {"column_list": ["paper_id", "link_rank"]}),
    Rule("ExpectColumnValuesToMatchRegex", {"column": "url", "regex": r"^(?:https?|ftp)://[^\s/?#@]*\S*$"}),
    Rule("ExpectColumnValuesToBeInSet", {"column": "kind", "value_set": list(enrich_links.KINDS)}),
    # Hosts are lower case and hold a dot; URLs end as a linkifier would end them.
    Rule("ExpectColumnValuesToMatchRegex", {"column": "host", "regex": r"^[^A-Z\s]+\.[^A-Z\s]+$"}),
    Rule("ExpectColumnValuesToBeInSet", {"column": "trimmed", "value_set": [True]}),
    # A repository link on a forge names its owner.
    Rule("ExpectColumnValuesToBeInSet", {"column": "forge_repo_has_owner", "value_set": [True]}),
))


def paper_links_frame(paper_links: Frame, papers: Frame) -> Frame:
    url = pl.col("url")
    forge_repo = pl.col("host").is_in(["github.com", "gitlab.com", "huggingface.co"]) & pl.col("kind").is_in(
        ["code_repository", "model", "dataset", "demo"]
    )
    frame = paper_links.lazy().select(
        "paper_id", "url", "link_rank", "kind", "host",
        trimmed=enrich_links.trim_url(url) == url,
        forge_repo_has_owner=~forge_repo | pl.col("owner").is_not_null() | pl.col("url").str.contains(r"^[a-z]+://[^/]+/?$"),
    )
    return _paper_exists(frame, papers)


PAPER_NAMES = Suite("paper_names", (
    Rule("ExpectColumnValuesToNotBeNull", {"column": "paper_id"}),
    Rule("ExpectColumnValuesToBeInSet", {"column": "paper_exists", "value_set": [True]}),
    Rule("ExpectCompoundColumnsToBeUnique", {"column_list": ["paper_id", "name"]}),
    Rule("ExpectCompoundColumnsToBeUnique", {"column_list": ["paper_id", "name_rank"]}),
    Rule("ExpectColumnValuesToBeInSet", {"column": "pattern", "value_set": list(enrich_names.PATTERNS)}),
    Rule("ExpectColumnValuesToBeBetween", {"column": "name_chars", "min_value": 2, "max_value": 40}),
    # A name is text of its own abstract, never invented.
    Rule("ExpectColumnValuesToBeInSet", {"column": "name_in_abstract", "value_set": [True]}),
))


def paper_names_frame(paper_names: Frame, papers: Frame) -> Frame:
    # Lazy: the abstracts are read for the containment test, not gathered into a joined copy.
    with_abstract = paper_names.lazy().join(papers.lazy().select("paper_id", "abstract"), on="paper_id", how="left")
    frame = with_abstract.select(
        "paper_id", "name", "name_rank", "pattern",
        name_chars=pl.col("name").str.len_chars(),
        name_in_abstract=pl.col("abstract").str.contains(pl.col("name"), literal=True).fill_null(False),
    )
    return _paper_exists(frame, papers)


def paper_topics_suite(topic_ids: list[str]) -> Suite:
    return Suite("paper_topics", (
        # Every paper has at least one topic (papers without one show up with a null topic).
        Rule("ExpectColumnValuesToNotBeNull", {"column": "topic"}),
        Rule("ExpectColumnValuesToBeInSet", {"column": "paper_exists", "value_set": [True]}),
        Rule("ExpectCompoundColumnsToBeUnique", {"column_list": ["paper_id", "topic"]}),
        Rule("ExpectColumnValuesToBeInSet", {"column": "topic", "value_set": topic_ids}),
        # 'other' only for papers with no other topic; a real topic always has evidence.
        Rule("ExpectColumnValuesToBeInSet", {"column": "consistent", "value_set": [True]}),
    ))


def paper_topics_frame(paper_topics: Frame, papers: Frame) -> Frame:
    per_paper = paper_topics.group_by("paper_id").agg(topics_of_paper=pl.len())
    is_other = pl.col("topic") == enrich_topics.OTHER
    return (
        papers.select("paper_id", paper_exists=pl.lit(True))
        .join(paper_topics.select("paper_id", "topic", "match_count", evidence=pl.col("evidence").list.len()),
              on="paper_id", how="full", coalesce=True)
        .join(per_paper, on="paper_id", how="left")
        .with_columns(pl.col("paper_exists").fill_null(False))
        .select(
            "paper_id", "topic", "paper_exists",
            consistent=pl.when(pl.col("topic").is_null()).then(True)
            .when(is_other).then(pl.col("topics_of_paper") == 1)
            .otherwise((pl.col("match_count") >= 1) & (pl.col("evidence") >= 1)),
        )
    )


# --- the pipeline's suite checks ------------------------------------------------------------

@dataclass(frozen=True)
class SuiteCheck:
    """One Dagster check of the pipeline: the table it checks (``asset``), the other tables its
    frame reads (``extra``), and how the suite and the frame validated are made from those tables
    (both called with the tables in ``tables`` order). The suite is made where the check runs;
    the frame may be made in the Great Expectations worker, from the staged tables' files."""

    name: str
    asset: str
    description: str
    frame: Callable[..., Frame]
    suite: Callable[..., Suite]
    extra: tuple[str, ...] = ()
    # Validates the rows of the landing files the current snapshot does not hold (each landing
    # table's delta, see stage.stage_landing_tables), not the whole tables: what holds across
    # files is checked by etl_project/integrity.py when publishing.
    delta: bool = False
    # Its rules hold paper by paper: a row's verdict depends on its own paper's rows and that
    # paper's row in papers alone. So when the rows of the other papers are the previous table's,
    # which met every expectation of this check against the papers they were computed from
    # (stage.passed_path), it validates only the rows of the papers the run worked out
    # (stage.scope_path). What holds across the whole table is checked by
    # etl_project/integrity.py when publishing: ids unique, every row's paper in papers.
    per_paper: bool = False

    @property
    def tables(self) -> tuple[str, ...]:
        return (self.asset, *self.extra)


def _rows(frame: Frame) -> int:
    return frame.lazy().select(pl.len()).collect().item()


# The suites are looked up when a check runs (module globals, not captured values), so a
# replaced suite (tests do that) is the one validated.
SUITE_CHECKS = {check.name: check for check in (
    SuiteCheck(
        "source_files_suite", "source_files",
        "Files unique, statuses valid, rejected files say why, and no character lost: each file's "
        "decoded text is fully accounted for by its title, raw records and rejected records.",
        source_files_frame, lambda *tables: SOURCE_FILES, ("raw_records", "rejected_records"), delta=True,
    ),
    SuiteCheck(
        "raw_records_suite", "raw_records",
        "record_id unique and not null, ordinals unique per file and >= 1, line spans ordered.",
        raw_records_frame, lambda *tables: RAW_RECORDS, delta=True,
    ),
    SuiteCheck(
        "records_suite", "records",
        "One normalized record per raw record, each with a non-empty text and dedup key.",
        lambda records, raw_records: records_frame(records),
        lambda records, raw_records: records_suite(_rows(raw_records)), ("raw_records",), delta=True,
    ),
    SuiteCheck(
        "papers_suite", "papers",
        "paper_id unique, well-formed, one per key; counts consistent; abstract size sane (mostly).",
        papers_frame, lambda *tables: PAPERS, per_paper=True,
    ),
    SuiteCheck(
        "paper_occurrences_suite", "paper_occurrences",
        "Each record in exactly one existing paper; one canonical occurrence per paper.",
        paper_occurrences_frame, lambda *tables: PAPER_OCCURRENCES, ("papers",), per_paper=True,
    ),
    SuiteCheck(
        "source_overlap_suite", "source_overlap",
        "File pairs unique and ordered, shared counts positive, Jaccard within [0, 1].",
        lambda source_overlap: source_overlap, lambda *tables: SOURCE_OVERLAP,
    ),
    SuiteCheck(
        "papers_plain_text_suite", "papers",
        "abstract_plain present and non-empty for every paper; markup left in it is worth a look.",
        papers_plain_text_frame, lambda *tables: PAPERS_PLAIN_TEXT, per_paper=True,
    ),
    SuiteCheck(
        "paper_links_suite", "paper_links",
        "One row per URL per paper of an existing paper; URLs well-formed and trimmed, hosts lower "
        "case, kinds known, forge repositories with an owner.",
        paper_links_frame, lambda *tables: PAPER_LINKS, ("papers",), per_paper=True,
    ),
    SuiteCheck(
        "paper_names_suite", "paper_names",
        "One row per name per paper of an existing paper; each name found verbatim in its abstract, "
        "with a known pattern and a plausible length.",
        paper_names_frame, lambda *tables: PAPER_NAMES, ("papers",), per_paper=True,
    ),
    SuiteCheck(
        "paper_topics_suite", "paper_topics",
        "Every paper has a topic, topics come from the taxonomy, 'other' only alone, and every "
        "taxonomy topic has evidence.",
        paper_topics_frame,
        lambda *tables: paper_topics_suite(enrich_topics.load_taxonomy().topic_ids()), ("papers",), per_paper=True,
    ),
)}
