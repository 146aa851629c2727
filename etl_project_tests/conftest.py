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


def materialize_all(landing: Path, warehouse: Path, instance: dg.DagsterInstance | None = None, full: bool = False):
    """Run the pipeline in process on ``landing`` into ``warehouse`` as ``etl-project run`` does:
    partitions synced with the folder, new and changed files parsed, everything republished.

    The one way tests run the pipeline, so they do not depend on how the graph is laid out.
    """
    from etl_project.definitions import ETL_JOB, build_defs
    from etl_project.defs import launch

    job = build_defs(str(landing), str(warehouse)).resolve_job_def(ETL_JOB)
    _, result = launch.run_in_process(job, instance or dg.DagsterInstance.ephemeral(), landing, warehouse, full=full)
    return result
