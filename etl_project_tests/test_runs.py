"""What a run parses, what it drops, the stage batches it keeps, and the runs that need no run."""

from pathlib import Path

import dagster as dg
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

import etl_project
from etl_project import landing, stage
from etl_project.defs import launch
from etl_project.defs.assets import PUBLISHED_TABLES
from etl_project.defs.resources import EtlSettings
from etl_project.lake import Lake
from etl_project_tests.conftest import materialize_all
from etl_project_tests.warehouse_helpers import query


def changes(**lists) -> landing.Changes:
    return landing.Changes(**lists)


def test_a_run_parses_new_and_changed_files_a_full_refresh_every_file():
    found = changes(new=["d"], changed=["b"], unchanged=["a", "c"], removed=["gone"], growing=["e", "f"])
    plan = landing.make_plan(found, published=["a", "b", "c", "e", "gone"])
    assert (plan.to_parse, plan.removed) == (["b", "d"], ["gone"])
    full = landing.make_plan(found, full=True, published=["a", "b", "c", "e", "gone"])
    assert full.to_parse == ["a", "b", "c", "d"]  # a file still growing is never read half-written


def parse_metadata(result, asset: str = "parsed_files") -> dict:
    [event] = [e for e in result.get_asset_materialization_events() if e.asset_key == dg.AssetKey(asset)]
    return {k: v.value for k, v in event.step_materialization_data.materialization.metadata.items()}


def manifest(warehouse: Path, result) -> pl.DataFrame:
    return pl.read_parquet(stage.run_path(warehouse, result.run_id, "parsed_files"))


def paper_list(title: str, *abstracts: str) -> str:
    return title + "\n\n" + "\n\n".join(abstracts) + "\n"


ABSTRACTS = [f"Abstract number {i} studies topic {i} with a method that is described in words." for i in range(6)]


def validated_rows(result) -> dict[str, int]:
    """Rows each suite check of the run validated."""
    return {e.check_name: e.metadata["rows_validated"].value for e in result.get_asset_check_evaluations()
            if "rows_validated" in e.metadata}


def count(warehouse: Path, sql: str):
    return query(warehouse, sql)


@pytest.fixture
def instance():
    with dg.DagsterInstance.ephemeral() as instance:
        yield instance


def test_runs_follow_the_folder_new_changed_removed(tmp_path: Path, instance):
    landing_dir, warehouse = tmp_path / "landing", tmp_path / "wh"
    landing_dir.mkdir()
    (landing_dir / "a.txt").write_text(paper_list("A", *ABSTRACTS[:2]))
    (landing_dir / "b.txt").write_text(paper_list("B", *ABSTRACTS[2:4]))
    first = materialize_all(landing_dir, warehouse, instance)
    assert first.success and parse_metadata(first)["files_parsed"] == 2
    assert manifest(warehouse, first)["key"].to_list() == ["a.txt", "b.txt"]

    # The files whose rows passed this build's landing suites: those the snapshot holds.
    target = Lake.of(warehouse)
    assert launch.files_validated(target, EtlSettings().build_fingerprint())["source_file"].sort().to_list() == ["a.txt", "b.txt"]
    assert launch.files_validated(target, "another build").is_empty()

    # Unchanged folder: nothing to parse.
    plan = launch.plan_run(instance, landing_dir, warehouse)
    assert plan.to_parse == [] and plan.changes.unchanged == ["a.txt", "b.txt"]

    # b changes, c arrives: only they are parsed, into a batch of their own.
    (landing_dir / "b.txt").write_text(paper_list("B", ABSTRACTS[3]))
    (landing_dir / "c.txt").write_text(paper_list("C", ABSTRACTS[4], ABSTRACTS[0]))
    result = materialize_all(landing_dir, warehouse, instance)
    assert result.success
    metadata = parse_metadata(result)
    assert (metadata["files_parsed"], metadata["files_new"], metadata["files_changed"]) == (2, 1, 1)
    batches = dict(manifest(warehouse, result).select("key", "batch").rows())
    assert batches["b.txt"] == batches["c.txt"] == metadata["batch"] != batches["a.txt"]
    assert count(warehouse, "SELECT source_file, record_count FROM source_files ORDER BY 1") == [("a.txt", 2), ("b.txt", 1), ("c.txt", 2)]
    assert count(warehouse, "SELECT count(*) FROM papers") == [(4,)]  # abstracts 0, 1, 3, 4
    # What did not change is looked up: the papers of a.txt's records (dedup_memo), and the
    # search terms of every paper whose text is the same (only abstract 4 is new).
    assert (parse_metadata(result, "papers")["papers_looked_up"], parse_metadata(result, "papers")["papers_worked_out"]) == (2, 2)
    assert (parse_metadata(result, "paper_terms")["papers_reused"], parse_metadata(result, "paper_terms")["papers_computed"]) == (3, 1)
    # Links, names and topics learn which papers' texts changed from the deduplication.
    for asset in ("paper_links", "paper_names", "paper_topics"):
        assert [parse_metadata(result, asset)[key] for key in ("changes_from", "papers_computed", "papers_reused")] == ["deduplication", 1, 3]
    # The landing suites validate the rows of b and c only (a's passed in the first run); the
    # occurrences suite those of the papers that changed or have a record in b or c: abstract 0
    # (in a and c), 3 and 4, not 1 (a's alone).
    assert (validated_rows(first)["raw_records_suite"], validated_rows(first)["paper_occurrences_suite"]) == (4, 4)
    validated = validated_rows(result)
    assert (validated["source_files_suite"], validated["raw_records_suite"], validated["records_suite"]) == (2, 3, 3)
    assert validated["paper_occurrences_suite"] == 4 and parse_metadata(result, "source_files")["files_validated"] == 2

    # a is removed: nothing parsed, its records are gone from the next publish, and its batch,
    # which no manifest points at any more, is pruned.
    (landing_dir / "a.txt").unlink()
    result = materialize_all(landing_dir, warehouse, instance)
    assert result.success
    assert (parse_metadata(result)["files_parsed"], parse_metadata(result)["files_removed"]) == (0, 1)
    assert count(warehouse, "SELECT DISTINCT source_file FROM raw_records ORDER BY 1") == [("b.txt",), ("c.txt",)]
    assert count(warehouse, "SELECT count(*) FROM papers") == [(3,)]
    assert validated_rows(result)["source_files_suite"] == 0  # no file new to the warehouse
    staged = {p.name for p in stage.batch_folder(warehouse, "x").parent.iterdir()}
    assert staged == {metadata["batch"]}


def test_landing_suites_validate_the_files_not_yet_validated_and_a_bad_one_stops_the_publish(tmp_path: Path, instance, monkeypatch):
    """Rows of published files are not validated again by the same code (a stricter suite patched
    in after the first run does not see them), a new file's rows are, and a failing one stops the
    publish while the snapshot stays as it was."""
    from etl_project.quality import suites

    landing_dir, warehouse = tmp_path / "landing", tmp_path / "wh"
    landing_dir.mkdir()
    (landing_dir / "a.txt").write_text(paper_list("A", *ABSTRACTS[:2]))  # ordinals 1 and 2
    assert materialize_all(landing_dir, warehouse, instance).success
    at_most_one = suites.Suite("raw_records", (suites.Rule("ExpectColumnValuesToBeBetween", {"column": "ordinal", "max_value": 1}),))
    monkeypatch.setattr(suites, "RAW_RECORDS", at_most_one)

    (landing_dir / "b.txt").write_text(paper_list("B", ABSTRACTS[2]))
    result = materialize_all(landing_dir, warehouse, instance)
    assert result.success and validated_rows(result)["raw_records_suite"] == 1  # b's row; a's ordinal 2 is not seen

    (landing_dir / "c.txt").write_text(paper_list("C", *ABSTRACTS[3:5]))
    result = materialize_all(landing_dir, warehouse, instance)
    assert not result.success
    blocking = [c.check_name for c in result.get_asset_check_evaluations() if not c.passed and c.severity == dg.AssetCheckSeverity.ERROR]
    assert blocking == ["raw_records_suite"]
    assert count(warehouse, "SELECT source_file FROM source_files ORDER BY 1") == [("a.txt",), ("b.txt",)]


def test_tables_that_do_not_line_up_are_not_published(tmp_path: Path, instance, monkeypatch):
    """What the cross-table check finds fails the warehouse step, which says so, and the snapshot
    stays as it was, with no data file of the refused run left."""
    from etl_project import integrity

    landing_dir, warehouse = tmp_path / "landing", tmp_path / "wh"
    landing_dir.mkdir()
    (landing_dir / "a.txt").write_text(paper_list("A", *ABSTRACTS[:2]))
    assert materialize_all(landing_dir, warehouse, instance).success
    files = set((warehouse / "data").rglob("*.parquet"))
    monkeypatch.setattr(integrity, "cross_table_problems", lambda tables: ["papers repeats paper_id: 'p1'"])

    (landing_dir / "b.txt").write_text(paper_list("B", ABSTRACTS[2]))
    result = materialize_all(landing_dir, warehouse, instance)
    assert not result.success
    [failure] = [event for event in result.all_events if event.is_step_failure]
    assert failure.step_key == "warehouse"
    assert "not publishing inconsistent tables: papers repeats paper_id: 'p1'" in failure.event_specific_data.error.message
    assert count(warehouse, "SELECT source_file FROM source_files ORDER BY 1") == [("a.txt",)]
    assert set((warehouse / "data").rglob("*.parquet")) == files


def test_per_paper_checks_validate_the_papers_a_run_worked_out_while_the_rest_passed_before(tmp_path: Path, instance, monkeypatch):
    """The enrichment checks validate the papers a run computed when the rows it took over met
    every expectation before; a failing new paper stops the publish, and the run after a failed
    check validates the whole table again."""
    from etl_project.quality import suites

    def validated(result, check: str = "paper_topics_suite") -> tuple[str, int]:
        [event] = [e for e in result.get_asset_check_evaluations() if e.check_name == check]
        return event.metadata["validated"].value, event.metadata["rows_validated"].value

    landing_dir, warehouse = tmp_path / "landing", tmp_path / "wh"
    landing_dir.mkdir()
    # These abstracts are shorter than the papers suite's WARN rules want (a failed WARN, like an
    # ERROR, leaves no marker that lets the next run validate only the papers it changed).
    errors_only = tuple(rule for rule in suites.PAPERS.rules if rule.severity == suites.ERROR)
    monkeypatch.setattr(suites, "PAPERS", suites.Suite("papers", errors_only))
    (landing_dir / "a.txt").write_text(paper_list("A", *ABSTRACTS[:3]))
    first = materialize_all(landing_dir, warehouse, instance)
    assert first.success and validated(first) == ("whole table", 3)  # one topic row per paper ("other")
    assert validated(first, "papers_suite") == validated(first, "papers_plain_text_suite") == ("whole table", 3)
    (landing_dir / "b.txt").write_text(paper_list("B", ABSTRACTS[3]))
    second = materialize_all(landing_dir, warehouse, instance)
    assert second.success
    assert validated(second)[0].startswith("rows of the papers worked out again") and validated(second)[1] == 1
    assert validated(second, "paper_names_suite")[1] == 0  # the new paper names nothing
    # The papers suites validate the row of the new paper; the three kept passed them before.
    assert validated(second, "papers_suite")[0].startswith("rows of the papers worked out again")
    assert validated(second, "papers_suite")[1] == validated(second, "papers_plain_text_suite")[1] == 1

    # A run of only the tables before enrichment, after a paper left a.txt: the topics table was
    # computed against the earlier papers, so it is validated whole, and the rows of the paper
    # that is gone (taken over in the last run) block the publish.
    from etl_project.definitions import build_defs

    (landing_dir / "a.txt").write_text(paper_list("A", *ABSTRACTS[:2]))
    before_enrichment = [dg.AssetKey(name) for name in ("parsed_files", "source_files", "raw_records", "rejected_records",
                                                        "records", "papers", "paper_occurrences", "source_overlap", "warehouse")]
    partial = build_defs(str(landing_dir), str(warehouse)).resolve_job_def("etl").execute_in_process(
        instance=instance, asset_selection=before_enrichment, raise_on_error=False)
    assert not partial.success
    assert count(warehouse, "SELECT count(*) FROM papers") == [(4,)]

    # A suite no topic row meets: the row of the paper new since the topics table last passed
    # fails it, and nothing is published.
    never = suites.Suite("paper_topics", (suites.Rule("ExpectColumnValuesToBeInSet", {"column": "topic", "value_set": ["none"]}),))
    monkeypatch.setattr(suites, "paper_topics_suite", lambda topic_ids: never)
    (landing_dir / "c.txt").write_text(paper_list("C", ABSTRACTS[5]))
    failed = materialize_all(landing_dir, warehouse, instance)
    assert not failed.success and validated(failed)[1] == 1
    assert count(warehouse, "SELECT count(*) FROM papers") == [(4,)]
    # The failed table passed nothing: the next run validates every row again.
    monkeypatch.undo()
    (landing_dir / "d.txt").write_text(paper_list("D", "A survey of compilers for quantum circuits, from gate synthesis to routing."))
    again = materialize_all(landing_dir, warehouse, instance)
    assert again.success and validated(again) == ("whole table", 5)
    (landing_dir / "e.txt").write_text(paper_list("E", "We measure how glaciers in the Alps retreat, with drone surveys over ten years."))
    last = materialize_all(landing_dir, warehouse, instance)
    assert last.success and validated(last)[1] == 1  # scoped again once the whole table passed


def test_a_run_is_needed_until_the_snapshot_holds_the_folder_as_it_is(tmp_path: Path, instance):
    landing_dir, warehouse = tmp_path / "landing", tmp_path / "wh"
    landing_dir.mkdir()
    (landing_dir / "a.txt").write_text(paper_list("A", *ABSTRACTS[:2]))
    (landing_dir / "b.txt").write_text(paper_list("B", *ABSTRACTS[2:4]))
    build = EtlSettings().build_fingerprint()  # what the definitions' runs record

    def unchanged(build: str = build) -> int | None:
        last = launch.last_manifest(instance, warehouse)
        return launch.unchanged_snapshot(launch.plan_run(instance, landing_dir, warehouse, manifest=last), warehouse, build, last)

    assert unchanged() is None  # nothing published yet
    assert materialize_all(landing_dir, warehouse, instance).success
    [(snapshot,)] = query(warehouse, "SELECT max(snapshot_id) FROM lake.snapshots()")
    assert unchanged() == snapshot
    assert unchanged(EtlSettings(near_threshold=0.5).build_fingerprint()) is None  # other settings
    (landing_dir / "a.txt").touch()
    assert unchanged() == snapshot  # a touch is not a change
    (landing_dir / "b.txt").write_text(paper_list("B", ABSTRACTS[3]))
    assert unchanged() is None  # changed content
    (landing_dir / "b.txt").write_text(paper_list("B", *ABSTRACTS[2:4]))
    assert unchanged() == snapshot
    # A run that parsed a new file and then failed before publishing: its manifest holds the file,
    # so the next plan has nothing to parse, but the snapshot does not hold it.
    (landing_dir / "c.txt").write_text(paper_list("C", ABSTRACTS[4]))
    from etl_project.definitions import build_defs

    only_parse = build_defs(str(landing_dir), str(warehouse)).resolve_job_def("etl").execute_in_process(
        instance=instance, asset_selection=[dg.AssetKey("parsed_files")])
    assert only_parse.success
    last = launch.last_manifest(instance, warehouse)
    plan = launch.plan_run(instance, landing_dir, warehouse, manifest=last)
    assert (plan.to_parse, plan.removed) == ([], [])
    assert launch.unchanged_snapshot(plan, warehouse, build, last) is None


def test_a_run_launched_with_nothing_changed_skips_every_step_after_the_parse(seeds_copy: Path, tmp_path: Path, instance):
    """As "Materialize all" in the UI does: the job with its default config."""
    from etl_project.definitions import build_defs

    warehouse = tmp_path / "wh"
    assert materialize_all(seeds_copy, warehouse, instance).success
    snapshots = query(warehouse, "SELECT count(*) FROM lake.snapshots()")
    job = build_defs(str(seeds_copy), str(warehouse)).resolve_job_def("etl")
    result = job.execute_in_process(instance=instance)
    assert result.success and not result.get_asset_materialization_events()
    logged = [e.message for e in instance.all_logs(result.run_id) if e.user_message.startswith("nothing changed")]
    assert len(logged) == 1 and "stays current" in logged[0]
    assert query(warehouse, "SELECT count(*) FROM lake.snapshots()") == snapshots
    full = job.execute_in_process(instance=instance, run_config=launch.parse_config(full=True))
    assert any(e.asset_key == dg.AssetKey("warehouse") for e in full.get_asset_materialization_events())


def test_a_run_launched_over_an_emptied_landing_folder_refuses_to_parse(seeds_copy: Path, tmp_path: Path, instance):
    """As from the UI, where no CLI checked first: the parse step itself refuses."""
    from etl_project.definitions import build_defs

    warehouse = tmp_path / "wh"
    assert materialize_all(seeds_copy, warehouse, instance).success
    snapshots = query(warehouse, "SELECT count(*) FROM lake.snapshots()")
    for path in seeds_copy.iterdir():  # an unmounted share looks like this
        path.unlink()
    job = build_defs(str(seeds_copy), str(warehouse)).resolve_job_def("etl")
    result = job.execute_in_process(instance=instance, raise_on_error=False)
    assert not result.success
    [failure] = result.get_step_failure_events()
    assert failure.step_key == "parsed_files" and "it would remove all 2 published file(s)" in failure.step_failure_data.error.message
    assert query(warehouse, "SELECT count(*) FROM lake.snapshots()") == snapshots
    assert query(warehouse, "SELECT count(*) FROM papers") == [(31,)]


def test_an_empty_landing_folder_publishes_empty_tables(tmp_path: Path, instance):
    (tmp_path / "landing").mkdir()
    result = materialize_all(tmp_path / "landing", tmp_path / "wh", instance)
    assert result.success
    assert count(tmp_path / "wh", "SELECT (SELECT count(*) FROM source_files), (SELECT count(*) FROM papers)") == [(0, 0)]


def test_full_refresh_parses_every_file_again(seeds_copy: Path, tmp_path: Path, instance):
    assert materialize_all(seeds_copy, tmp_path / "wh", instance).success
    result = materialize_all(seeds_copy, tmp_path / "wh", instance, full=True)
    assert parse_metadata(result)["files_parsed"] == len(list(seeds_copy.iterdir()))
    assert count(tmp_path / "wh", "SELECT count(*) FROM papers") == [(31,)]


def test_each_run_keeps_its_own_cross_file_stage_and_old_runs_are_pruned(seeds_copy: Path, tmp_path: Path, instance):
    runs = [materialize_all(seeds_copy, tmp_path / "wh", instance, full=True) for _ in range(3)]  # each rebuilds
    assert all(r.success for r in runs)
    staged = sorted(p.name for p in (tmp_path / "wh" / stage.STAGE / stage.RUNS).iterdir())
    assert staged == [runs[-1].run_id]  # the latest materializations are all the last run's
    assert any(stage.run_path(tmp_path / "wh", runs[-1].run_id, "papers").glob("*.parquet"))  # a folder of parts


def test_tables_staged_by_another_version_of_the_code_are_parsed_again(seeds_copy: Path, tmp_path: Path, instance):
    warehouse = tmp_path / "wh"
    assert materialize_all(seeds_copy, warehouse, instance).success
    current = stage.batch_folder(warehouse, "x").parents[1]
    older = current.with_name(f"{stage.PARSED}@0ldc0de0")
    current.rename(older)  # as an older release left it
    plan = launch.plan_run(instance, seeds_copy, warehouse)
    assert plan.to_parse == sorted(p.name for p in seeds_copy.iterdir())
    assert materialize_all(seeds_copy, warehouse, instance).success
    assert not older.exists()  # pruned
    assert count(warehouse, "SELECT count(*) FROM papers") == [(31,)]


def test_a_run_folds_the_smallest_batches_into_its_own(tmp_path: Path, instance, monkeypatch):
    monkeypatch.setattr(stage, "MAX_BATCHES", 3)
    landing_dir, warehouse = tmp_path / "landing", tmp_path / "wh"
    landing_dir.mkdir()
    (landing_dir / "big.txt").write_text(paper_list("Big", *ABSTRACTS[:3]))
    (landing_dir / "big2.txt").write_text(paper_list("Big 2", *ABSTRACTS[3:]))
    assert materialize_all(landing_dir, warehouse, instance).success
    for number in range(4):  # one new file per run, each in a batch of its own until folded
        (landing_dir / f"n{number}.txt").write_text(paper_list(f"N{number}", ABSTRACTS[number]))
        result = materialize_all(landing_dir, warehouse, instance)
        assert result.success
        batches = manifest(warehouse, result).group_by("batch").len()
        assert batches.height <= 3
    assert parse_metadata(result)["files_refolded"] >= 1
    assert sorted(p.name for p in stage.batch_folder(warehouse, "x").parent.iterdir()) == sorted(batches["batch"])
    assert_same_as_full_build(landing_dir, warehouse, tmp_path / "full")


PUBLISHED = PUBLISHED_TABLES


def assert_same_as_full_build(landing_dir: Path, warehouse: Path, fresh: Path) -> None:
    """Every published table of ``warehouse`` equals, row for row, a full build of ``landing_dir``
    into the fresh folder ``fresh``. Both are read sorted by every column: a table's row order is
    not part of it (a run's landing tables come batch by batch, a full build's in one batch)."""
    assert materialize_all(landing_dir, fresh, full=True).success
    for table in PUBLISHED:
        with etl_project.connect(warehouse) as con:
            got = con.sql(f"FROM {table} ORDER BY ALL").pl()
        with etl_project.connect(fresh) as con:
            want = con.sql(f"FROM {table} ORDER BY ALL").pl()
        try:
            assert_frame_equal(got, want, check_exact=True)
        except AssertionError as exc:
            raise AssertionError(f"{table} differs from a full build: {exc}") from None


def test_batches_of_any_size_stage_and_publish_the_same_tables(tmp_path: Path, monkeypatch):
    """parsed_files stages a batch of files at a time; one file per batch must publish exactly
    what one batch of all files does (order included: the stack is read in file order)."""
    landing_dir = tmp_path / "landing"
    landing_dir.mkdir()
    for name in ("b.txt", "a.txt", "sub/c.txt", "Z.txt", "é.txt"):
        (landing_dir / name).parent.mkdir(exist_ok=True)
        (landing_dir / name).write_text(paper_list(name, *ABSTRACTS[len(name) % 3:], ABSTRACTS[0]))
    (landing_dir / "empty.txt").write_text("")
    published = {}
    for label, batch_bytes in (("one batch", 1 << 30), ("file by file", 1)):
        monkeypatch.setattr(stage, "BATCH_BYTES", batch_bytes)
        warehouse = tmp_path / label
        assert materialize_all(landing_dir, warehouse).success
        with etl_project.connect(warehouse) as con:  # each table is one data file, read in its order
            published[label] = {
                table: con.sql(f"FROM {table}").pl()
                for table in ("source_files", "raw_records", "records", "papers", "paper_occurrences")
            }
    for table, frame in published["one batch"].items():
        assert_frame_equal(frame, published["file by file"][table], check_exact=True)
    files = published["one batch"]["source_files"]["source_file"].to_list()
    assert files == sorted(files) and len(files) == 6
    for table in ("raw_records", "records"):
        frame = published["file by file"][table]
        assert frame.height == 27 and frame.equals(frame.sort("source_file", "ordinal"))


# --- The rule: after any sequence of runs, the tables equal a full build of the same folder ---

BASE = ("We study robust training of graph neural networks under label noise and propose a "
        "method that reweights samples by their agreement with neighbours, with experiments on "
        "citation benchmarks showing consistent gains over strong baselines in every setting we tried")
# Exact copies, near variants (one or two words changed: one paper with them) and distinct texts.
TEXTS = [BASE, BASE.replace("robust", "stable"), BASE.replace("robust", "stable").replace("citation", "social"),
         ABSTRACTS[0], ABSTRACTS[1], ABSTRACTS[2] + " With code at https://github.com/example/repo."]
NAMES = ["a.txt", "b.txt", "sub/c.txt", "d.txt"]
file_texts = st.lists(st.sampled_from(TEXTS), min_size=1, max_size=4)
operations = st.one_of(
    st.tuples(st.just("write"), st.sampled_from(NAMES), file_texts),  # adds or changes
    st.tuples(st.just("remove"), st.sampled_from(NAMES), st.just([])),
    st.tuples(st.just("rename"), st.sampled_from(NAMES), st.sampled_from(NAMES)),
    st.tuples(st.just("parse_only"), st.just(""), st.just([])),  # a run that stops after parsing
)


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(operations, min_size=1, max_size=3))
def test_any_sequence_of_runs_equals_a_full_build(tmp_path_factory, steps):
    from etl_project.definitions import build_defs

    root = tmp_path_factory.mktemp("sequence")
    landing_dir, warehouse = root / "landing", root / "wh"
    landing_dir.mkdir()
    (landing_dir / "a.txt").write_text(paper_list("A", TEXTS[0], TEXTS[3]))
    (landing_dir / "b.txt").write_text(paper_list("B", TEXTS[1], TEXTS[3]))
    with dg.DagsterInstance.ephemeral() as instance:
        assert materialize_all(landing_dir, warehouse, instance).success
        for number, (kind, name, arg) in enumerate(steps):
            path = landing_dir / name
            if kind == "write":
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(paper_list(name, *arg))
            elif kind == "remove":
                path.unlink(missing_ok=True)
            elif kind == "rename" and path.exists():
                (landing_dir / arg).parent.mkdir(parents=True, exist_ok=True)
                path.replace(landing_dir / arg)
            elif kind == "parse_only":
                job = build_defs(str(landing_dir), str(warehouse)).resolve_job_def("etl")
                job.execute_in_process(instance=instance, asset_selection=[dg.AssetKey("parsed_files")],
                                       run_config=launch.parse_config(allow_removals=True))
                continue
            result = materialize_all(landing_dir, warehouse, instance, allow_removals=True)
            assert result.success
            assert_same_as_full_build(landing_dir, warehouse, root / f"full{number}")


def test_search_finds_a_paper_by_the_words_only_its_near_duplicate_variant_holds(tmp_path: Path, instance):
    """b.txt holds a near duplicate of a.txt's text with "robust" edited to "stable": one paper,
    whose canonical text lacks "stable". Search finds it by that word while b.txt is there, and
    only that paper's terms are worked out again as b.txt comes and goes."""
    landing_dir, warehouse = tmp_path / "landing", tmp_path / "wh"
    landing_dir.mkdir()
    (landing_dir / "a.txt").write_text(paper_list("A", TEXTS[0], TEXTS[3]))
    found = "SELECT p.first_source_file, p.variant_count FROM search_papers('stable') JOIN papers AS p USING (paper_id)"
    assert materialize_all(landing_dir, warehouse, instance).success
    assert count(warehouse, found) == []

    (landing_dir / "b.txt").write_text(paper_list("B", TEXTS[1]))
    result = materialize_all(landing_dir, warehouse, instance)
    assert result.success and count(warehouse, "SELECT count(*) FROM papers") == [(2,)]
    assert count(warehouse, found) == [("a.txt", 2)]
    terms = parse_metadata(result, "paper_terms")
    assert (terms["papers_with_variants"], terms["papers_computed"], terms["papers_reused"]) == (1, 1, 1)
    # The words the texts share are counted once: "robust" and "graph" as often as in one text.
    tf = "SELECT term, tf FROM paper_terms WHERE term IN ('robust', 'stabl', 'graph') ORDER BY term"
    assert count(warehouse, tf) == [("graph", 1), ("robust", 1), ("stabl", 1)]

    (landing_dir / "b.txt").unlink()
    result = materialize_all(landing_dir, warehouse, instance, allow_removals=True)
    assert result.success and count(warehouse, found) == []
    assert parse_metadata(result, "paper_terms")["papers_computed"] == 1


def test_a_file_that_could_not_be_read_is_read_again_by_the_next_run(tmp_path: Path, instance, monkeypatch):
    from etl_project import ingest

    landing_dir, warehouse = tmp_path / "landing", tmp_path / "wh"
    landing_dir.mkdir()
    (landing_dir / "a.txt").write_text(paper_list("A", *ABSTRACTS[:2]))
    (landing_dir / "b.txt").write_text(paper_list("B", *ABSTRACTS[2:4]))
    read = ingest._read_regular_file

    def failing(real: Path, limit: int):
        if real.name == "b.txt":
            raise OSError(5, "Input/output error")
        return read(real, limit)

    monkeypatch.setattr(ingest, "_read_regular_file", failing)
    assert materialize_all(landing_dir, warehouse, instance).success
    assert count(warehouse, "SELECT status FROM source_files WHERE source_file = 'b.txt'") == [("rejected",)]
    monkeypatch.setattr(ingest, "_read_regular_file", read)
    plan = launch.plan_run(instance, landing_dir, warehouse)
    assert plan.to_parse == ["b.txt"]  # its sha256 was never read: it counts as changed
    assert materialize_all(landing_dir, warehouse, instance).success
    assert_same_as_full_build(landing_dir, warehouse, tmp_path / "full")


def test_files_parsed_with_other_limits_or_code_are_parsed_again(tmp_path: Path):
    parsed_by = stage.parse_version()
    assert stage.parse_version(max_file_bytes=10) != parsed_by != stage.parse_version(max_record_chars=10)
    (tmp_path / stage.STAGE).mkdir()
    stage.batch_folder(tmp_path, "b1").mkdir(parents=True)
    rows = pl.DataFrame({"key": ["a", "b"], "source_file": ["a", "b"], "sha256": ["x", "y"], "batch": ["b1", "gone"],
                         "parsed_by": [parsed_by, parsed_by], "size": [1, 1], "mtime_ns": [1, 1]}, schema=stage.MANIFEST_SCHEMA)
    assert stage.known_files(tmp_path, rows, parsed_by)["key"].to_list() == ["a"]  # b's batch is not staged
    assert stage.known_files(tmp_path, rows, stage.parse_version(max_file_bytes=10)).is_empty()
    assert stage.known_files(tmp_path, rows.drop("parsed_by"), parsed_by).is_empty()  # an older release's manifest


def test_a_snapshot_of_tables_stacked_from_an_older_parse_says_so(tmp_path: Path, instance):
    """Only parsed_files, then only the warehouse: the publish is of the landing tables stacked
    before the new file was parsed, and the snapshot records that, so a run is still needed."""
    from etl_project.definitions import build_defs

    landing_dir, warehouse = tmp_path / "landing", tmp_path / "wh"
    landing_dir.mkdir()
    (landing_dir / "a.txt").write_text(paper_list("A", *ABSTRACTS[:2]))
    assert materialize_all(landing_dir, warehouse, instance).success
    (landing_dir / "c.txt").write_text(paper_list("C", ABSTRACTS[4]))
    job = build_defs(str(landing_dir), str(warehouse)).resolve_job_def("etl")
    for asset in ("parsed_files", "warehouse"):
        assert job.execute_in_process(instance=instance, asset_selection=[dg.AssetKey(asset)]).success
    assert count(warehouse, "SELECT source_file FROM source_files") == [("a.txt",)]
    last = launch.last_manifest(instance, warehouse)
    assert last["key"].to_list() == ["a.txt", "c.txt"]
    plan = launch.plan_run(instance, landing_dir, warehouse, manifest=last)
    assert launch.unchanged_snapshot(plan, warehouse, EtlSettings().build_fingerprint(), last) is None
    assert materialize_all(landing_dir, warehouse, instance).success  # c's batch was kept for it
    assert_same_as_full_build(landing_dir, warehouse, tmp_path / "full")


def test_a_file_still_growing_is_never_read_to_fold_batches(tmp_path: Path, instance, monkeypatch):
    import os
    import time

    from etl_project.definitions import build_defs

    monkeypatch.setattr(stage, "MAX_BATCHES", 2)
    landing_dir, warehouse = tmp_path / "landing", tmp_path / "wh"
    landing_dir.mkdir()
    job = build_defs(str(landing_dir), str(warehouse)).resolve_job_def("etl")

    def write(name: str, text: str, age_seconds: float = 600) -> None:
        (landing_dir / name).write_text(text)
        stamp = time.time_ns() - int(age_seconds * 1e9)
        os.utime(landing_dir / name, ns=(stamp, stamp))

    def run() -> dg.ExecuteInProcessResult:
        result = job.execute_in_process(instance=instance, run_config=launch.parse_config(settle_seconds=60))
        assert result.success
        return result

    write("a.txt", paper_list("A", ABSTRACTS[0]))
    run()
    write("b.txt", paper_list("B", ABSTRACTS[1]))
    run()  # two batches: a's and b's
    write("a.txt", paper_list("A", "HALF WRITTEN"), age_seconds=0)  # being rewritten right now
    write("c.txt", paper_list("C", ABSTRACTS[2]))
    result = run()  # c needs a batch: b's is the smallest one that may be read again
    assert parse_metadata(result)["files_waiting"] == 1
    assert count(warehouse, "SELECT raw_text FROM raw_records WHERE source_file = 'a.txt'") == [(ABSTRACTS[0],)]
    assert manifest(warehouse, result).group_by("batch").len().height <= 2


def test_a_file_with_the_size_and_mtime_it_was_parsed_with_is_not_read_again(tmp_path: Path, instance, monkeypatch):
    import os
    import time

    landing_dir, warehouse = tmp_path / "landing", tmp_path / "wh"
    landing_dir.mkdir()
    (landing_dir / "a.txt").write_text(paper_list("A", *ABSTRACTS[:2]))
    (landing_dir / "b.txt").write_text(paper_list("B", *ABSTRACTS[2:4]))
    (landing_dir / "c.txt").write_text(paper_list("C", ABSTRACTS[4]))
    for name in ("a.txt", "b.txt"):  # written well before the run; c just now
        os.utime(landing_dir / name, ns=(time.time_ns() - 60 * 10**9,) * 2)
    assert materialize_all(landing_dir, warehouse, instance).success
    read = []
    sha256_of = landing.sha256_of
    monkeypatch.setattr(landing, "sha256_of", lambda path: read.append(path.name) or sha256_of(path))
    # c was modified too shortly before it was parsed to trust its mtime ("racy clean", as git says):
    # it could be rewritten, same size, within the same mtime tick.
    assert launch.plan_run(instance, landing_dir, warehouse).to_parse == [] and read == ["c.txt"]
    (landing_dir / "b.txt").touch()  # a new mtime: read again, and found unchanged
    read.clear()
    assert launch.plan_run(instance, landing_dir, warehouse).to_parse == [] and sorted(read) == ["b.txt", "c.txt"]
