"""One run at a time per warehouse: the lock a run holds from its start to its end.

Two runs at once (the CLI and the UI, two sensor ticks, two machines sharing a catalog) would
write the stage and commit to the DuckLake catalog together; with this lock the second waits for
the first and says so ("waiting for run X (pid N) to finish"), in its log and on the terminal.

What is locked depends on the catalog (``settings.catalog``):

- ``postgres:<libpq conninfo>``: a session-level ``pg_advisory_lock`` taken on a connection of
  its own to the catalog's server, held until the run ends. Runs on any machine that reach the
  same database take turns, and the server releases the lock when that connection closes, also
  when the process holding it is killed. The holder names itself in ``application_name``; a
  waiter finds it through ``pg_locks`` and ``pg_stat_activity``. Needs psycopg (the ``postgres``
  extra).
- anything else (the embedded SQLite catalog): an ``flock`` on ``.run.lock`` next to the catalog
  file (``<warehouse>/.run.lock`` by default), which names its holder in its content. It
  serializes the processes of one machine; a catalog file on a network share needs PostgreSQL.
"""

import contextlib
import hashlib
import json
import os
import re
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from etl_project import locks

LOCK_FILE = ".run.lock"
POLL_SECONDS = 0.2
POSTGRES_POLL_SECONDS = 0.5
# One lock per catalog database: advisory locks are per database already, and a DuckLake catalog
# is one per database here, so the key needs nothing from the (host, user, ...) spelling of the
# conninfo, which differs between machines that reach the same server.
ADVISORY_KEY_NAME = "etl_project/run-lock"
APPLICATION_NAME = re.compile(r"^etl_project (?:run )?(?P<run_id>\S+) pid (?P<pid>\d+)$")


# What this process holds: lock target -> (run id, depth).
_HELD: dict[str, tuple[str, int]] = {}
_HELD_GUARD = threading.Lock()


class Log(Protocol):
    def info(self, msg: str) -> None: ...
    def warning(self, msg: str) -> None: ...


@dataclass(frozen=True)
class Holder:
    run_id: str
    pid: int | None = None
    host: str = ""

    def describe(self) -> str:
        where = [f"pid {self.pid}"] if self.pid is not None else []
        if self.host and self.host != socket.gethostname():
            where.append(f"on {self.host}")
        return f"run {self.run_id}" + (f" ({' '.join(where)})" if where else "")


def advisory_key(name: str = ADVISORY_KEY_NAME) -> int:
    """A signed 64-bit key for ``pg_advisory_lock`` (stable across machines and versions)."""
    return int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest(), "big", signed=True)


def postgres_conninfo(catalog: str) -> str | None:
    """The libpq conninfo of a ``postgres:`` catalog (``ducklake:`` prefix allowed), else None."""
    value = catalog.strip().removeprefix("ducklake:")
    for prefix in ("postgres:", "postgresql:"):
        if value.startswith(prefix) and not value.startswith("postgresql://"):
            return value[len(prefix):].strip()
    if value.startswith(("postgresql://", "postgres://")):
        return value
    return None


def lock_file(catalog: str, warehouse: Path) -> Path:
    """The lock file of a non-PostgreSQL catalog: next to its file, else in the warehouse."""
    value = catalog.strip().removeprefix("ducklake:")
    scheme, sep, rest = value.partition(":")
    if not sep or len(scheme) == 1:  # a bare path (a DuckDB catalog file; "C:" is a drive)
        rest = value
    elif scheme not in ("sqlite", "duckdb"):
        return Path(warehouse) / LOCK_FILE
    return Path(rest).expanduser().resolve().parent / LOCK_FILE if rest else Path(warehouse) / LOCK_FILE


@contextlib.contextmanager
def hold(catalog: str, warehouse: Path, run_id: str | None, log: Log, poll_seconds: float | None = None):
    """Hold the warehouse's run lock for the ``with`` block, waiting for it when another run has
    it: logs (WARNING) which run it waits for, and (INFO) when it got the lock."""
    reentrant = bool(run_id)  # only a run is known to be the same one
    run_id = run_id or "(outside a run)"
    conninfo = postgres_conninfo(catalog)
    target = f"postgres:{conninfo}" if conninfo is not None else str(lock_file(catalog, warehouse))
    # The same run taking it again in this process (a second resource holding it) holds it already:
    # a second flock or session would wait for the run itself, forever.
    with _HELD_GUARD:
        if reentrant and _HELD.get(target, (None, 0))[0] == run_id:
            _HELD[target] = (run_id, _HELD[target][1] + 1)
            reentered = True
        else:
            reentered = False
    if reentered:
        try:
            yield
        finally:
            with _HELD_GUARD:
                _HELD[target] = (run_id, _HELD[target][1] - 1)
        return
    started = time.monotonic()
    waited = []

    def on_wait(who: str | None, where: str) -> None:
        waited.append(who)
        log.warning(f"waiting for {who or 'another run'} to finish: it holds the warehouse lock ({where})")

    if conninfo is not None:
        lock = _postgres_lock(conninfo, run_id, on_wait, poll_seconds or POSTGRES_POLL_SECONDS, log)
    else:
        lock = _file_lock(lock_file(catalog, warehouse), run_id, on_wait, poll_seconds or POLL_SECONDS)
    with lock as where:
        after = f" after waiting {time.monotonic() - started:.1f} s" if waited else ""
        log.info(f"run {run_id} holds the warehouse lock ({where}){after}")
        with _HELD_GUARD:
            _HELD[target] = (run_id, 1)
        try:
            yield
        finally:
            with _HELD_GUARD:
                del _HELD[target]


@contextlib.contextmanager
def _file_lock(path: Path, run_id: str, on_wait, poll_seconds: float):
    me = json.dumps({"run_id": run_id, "pid": os.getpid(), "host": socket.gethostname()})

    def report(text: str) -> None:
        holder = _parse_holder(text)
        on_wait(holder.describe() if holder else None, str(path))

    with locks.file_lock(path, holder=me, on_wait=report, poll_seconds=poll_seconds):
        yield str(path)


def _parse_holder(text: str) -> Holder | None:
    try:
        data = json.loads(text)
        return Holder(str(data["run_id"]), int(data["pid"]) if data.get("pid") is not None else None, data.get("host", ""))
    except (ValueError, KeyError, TypeError):
        return None


_HOLDER_SQL = """
SELECT a.application_name, a.pid, host(a.client_addr), a.client_hostname
FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND l.classid::bigint = %s AND l.objid::bigint = %s
LIMIT 1
"""


@contextlib.contextmanager
def _postgres_lock(conninfo: str, run_id: str, on_wait, poll_seconds: float, log: Log):
    psycopg = _psycopg()
    key = advisory_key()
    # application_name keeps 63 bytes: "etl_project run " + a 36-character run id + " pid " + a
    # 7-digit pid is one too many, and a cut pid would name another process.
    name = f"etl_project run {run_id} pid {os.getpid()}"
    if len(name.encode()) > 63:
        name = f"etl_project {run_id} pid {os.getpid()}"
    with psycopg.connect(conninfo, autocommit=True, application_name=name) as con:
        where = _describe_server(con)
        # The lock lives as long as this idle session: no server timeout may end it mid-run, and
        # keepalives let the server notice a holder whose machine died.
        for setting, value in (("tcp_keepalives_idle", "60"), ("tcp_keepalives_interval", "10"),
                               ("tcp_keepalives_count", "6"), ("idle_session_timeout", "0")):
            if setting != "idle_session_timeout" or con.info.server_version >= 140000:
                con.execute("SELECT set_config(%s, %s, false)", (setting, value))
        reported = None
        while not con.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()[0]:
            row = con.execute(_HOLDER_SQL, ((key >> 32) & 0xFFFFFFFF, key & 0xFFFFFFFF)).fetchone()
            if row and row[1] != reported:  # a new holder (by server pid)
                on_wait(_describe_session(row), where)
                reported = row[1]
            time.sleep(poll_seconds)
        try:
            yield where
        finally:
            try:
                con.execute("SELECT pg_advisory_unlock(%s)", (key,))
            except psycopg.Error as exc:  # the session ended: the server released the lock with it
                log.warning(f"the warehouse lock's session to the catalog's server ended during the run "
                            f"({str(exc).strip()}): another run may have started before this one ended")


def _describe_session(row) -> str:
    application, backend_pid, address, hostname = row
    match = APPLICATION_NAME.match(application or "")
    if not match:  # not an etl_project run: the server session that holds it
        return f"session {application or '(unnamed)'!r} (server pid {backend_pid})"
    remote = hostname or (address if address not in (None, "127.0.0.1", "::1") else "")
    return Holder(match["run_id"], int(match["pid"]), remote).describe()


def _describe_server(con) -> str:
    info = con.info  # never the password
    return f"PostgreSQL advisory lock {advisory_key()} in database {info.dbname} on {info.host}:{info.port}"


def _psycopg():
    try:
        import psycopg
    except ImportError:
        raise ImportError(
            "a postgres: DuckLake catalog needs psycopg for the run lock: pip install 'etl_project[postgres]'"
        ) from None
    return psycopg
