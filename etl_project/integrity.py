"""Cross-table consistency, asserted again at publish time.

The suite checks validate each table when it is produced, and a full run publishes only
tables it produced itself. A run of only some assets (from the UI, say) publishes others from
their latest materializations, made by other runs: these cheap joins make sure that they still
describe the same records, and the publish step refuses when they do not. The landing tables'
suites validate only the rows of files new to the warehouse (suites.SuiteCheck.delta), and the
papers suites only the papers a run changed (suites.SuiteCheck.per_paper), so what holds across
them is checked here over the whole tables: file names, record ids and paper ids unique (a
paper_id is the hash of its dedup_key, so keys are unique too), one ordinal per record of a file.
"""

from collections.abc import Mapping

import polars as pl


def cross_table_problems(tables: Mapping[str, pl.DataFrame | pl.LazyFrame]) -> list[str]:
    """What does not line up between the tables about to be published; empty when all is well.
    Reads only the id columns (scans are not loaded whole)."""

    def column(table: str, name: str) -> pl.Series:
        return tables[table].lazy().select(name).collect().to_series()

    problems = []
    for table, key in (("source_files", ["source_file"]), ("raw_records", ["record_id"]),
                       ("raw_records", ["source_file", "ordinal"]), ("records", ["record_id"]), ("papers", ["paper_id"])):
        repeated = tables[table].lazy().select(key).filter(pl.struct(key).is_duplicated()).unique(maintain_order=True).head(4).collect()
        if repeated.height:
            problems.append(f"{table} repeats {', '.join(key)}: {_sample(repeated.select(pl.concat_str(key, separator=':')).to_series())}")
    files = tables["source_files"].lazy().select("source_file", "record_count")
    per_file = tables["raw_records"].lazy().group_by("source_file").agg(found=pl.len())
    mismatch = files.join(per_file, on="source_file", how="full", coalesce=True).filter(
        pl.col("record_count").fill_null(-1) != pl.col("found").fill_null(0)
    ).collect()
    if mismatch.height:
        problems.append(f"raw_records disagree with source_files for {_sample(mismatch['source_file'])}")
    record_ids = column("raw_records", "record_id")
    for name in ("records", "paper_occurrences"):
        if _differ(record_ids, column(name, "record_id")):
            problems.append(f"{name} does not hold exactly the raw records' record_ids")
    if _differ(column("papers", "paper_id"), column("paper_occurrences", "paper_id")):
        problems.append("paper_occurrences and papers disagree on the set of paper_ids")
    if "paper_terms" in tables:
        stray = (
            tables["paper_terms"].lazy().select("paper_id").unique()
            .join(tables["papers"].lazy().select("paper_id"), on="paper_id", how="anti").head(4).collect()
        )
        if stray.height:
            problems.append(f"paper_terms holds papers that papers does not: {_sample(stray['paper_id'])}")
    return problems


def _differ(a: pl.Series, b: pl.Series) -> bool:
    """Whether the two hold different sets of ids: an anti join each way (no de-duplication
    first, which costs more than the joins)."""
    left, right = a.to_frame("id"), b.to_frame("id")
    return any(x.join(y, on="id", how="anti").height for x, y in ((left, right), (right, left)))


def _sample(names: pl.Series, limit: int = 3) -> str:
    shown = ", ".join(repr(n) for n in names.head(limit).to_list())
    return shown + (f" and {names.len() - limit} more" if names.len() > limit else "")
