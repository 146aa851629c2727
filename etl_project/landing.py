"""The landing folder as a set of files: file keys, fingerprints, changes and what a run parses.

Every file of the landing folder (after ingest's ignore rules) has a key: its name relative to the
folder, except that a few things are percent-escaped so that keys are plain text: ``%`` itself,
control characters, bytes of a name that is not valid UTF-8, and any ``.`` that would complete a
``...``. Keys map back to names exactly.

A change is decided by content: a file is new when its key is unknown, changed when its sha256
differs from the one last parsed, unchanged otherwise (a ``touch`` is not a change). A file is
*settled* when its mtime is at least ``settle_seconds`` old and, when there was a previous look,
its size and mtime did not move since then, so a half-copied file is not picked up while it grows.

A plan (``make_plan``) says which files a run parses: the new and changed ones (every file for a
full refresh). ``removal_refusal`` says when a plan removes too many of the published files to be
applied without the user's word.
"""

import hashlib
import os
import re
import stat
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from etl_project import ingest

_CONTROL = {chr(c) for c in [*range(0x20), 0x7F]}
_ESCAPE = re.compile(r"%([0-9A-F]{2})")
_HASH_CHUNK = 1 << 20


def file_key(name: str) -> str:
    out: list[str] = []
    for char in name:
        code = ord(char)
        if 0xDC80 <= code <= 0xDCFF:  # a byte of a non-UTF-8 name (surrogateescape)
            out.append(f"%{code - 0xDC00:02X}")
        elif char == "%" or char in _CONTROL or (char == "." and out[-2:] == [".", "."]):
            out.append(f"%{code:02X}")
        else:
            out.append(char)
    return "".join(out)


def file_name(key: str) -> str:
    def unescape(match: re.Match) -> str:
        code = int(match.group(1), 16)
        return chr(code + 0xDC00) if code >= 0x80 else chr(code)

    return _ESCAPE.sub(unescape, key)


@dataclass(frozen=True)
class FileState:
    """What a look at one file saw: size and mtime always, sha256 once the file was read."""

    size: int
    mtime_ns: int
    sha256: str | None = None

    def same_stat(self, other: "FileState | None") -> bool:
        return other is not None and (self.size, self.mtime_ns) == (other.size, other.mtime_ns)


def scan(root: Path) -> dict[str, FileState]:
    """Every candidate file of the landing folder by file key (symlinks are not followed:
    ingest rejects those that lead outside; a broken one is seen with size 0). A subfolder that
    cannot be listed is a candidate too, so that ingest records it as refused, not skipped.

    Raises ingest.LandingFolderError when the folder itself is missing, is a file or cannot be
    listed: that is never "no files"."""
    unlisted: list[OSError] = []
    paths = ingest.list_landing_files(root, unlisted)
    for error in unlisted:
        if error.filename and Path(error.filename) == root:
            raise ingest.LandingFolderError(f"cannot list the landing folder {root}: {error.strerror or error}")
    paths += [Path(error.filename) for error in unlisted if error.filename and Path(error.filename) != root]
    found = {}
    for path in paths:
        try:
            info = path.stat()
        except OSError:
            info = path.lstat()
        found[file_key(path.relative_to(root).as_posix())] = FileState(info.st_size, info.st_mtime_ns)
    return found


def sha256_of(path: Path) -> str | None:
    """The content hash, streamed; None when it is not a regular file or cannot be read (ingest
    records why). A pipe is never opened for reading, so it cannot block the caller."""
    digest = hashlib.sha256()
    try:
        if not stat.S_ISREG(path.stat().st_mode):
            return None
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with open(fd, "rb") as handle:
            while chunk := handle.read(_HASH_CHUNK):
                digest.update(chunk)
    except OSError:
        return None
    return digest.hexdigest()


@dataclass(frozen=True)
class Changes:
    """File keys by what happened to their file, each list sorted."""

    new: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    growing: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)

    @property
    def to_parse(self) -> list[str]:
        return sorted([*self.new, *self.changed])

    @property
    def present(self) -> set[str]:
        """Every key still in the folder, whatever happened to it."""
        return {*self.new, *self.changed, *self.growing, *self.unchanged}


def detect_changes(
    root: Path,
    current: Mapping[str, FileState],
    known: Mapping[str, str | None],
    previous: Mapping[str, FileState] | None = None,
    now_ns: int | None = None,
    settle_seconds: float = 0.0,
    parsed: Mapping[str, FileState] | None = None,
) -> tuple[Changes, dict[str, FileState]]:
    """Compare the folder (``current``) with the sha256 last parsed per key (``known``).

    ``previous`` is the previous look (size, mtime and sha256 per key) or None when there is no
    previous look (the CLI, a run): then a file is settled once its mtime is ``settle_seconds``
    old. ``parsed`` is what each file looked like when it was last parsed: a file with that same
    size and mtime (to the nanosecond) and a known sha256 is not read again, as for a file not
    touched since the previous look. Returns the changes and the
    states to remember for the next look (with sha256 filled in for the files that were hashed).
    """
    now_ns = now_ns if now_ns is not None else time.time_ns()
    settle_ns = int(settle_seconds * 1e9)
    new, changed, growing, unchanged = [], [], [], []
    seen: dict[str, FileState] = {}
    for key, state in sorted(current.items()):
        before = previous.get(key) if previous is not None else None
        cached = next((s for s in (before, (parsed or {}).get(key)) if s is not None and state.same_stat(s)), None)
        if cached is not None and cached.sha256 is not None and cached.sha256 == known.get(key):
            seen[key] = cached  # not touched since it was last hashed and parsed
            unchanged.append(key)
            continue
        settled = (previous is None or state.same_stat(before)) and now_ns - state.mtime_ns >= settle_ns
        if not settled:
            seen[key] = state
            growing.append(key)
            continue
        sha = sha256_of(root / file_name(key))
        seen[key] = FileState(state.size, state.mtime_ns, sha)
        if key not in known:
            new.append(key)
        elif sha != known[key]:  # an unreadable file (None) stays unchanged until it is readable
            changed.append(key)
        else:
            unchanged.append(key)
    removed = sorted(set(known) - set(current))
    return Changes(new, changed, removed, growing, unchanged), seen


@dataclass(frozen=True)
class Plan:
    """What a run parses, and what it removes."""

    changes: Changes
    to_parse: list[str]  # keys, sorted
    # The files the stage holds before the run (the last parse's manifest): what
    # removal_refusal weighs when the lake cannot be read.
    published: frozenset[str] = frozenset()
    full: bool = False
    # Each file of the folder as the look that made the plan saw it: size, mtime and sha256
    # (None: unreadable, or still growing and not read).
    looked: Mapping[str, FileState] = field(default_factory=dict)

    @property
    def removed(self) -> list[str]:
        return self.changes.removed


ALLOW_REMOVALS_HINT = "--allow-removals (the sensor and schedule: ETL_ALLOW_REMOVALS=1)"


def removal_refusal(plan: Plan, published: Collection[str] | None = None) -> str | None:
    """Why the plan must not run unless the user allows removals, or None when it may.

    A landing folder that suddenly lacks most of the files the warehouse holds is far more
    often a mistyped path, an unmounted share or a failed sync than a real clean-up; publishing
    it would empty the warehouse. So a plan that removes every published file (at least one), or
    more than half of them, is refused; exactly half is allowed, and a first run into an empty
    warehouse is never refused. ``published`` defaults to ``plan.published``.
    """
    held = set(plan.published if published is None else published)
    removed = [k for k in plan.removed if k in held]
    if not removed:
        return None
    if len(removed) == len(held):
        return (f"it would remove all {len(held)} published file(s): none of them is in the landing folder "
                "any more (a mistyped path, an unmounted share or a failed sync?)")
    if 2 * len(removed) > len(held):
        return (f"it would remove {len(removed)} of the {len(held)} published files, more than half "
                "(a mistyped path, an unmounted share or a failed sync?)")
    return None


def make_plan(changes: Changes, full: bool = False, published: Collection[str] = (),
              looked: Mapping[str, FileState] | None = None) -> Plan:
    """A run parses the new and changed files; a full refresh every settled file (a file still
    growing waits either way: a known one keeps the rows it was last parsed to)."""
    to_parse = sorted([*changes.new, *changes.changed, *changes.unchanged]) if full else changes.to_parse
    return Plan(changes, to_parse, frozenset(published), full, dict(looked or {}))
