"""What the UI shows about a table: row count, column schema (with each column's description from
the table contract, etl_project/contract.py) and a preview of the first rows, as Dagster table
metadata. Empty values are left out (``non_empty``): no empty tables, lists or texts."""

import json

import dagster as dg
import polars as pl

from etl_project import contract

# Who answers for these assets in the UI (a team, as Dagster's owners accept "team:<name>").
OWNERS = ["team:data-engineering"]
PREVIEW_ROWS = 5
# Longer texts are cut (with "…") in table cells: an abstract (about 1,200 characters, 3,000 is
# rare) fits whole, a 20,000-character paragraph does not.
CELL_CHARS = 3000
# Derived columns the preview leaves out (the column schema still lists them): a dedup key is
# its row's text again, folded.
PREVIEW_HIDDEN = ("dedup_key",)


def row_count(frame: pl.DataFrame | pl.LazyFrame) -> int:
    """Rows of a table or a scan (of Parquet: read from the file footers, not the rows)."""
    return frame.lazy().select(pl.len()).collect().item()


def column_schema(schema: pl.Schema | dict, table: str | None = None) -> dg.TableSchema:
    """The Dagster column schema of a frame, each column described by the contract of ``table``."""
    return dg.TableSchema(columns=[
        dg.TableColumn(name, str(dtype), description=contract.describe(table, name) if table else None)
        for name, dtype in schema.items()
    ])


def table_metadata(frame: pl.DataFrame | pl.LazyFrame, table: str | None = None) -> dict:
    """Row count, column schema and preview of ``frame``, the published table ``table``. For a
    LazyFrame (a scan of staged Parquet) only the count and the first rows are read."""
    lazy = frame.lazy()
    schema = lazy.collect_schema()
    shown = [c for c in schema.names() if c not in PREVIEW_HIDDEN]
    return non_empty({
        "dagster/row_count": row_count(lazy),
        "dagster/column_schema": column_schema(schema, table),
        "preview": table_value(lazy.select(shown).head(PREVIEW_ROWS).collect()),
    })


def status_counts(source_files: pl.DataFrame) -> dict[str, int]:
    """``files_ok``, ``files_empty``, ``files_rejected``: how many files of each status."""
    by_status = dict(source_files.group_by("status").len().iter_rows())
    return {f"files_{status}": by_status.get(status, 0) for status in ("ok", "empty", "rejected")}


def _cell(value) -> str | int | float | bool | None:
    """A value as a table cell: numbers, booleans and null as they are, the rest as (capped) text."""
    if value is None or isinstance(value, (bool, int, float)):
        return value
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= CELL_CHARS else text[: CELL_CHARS - 1] + "…"


def table_value(frame: pl.DataFrame | list[dict]) -> dg.TableMetadataValue | None:
    """Rows as a table for the UI (a frame, or dicts sharing their keys); None when there are none,
    so ``non_empty`` leaves the entry out."""
    if isinstance(frame, list):
        frame = pl.DataFrame(frame, infer_schema_length=None) if frame else pl.DataFrame()
    if frame.height == 0:
        return None
    return dg.MetadataValue.table(
        records=[dg.TableRecord({k: _cell(v) for k, v in row.items()}) for row in frame.iter_rows(named=True)],
        schema=column_schema(frame.schema),
    )


def non_empty(metadata: dict) -> dict:
    """``metadata`` less its empty entries (None, empty text, list, dict or table)."""
    def empty(value) -> bool:
        if isinstance(value, dg.MetadataValue):
            value = value.value
        if isinstance(value, dg.TableMetadataValue):
            return not value.records
        return value is None or (isinstance(value, (str, list, dict, tuple)) and len(value) == 0)

    return {key: value for key, value in metadata.items() if not empty(value)}
