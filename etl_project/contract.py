"""The table contract: what each published table holds, one row of it, and every column, in one
place. The UI's column schemas (etl_project/defs/metadata.py), the assets' descriptions, the
DuckDB table and column comments (``comment_statements``) and the README's "Tables" section
(``readme_tables_markdown``) are all made from it, so they cannot drift apart.

Regenerate the README section after an edit here::

    python -m etl_project.contract --write-readme

(``python -m etl_project.contract`` alone prints the section.)
"""

import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from etl_project.lake import literal, quote


@dataclass(frozen=True)
class Table:
    name: str
    grain: str  # what one row is: "one row per ..."
    description: str  # one line: what the table is for
    columns: dict[str, str]  # column -> its description, in the table's column order

    @property
    def summary(self) -> str:
        """Grain and description in one sentence pair, for asset and table comments."""
        return f"{self.grain[0].upper()}{self.grain[1:]}. {self.description}"


TABLES: dict[str, Table] = {t.name: t for t in (
    Table(
        "source_files", "one row per file seen in the landing folder",
        "What was read from each file, how it decoded, and whether it was used.",
        {
            "source_file": "File name relative to the landing folder (the key of the file's rows in every table).",
            "sha256": "SHA-256 of the file's bytes; null when the file could not be read.",
            "size_bytes": "Size of the file in bytes.",
            "encoding": "Encoding the bytes were decoded with (utf-8, utf-16, cp1252, gb18030, ...).",
            "encoding_confidence": "'certain' (a byte-order mark or valid UTF-8), 'detected' (one reading won) "
            "or 'ambiguous' (a close call between legacy encodings: check the file).",
            "decode_errors": "Invalid UTF-8 sequences replaced by U+FFFD; paragraphs holding one are rejected.",
            "title": "The file's first line (the list's title).",
            "record_count": "Paragraphs of the file kept as raw_records.",
            "rejected_count": "Paragraphs of the file refused into rejected_records.",
            "status": "'ok', 'empty' (no paragraph after the title) or 'rejected' (not read: see error).",
            "error": "Why the file was rejected (binary, too large, outside the folder, ...); null otherwise.",
            "decoded_chars": "Non-whitespace characters the decoder returned: the title, raw records and "
            "rejected records account for every one of them.",
        },
    ),
    Table(
        "raw_records", "one row per paragraph after the title",
        "Each paragraph exactly as decoded (line endings normalized to LF), with where it came from.",
        {
            "record_id": "'<source_file>:<ordinal>': unique, stable while the file is unchanged.",
            "source_file": "The file the paragraph is in (source_files.source_file).",
            "ordinal": "1-based position of the paragraph in its file, shared with rejected_records.",
            "line_start": "First line of the paragraph in the file (1-based).",
            "line_end": "Last line of the paragraph in the file (1-based).",
            "raw_text": "The paragraph exactly as decoded, LF line endings.",
        },
    ),
    Table(
        "rejected_records", "one row per paragraph refused after decoding",
        "Paragraphs that decoded but cannot be abstracts, with the reason; nothing is dropped silently.",
        {
            "source_file": "The file the paragraph is in.",
            "ordinal": "1-based position of the paragraph in its file (numbered with raw_records).",
            "line_start": "First line of the paragraph in the file (1-based).",
            "line_end": "Last line of the paragraph in the file (1-based).",
            "reason": "Why it was refused: control characters, U+FFFD (bytes that did not decode), longer than "
            "the limit (20,000 characters by default), or no letters or digits.",
            "raw_text": "The paragraph exactly as decoded.",
        },
    ),
    Table(
        "records", "one row per raw record",
        "Each raw record's normalized display text and dedup key (raw_text stays in raw_records).",
        {
            "record_id": "The raw record (raw_records.record_id).",
            "source_file": "The file the record is in.",
            "ordinal": "1-based position of the record in its file.",
            "text": "Display text: NFKC, invisible characters removed, whitespace folded.",
            "dedup_key": "The text with case, quotes and dashes also folded: records with equal keys are exact duplicates.",
            "char_count": "Characters of text.",
            "word_count": "Words of text.",
        },
    ),
    Table(
        "papers", "one row per distinct abstract",
        "Exact and near duplicates merged; the canonical record (the first by source_file, ordinal) "
        "gives the paper its abstract and paper_id.",
        {
            "paper_id": "First 16 hex digits of XXH3-64 of the canonical record's dedup_key: stable across runs and machines.",
            "abstract": "The canonical record's display text.",
            "dedup_key": "The canonical record's dedup key.",
            "word_count": "Words of the abstract.",
            "char_count": "Characters of the abstract.",
            "occurrence_count": "Raw records of this paper (exact and near duplicates included).",
            "source_count": "Distinct files the paper appears in.",
            "variant_count": "Distinct dedup keys merged into the paper (above 1: near duplicates).",
            "first_source_file": "File of the canonical record.",
            "first_ordinal": "Ordinal of the canonical record in that file.",
            "canonical_record_id": "record_id of the canonical record.",
            "sources": "Every file the paper appears in, sorted.",
            "abstract_plain": "The abstract with LaTeX and markdown markup removed (for display and search).",
        },
    ),
    Table(
        "paper_occurrences", "one row per raw record",
        "Which paper each raw record belongs to, and how it matched.",
        {
            "paper_id": "The paper (papers.paper_id).",
            "record_id": "The raw record (raw_records.record_id).",
            "source_file": "The file the record is in.",
            "ordinal": "1-based position of the record in its file.",
            "match_kind": "'canonical' (the paper's own record), 'exact' (same dedup_key) or 'near' (a near duplicate).",
            "similarity": "Verified Jaccard similarity of the record's text to the canonical one; 1.0 unless near.",
        },
    ),
    Table(
        "source_overlap", "one row per pair of files that share papers",
        "How much two paper lists overlap.",
        {
            "file_a": "The first file of the pair (file_a < file_b).",
            "file_b": "The second file of the pair.",
            "shared_papers": "Papers found in both files.",
            "papers_a": "Papers in file_a.",
            "papers_b": "Papers in file_b.",
            "jaccard": "shared_papers / (papers_a + papers_b - shared_papers).",
        },
    ),
    Table(
        "paper_links", "one row per distinct URL per paper",
        "Every URL in a paper's texts (canonical abstract first, then its near-duplicate variants), "
        "trimmed as a linkifier would and classified.",
        {
            "paper_id": "The paper (papers.paper_id).",
            "link_rank": "1-based order of first appearance in the paper's texts.",
            "url": "The URL, trimmed; scheme and host lower-cased, path as written.",
            "host": "Host of the URL, lower case.",
            "kind": "code_repository, dataset, model, demo, hub_page, package, notebook, paper, video, "
            "project_page, anonymous_review or other.",
            "owner": "Repository owner (GitHub, GitLab, Bitbucket, Codeberg, Gitee, Hugging Face); null otherwise.",
            "name": "Repository name on those hosts; null for a user or organization page.",
        },
    ),
    Table(
        "paper_names", "one row per name a paper introduces",
        "The names of the methods, models, benchmarks and datasets papers introduce; papers introducing none have no row.",
        {
            "paper_id": "The paper (papers.paper_id).",
            "name_rank": "1-based order of the name in the abstract.",
            "name": "The name (an acronym when the abstract gives 'Long Form (ACRONYM)').",
            "long_name": "The name's expansion, when the abstract gives one; null otherwise.",
            "pattern": "The phrasing that introduced it ('we propose X', 'termed X', 'X—short for …', ...).",
            "markup": "Markup the name was wrapped in (*, **, `, \\emph, \\textbf, ...); null when none.",
            "evidence": "The matched phrase of the abstract.",
        },
    ),
    Table(
        "paper_topics", "one row per (paper, topic)",
        "Each paper tagged with every topic of the taxonomy its plain text matches; 'other' when none does.",
        {
            "paper_id": "The paper (papers.paper_id).",
            "topic": "Topic id from the taxonomy (etl_project/enrich/taxonomy.yaml), or 'other'.",
            "label": "The topic's human-readable label.",
            "match_count": "Pattern matches of the topic in the paper's plain text.",
            "evidence": "The distinct matched phrases, lower-cased, in order of first appearance.",
        },
    ),
    Table(
        "paper_terms", "one row per (paper, search term)",
        "What search_papers scores: the terms of each paper's names, plain text and its near-duplicate variants' "
        "plain texts, as DuckDB's fts extension makes them (its tokenizer, English stopwords out, Porter stems), "
        "with their counts. BM25's corpus statistics are computed from it at query time.",
        {
            "paper_id": "The paper (papers.paper_id).",
            "term": "A stemmed term of the paper's names, plain text or a variant's text.",
            "tf": "How often the names hold the term, plus how often the plain text does or, for a term the plain "
                  "text lacks, the most any one variant does: words a variant shares with the canonical text are "
                  "not counted again.",
            "doc_terms": "The paper's tf summed over its terms (BM25's document length).",
        },
    ),
)}


def describe(table: str, column: str) -> str | None:
    """The contract's description of ``table.column``, or None when the contract lacks it."""
    known = TABLES.get(table)
    return known.columns.get(column) if known else None


def comment_statements(table: str, columns: Iterable[str]) -> list[str]:
    """DuckDB ``COMMENT ON TABLE`` / ``COMMENT ON COLUMN`` statements for ``table`` and those of
    ``columns`` (the table's existing columns) that the contract describes; identifiers quoted,
    literals escaped. Nothing for a table the contract does not know."""
    known = TABLES.get(table)
    if known is None:
        return []
    statements = [f"COMMENT ON TABLE {quote(table)} IS {literal(known.summary)}"]
    for column in columns:
        if column in known.columns:
            statements.append(
                f"COMMENT ON COLUMN {quote(table)}.{quote(column)} IS {literal(known.columns[column])}"
            )
    return statements


def _cell(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("|", "\\|").replace("\n", " ")


def readme_tables_markdown() -> str:
    """The README's table reference: per table its grain, description and every column."""
    parts = []
    for table in TABLES.values():
        rows = "\n".join(f"| `{name}` | {_cell(text)} |" for name, text in table.columns.items())
        parts.append(f"### `{table.name}`\n\n{table.summary}\n\n| column | description |\n|---|---|\n{rows}\n")
    return "\n".join(parts)


START, END = "<!-- tables:start -->", "<!-- tables:end -->"
README = Path(__file__).resolve().parents[1] / "README.md"


def readme_with_tables(readme: str) -> str:
    """``readme`` with the text between the two marker comments replaced by the tables."""
    pattern = re.compile(re.escape(START) + r".*?" + re.escape(END), re.S)
    if not pattern.search(readme):
        raise ValueError(f"README has no {START} ... {END} section")
    return pattern.sub(lambda _: f"{START}\n{readme_tables_markdown()}{END}", readme)


def write_readme(path: Path = README) -> None:
    """Regenerate the README's "Tables" section from the contract."""
    path.write_text(readme_with_tables(path.read_text(encoding="utf-8")), encoding="utf-8")


if __name__ == "__main__":
    if sys.argv[1:] == ["--write-readme"]:
        write_readme()
    else:
        sys.stdout.write(readme_tables_markdown())
