"""What a published snapshot was built from: the code and the settings that shape its rows.

Every publish records ``fingerprint(...)`` in its snapshot's commit. A run whose landing folder
holds exactly the files of the current snapshot (same names, same sha256) and whose fingerprint
is the same has nothing to do: publishing again would give the same tables.
"""

import functools
import importlib.metadata
import json
import sys
from collections.abc import Mapping
from pathlib import Path

import xxhash

PACKAGE = Path(__file__).resolve().parent
SHAPES_ROWS = (".py", ".sql", ".yaml")  # not the data docs' static web files
# Libraries whose upgrade may change the rows (parsing, hashing, the search terms' tokenizer and stems).
LIBRARIES = ("polars", "duckdb", "duckdb-extension-fts", "charset-normalizer", "xxhash")


@functools.cache
def code_version() -> str:
    """A hash of the package's own files (code, SQL, the default topic taxonomy), Python's version
    and the libraries' versions."""
    files = sorted(p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*") if p.suffix in SHAPES_ROWS and p.is_file())
    return files_version(tuple(files), LIBRARIES, {})


def files_version(modules: tuple[str, ...], libraries: tuple[str, ...], settings: Mapping[str, object]) -> str:
    """A hash of some of the package's ``modules`` (paths relative to it), Python's version, the
    ``libraries``' versions and ``settings``."""
    digest = xxhash.xxh3_128()
    for module in modules:
        digest.update(module.encode())
        digest.update((PACKAGE / module).read_bytes())
    digest.update(json.dumps({"python": sys.version_info[:3], **_versions(libraries), **settings}, sort_keys=True, default=str).encode())
    return digest.hexdigest()


def _versions(libraries: tuple[str, ...]) -> dict[str, str]:
    found = {}
    for library in libraries:
        try:
            found[library] = importlib.metadata.version(library)
        except importlib.metadata.PackageNotFoundError:
            found[library] = "none"
    return found


def fingerprint(settings: Mapping[str, object]) -> str:
    """The code version and ``settings`` (JSON-able values that shape the published rows)."""
    return xxhash.xxh3_128_hexdigest(json.dumps({"code": code_version(), **settings}, sort_keys=True, default=str).encode())
