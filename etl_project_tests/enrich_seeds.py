"""The seeds' papers for the enrichment tests, built once per session without Dagster."""

import functools

import polars as pl

from etl_project import dedup, ingest, normalize
from etl_project.enrich.markup import plain_text
from etl_project_tests.conftest import SEEDS


@functools.cache
def seed_papers() -> pl.DataFrame:
    """Ingest, normalize and dedup of the seeds, plus abstract_plain (as the papers asset does)."""
    parsed = ingest.parse_files(ingest.read_landing_folder(SEEDS))
    papers, _ = dedup.deduplicate(normalize.normalize_records(parsed.raw_records))
    return papers.with_columns(abstract_plain=plain_text(pl.col("abstract")))


def paper_starting(prefix: str) -> str:
    """The paper_id of the seed paper whose abstract starts with ``prefix``."""
    return seed_papers().filter(pl.col("abstract").str.starts_with(prefix))["paper_id"].item()
