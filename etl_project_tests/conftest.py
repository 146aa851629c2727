import shutil
from pathlib import Path

import pytest

SEEDS = Path(__file__).resolve().parents[1] / "seeds"


@pytest.fixture
def seeds_copy(tmp_path: Path) -> Path:
    landing = tmp_path / "landing"
    shutil.copytree(SEEDS, landing)
    return landing
