"""Where the landing folder and the warehouse are, for every entry point (CLI, UI, tests).

Precedence: an explicit value, then the environment variable, then the project's own folder
(resolved from the package location, never from the current directory).
"""

import os
from collections.abc import Mapping
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
SEEDS_ENV = "ETL_SEEDS_DIR"
WAREHOUSE_ENV = "ETL_WAREHOUSE_DIR"
MAX_FILE_BYTES_ENV = "ETL_MAX_FILE_BYTES"
DEFAULT_MAX_FILE_BYTES = 64 * 1024 * 1024
DUCKDB_MEMORY_ENV = "ETL_DUCKDB_MEMORY_LIMIT"
CATALOG_ENV = "ETL_CATALOG"
ALLOW_REMOVALS_ENV = "ETL_ALLOW_REMOVALS"
DATA_PATH_ENV = "ETL_DATA_PATH"
CATALOG_FILE = "catalog.sqlite"
DATA_FOLDER = "data"
# What a publish lets DuckDB hold before it spills to disk: loading and indexing a million
# records takes no longer under 1 GB, and the run's peak memory stays near the pipeline's own.
DEFAULT_DUCKDB_MEMORY = "1GB"


def seeds_dir(explicit: str | os.PathLike | None = None) -> Path:
    return _resolve(explicit, SEEDS_ENV, PROJECT_ROOT / "seeds")


def warehouse_dir(explicit: str | os.PathLike | None = None) -> Path:
    return _resolve(explicit, WAREHOUSE_ENV, PROJECT_ROOT / "warehouse")


def max_file_bytes() -> int:
    """The size above which a landing file is refused: ``ETL_MAX_FILE_BYTES`` or 64 MiB."""
    value = os.environ.get(MAX_FILE_BYTES_ENV, "").strip()
    if not value:
        return DEFAULT_MAX_FILE_BYTES
    try:
        limit = int(value)
    except ValueError:
        raise ValueError(f"{MAX_FILE_BYTES_ENV} must be a whole number of bytes, not {value!r}") from None
    if limit < 0:
        raise ValueError(f"{MAX_FILE_BYTES_ENV} must not be negative, got {limit}")
    return limit


def duckdb_memory_limit() -> str:
    """DuckDB's memory_limit while publishing: ``ETL_DUCKDB_MEMORY_LIMIT`` (e.g. ``4GB``) or 1 GB."""
    return os.environ.get(DUCKDB_MEMORY_ENV, "").strip() or DEFAULT_DUCKDB_MEMORY


def catalog(warehouse: Path, explicit: str = "") -> str:
    """The DuckLake catalog, as DuckLake's ATTACH takes it after ``ducklake:``: an explicit value,
    ``ETL_CATALOG`` (e.g. ``postgres:dbname=etl host=db``), else the embedded SQLite file
    ``<warehouse>/catalog.sqlite``."""
    value = explicit or os.environ.get(CATALOG_ENV, "").strip()
    return value or f"sqlite:{Path(warehouse) / CATALOG_FILE}"


def data_path(warehouse: Path, explicit: str = "") -> str:
    """Where the lake's Parquet data files live: an explicit value, ``ETL_DATA_PATH`` (a folder,
    or an object-store URL that DuckDB reads), else ``<warehouse>/data/``. Ends with ``/``."""
    value = explicit or os.environ.get(DATA_PATH_ENV, "").strip() or str(Path(warehouse) / DATA_FOLDER)
    return value if value.endswith("/") else value + "/"


def default_dagster_home() -> Path:
    return PROJECT_ROOT / ".dagster_home"


def dagster_home(warehouse: Path, environ: Mapping[str, str] | None = None) -> Path:
    """The Dagster instance of a warehouse: ``DAGSTER_HOME`` when set; otherwise the project's
    ``.dagster_home/`` for the project's own warehouse (the home the README's ``dagster dev``
    uses), and ``<warehouse>/.dagster_home`` for any other, so runs over other folders never
    share manifests, cursors or run history with the project's."""
    value = (os.environ if environ is None else environ).get("DAGSTER_HOME", "").strip()
    if value:
        return Path(value).expanduser().resolve()
    warehouse = Path(warehouse).expanduser().resolve()
    return default_dagster_home() if warehouse == (PROJECT_ROOT / "warehouse").resolve() else warehouse / ".dagster_home"


def allow_removals() -> bool:
    """``ETL_ALLOW_REMOVALS=1``: the sensor and the schedule apply a plan that removes every
    published file or more than half of them (the CLI's ``--allow-removals``)."""
    return os.environ.get(ALLOW_REMOVALS_ENV, "").strip().lower() in {"1", "true", "yes", "on"}


def instance_settings() -> Path:
    """The project's dagster.yaml (pools, run queue, monitoring), tracked in the default home."""
    return default_dagster_home() / "dagster.yaml"


def _resolve(explicit: str | os.PathLike | None, env: str, default: Path) -> Path:
    value = explicit or os.environ.get(env) or default
    return Path(value).expanduser().resolve()
