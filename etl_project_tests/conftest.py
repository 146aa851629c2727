import shutil
from pathlib import Path

import dagster as dg
import pytest

SEEDS = Path(__file__).resolve().parents[1] / "seeds"


@pytest.fixture
def seeds_copy(tmp_path: Path) -> Path:
    landing = tmp_path / "landing"
    shutil.copytree(SEEDS, landing)
    return landing


def normalized_records(rows: list[tuple[str, int, str]]):
    """``records`` for hand-made ``(source_file, ordinal, raw_text)`` rows, as the pipeline makes them."""
    import polars as pl

    from etl_project import normalize

    raw = pl.DataFrame(
        [(f"{f}:{o}", f, o, 1, 1, t) for f, o, t in rows],
        schema=["record_id", "source_file", "ordinal", "line_start", "line_end", "raw_text"],
        orient="row",
    )
    return normalize.normalize_records(raw)


def materialize_all(landing: Path, warehouse: Path, instance: dg.DagsterInstance | None = None, full: bool = False,
                    allow_removals: bool = False):
    """Run the pipeline in process on ``landing`` into ``warehouse`` as ``etl-project run`` does:
    new and changed files parsed, everything republished.

    The one way tests run the pipeline, so they do not depend on how the graph is laid out.
    """
    from etl_project.definitions import ETL_JOB, build_defs
    from etl_project.defs import launch

    job = build_defs(str(landing), str(warehouse)).resolve_job_def(ETL_JOB)
    _, result = launch.run_in_process(job, instance or dg.DagsterInstance.ephemeral(), landing, warehouse, full=full,
                                      allow_removals=allow_removals)
    return result


@pytest.fixture
def postgres_catalog():
    """A real PostgreSQL server for the test (etl_project_tests/postgres_server.py); yields the
    ``postgres:`` catalog string of its database. Skips when the server or psycopg is missing."""
    from etl_project_tests.postgres_server import postgres_server

    yield from postgres_server()
