"""Run a Suite with Great Expectations 1.x on a Polars frame, and render its Data Docs.

GX costs seconds to import, so it is imported on first use, and one ephemeral context serves the
whole process; each suite's validation definition is registered once and reused while the suite
is unchanged. A Dagster run validates in a GxWorker process instead, started with the run, so
that import overlaps the run's first steps.

GX validates pandas, so the frame is cut down at the boundary to what the rules need (see
``gx_frame``): only the columns a suite reads, and a string column that only identity rules read
(not null, unique, compound unique) as an exact integer code instead of its text, so GX never
converts, hashes or factorizes long strings such as dedup keys. Samples of unexpected values are
translated back to the original text.

Data Docs: each validation is stored in the context (in memory) and its page rendered into a
static site in the folder the caller gives (one per run: see etl_project/defs/checks.py). One
site builder per folder is kept, so its page templates are compiled once per process. GX's pages
load their scripts and styles from CDNs; the site gets copies of those files
(etl_project/quality/data_docs_static/, see its README) and every page written is pointed at them,
so the Data Docs work without internet.
"""

import atexit
import contextlib
import functools
import math
import os
import queue
import re
import shutil
import sys
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from etl_project.quality.suites import ERROR, WARN, Rule, Suite

SAMPLE_SIZE = 5

# Rules that only ask whether values are missing or equal to each other: any one-to-one,
# null-preserving recoding of a column gives them the same verdict on the same rows.
IDENTITY_RULES = frozenset({
    "ExpectColumnValuesToNotBeNull", "ExpectColumnValuesToBeUnique", "ExpectCompoundColumnsToBeUnique",
})
_NULL_ONLY = frozenset({"ExpectColumnValuesToNotBeNull"})


@dataclass(frozen=True)
class RuleResult:
    rule: Rule
    success: bool
    element_count: int | None = None
    unexpected_count: int | None = None
    unexpected_percent: float | None = None
    observed_value: object = None
    samples: list = field(default_factory=list)
    exception: str | None = None


@dataclass(frozen=True)
class SuiteResult:
    suite: Suite
    row_count: int
    results: list[RuleResult]
    docs_page: str | None = None  # file:// URL of this validation's Data Docs page
    docs_index: str | None = None

    @property
    def failed(self) -> list[RuleResult]:
        return [r for r in self.results if not r.success]

    @property
    def passed(self) -> bool:
        """True only when every expectation was met: a failed WARN rule fails the suite too."""
        return not self.failed

    @property
    def blocks(self) -> bool:
        """Whether an ERROR rule failed: only then does the suite stop what depends on it."""
        return any(r.rule.severity == ERROR for r in self.failed)

    @property
    def severity(self) -> str:
        """WARN when the only failed rules are WARN rules (reported, not blocking), else ERROR."""
        return WARN if self.failed and not self.blocks else ERROR


@functools.cache
def _gx():
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    import great_expectations as gx
    from great_expectations.data_context.types.base import ProgressBarsConfig
    from great_expectations.execution_engine import pandas_execution_engine

    # GX labels each pandas batch under 1 GB with a hash of every cell ("pandas_data_fingerprint"),
    # used for nothing else: at a million rows that hash was most of a suite's time. Off.
    pandas_execution_engine.HASH_THRESHOLD = 0
    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False, metric_calculations=False)
    batch_definition = (
        context.data_sources.add_pandas("etl_frames")
        .add_dataframe_asset("frame")
        .add_batch_definition_whole_dataframe("whole_frame")
    )
    return gx, context, batch_definition


_validations: dict[str, tuple[Suite, object]] = {}


def _validation(suite: Suite):
    """The GX validation definition of ``suite``: registered on first use and again only when the
    suite's rules change (records and paper_topics suites carry run-dependent values)."""
    known = _validations.get(suite.name)
    if known and known[0] == suite:
        return known[1]
    gx, context, batch_definition = _gx()
    gx_suite = gx.ExpectationSuite(name=suite.name)
    for index, rule in enumerate(suite.rules):
        expectation_class = getattr(gx.expectations, rule.expectation)
        gx_suite.add_expectation(expectation_class(**rule.kwargs, meta={"rule_index": index}))
    gx_suite = context.suites.add_or_update(gx_suite)
    validation = context.validation_definitions.add_or_update(
        gx.ValidationDefinition(name=suite.name, data=batch_definition, suite=gx_suite)
    )
    _validations[suite.name] = (suite, validation)
    return validation


_ROW = "__gx_row_index__"


def identity_code(column: str) -> pl.Expr:
    """An exact integer stand-in for ``column``: null where it is null, else the row index of the
    value's first occurrence, so equal values share a code and different values never do.
    Needs the row index as column ``_ROW``.

    Only rows whose 64-bit hash repeats are grouped by their text; every other value is unique
    already (different hashes mean different values) and keeps its own row index.
    """
    value, row = pl.col(column), pl.col(_ROW)
    repeated = value.hash().is_duplicated()
    return (
        pl.when(value.is_null()).then(None)
        .when(repeated).then(row.first().over(pl.when(repeated).then(value)))
        .otherwise(row)
        .alias(column)
    )


def _as_wide_number(column: str, dtype: pl.DataType) -> pl.Expr:
    """``column``, with any other integer type as Int64 and Float32 as Float64: GX's pandas
    range rule is vectorized only for those two dtypes and calls a Python function per value for
    the rest (UInt32 lengths and counts, as Polars makes them). Both casts are exact (UInt64 past
    Int64's range is not: it stays as it is)."""
    if dtype.is_integer() and dtype not in (pl.Int64, pl.UInt64):
        return pl.col(column).cast(pl.Int64)
    if dtype == pl.Float32:
        return pl.col(column).cast(pl.Float64)
    return pl.col(column)


def gx_frame(suite: Suite, frame: pl.DataFrame) -> tuple[pl.DataFrame, list[str]]:
    """The frame GX validates: the suite's columns, with every string column that only identity
    rules read recoded as integers (a column only checked for nulls keeps its row index).
    Returns it and the names of the recoded columns (their codes are row indexes of ``frame``)."""
    columns = suite.columns() or frame.columns[:1]
    exprs, coded = [], []
    for column in columns:
        kinds = {r.expectation for r in suite.rules if column in r.columns()}
        dtype = frame.schema[column]
        if dtype not in (pl.String, pl.Binary) or not kinds <= IDENTITY_RULES:
            exprs.append(_as_wide_number(column, dtype))
            continue
        coded.append(column)
        if kinds <= _NULL_ONLY:
            exprs.append(pl.when(pl.col(column).is_not_null()).then(pl.col(_ROW)).alias(column))
        else:
            exprs.append(identity_code(column))
    return frame.lazy().with_row_index(_ROW).select(exprs).collect(), coded


def run_suite(suite: Suite, frame: pl.DataFrame | pl.LazyFrame, docs_dir: Path | None = None) -> SuiteResult:
    """Validate ``frame`` against ``suite`` with GX in this process; with ``docs_dir``, also render
    the result's Data Docs page and the site index there. A LazyFrame is collected with only the
    suite's columns, so a check over a scan of a big table never loads the columns it does not
    read. (A Dagster run validates in its GxWorker instead: GxWorker.submit_staged.)"""
    return _run_suite(suite, frame, docs_dir, validate_narrow)


def _run_suite(suite: Suite, frame: pl.DataFrame | pl.LazyFrame, docs_dir: Path | None, validate) -> SuiteResult:
    if isinstance(frame, pl.LazyFrame):
        frame = frame.select(suite.columns() or pl.first()).collect()
    narrow, coded = gx_frame(suite, frame)
    outcomes, page, index = validate(suite, narrow, docs_dir)
    decode = functools.partial(_decode, {c: frame[c] for c in coded})
    results = [_rule_result(rule, outcomes[i], decode) for i, rule in enumerate(suite.rules)]
    return SuiteResult(suite, frame.height, results, page, index)


def validate_narrow(suite: Suite, narrow: pl.DataFrame, docs_dir: Path | None) -> tuple[list[dict], str | None, str | None]:
    """GX's part of run_suite, on the frame gx_frame made: each rule's outcome as a plain dict
    (in the suite's order), and the Data Docs page and index when ``docs_dir`` is given."""
    outcome = _validation(suite).run(
        batch_parameters={"dataframe": narrow.to_pandas()},
        result_format={"result_format": "SUMMARY", "partial_unexpected_count": SAMPLE_SIZE},
    )
    by_index = {r.expectation_config.meta["rule_index"]: r for r in outcome.results}
    outcomes = [_outcome(by_index[i]) for i in range(len(suite.rules))]
    if docs_dir is None:
        return outcomes, None, None
    page = _DocsPage.newest(docs_dir, suite.name)
    page.render()
    return outcomes, page.url, page.index_url


class GxWorker:
    """Great Expectations in a process of its own, for the checks of a Dagster run.

    Importing GX costs about 3 s of one core, and the first check of a run would wait for it. A
    worker started when the run starts (or, for ``etl-project run``, when the command starts)
    imports GX while this process parses the landing files. A check is handed to it by name with
    the staged files of the tables it reads (``submit_staged``): the worker makes the check's
    frame from them and validates it while this process goes on with the run, and answers with
    the result (its samples decoded, plain values) and the URL of the validation's Data Docs page,
    which it renders after answering (``flush_docs`` waits for the pages). One worker serves the
    whole process (``shared``), as one GX context does in process; it exits with this process,
    even one that is killed (it watches its parent)."""

    def __init__(self):
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        # spawn, not fork: this process runs Polars', DuckDB's and Dagster's threads.
        self._pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"),
                                         initializer=_worker_start, initargs=(os.getpid(),))
        with _environment(WORKER_ALLOCATOR):  # what the process is started with
            self._ready = self._pool.submit(_gx_ready)  # the process starts, and imports GX, now

    def submit_staged(self, check: str, suite: Suite, paths: dict[str, Path], docs_dir: Path | None) -> "Future[SuiteResult]":
        """Start validating the suite check ``check`` (a name in suites.SUITE_CHECKS) on the staged
        tables' files ``paths``, and return at once: the worker builds the check's frame itself, so
        this process goes on with the run meanwhile. ``result`` gives the verdict."""
        return self._pool.submit(_validate_staged, check, suite, {t: str(p) for t, p in paths.items()}, docs_dir)

    @staticmethod
    def result(future: Future):
        """The future's result; a worker that died is said as such."""
        from concurrent.futures.process import BrokenProcessPool

        try:
            return future.result()
        except BrokenProcessPool as exc:
            raise RuntimeError("the Great Expectations worker process died (out of memory?); "
                               "the next run starts a new one") from exc

    def flush_docs(self) -> list[str]:
        """Wait until every Data Docs page asked for so far is written; returns why any could not be."""
        from concurrent.futures.process import BrokenProcessPool

        try:
            return self._pool.submit(_docs_written).result()
        except BrokenProcessPool:
            return ["the Great Expectations worker process died before writing them"]

    @classmethod
    def flush_shared(cls) -> list[str]:
        """flush_docs of this process's worker, if it has one (never starts one)."""
        return _shared.flush_docs() if _shared is not None else []

    @property
    def pid(self) -> int:
        """The worker process's id, once it has imported GX."""
        return self._ready.result()

    @property
    def broken(self) -> bool:
        return bool(getattr(self._pool, "_broken", False))

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    @classmethod
    def discard_shared(cls) -> None:
        """Stop this process's worker now, without waiting for it to finish importing GX (seconds
        that a process ending would otherwise wait): for a process that started one early and then
        had nothing to validate. ProcessPoolExecutor has no public way to stop a busy worker; should
        its ``_processes`` go, the worker is only waited for, as before."""
        global _shared
        if _shared is None:
            return
        for process in list(getattr(_shared._pool, "_processes", {}).values()):
            process.kill()  # SIGKILL: a terminated worker went on importing in some full test runs (cause not found)
        _shared._pool.shutdown(wait=True, cancel_futures=True)
        _shared = None

    @classmethod
    def shared(cls) -> "GxWorker":
        """This process's worker, started on first use (again if it died)."""
        global _shared
        if _shared is None or _shared.broken:
            _shared = cls()
            atexit.register(_shared.close)
        return _shared


_shared: GxWorker | None = None

# The worker's Polars hands freed memory back to the system at once instead of keeping it for
# reuse (jemalloc keeps it ~10 s by default): the worker's frames come and go in bursts, often
# while the run's main process is at its own peak.
WORKER_ALLOCATOR = {"_RJEM_MALLOC_CONF": "dirty_decay_ms:0,muzzy_decay_ms:0"}


@contextlib.contextmanager
def _environment(values: dict[str, str]):
    """``values`` set in os.environ (what a process started meanwhile inherits), then restored."""
    before = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _worker_start(parent: int) -> None:
    """In the worker: yield the CPU to the run (the worker validates while the run's next stages
    go on, and only the publish waits for it, so the run's own steps come first); exit as soon as
    the process that started it is gone; and at exit, skip the interpreter's teardown of GX's
    thousands of modules (about a second at the end of every run, which waits for it): the
    worker's files are written and closed by then."""
    os.nice(10)

    def watch():
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(0)

    threading.Thread(target=watch, name="watch-parent", daemon=True).start()
    atexit.register(_exit_now)


def _exit_now() -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _gx_ready() -> int:
    _gx()
    return os.getpid()


# In the worker: GX's context serves one thread at a time (validations, and the docs thread's
# renders); the pages still to render; why pages could not be rendered since the last flush.
_GX_LOCK = threading.Lock()
_docs_queue: "queue.Queue[_DocsPage]" = queue.Queue()
_docs_errors: list[str] = []


def _validate_deferring_docs(suite: Suite, narrow: pl.DataFrame, docs_dir: Path | None):
    """validate_narrow in the worker, answering as soon as the validation is done: the page (and
    the site's index) is left to the docs thread, which renders between and after validations."""
    with _GX_LOCK:
        outcomes, _, _ = validate_narrow(suite, narrow, None)
        if docs_dir is None:
            return outcomes, None, None
        page = _DocsPage.newest(docs_dir, suite.name)
    _docs_thread()
    _docs_queue.put(page)
    return outcomes, page.url, page.index_url


SCOPE = "scope"  # in a check's paths: the papers whose rows a per-paper check validates


def _validate_staged(check: str, suite: Suite, paths: dict[str, str], docs_dir: Path | None) -> SuiteResult:
    """In the worker: the check's frame, made from the staged files, validated (submit_staged)."""
    from etl_project.quality.suites import SUITE_CHECKS

    tables = SUITE_CHECKS[check].tables
    scans = [pl.scan_parquet(paths[t]) for t in tables]
    if SCOPE in paths:  # a per-paper check: the rows of the papers worked out (background.validated_paths)
        checked = pl.read_parquet(paths[SCOPE])["paper_id"].implode()
        scans = [scan.filter(pl.col("paper_id").is_in(checked)) for scan in scans]
    frame = SUITE_CHECKS[check].frame(*scans)
    return _run_suite(suite, frame, docs_dir, _validate_deferring_docs)


@functools.cache
def _docs_thread() -> threading.Thread:
    thread = threading.Thread(target=_render_queued, name="data-docs", daemon=True)
    thread.start()
    return thread


def _render_queued() -> None:
    stale_indexes: set[Path] = set()
    while True:
        page = _docs_queue.get()
        try:
            with _GX_LOCK:
                page.render(index=False)
            stale_indexes.add(page.docs_dir)
            if _docs_queue.empty():  # the index once per burst of pages, not once per page
                with _GX_LOCK:
                    for docs_dir in stale_indexes:
                        _DocsPage.render_index(docs_dir)
                stale_indexes.clear()
        except Exception as exc:  # noqa: BLE001 (any failure: reported by the next flush; the verdict stands)
            _docs_errors.append(f"{page.suite_name}: {type(exc).__name__}: {exc}")
        finally:
            _docs_queue.task_done()


def _docs_written() -> list[str]:
    _docs_queue.join()
    errors = list(_docs_errors)
    _docs_errors.clear()
    return errors


@functools.cache
def _site_builder(docs_dir: Path):
    """The Data Docs site builder writing into ``docs_dir``, with the site's static assets (one
    per process and folder: its page templates are compiled once)."""
    from great_expectations.render.renderer.site_builder import SiteBuilder

    _, context, _ = _gx()
    site = SiteBuilder(
        data_context=context,
        site_name="data_docs",
        show_how_to_buttons=False,
        store_backend={"class_name": "TupleFilesystemStoreBackend", "base_directory": str(docs_dir)},
        site_index_builder={"class_name": "DefaultSiteIndexBuilder"},
    )
    site.target_store.copy_static_assets()
    shutil.copytree(VENDORED, docs_dir / VENDOR_DIR, dirs_exist_ok=True, ignore=shutil.ignore_patterns("README.md"))
    return site


@dataclass(frozen=True)
class _DocsPage:
    """The Data Docs page of one validation of a suite, in the site at ``docs_dir``."""

    docs_dir: Path
    suite_name: str
    key: object  # GX's ValidationResultIdentifier
    url: str
    index_url: str

    @classmethod
    def newest(cls, docs_dir: Path, suite_name: str) -> "_DocsPage":
        """The page of ``suite_name``'s newest validation (its URL is known before it is written)."""
        _, context, _ = _gx()
        site = _site_builder(docs_dir.resolve())
        ours = [key for key in context.validation_results_store.list_keys()
                if key.expectation_suite_identifier.name == suite_name]
        newest = max(ours, key=lambda key: key.run_id.run_time)
        return cls(docs_dir, suite_name, newest, site.get_resource_url(resource_identifier=newest, only_if_exists=False),
                   site.get_resource_url(only_if_exists=False))

    def render(self, index: bool = True) -> None:
        """Render the validation's page and the suite's page (which the index and the validation
        page link), then, with ``index``, the site's index; point them at the site's copies of
        their scripts and styles.

        What ``SiteBuilder.build`` does for one validation, less copying the static assets again
        (about half its time on small tables) and less the profiling section."""
        from great_expectations.data_context.types.resource_identifiers import (
            ExpectationSuiteIdentifier,
        )

        site = _site_builder(self.docs_dir.resolve())
        suite_key = ExpectationSuiteIdentifier(name=self.suite_name)
        site.site_section_builders["validations"].build(resource_identifiers=[self.key])
        site.site_section_builders["expectations"].build(resource_identifiers=[suite_key])
        for url in (self.url, site.get_resource_url(resource_identifier=suite_key)):
            offline_page(_file_path(url), self.docs_dir.resolve())
        if index:
            self.render_index(self.docs_dir)

    @staticmethod
    def render_index(docs_dir: Path) -> None:
        site = _site_builder(docs_dir.resolve())
        site.site_index_builder.build()
        offline_page(_file_path(site.get_resource_url(only_if_exists=False)), docs_dir.resolve())


# Where the site keeps the copies of what GX's pages load from CDNs, and the copies in the package.
VENDOR_DIR = Path("static") / "vendor"
VENDORED = Path(__file__).with_name("data_docs_static")
# Every CDN file GX 1.x's templates load, and its copy (relative to VENDORED). None: left out (see
# the README there), its tag is removed.
CDN_FILES = {
    "https://maxcdn.bootstrapcdn.com/bootstrap/4.3.1/css/bootstrap.min.css": "bootstrap-4.3.1/bootstrap.min.css",
    "https://stackpath.bootstrapcdn.com/bootstrap/4.3.1/js/bootstrap.min.js": "bootstrap-4.3.1/bootstrap.min.js",
    "https://code.jquery.com/jquery-3.7.1.min.js": "jquery-3.7.1/jquery.min.js",
    "https://cdnjs.cloudflare.com/ajax/libs/popper.js/1.12.9/umd/popper.min.js": "popper.js-1.12.9/popper.min.js",
    "https://unpkg.com/bootstrap-table@1.19.1/dist/bootstrap-table.min.css": "bootstrap-table-1.19.1/bootstrap-table.min.css",
    "https://unpkg.com/bootstrap-table@1.19.1/dist/bootstrap-table.min.js": "bootstrap-table-1.19.1/bootstrap-table.min.js",
    "https://unpkg.com/bootstrap-table@1.19.0/dist/extensions/filter-control/bootstrap-table-filter-control.css":
        "bootstrap-table-1.19.1/bootstrap-table-filter-control.min.css",
    "https://unpkg.com/bootstrap-table@1.19.0/dist/extensions/filter-control/bootstrap-table-filter-control.min.css":
        "bootstrap-table-1.19.1/bootstrap-table-filter-control.min.css",
    "https://unpkg.com/bootstrap-table@1.19.1/dist/extensions/filter-control/bootstrap-table-filter-control.min.js":
        "bootstrap-table-1.19.1/bootstrap-table-filter-control.min.js",
    "https://cdnjs.cloudflare.com/ajax/libs/bootstrap-datepicker/1.9.0/css/bootstrap-datepicker.min.css":
        "bootstrap-datepicker-1.9.0/bootstrap-datepicker.min.css",
    "https://cdnjs.cloudflare.com/ajax/libs/bootstrap-datepicker/1.9.0/js/bootstrap-datepicker.min.js":
        "bootstrap-datepicker-1.9.0/bootstrap-datepicker.min.js",
    "https://cdn.jsdelivr.net/npm/@forevolve/bootstrap-dark@1.1.0/dist/css/bootstrap-prefers-dark.css":
        "bootstrap-dark-1.1.0/bootstrap-prefers-dark.min.css",
    "https://cdnjs.cloudflare.com/ajax/libs/font-awesome/6.6.0/css/all.min.css": "fontawesome-free-6.6.0/css/all.min.css",
    "https://cdn.jsdelivr.net/npm/vega@5": None,
    "https://cdn.jsdelivr.net/npm/vega-lite@5": None,
    "https://cdn.jsdelivr.net/npm/vega-embed@6": None,
}
_TAG = re.compile(r'<(?:script|link)\b[^>]*?\b(?:src|href)="(?P<url>https?://[^"]+)"[^>]*>(?:\s*</script>)?')
_SRI = re.compile(r'\s+(?:integrity|crossorigin)="[^"]*"')
_GX_IMAGES = re.compile(r'https://great-expectations-web-assets\.s3\.us-east-2\.amazonaws\.com/(?P<name>[\w.-]+)(?:\?[^"]*)?')
_STATIC = re.compile(r'(?<=")(?:\./|(?:\.\./)+)static/')


def offline_page(page: Path, site: Path) -> None:
    """Point a Data Docs page of ``site`` at the site's own copies of its scripts, styles and
    images instead of CDNs; also fixes the depth of its ``static/`` links (GX's validation pages
    link the favicon one folder too high)."""
    html = page.read_text(encoding="utf-8")
    to_site = Path(os.path.relpath(site, page.parent)).as_posix()

    def tag(match: re.Match) -> str:
        url = match["url"]
        if url not in CDN_FILES:
            return match[0]
        if CDN_FILES[url] is None:
            return ""
        local = f"{to_site}/{VENDOR_DIR.as_posix()}/{CDN_FILES[url]}"
        return _SRI.sub("", match[0].replace(url, local))  # no CORS nor hashes for files of the site

    html = _TAG.sub(tag, html)
    html = _STATIC.sub(f"{to_site}/static/", html)
    html = _GX_IMAGES.sub(lambda m: f"{to_site}/static/images/{m['name']}", html)
    page.write_text(html, encoding="utf-8")


def _file_path(url: str) -> Path:
    from urllib.parse import unquote, urlparse

    return Path(unquote(urlparse(url).path))


def _outcome(result) -> dict:
    """What RuleResult keeps of one GX expectation result, as plain values (it crosses processes)."""
    details = result.result or {}
    raised = result.exception_info.get("raised_exception") if result.exception_info else False
    return {
        "success": bool(result.success),
        "element_count": details.get("element_count"),
        "unexpected_count": details.get("unexpected_count"),
        "unexpected_percent": details.get("unexpected_percent"),
        "observed_value": details.get("observed_value"),
        "samples": [_plain(v) for v in details.get("partial_unexpected_list", [])[:SAMPLE_SIZE]],
        "exception": result.exception_info.get("exception_message") if raised else None,
    }


def _rule_result(rule: Rule, outcome: dict, decode) -> RuleResult:
    # The samples are plain already (_outcome); decoding takes codes back to Python values.
    return RuleResult(rule=rule, **(outcome | {"samples": [decode(rule, v) for v in outcome["samples"]]}))


def _decode(originals: dict[str, pl.Series], rule: Rule, value):
    """A sample as the original values: codes of recoded columns become their text again
    (compound rules give one ``{column: value}`` dict per sample)."""
    def original(column: str, v):
        if column not in originals or v is None or (isinstance(v, float) and math.isnan(v)):
            return v
        return originals[column][int(v)]

    if isinstance(value, dict):
        return {column: original(column, v) for column, v in value.items()}
    return original(rule.columns()[0], value) if rule.columns() else value


def _plain(value):
    """numpy scalars, tuples and dicts from GX, as JSON-friendly Python values."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    return value.item() if hasattr(value, "item") else value
