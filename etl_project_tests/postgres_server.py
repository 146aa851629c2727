"""A throwaway PostgreSQL server for tests (Debian's ``postgresql`` package): data in a
temporary folder, bound to 127.0.0.1 on a free port, stopped at the end. The fixture
``postgres_catalog`` (conftest.py) yields the ``postgres:`` DuckLake catalog string of its database."""

import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest


def _postgres_bin() -> Path | None:
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/postgres"), key=lambda p: int(p.parts[-3]))
    if found:
        return found[-1].parent
    on_path = shutil.which("postgres")
    return Path(on_path).parent if on_path else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def postgres_server():
    """A throwaway PostgreSQL server on 127.0.0.1 (data in a temporary folder, stopped at the
    end); yields the ``postgres:`` catalog string of its database."""
    psycopg = pytest.importorskip("psycopg", reason="psycopg is not installed (the dev or postgres extra)")
    bin_dir = _postgres_bin()
    if bin_dir is None or not (bin_dir / "initdb").exists():
        pytest.skip("no PostgreSQL server binaries (Debian: apt-get install postgresql)")
    as_user = {}
    if os.geteuid() == 0:  # the server refuses to run as root
        try:
            account = pwd.getpwnam("postgres")
        except KeyError:
            pytest.skip("running as root, and there is no 'postgres' user to run the server as")
        as_user = {"user": account.pw_uid, "group": account.pw_gid, "extra_groups": []}
    # Not under pytest's tmp_path: its root is private to root, and the server's user must reach it.
    root = Path(tempfile.mkdtemp(prefix="etl-pg-"))
    server = None
    try:
        data, sockets = root / "data", root / "sockets"
        sockets.mkdir()
        if as_user:
            for path in (root, sockets):
                os.chown(path, as_user["user"], as_user["group"])
        env = {"PATH": os.environ.get("PATH", ""), "LANG": "C.UTF-8", "HOME": str(root)}
        subprocess.run([str(bin_dir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"],
                       cwd=root, env=env, check=True, capture_output=True, **as_user)
        port = _free_port()
        log = open(root / "server.log", "w")
        server = subprocess.Popen(
            [str(bin_dir / "postgres"), "-D", str(data), "-p", str(port), "-k", str(sockets),
             "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off"],
            cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT, **as_user,
        )
        conninfo = f"dbname=postgres host=127.0.0.1 port={port} user=postgres"
        deadline = time.monotonic() + 60
        while True:
            try:
                psycopg.connect(conninfo, connect_timeout=2).close()
                break
            except psycopg.OperationalError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError("PostgreSQL did not start:\n" + (root / "server.log").read_text()) from None
                time.sleep(0.2)
        yield f"postgres:{conninfo}"
    finally:
        if server is not None:
            server.send_signal(signal.SIGINT)  # fast shutdown
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
        shutil.rmtree(root, ignore_errors=True)
