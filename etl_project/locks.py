"""An exclusive lock across the processes of one machine, held for a ``with`` block.

``flock`` on an open file: the kernel releases it when the holder closes the file or dies, killed
or not, so a lock is never left behind. The file's content is free to use: a holder may write who
it is (``holder=``) and those waiting read it (``on_wait=``).
"""

import contextlib
import fcntl
import os
import time
from collections.abc import Callable
from pathlib import Path

# How long a waiter accepts an empty lock file (a holder between its flock and its write) before
# it reports an unnamed holder.
_UNNAMED_AFTER_SECONDS = 2.0


@contextlib.contextmanager
def file_lock(
    path: Path,
    holder: str = "",
    on_wait: Callable[[str], None] | None = None,
    poll_seconds: float = 0.2,
):
    """Wait for and hold an exclusive ``flock`` on ``path`` (created, with its folder, if need be).

    ``holder``: text written into the file once the lock is taken and erased before it is
    released (who holds it). ``on_wait``: without it, one blocking wait; with it, the lock is
    tried every ``poll_seconds`` and ``on_wait(text)`` called each time the file names a new holder
    ("" for a holder that writes nothing)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)  # not inherited by subprocesses (PEP 446)
    try:
        if on_wait is None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        else:
            _poll(fd, on_wait, poll_seconds)
        try:
            if holder:
                os.ftruncate(fd, 0)
                os.pwrite(fd, holder.encode(), 0)
            yield
        finally:
            if holder:
                os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def try_flock(fd: int) -> bool:
    """Take the exclusive flock on an open file if it is free; False when another holds it."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _poll(fd: int, on_wait: Callable[[str], None], poll_seconds: float) -> None:
    reported, empty_since = None, None
    while not try_flock(fd):
        text = os.pread(fd, 4096, 0).decode(errors="replace").strip()
        if not text:  # taken but not yet written, or a holder that names nobody
            empty_since = empty_since or time.monotonic()
            if time.monotonic() - empty_since < _UNNAMED_AFTER_SECONDS:
                text = reported  # keep quiet for now
        else:
            empty_since = None
        if text is not None and text != reported:
            on_wait(text)
            reported = text
        time.sleep(poll_seconds)
