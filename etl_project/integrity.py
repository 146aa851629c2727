"""Cross-table consistency, asserted again at publish time.

The suite checks validate each table when it is produced, and a full run publishes only
tables it produced itself. A run of only some assets (from the UI, say) publishes others from
their latest materializations, made by other runs: these cheap checks make sure that they still
describe the same records, and the publish step refuses when they do not. The landing tables'
suites validate only the rows of files new to the warehouse (suites.SuiteCheck.delta), and the
per-paper suites only the rows of the papers a run worked out (suites.SuiteCheck.per_paper), so
what holds across them is checked here over the whole tables: file names, record ids and paper
ids unique (a paper_id is the hash of its dedup_key, so keys are unique too), one ordinal per
record of a file, every raw record in exactly one paper, every row of a per-paper table of a
paper there is.
"""

from collections.abc import Mapping

import polars as pl


def cross_table_problems(tables: Mapping[str, pl.DataFrame | pl.LazyFrame]) -> list[str]:
    """What does not line up between the tables about to be published; empty when all is well.
    Reads only the id columns, each once (scans are not loaded whole)."""

    def read(table: str, *columns: str) -> pl.DataFrame:
        return tables[table].lazy().select(columns).collect()

    files = read("source_files", "source_file", "record_count")
    raw = read("raw_records", "record_id", "source_file", "ordinal")
    records, occurrences, papers = read("records", "record_id"), read("paper_occurrences", "record_id", "paper_id"), read("papers", "paper_id")
    problems = []
    for table, frame, key in (("source_files", files, ["source_file"]), ("raw_records", raw, ["record_id"]),
                              ("raw_records", raw, ["source_file", "ordinal"]), ("records", records, ["record_id"]),
                              ("paper_occurrences", occurrences, ["record_id"]), ("papers", papers, ["paper_id"])):
        repeated = _repeated(frame.select(key))
        if repeated.height:
            problems.append(f"{table} repeats {', '.join(key)}: {_sample(repeated.select(pl.concat_str(key, separator=':')).to_series())}")
    per_file = raw.group_by("source_file").agg(found=pl.len())
    mismatch = files.join(per_file, on="source_file", how="full", coalesce=True).filter(
        pl.col("record_count").fill_null(-1) != pl.col("found").fill_null(0)
    )
    if mismatch.height:
        problems.append(f"raw_records disagree with source_files for {_sample(mismatch['source_file'])}")
    for name, frame in (("records", records), ("paper_occurrences", occurrences)):
        if _differ(raw["record_id"], frame["record_id"]):
            problems.append(f"{name} does not hold exactly the raw records' record_ids")
    if _differ(papers["paper_id"], occurrences["paper_id"]):
        problems.append("paper_occurrences and papers disagree on the set of paper_ids")
    known = papers["paper_id"].drop_nulls().hash(SEED).implode()
    for table in PER_PAPER_TABLES:
        if table not in tables:
            continue
        # The runs of equal paper_ids hold each paper_id at least once, whatever the order; a
        # part of paper_terms is sorted by paper_id, so there are about as many runs as papers:
        # one pass over its 45M rows, where unique() would hash them all.
        ids = tables[table].lazy().select(pl.col("paper_id").rle().struct.field("value").alias("paper_id"))
        stray = ids.filter(~pl.col("paper_id").hash(SEED).is_in(known)).unique(maintain_order=True).head(4).collect()
        if stray.height:
            problems.append(f"{table} holds papers that papers does not: {_sample(stray['paper_id'])}")
    return problems


# Tables of rows per paper. Their suite checks validate the rows of the papers a run worked out,
# so a row of a paper that papers lacks (one that is gone, say) is found here.
PER_PAPER_TABLES = ("paper_links", "paper_names", "paper_topics", "paper_terms")


# Ids are compared by a 64-bit hash of each, much cheaper to sort and look up than the strings.
# Equal ids have equal hashes, so a repeat or a difference found by hash is real (a repeat is
# confirmed on the ids themselves); two different ids share a hash with odds of 2^-64, and only
# then is a difference between exactly those two missed.
SEED = 0x2545F4914F6CDD1D


def _repeated(keys: pl.DataFrame) -> pl.DataFrame:
    """The first few distinct rows ``keys`` holds more than once: of the rows whose hash repeats
    (sorted, repeats are neighbours: no hash table of them all is built)."""
    hashes = keys.select(pl.struct(keys.columns).hash(SEED)).to_series()
    ordered = hashes.sort()
    if not (ordered.slice(1) == ordered.head(-1)).any():
        return keys.clear()
    suspects = keys.filter(hashes.is_duplicated())
    return suspects.filter(suspects.is_duplicated()).unique(maintain_order=True).head(4)


def _differ(a: pl.Series, b: pl.Series) -> bool:
    """Whether the two hold different sets of ids (either may repeat one): whether the sorted
    distinct hashes of their ids differ. A null id is no id, so it is never in the other set."""
    if a.null_count() or b.null_count():
        return True
    return not a.hash(SEED).unique().sort().equals(b.hash(SEED).unique().sort())


def _sample(names: pl.Series, limit: int = 3) -> str:
    shown = ", ".join(repr(n) for n in names.head(limit).to_list())
    return shown + (f" and {names.len() - limit} more" if names.len() > limit else "")
