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


def materialize_all(landing: Path, warehouse: Path, instance: dg.DagsterInstance | None = None):
    """Run the whole graph (every asset and check) in process on ``landing`` into ``warehouse``.

    The one way tests run the pipeline, so they do not depend on how the graph is laid out.
    """
    from etl_project.definitions import defs
    from etl_project.defs.resources import build_resources

    return dg.materialize(
        [*defs.assets, *defs.asset_checks],
        resources=build_resources(str(landing), str(warehouse)),
        instance=instance or dg.DagsterInstance.ephemeral(),
        raise_on_error=False,
    )
