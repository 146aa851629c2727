"""The warehouse as a DuckLake: a SQL catalog plus the Parquet data files it lists.

Layout of the default (embedded) warehouse folder::

    catalog.sqlite           the DuckLake catalog (SQLite in WAL mode): tables, snapshots, files
    data/main/<table>/*.parquet   the tables' data files, written once by Polars and registered
    data/search/stopwords/*.parquet the stop words search_papers leaves out, written by DuckLake
    open.sql                 attaches the lake for ``duckdb -init warehouse/open.sql``

``ETL_CATALOG`` takes any DuckLake catalog instead (``postgres:dbname=etl host=db``), and
``ETL_DATA_PATH`` the folder (or object-store URL) of the data files. Every reader attaches the
lake with its data path given explicitly (``OVERRIDE_DATA_PATH``), so a warehouse folder that was
copied or moved opens where it now is: the catalog stores file paths relative to the data path.

The extensions come from their PyPI packages (nothing is downloaded): ``duckdb-extension-ducklake``,
``-sqlite``, ``-postgres`` and ``-fts``, installed into DuckDB's extension directory on first use
(``INSTALL '<file>'``; a no-op once installed), then loaded by name.
"""

import importlib.util
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import duckdb

from etl_project import settings

ALIAS = "lake"
OPEN_SQL = "open.sql"
RECORD = "lake.json"  # a non-default catalog or data path, for readers of the folder
# Package, file in the package, and the name DuckDB knows the extension by once installed.
EXTENSIONS = {
    "ducklake": ("duckdb_extension_ducklake", "ducklake", "ducklake"),
    "sqlite": ("duckdb_extension_sqlite", "sqlite", "sqlite_scanner"),
    "postgres": ("duckdb_extension_postgres", "postgres", "postgres_scanner"),
    "fts": ("duckdb_extension_fts", "fts", "fts"),
}
# SQLite catalog: WAL lets readers read while a run commits; writers wait for each other.
SQLITE_OPTIONS = {"META_JOURNAL_MODE": "WAL", "META_BUSY_TIMEOUT": 5000}


class ExtensionUnavailable(RuntimeError):
    """A DuckDB extension this warehouse needs is not installed as a package."""


class NoWarehouse(FileNotFoundError):
    """A reader asked for a warehouse that was never published."""


def extension_file(name: str) -> Path:
    package, stem, _ = EXTENSIONS[name]
    version = duckdb.__version__
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ExtensionUnavailable(f"the {name} extension needs the package {package.replace('_', '-')}=={version} (pip install it)")
    path = Path(next(iter(spec.submodule_search_locations))) / "extensions" / f"v{version}" / f"{stem}.duckdb_extension"
    if not path.is_file():
        raise ExtensionUnavailable(f"{package} has no extension for DuckDB {version} (looked for {path})")
    return path


def load_extension(con: duckdb.DuckDBPyConnection, name: str) -> None:
    """Install ``name`` from its package into the connection's extension directory and load it.
    When that directory cannot be written (a read-only home), a private one under the temporary
    folder is used instead, for this connection."""
    path = literal(str(extension_file(name)))
    try:
        con.execute(f"INSTALL {path}")
    except duckdb.Error:
        private = Path(tempfile.gettempdir()) / f"etl_project-duckdb-extensions-{os.getuid()}"
        con.execute(f"SET extension_directory = {literal(str(private))}")
        con.execute(f"INSTALL {path}")
    con.execute(f"LOAD {EXTENSIONS[name][2]}")


def install_extensions() -> list[str]:
    """``etl-project install-extensions``: every extension into this user's DuckDB extension
    directory, so any DuckDB client of this version loads them by itself. Returns where each went."""
    with duckdb.connect() as con:
        for name in EXTENSIONS:
            load_extension(con, name)
        return [
            f"{name}: {path}"
            for name, path in con.execute(
                "SELECT extension_name, install_path FROM duckdb_extensions() WHERE loaded AND extension_name IN "
                "('ducklake', 'sqlite_scanner', 'postgres_scanner', 'fts') ORDER BY extension_name"
            ).fetchall()
        ]


@dataclass(frozen=True)
class Lake:
    """Where a warehouse's catalog and data files are."""

    warehouse: Path
    catalog: str  # DuckLake's catalog string after ``ducklake:``: ``sqlite:<file>``, ``postgres:<conninfo>``
    data_path: str  # ends with "/"

    @classmethod
    def of(cls, warehouse: Path, catalog: str = "", data_path: str = "") -> "Lake":
        """The lake of ``warehouse``: explicit values, else ETL_CATALOG / ETL_DATA_PATH, else what
        the last publish recorded in ``<warehouse>/lake.json`` (a catalog or data path other than
        the embedded default), else the embedded default."""
        warehouse = Path(warehouse).expanduser().resolve()
        recorded = _recorded(warehouse)
        catalog = catalog or os.environ.get(settings.CATALOG_ENV, "").strip() or recorded.get("catalog", "")
        data_path = data_path or os.environ.get(settings.DATA_PATH_ENV, "").strip() or recorded.get("data_path", "")
        return cls(warehouse, settings.catalog(warehouse, catalog), settings.data_path(warehouse, data_path))

    def record(self) -> None:
        """Remember a catalog or data path other than the embedded default in ``lake.json``, so
        readers of this folder find them without the environment variables."""
        values = {}
        if self.catalog != f"sqlite:{self.warehouse / settings.CATALOG_FILE}":
            values["catalog"] = self.catalog
        if self.data_path != str(self.warehouse / settings.DATA_FOLDER) + "/":
            values["data_path"] = self.data_path
        path = self.warehouse / RECORD
        if not values:
            path.unlink(missing_ok=True)
            return
        partial = path.with_name(f".{RECORD}.partial")
        partial.write_text(json.dumps(values, indent=2) + "\n")
        os.replace(partial, path)

    @property
    def backend(self) -> str:
        """``sqlite``, ``postgres`` or ``duckdb``: the database holding the catalog."""
        kind, sep, _ = self.catalog.partition(":")
        return kind if sep and kind in ("sqlite", "postgres") else "duckdb"

    @property
    def catalog_file(self) -> Path | None:
        """The catalog's file for an embedded catalog, else None."""
        if self.backend == "postgres":
            return None
        return Path(self.catalog.partition(":")[2] if self.backend == "sqlite" else self.catalog)

    def exists(self) -> bool:
        """Whether the catalog is there (for PostgreSQL: assumed, the ATTACH says otherwise)."""
        return self.catalog_file is None or self.catalog_file.exists()

    def attach_statement(self, read_only: bool, data_path: str | None = None) -> str:
        options = {"DATA_PATH": literal(data_path if data_path is not None else self.data_path), "OVERRIDE_DATA_PATH": "true"}
        if self.backend == "sqlite":
            options |= {k: literal(v) if isinstance(v, str) else str(v) for k, v in SQLITE_OPTIONS.items()}
        if read_only:
            options["READ_ONLY"] = "true"
        else:
            options["DATA_INLINING_ROW_LIMIT"] = "0"  # every row in a data file, none in the catalog
        joined = ", ".join(f"{k} {v}" for k, v in options.items())
        return f"ATTACH {literal('ducklake:' + self.catalog)} AS {ALIAS} ({joined})"

    def extensions(self) -> list[str]:
        return ["ducklake", *([self.backend] if self.backend != "duckdb" else []), "fts"]


def connect(warehouse_dir: str | os.PathLike | None = None, read_only: bool = True,
            catalog: str = "", data_path: str = "") -> duckdb.DuckDBPyConnection:
    """A DuckDB connection with the warehouse's lake attached and selected (``USE lake``): tables,
    the analysis views and ``search_papers`` are addressed unqualified. Read-only by default;
    runs may publish while it is open, and it sees the snapshot current when each query (or
    transaction) starts."""
    lake = Lake.of(settings.warehouse_dir(warehouse_dir), catalog, data_path)
    if read_only and not lake.exists():
        raise NoWarehouse(f"no warehouse has been published at {lake.warehouse} (no {lake.catalog_file.name}): run `etl-project run` first")
    return attach(lake, read_only)


def attach(lake: Lake, read_only: bool, memory_limit: str | None = None) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB session with ``lake`` attached as ``lake`` and in use."""
    con = duckdb.connect(config={"memory_limit": memory_limit} if memory_limit else {})
    try:
        for name in lake.extensions():
            load_extension(con, name)
        if not read_only and lake.catalog_file is not None:
            lake.catalog_file.parent.mkdir(parents=True, exist_ok=True)
        if not read_only and "://" not in lake.data_path:
            Path(lake.data_path).mkdir(parents=True, exist_ok=True)
        con.execute(lake.attach_statement(read_only))
        con.execute(f"USE {ALIAS}")
    except BaseException:
        con.close()
        raise
    return con


def open_sql(lake: Lake, relative: bool = True) -> str:
    """The script behind ``duckdb -init warehouse/open.sql``: the lake attached read-only and
    selected. Paths of an embedded warehouse are written relative to the folder that holds the
    warehouse (run it from there, as from the project root), so a moved folder still opens;
    ``relative=False`` writes them as they are (for a script used once, from anywhere)."""
    base = lake.warehouse.parent
    catalog, data_path = lake.catalog, lake.data_path
    if relative and lake.backend == "sqlite":
        catalog = f"sqlite:{_relative(Path(catalog.partition(':')[2]), base)}"
    if relative and "://" not in data_path:
        data_path = _relative(Path(data_path), base) + "/"
    relative = Lake(lake.warehouse, catalog, data_path)
    loads = "\n".join(f"LOAD {EXTENSIONS[name][2]};" for name in lake.extensions())
    return (
        f"-- The warehouse, read-only, from the folder that holds {lake.warehouse.name}/:\n"
        f"--   duckdb -init {lake.warehouse.name}/{OPEN_SQL}\n"
        "-- Extensions: `etl-project install-extensions` installs them for this user once.\n"
        f"{loads}\n{relative.attach_statement(read_only=True)};\nUSE {ALIAS};\n"
    )


def write_open_sql(lake: Lake) -> Path:
    path = lake.warehouse / OPEN_SQL
    partial = path.with_name(f".{OPEN_SQL}.partial")
    partial.write_text(open_sql(lake))
    os.replace(partial, path)
    lake.record()
    return path


def _recorded(warehouse: Path) -> dict:
    try:
        return json.loads((warehouse / RECORD).read_text())
    except (OSError, ValueError):
        return {}


def _relative(path: Path, base: Path) -> str:
    try:
        return os.path.relpath(path, base)
    except ValueError:  # another drive
        return str(path)


def literal(value: str) -> str:
    """A SQL string literal. The project's SQL inlines values rather than binding parameters:
    DuckDB binds none in ATTACH, INSTALL or DDL, and binding any Python value imports pandas
    (0.3 s of every run's publish, in DuckDB 1.5)."""
    return "'" + value.replace("'", "''") + "'"


def quote(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'
