"""What a published snapshot was built from: the code and the settings that shape its rows.

Every publish records ``fingerprint(...)`` in its snapshot's commit. A run whose landing folder
holds exactly the files of the current snapshot (same names, same sha256) and whose fingerprint
is the same has nothing to do: publishing again would give the same tables.
"""

import functools
import importlib.metadata
import json
from collections.abc import Mapping
from pathlib import Path

import xxhash

PACKAGE = Path(__file__).resolve().parent
# Libraries whose upgrade may change the rows (parsing, hashing, the search index).
SHAPES_ROWS = (".py", ".sql", ".yaml")  # not the data docs' static web files
LIBRARIES = ("polars", "duckdb", "charset-normalizer", "xxhash")


@functools.cache
def code_version() -> str:
    """A hash of the package's own files (code, SQL, the topic taxonomy) and the libraries' versions."""
    digest = xxhash.xxh3_128()
    files = (p for p in PACKAGE.rglob("*") if p.suffix in SHAPES_ROWS and p.is_file())
    for path in sorted(files):
        digest.update(path.relative_to(PACKAGE).as_posix().encode())
        digest.update(path.read_bytes())
    for library in LIBRARIES:
        try:
            digest.update(f"{library}={importlib.metadata.version(library)}".encode())
        except importlib.metadata.PackageNotFoundError:
            digest.update(f"{library}=none".encode())
    return digest.hexdigest()


def fingerprint(settings: Mapping[str, object]) -> str:
    """The code version and ``settings`` (JSON-able values that shape the published rows)."""
    return xxhash.xxh3_128_hexdigest(json.dumps({"code": code_version(), **settings}, sort_keys=True, default=str).encode())
