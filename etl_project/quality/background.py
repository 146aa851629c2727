"""A run's suite checks, validated in the background while the run goes on.

Each suite check (suites.SUITE_CHECKS) is validated in the Great Expectations worker
(runner.GxWorker), which makes the check's frame itself from the staged tables' files. It starts
as soon as the run has staged every table the check reads (the IO manager calls ``start_ready``),
so validating one stage overlaps the next stage on the other core instead of sitting between
them. The check's step and the publish gate then ask for the verdict (``verdict``): started
already, or started then (a run of only some assets).
"""

import functools
import os
import shutil
import threading
from concurrent.futures import Future
from pathlib import Path

import polars as pl

from etl_project import stage
from etl_project.quality import runner
from etl_project.quality.suites import SUITE_CHECKS, SuiteCheck

# Data Docs of this many runs are kept (each run's site is its own folder; check links stay valid).
KEEP_DOCS_RUNS = 20

SCOPE = runner.SCOPE  # in validated_paths: the papers whose rows a per-paper check validates
# (run id, check name) -> (the files validated, the verdict to come)
_started: dict[tuple[str, str], tuple[dict[str, Path], Future]] = {}
_lock = threading.Lock()


def start(run_id: str, warehouse: Path, check: SuiteCheck, paths: dict[str, Path], build: str | None = None) -> Future:
    """The validation of ``check`` on ``paths`` (one staged file per table it reads) for this
    run of ``warehouse``, started now unless it was already. An error making the suite becomes
    the future's error, so that the check's step reports it. ``build``: validated_paths."""
    paths = validated_paths(check, paths, build)
    with _lock:
        known = _started.get((run_id, check.name))
        if known and known[0] == paths:
            return known[1]
        try:
            suite = check.suite(*(pl.scan_parquet(paths[t]) for t in check.tables))
            future = runner.GxWorker.shared().submit_staged(check.name, suite, paths, docs_dir(warehouse, run_id))
        except Exception as exc:  # noqa: BLE001 - raised again where the verdict is asked for
            future = Future()
            future.set_exception(exc)
        _started[(run_id, check.name)] = (paths, future)
        return future


def validated_paths(check: SuiteCheck, paths: dict[str, Path], build: str | None) -> dict[str, Path]:
    """The files ``check`` validates: for a check of the landing rows not yet validated
    (SuiteCheck.delta), each staged table's delta that this ``build`` chose beside it; for a
    per-paper check (SuiteCheck.per_paper), the tables and, as ``SCOPE``, the papers whose rows it
    validates, which this ``build`` wrote beside the checked table; the tables themselves when
    there is none (staged by other code or settings, which may validate otherwise) or no build is
    given."""
    if build is None:
        return paths
    if check.per_paper:
        scope = stage.scope_path(paths[check.asset], build, paths["papers"])
        return {**paths, SCOPE: scope} if scope.exists() else paths
    if not check.delta:
        return paths
    deltas = {table: stage.delta_path(path, build) for table, path in paths.items()}
    return deltas if all(path.exists() for path in deltas.values()) else paths


def validated_rows(check: SuiteCheck, paths: dict[str, Path], build: str | None) -> str:
    """What of its tables ``check`` validates (validated_paths), in words."""
    chosen = validated_paths(check, paths, build)
    if SCOPE in chosen:
        return "rows of the papers worked out again (the rows taken over met every expectation before)"
    if check.delta and chosen != paths:
        return "rows of the files this code had not validated"
    return "whole table"


def verdict(run_id: str, warehouse: Path, check: SuiteCheck, paths: dict[str, Path], build: str | None = None) -> runner.SuiteResult:
    """The check's result on ``paths``: waits for the validation started earlier, or runs it now.
    A per-paper check whose every expectation is met says so beside the checked table: what lets
    the next run validate only the papers it works out."""
    result = runner.GxWorker.result(start(run_id, warehouse, check, paths, build))
    if check.per_paper and build is not None and result.passed:
        stage.passed_path(paths[check.asset], check.name, build, paths["papers"]).touch()
    return result


def passed_before(rows: Path, asset: str, build: str, papers: Path) -> bool:
    """Whether the staged table ``rows`` of ``asset`` met every expectation of each of its
    per-paper checks under ``build``, against ``papers`` (verdict's markers): what lets a run
    that takes rows over from it validate only the others."""
    return all(stage.passed_path(rows, check.name, build, papers).exists()
               for check in SUITE_CHECKS.values() if check.asset == asset and check.per_paper)


def start_ready(run_id: str, warehouse: Path, asset: str, build: str | None = None) -> None:
    """``asset`` was just staged by this run: start every check that reads it and whose other
    tables this run has staged too (``build``: validated_paths)."""
    for check in SUITE_CHECKS.values():
        if asset not in check.tables:
            continue
        paths = {table: stage.run_path(warehouse, run_id, table) for table in check.tables}
        if all(path.exists() for path in paths.values()):
            start(run_id, warehouse, check, paths, build)


def forget(run_id: str) -> None:
    """Drop a finished run's verdicts."""
    with _lock:
        for key in [key for key in _started if key[0] == run_id]:
            del _started[key]


def docs_dir(warehouse: Path, run_id: str) -> Path:
    """This run's Great Expectations Data Docs site, ``<warehouse>/data_docs/runs/<run_id>/``;
    ``data_docs/latest`` points at the newest run's."""
    return run_docs(warehouse / "data_docs", run_id)


@functools.cache
def run_docs(root: Path, run_id: str) -> Path:
    """Made once per run: the folder, the ``latest`` link, and old runs' sites pruned."""
    folder = root / "runs" / run_id
    folder.mkdir(parents=True, exist_ok=True)
    _point_link(root / "latest", Path("runs") / run_id)
    older = sorted((p for p in folder.parent.iterdir() if p != folder), key=lambda p: p.stat().st_mtime)
    for old in older[: max(0, len(older) - (KEEP_DOCS_RUNS - 1))]:
        shutil.rmtree(old, ignore_errors=True)
    return folder


def _point_link(link: Path, target: Path) -> None:
    """Make ``link`` a symlink to ``target`` with one rename (a reader never sees it missing)."""
    staging = link.with_name(f".{link.name}.new")
    staging.unlink(missing_ok=True)
    staging.symlink_to(target)
    os.replace(staging, link)
