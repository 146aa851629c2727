"""What the UI shows about a table: row count, column schema and a preview of the first rows."""

import dagster as dg
import polars as pl

# Who answers for these assets in the UI (a team, as Dagster's owners accept "team:<name>").
OWNERS = ["team:data-engineering"]
PREVIEW_ROWS = 5
PREVIEW_CELL_CHARS = 80


def row_count(frame: pl.DataFrame | pl.LazyFrame) -> int:
    """Rows of a table or a scan (of Parquet: read from the file footers, not the rows)."""
    return frame.lazy().select(pl.len()).collect().item()


def table_metadata(frame: pl.DataFrame | pl.LazyFrame) -> dict:
    """For a LazyFrame (a scan of staged Parquet) only the count and the first rows are read."""
    lazy = frame.lazy()
    return {
        "dagster/row_count": row_count(lazy),
        "dagster/column_schema": dg.TableSchema(
            columns=[dg.TableColumn(name, str(dtype)) for name, dtype in lazy.collect_schema().items()]
        ),
        "preview": dg.MetadataValue.md(markdown_table(lazy.head(PREVIEW_ROWS).collect())),
    }


def status_counts(source_files: pl.DataFrame) -> dict[str, int]:
    """``files_ok``, ``files_empty``, ``files_rejected``: how many files of each status."""
    by_status = dict(source_files.group_by("status").len().iter_rows())
    return {f"files_{status}": by_status.get(status, 0) for status in ("ok", "empty", "rejected")}


def markdown_table(frame: pl.DataFrame) -> str:
    def cell(value) -> str:
        text = "" if value is None else str(value)
        if len(text) > PREVIEW_CELL_CHARS:
            text = text[: PREVIEW_CELL_CHARS - 1] + "…"
        return text.replace("|", "\\|").replace("\n", " ")

    header = "| " + " | ".join(frame.columns) + " |"
    rule = "|" + "---|" * len(frame.columns)
    rows = ["| " + " | ".join(cell(v) for v in row) + " |" for row in frame.iter_rows()]
    return "\n".join([header, rule, *rows])
