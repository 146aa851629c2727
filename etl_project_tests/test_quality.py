"""The Great Expectations runner: what GX is handed is cut down (columns a suite reads, string
columns only identity rules read recoded as integers) without changing any verdict, count or sample."""

import math
import shutil
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from etl_project import dedup, ingest
from etl_project.enrich import links, names, topics
from etl_project.enrich.markup import plain_text
from etl_project.quality import runner, suites
from etl_project_tests.conftest import SEEDS


@pytest.fixture(scope="module")
def seed_tables(tmp_path_factory) -> dict[str, pl.DataFrame]:
    """Every table a suite check reads, built from the seeds and a copy of each (four files, six
    overlapping pairs)."""
    landing = tmp_path_factory.mktemp("landing")
    for seed in SEEDS.glob("*.txt"):
        shutil.copy(seed, landing / seed.name)
        shutil.copy(seed, landing / f"copy_{seed.name}")
    tables = ingest.file_tables(ingest.read_landing_folder(landing))
    papers, occurrences = dedup.deduplicate(tables["records"], None)
    papers = papers.with_columns(abstract_plain=plain_text(pl.col("abstract")))
    return tables | {
        "papers": papers,
        "paper_occurrences": occurrences,
        "source_overlap": dedup.source_overlap(papers),
        "paper_links": links.extract_links(papers),
        "paper_names": names.extract_names(papers),
        "paper_topics": topics.tag_topics(papers, topics.load_taxonomy()),
    }


@pytest.fixture(scope="module")
def seed_frames(seed_tables) -> dict[str, tuple[suites.Suite, pl.DataFrame]]:
    """Every suite with the frame its asset check validates (as suites.SUITE_CHECKS pairs them)."""
    cases = {}
    for check in suites.SUITE_CHECKS.values():
        tables = [seed_tables[t] for t in check.tables]
        suite, frame = check.suite(*tables), check.frame(*tables)
        cases[suite.name] = (suite, frame.lazy().collect())
    return cases


def plain_gx(suite: suites.Suite, frame: pl.DataFrame) -> list[runner.RuleResult]:
    """The suite validated as before the recoding: the columns it reads, converted as they are."""
    outcome = runner._validation(suite).run(
        batch_parameters={"dataframe": frame.select(suite.columns() or frame.columns[:1]).to_pandas()},
        result_format={"result_format": "SUMMARY", "partial_unexpected_count": runner.SAMPLE_SIZE},
    )
    by_index = {r.expectation_config.meta["rule_index"]: r for r in outcome.results}
    return [runner._rule_result(rule, runner._outcome(by_index[i]), lambda _, v: v) for i, rule in enumerate(suite.rules)]


def comparable(result: runner.RuleResult) -> tuple:
    def plain(v):
        if isinstance(v, float) and math.isnan(v):
            return None
        if isinstance(v, dict):
            return {k: plain(x) for k, x in v.items()}
        return [plain(x) for x in v] if isinstance(v, list) else v

    return (result.rule, result.success, result.element_count, result.unexpected_count,
            result.unexpected_percent, plain(result.observed_value), plain(result.samples), result.exception)


def broken(suite: suites.Suite, frame: pl.DataFrame) -> pl.DataFrame:
    """Every string column the suite reads (that the frame has) with row 1 a copy of row 0 and row 2 null: duplicates
    and missing values for its unique, compound-unique and not-null rules alike."""
    text = [c for c in suite.columns() if frame.schema.get(c) == pl.String]
    row = pl.int_range(pl.len())
    return frame.with_columns(
        pl.when(row == 1).then(pl.col(c).first()).when(row == 2).then(None).otherwise(pl.col(c)).alias(c) for c in text
    )


@pytest.mark.parametrize("name", [
    "source_files", "raw_records", "records", "papers", "paper_occurrences", "source_overlap",
    "papers_plain_text", "paper_links", "paper_names", "paper_topics",
])
def test_every_suite_gives_the_verdicts_gx_gives_on_the_plain_frame(seed_frames, name: str):
    suite, frame = seed_frames[name]
    assert frame.height >= 3
    assert runner.run_suite(suite, frame).passed
    bad = broken(suite, frame)
    result = runner.run_suite(suite, bad)
    assert [comparable(r) for r in result.results] == [comparable(r) for r in plain_gx(suite, bad)]
    if runner.gx_frame(suite, bad)[1]:  # a recoded column: it has identity rules, now broken
        assert not result.passed


def test_a_check_is_validated_in_the_background_once_its_tables_are_staged(seed_tables, seed_frames, tmp_path: Path):
    """What the IO manager starts as each table is staged: every check whose tables this run has
    staged, once, in the worker process, with the verdicts, counts and decoded samples run_suite
    gives in process and a Data Docs page; the check's step and the publish gate then get that
    same validation, not a second one."""
    from etl_project import stage
    from etl_project.quality import background

    run, pages = "run-under-test", []
    order = ["raw_records", "records", "source_files", "rejected_records", "papers", "paper_occurrences",
             "source_overlap", "paper_links", "paper_names", "paper_topics"]
    started_after = {}
    for table in order:
        stage.write(seed_tables[table], stage.run_path(tmp_path, run, table))
        background.start_ready(run, tmp_path, table)
        started_after[table] = {name for (r, name) in background._started if r == run}
    assert started_after["raw_records"] == {"raw_records_suite"}
    assert started_after["records"] == {"raw_records_suite", "records_suite"}  # it reads raw_records too
    assert "source_files_suite" in started_after["rejected_records"] - started_after["source_files"]
    assert started_after["paper_topics"] == set(suites.SUITE_CHECKS)
    for check in suites.SUITE_CHECKS.values():
        paths = {t: stage.run_path(tmp_path, run, t) for t in check.tables}
        future = background._started[(run, check.name)][1]
        assert background.start(run, tmp_path, check, paths) is future  # asked again: the same validation
        result = background.verdict(run, tmp_path, check, paths)
        suite, frame = seed_frames[result.suite.name]
        here = runner.run_suite(suite, frame)
        assert [comparable(r) for r in result.results] == [comparable(r) for r in here.results], check.name
        assert result.passed
        pages.append(Path(runner._file_path(result.docs_page)))
    worker = runner.GxWorker.shared()
    assert worker.flush_docs() == []  # the worker renders the pages after answering
    assert all(page.is_file() and "cdn." not in page.read_text() for page in pages)
    index = (background.docs_dir(tmp_path, run) / "index.html").read_text()
    assert all(page.name in index for page in pages)  # the index written after the last page lists all
    assert runner.GxWorker.shared() is worker  # one per process
    background.forget(run)
    assert not [key for key in background._started if key[0] == run]


@pytest.mark.parametrize("table", ["raw_records", "source_overlap"])
def test_failures_found_in_the_worker_are_the_ones_found_in_process(seed_tables, tmp_path: Path, table: str):
    """A broken table (duplicates and nulls where the suite forbids them) fails in the worker
    exactly as in process: same failed rules, counts and samples, decoded back to the text."""
    from etl_project import stage
    from etl_project.quality import background

    (check,) = [c for c in suites.SUITE_CHECKS.values() if c.asset == table and not c.extra]
    bad = broken(check.suite(seed_tables[table]), seed_tables[table].lazy().collect())
    stage.write(bad, stage.run_path(tmp_path, "broken", table))
    there = background.verdict("broken", tmp_path, check, {table: stage.run_path(tmp_path, "broken", table)})
    here = runner.run_suite(check.suite(bad), check.frame(bad))
    assert not there.passed and there.blocks
    assert [comparable(r) for r in there.results] == [comparable(r) for r in here.results]
    background.forget("broken")


def test_a_data_docs_page_that_cannot_be_rendered_is_reported_by_the_next_flush(seed_frames, tmp_path: Path):
    """The worker's docs thread keeps going after a failed page and the flush says which one, once."""
    suite, frame = seed_frames["records"]
    runner.run_suite(suite, frame)  # GX's context, in this process as in a worker
    runner._docs_thread()
    runner._docs_queue.put(runner._DocsPage(tmp_path / "docs", "no_such_suite", None, "file:///nowhere", "file:///nowhere"))
    errors = runner._docs_written()
    assert len(errors) == 1 and errors[0].startswith("no_such_suite: "), errors
    assert runner._docs_written() == []


WORKER_PID_SCRIPT = """
import sys
from etl_project.quality import runner
print(runner.GxWorker.shared().pid, flush=True)
sys.stdin.read()  # until killed
"""


def test_the_worker_exits_when_its_process_is_killed():
    """SIGKILL leaves no atexit to run: the worker notices its parent is gone and exits."""
    parent = subprocess.Popen([sys.executable, "-c", WORKER_PID_SCRIPT], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        pid = int(parent.stdout.readline())
        assert Path(f"/proc/{pid}").exists()  # alive
    finally:
        parent.kill()
        parent.wait()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:  # gone, or a zombie its new parent has not reaped yet
            if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                return
        except (FileNotFoundError, ProcessLookupError):
            return
        time.sleep(0.2)
    pytest.fail(f"the worker {pid} outlived its parent")


WORKER_DISCARD_SCRIPT = """
from etl_project.quality import runner
worker = runner.GxWorker.shared()
(process,) = worker._pool._processes.values()
runner.GxWorker.discard_shared()
print(process.exitcode is not None, worker._ready.exception() is not None, runner.GxWorker.shared() is not worker)
"""


def test_a_worker_discarded_while_it_imports_gx_is_stopped_not_waited_for():
    """What `etl-project run` does when it started the worker and then had nothing to run: the
    worker is stopped mid-import (its readiness fails), and a later shared() starts a new one."""
    out = subprocess.run([sys.executable, "-c", WORKER_DISCARD_SCRIPT], capture_output=True, text=True, timeout=120, check=False)
    assert out.stdout.split() == ["True", "True", "True"], out.stderr


def test_the_landing_suites_recode_their_long_strings(seed_frames):
    """record_id, source_file and dedup_key reach GX as integers; regex and set rules keep text."""
    for name, recoded in {"raw_records": ["record_id", "source_file"], "records": ["record_id", "dedup_key"],
                          "papers": ["dedup_key"], "paper_links": ["paper_id"]}.items():
        suite, frame = seed_frames[name]
        narrow, coded = runner.gx_frame(suite, frame)
        assert coded == recoded
        assert narrow.columns == suite.columns()
        assert all(narrow.schema[c].is_integer() for c in coded)
    narrow, _ = runner.gx_frame(*seed_frames["papers"])
    assert narrow.schema["paper_id"] == pl.String  # it must match a regex


def test_a_duplicate_is_reported_with_its_text(seed_frames):
    suite, frame = seed_frames["records"]
    key = frame["dedup_key"][0]
    result = runner.run_suite(suite, frame.with_columns(dedup_key=pl.when(pl.int_range(pl.len()) == 5).then(None).otherwise(pl.col("dedup_key"))))
    not_null = next(r for r in result.failed if r.rule.kwargs == {"column": "dedup_key"})
    assert not_null.unexpected_count == 1

    suite, frame = seed_frames["papers"]
    result = runner.run_suite(suite, frame.with_columns(dedup_key=pl.when(pl.int_range(pl.len()) == 3).then(pl.lit(key)).otherwise(pl.col("dedup_key"))))
    (unique,) = result.failed
    assert unique.rule == suites.Rule("ExpectColumnValuesToBeUnique", {"column": "dedup_key"})
    assert (unique.unexpected_count, unique.samples) == (2, [key, key])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(st.none(), st.sampled_from(["", "a", "b", "é", "a" * 300, "a" * 301])), min_size=1, max_size=40))
def test_identity_codes_are_exact(values):
    frame = pl.DataFrame({"v": values}, schema={"v": pl.String})
    for rules in ((suites.Rule("ExpectColumnValuesToBeUnique", {"column": "v"}),),
                  (suites.Rule("ExpectColumnValuesToNotBeNull", {"column": "v"}),)):
        narrow, coded = runner.gx_frame(suites.Suite("t", rules), frame)
        codes = narrow["v"].to_list()
        assert coded == ["v"]
        assert [c is None for c in codes] == [v is None for v in values]
        assert all(values[c] == v for c, v in zip(codes, values) if c is not None)  # a code is the row of its value
        if rules[0].expectation == "ExpectColumnValuesToBeUnique":
            pairs = [(a, b) for a in range(len(values)) for b in range(len(values)) if values[a] is not None and values[b] is not None]
            assert all((codes[a] == codes[b]) == (values[a] == values[b]) for a, b in pairs)


def test_changed_rules_are_validated_as_changed(seed_frames):
    """Validation definitions are reused per suite name only while the rules stay the same."""
    _, frame = seed_frames["records"]
    assert runner.run_suite(suites.records_suite(frame.height), frame).passed
    result = runner.run_suite(suites.records_suite(frame.height + 1), frame)
    assert [r.rule.expectation for r in result.failed] == ["ExpectTableRowCountToEqual"]
    assert runner.run_suite(suites.records_suite(frame.height), frame).passed


def test_batches_are_not_fingerprinted(seed_frames):
    """GX would hash every cell of a batch to label it; that label is switched off."""
    suite, frame = seed_frames["raw_records"]
    runner.run_suite(suite, frame)
    _, context, _ = runner._gx()
    keys = [k for k in context.validation_results_store.list_keys() if k.expectation_suite_identifier.name == suite.name]
    stored = context.validation_results_store.get(max(keys, key=lambda k: k.run_id.run_time))
    assert "ge_load_time" in stored.meta["batch_markers"]
    assert "pandas_data_fingerprint" not in stored.meta["batch_markers"]


def test_data_docs_pages_and_index(seed_frames, tmp_path: Path):
    pages = []
    for name in ("raw_records", "papers"):
        result = runner.run_suite(*seed_frames[name], tmp_path / "docs")
        pages.append(Path(result.docs_page.removeprefix("file://")))
        assert result.docs_index == (tmp_path / "docs" / "index.html").as_uri()
    assert all(p.is_file() and p.is_relative_to(tmp_path / "docs") for p in pages)
    assert "raw_records" in pages[0].read_text(encoding="utf-8")
    index = (tmp_path / "docs" / "index.html").read_text(encoding="utf-8")
    assert "raw_records" in index and "papers" in index
    assert (tmp_path / "docs" / "static").is_dir()


def test_definitions_do_not_import_great_expectations():
    done = subprocess.run(
        [sys.executable, "-c", "import sys, etl_project.definitions; print('great_expectations' in sys.modules)"],
        capture_output=True, text=True, check=True,
    )
    assert done.stdout.strip() == "False"


def test_landing_checks_validate_the_delta_their_build_chose_and_whole_tables_otherwise(tmp_path):
    """A delta is used only by the build that chose its rows: tables staged by other code or
    settings (a re-execution after an upgrade) are validated whole."""
    from etl_project import stage
    from etl_project.quality import background

    check = suites.SUITE_CHECKS["records_suite"]
    paths = {table: tmp_path / f"{table}.parquet" for table in check.tables}
    for path in paths.values():
        stage.delta_path(path, "b1" * 16).mkdir(parents=True)
    assert background.validated_paths(check, paths, "b1" * 16) == {t: stage.delta_path(p, "b1" * 16) for t, p in paths.items()}
    assert background.validated_paths(check, paths, "b2" * 16) == paths
    assert background.validated_paths(check, paths, None) == paths
    whole = suites.SUITE_CHECKS["source_overlap_suite"]
    assert background.validated_paths(whole, {"source_overlap": tmp_path / "so.parquet"}, "b1" * 16) == {"source_overlap": tmp_path / "so.parquet"}


def test_per_paper_checks_validate_the_scope_their_build_chose_against_the_same_papers(tmp_path):
    from etl_project import stage
    from etl_project.quality import background

    check = suites.SUITE_CHECKS["paper_names_suite"]
    paths = {table: tmp_path / "runs" / "r1" / f"{table}.parquet" for table in check.tables}
    assert background.validated_paths(check, paths, "b1" * 16) == paths
    scope = stage.scope_path(paths["paper_names"], "b1" * 16, paths["papers"])
    scope.parent.mkdir(parents=True)
    scope.touch()
    assert background.validated_paths(check, paths, "b1" * 16) == {**paths, background.SCOPE: scope}
    assert background.validated_rows(check, paths, "b1" * 16).startswith("rows of the papers worked out again")
    assert background.validated_paths(check, paths, "b2" * 16) == paths
    assert background.validated_rows(check, paths, "b2" * 16) == "whole table"
    # Against the papers of another run (a run of only some assets), the table is validated whole.
    newer = {**paths, "papers": tmp_path / "runs" / "r2" / "papers.parquet"}
    assert background.validated_paths(check, newer, "b1" * 16) == newer
    whole = suites.SUITE_CHECKS["source_overlap_suite"]  # checks a table as a whole (pairs of files)
    whole_paths = {table: paths["papers"].with_name(f"{table}.parquet") for table in whole.tables}
    assert background.validated_paths(whole, whole_paths, "b1" * 16) == whole_paths


def test_a_scoped_check_validates_the_rows_of_the_papers_worked_out(seed_tables, tmp_path: Path):
    """The scope names the papers a run worked out: their rows are validated, and a bad one fails
    the check. The rows of every other paper met every expectation before and are not validated
    again (a row of a paper that is gone is found when publishing: etl_project/integrity.py).
    Only a check that met every expectation leaves the marker that lets the next run scope it."""
    from etl_project import stage
    from etl_project.quality import background

    check, build = suites.SUITE_CHECKS["paper_names_suite"], "b1" * 16
    names = seed_tables["paper_names"].lazy().collect()
    ids = names["paper_id"].unique().sort()
    worked_out, other = ids.head(2), ids[-1]
    validated = names.filter(pl.col("paper_id").is_in(worked_out.implode())).height
    assert 0 < validated < names.height
    for run, bad in (("good", None), ("bad_worked_out", worked_out[0]), ("bad_other", other)):
        # a one-character name that its abstract does not hold breaks two rules
        rows = names if bad is None else names.with_columns(name=pl.when(pl.col("paper_id") == bad).then(pl.lit("§")).otherwise("name"))
        paths = {"paper_names": stage.run_path(tmp_path, run, "paper_names"), "papers": stage.run_path(tmp_path, run, "papers")}
        stage.write(rows, paths["paper_names"])
        stage.write(seed_tables["papers"], paths["papers"])
        stage.write_scope(paths["paper_names"], build, paths["papers"], worked_out)
        result = background.verdict(run, tmp_path, check, paths, build)
        assert result.row_count == validated
        marker = stage.passed_path(paths["paper_names"], check.name, build, paths["papers"])
        if bad == worked_out[0]:
            failed = {r.rule.expectation for r in result.failed}
            assert not result.passed and {"ExpectColumnValuesToBeBetween", "ExpectColumnValuesToBeInSet"} <= failed
            assert not marker.exists()
        else:
            assert result.passed and marker.exists()
        background.forget(run)
