"""An exclusive lock across the processes of one machine, held for a ``with`` block."""

import contextlib
import fcntl
from pathlib import Path


@contextlib.contextmanager
def file_lock(path: Path):
    """Wait for and hold an exclusive ``flock`` on ``path`` (created, with its folder, if need be)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
