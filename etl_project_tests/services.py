"""Real services for the end-to-end test: `dagster dev` (webserver and daemon) in its own process
group, its GraphQL API, and headless Chromium. Everything binds to and talks to 127.0.0.1 only:
HTTP goes through an opener without proxies, Chromium is told to use no proxy and to resolve no
other host.
"""

import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

LOCALHOST = "127.0.0.1"
T = TypeVar("T")

# Runs in these states are still on their way; everything else is final.
UNFINISHED_RUN_STATUSES = {"QUEUED", "NOT_STARTED", "STARTING", "STARTED", "MANAGED", "CANCELING"}

_NO_PROXY_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOCALHOST, 0))
        return sock.getsockname()[1]


def group_alive(pgid: int) -> bool:
    """Whether a process of the group is still running (zombies waiting to be reaped do not count)."""
    proc = Path("/proc")
    if not proc.is_dir():
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        return True
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # the process ended while we looked
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


def stop_process_group(proc: subprocess.Popen, term_seconds: float = 30, kill_seconds: float = 10) -> str:
    """Stop ``proc`` (a group leader, started with ``start_new_session``) and every process of its
    group: SIGTERM, then SIGKILL to whatever is left after ``term_seconds``. Returns what it did."""
    pgid = proc.pid
    done = []
    for sig, grace in ((signal.SIGTERM, term_seconds), (signal.SIGKILL, kill_seconds)):
        if proc.poll() is not None and not group_alive(pgid):
            break
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            break
        done.append(sig.name)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            if proc.poll() is not None and not group_alive(pgid):
                break
            time.sleep(0.2)
    try:
        proc.wait(timeout=kill_seconds)
    except subprocess.TimeoutExpired:
        pass
    if group_alive(pgid):
        raise RuntimeError(f"process group {pgid} still has live processes after {', '.join(done)}")
    return " then ".join(done) or "already stopped"


def tail(path: Path, lines: int = 60, width: int = 400) -> str:
    """The last ``lines`` lines of a log file, each cut to ``width`` characters."""
    if not path.exists():
        return f"(no log at {path})"
    text = path.read_text(errors="replace").splitlines()[-lines:]
    return "\n".join(line if len(line) <= width else line[:width] + " …" for line in text)


class DagsterDev:
    """``dagster dev`` started from ``project_root`` (its workspace.yaml) on 127.0.0.1:``port``,
    in its own process group, output to ``log_path``. Use as a context manager: leaving it stops
    every process of the group, also when the body failed."""

    def __init__(self, project_root: Path, env: dict[str, str], log_path: Path, port: int | None = None):
        self.project_root = project_root
        self.env = env
        self.log_path = log_path
        self.port = port or free_port()
        self.url = f"http://{LOCALHOST}:{self.port}"
        self.proc: subprocess.Popen | None = None
        self.stopped_with = ""

    def __enter__(self) -> "DagsterDev":
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "dagster", "dev", "-h", LOCALHOST, "-p", str(self.port)],
                cwd=self.project_root, env=self.env, stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True,
            )
        return self

    def __exit__(self, *exc) -> None:
        if self.proc is not None:
            self.stopped_with = stop_process_group(self.proc)

    def log_tail(self, lines: int = 60) -> str:
        return f"--- last {lines} lines of {self.log_path} ---\n{tail(self.log_path, lines)}"

    def fail(self, message: str) -> AssertionError:
        return AssertionError(f"{message}\n{self.log_tail()}")

    def graphql(self, query: str, variables: dict | None = None, timeout: float = 30) -> dict:
        """POST a query to the webserver's /graphql; its ``data``, or an error with the messages."""
        request = urllib.request.Request(
            f"{self.url}/graphql",
            data=json.dumps({"query": query, "variables": variables or {}}).encode(),
            headers={"Content-Type": "application/json"},
        )
        with _NO_PROXY_OPENER.open(request, timeout=timeout) as response:
            body = json.load(response)
        if body.get("errors"):
            raise RuntimeError(f"GraphQL errors: {json.dumps(body['errors'])[:2000]}")
        return body["data"]

    def wait_for(self, what: str, probe: Callable[[], T | None], timeout: float, interval: float = 1.0) -> T:
        """Call ``probe`` until it returns something other than None (or raises AssertionError,
        which fails at once); fail with ``what``, the last error and the log's tail after ``timeout``."""
        deadline = time.monotonic() + timeout
        last_error = ""
        while True:
            if self.proc is not None and self.proc.poll() is not None:
                raise self.fail(f"dagster dev exited with code {self.proc.returncode} while waiting for {what}")
            try:
                result = probe()
            except AssertionError:
                raise
            except Exception as exc:  # not up yet, connection refused, a file being replaced
                result, last_error = None, f"{type(exc).__name__}: {exc}"
            if result is not None:
                return result
            if time.monotonic() > deadline:
                raise self.fail(f"timed out after {timeout:.0f} s waiting for {what}" + (f" (last error: {last_error})" if last_error else ""))
            time.sleep(interval)

    def wait_until_loaded(self, location: str, timeout: float) -> None:
        """Until the webserver answers and has loaded the code location (fails at once when the
        location has a load error)."""

        def loaded():
            data = self.graphql(WORKSPACE_QUERY, timeout=10)
            entries = {e["name"]: e for e in data["workspaceOrError"].get("locationEntries", [])}
            entry = entries.get(location)
            if entry is None or entry["loadStatus"] != "LOADED":
                return None
            outcome = entry["locationOrLoadError"]
            if outcome["__typename"] == "PythonError":
                raise self.fail(f"code location {location} failed to load: {outcome['message']}\n{outcome['stack']}")
            return True

        self.wait_for(f"the webserver on {self.url} to load code location {location!r}", loaded, timeout)

    def runs(self) -> list[dict]:
        """Every run of the instance, newest first: ``{runId, status, tags: {key: value}}``."""
        results = self.graphql(RUNS_QUERY)["runsOrError"]["results"]
        return [{**r, "tags": {t["key"]: t["value"] for t in r["tags"]}} for r in results]

    def run_errors(self, run_id: str) -> str:
        """The error messages of a run's events (step failures, run failure), for a failure message."""
        events = self.graphql(RUN_EVENTS_QUERY, {"runId": run_id})["logsForRun"].get("events", [])
        lines = [
            f"{e.get('stepKey') or 'run'}: {(e.get('error') or {}).get('message') or e.get('message')}"
            for e in events
            if e.get("level") == "ERROR" or e["__typename"] in ("ExecutionStepFailureEvent", "RunFailureEvent")
        ]
        return "\n".join(lines) or "(no error events)"

    def assert_no_failed_runs(self) -> list[dict]:
        """Every run so far; fails with the errors of any run that failed or was canceled."""
        runs = self.runs()
        bad = [r for r in runs if r["status"] in ("FAILURE", "CANCELED")]
        if bad:
            details = "\n".join(f"run {r['runId']} {r['status']} tags={r['tags']}\n{self.run_errors(r['runId'])}" for r in bad)
            raise self.fail(f"{len(bad)} run(s) did not succeed:\n{details}")
        return runs

    def sensor_ticks(self, location: str, sensor: str, limit: int = 5) -> str:
        """The sensor's status and last ticks, for a failure message."""
        selector = {"repositoryLocationName": location, "repositoryName": "__repository__", "sensorName": sensor}
        data = self.graphql(SENSOR_QUERY, {"selector": selector, "limit": limit})["sensorOrError"]
        state = data.get("sensorState")
        if not state:
            return f"sensor {sensor}: {data}"
        ticks = [
            f"  {t['status']}: {t.get('skipReason') or ''}{(t.get('error') or {}).get('message') or ''} runs={t['runIds']}"
            for t in state["ticks"]
        ]
        return "\n".join([f"sensor {sensor}: {state['status']}, last ticks:", *ticks])


WORKSPACE_QUERY = """
query {
  workspaceOrError {
    ... on Workspace {
      locationEntries {
        name
        loadStatus
        locationOrLoadError { __typename ... on PythonError { message stack } }
      }
    }
  }
}
"""

RUNS_QUERY = """
query {
  runsOrError { ... on Runs { results { runId status tags { key value } } } }
}
"""

RUN_EVENTS_QUERY = """
query ($runId: ID!) {
  logsForRun(runId: $runId) {
    ... on EventConnection {
      events {
        __typename
        ... on MessageEvent { message level stepKey }
        ... on ExecutionStepFailureEvent { error { message } }
      }
    }
  }
}
"""

SENSOR_QUERY = """
query ($selector: SensorSelector!, $limit: Int) {
  sensorOrError(sensorSelector: $selector) {
    ... on Sensor { sensorState { status ticks(limit: $limit) { status skipReason runIds error { message } } } }
    ... on PythonError { message }
  }
}
"""


def find_chromium() -> str | None:
    """Debian's chromium (what .ci/run installs), else a chromium on PATH."""
    return next((p for p in ("/usr/bin/chromium", shutil.which("chromium")) if p and Path(p).exists()), None)


def render_page(
    chromium: str, url: str, dom_path: Path, screenshot_path: Path, profile: Path,
    window: tuple[int, int] = (1400, 900), budget_ms: int = 15_000, timeout: float = 120,
) -> str:
    """Load ``url`` in headless Chromium with a fresh profile, let the page run for ``budget_ms``
    of virtual time, and save the rendered DOM and a screenshot. Returns the DOM."""
    args = [
        chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic",
        "--no-proxy-server", f"--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE {LOCALHOST}",
        f"--user-data-dir={profile}", f"--window-size={window[0]},{window[1]}",
        f"--virtual-time-budget={budget_ms}", f"--screenshot={screenshot_path}", "--dump-dom", url,
    ]
    log_path = dom_path.with_suffix(".chromium.log")
    with open(dom_path, "wb") as dom, open(log_path, "wb") as log:
        proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=dom, stderr=log, start_new_session=True)
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            code = None
        finally:
            stop_process_group(proc, term_seconds=5)
    if code != 0:
        raise AssertionError(
            f"chromium {'timed out' if code is None else f'exited with {code}'} on {url}\n"
            f"--- {log_path} ---\n{tail(log_path, 30)}"
        )
    return dom_path.read_text(errors="replace")


def visible_text(html: str) -> str:
    """The text of a DOM dump without scripts, styles and tags, whitespace folded."""
    html = re.sub(r"<(script|style)\b.*?</\1>", " ", html, flags=re.S | re.I)
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


def png_size(path: Path) -> tuple[int, int]:
    """Width and height from a PNG's header; fails when the file is not a PNG."""
    header = path.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n" and header[12:16] == b"IHDR", f"{path} is not a PNG"
    return struct.unpack(">II", header[16:24])
