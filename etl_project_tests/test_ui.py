"""What the UI shows is true and complete: check verdicts (a WARN-only failure fails at WARN
without blocking), Data Docs that work offline, described columns, table metadata without empty
entries, and the command Dagster recommends for the UI.

One pipeline run on the seeds serves the module, with one extra WARN expectation on ``papers``
that the seeds fail (abstracts of at least 150 words: most have fewer)."""

import dataclasses
import functools
import http.server
import re
import shutil
import threading
import tomllib
from pathlib import Path

import dagster as dg
import duckdb
import polars as pl
import pytest
import yaml

from etl_project import contract
from etl_project.defs.assets import PUBLISHED_TABLES
from etl_project.quality import runner, suites
from etl_project_tests.conftest import SEEDS, materialize_all

ROOT = Path(__file__).resolve().parents[1]
LONG_ABSTRACTS = suites.Rule(
    "ExpectColumnValuesToBeBetween", {"column": "word_count", "min_value": 150, "mostly": 0.95}, suites.WARN,
)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("ui")
    shutil.copytree(SEEDS, root / "landing")
    # A validation rendered into another site by the same process (as in tests and benchmarks):
    # the run's Data Docs index must not list it.
    overlap = pl.DataFrame({"file_a": ["a"], "file_b": ["b"], "shared_papers": [1], "papers_a": [1], "papers_b": [1], "jaccard": [0.5]})
    runner.run_suite(suites.SOURCE_OVERLAP, overlap, root / "other_docs")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(suites, "PAPERS", dataclasses.replace(suites.PAPERS, rules=(*suites.PAPERS.rules, LONG_ABSTRACTS)))
        result = materialize_all(root / "landing", root / "warehouse")
    return root / "warehouse", result


def materializations(result) -> dict[str, dg.AssetMaterialization]:
    return {
        e.materialization.asset_key.to_user_string(): e.materialization
        for e in result.get_asset_materialization_events() if e.materialization.partition is None
    }


def evaluations(result) -> dict[str, dg.AssetCheckEvaluation]:
    return {e.check_name: e for e in result.get_asset_check_evaluations()}


# --- item 7: WARN-only failures ------------------------------------------------------------

def test_a_suite_failing_only_warn_expectations_fails_at_warn_and_does_not_block(run):
    _, result = run
    papers = evaluations(result)["papers_suite"]
    assert (papers.passed, papers.severity) == (False, dg.AssetCheckSeverity.WARN)
    assert papers.metadata["expectations_failed"].value == 1
    assert result.success
    assert "warehouse" in materializations(result)  # published all the same
    others = [e for name, e in evaluations(result).items() if name != "papers_suite"]
    assert all(e.passed for e in others)


# --- item 8: Data Docs offline --------------------------------------------------------------

class _Recording(http.server.SimpleHTTPRequestHandler):
    """Serves a folder and notes every request's path and status."""

    requests: list[tuple[str, int]]

    def log_request(self, code="-", size="-"):
        self.requests.append((self.path, int(code)))

    def log_message(self, *args):
        pass


def test_data_docs_index_lists_the_runs_validations_in_chromium_offline(run, tmp_path: Path):
    from etl_project_tests.services import find_chromium, render_page

    warehouse, result = run
    chromium = find_chromium()
    assert chromium, "headless Chromium not found: install Debian's `chromium` (.ci/run does: apt-get install chromium)"
    site = warehouse / "data_docs" / "latest"
    listed = re.findall(r"'_table_row_link_path': '([^']+)'", (site / "index.html").read_text(encoding="utf-8"))
    assert all((site / path).is_file() for path in listed)  # validations and suites, each with its page
    assert len([p for p in listed if p.startswith("validations/")]) == 10  # this run's only
    for page in site.rglob("*.html"):
        html = page.read_text(encoding="utf-8")
        assert not re.findall(r'<(?:script|link)\b[^>]*(?:src|href)="https?://', html), f"a CDN file in {page}"
        assert "vegaEmbed(" not in html, f"{page} draws a chart: vendor vega (etl_project/quality/data_docs_static)"

    requests: list[tuple[str, int]] = []
    handler = functools.partial(type("Handler", (_Recording,), {"requests": requests}), directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_port}/index.html"
        dom = render_page(chromium, url, tmp_path / "index.html", tmp_path / "index.png", tmp_path / "profile", budget_ms=5000)
    finally:
        server.shutdown()
        server.server_close()

    # bootstrap-table ran and drew one row per validation, linking its page.
    assert 'class="bootstrap-table bootstrap4"' in dom
    rows = re.findall(r'<tr\b[^>]*class="clickable-row"[^>]*data-href="validations/([^/"]+)/', dom)
    suite_names = {e.metadata["suite"].value for e in evaluations(result).values() if "suite" in e.metadata}
    assert len(suite_names) == 10 and set(rows) == suite_names and len(rows) == 10
    assert "fa-times" in dom and "fa-check-circle" in dom  # the failed WARN suite and the passed ones
    # Every script, style and font came from the site itself, and none was missing.
    served = dict(requests)
    assert all(code == 200 for code in served.values()), [r for r in requests if r[1] != 200]
    vendored = {f"/{runner.VENDOR_DIR.as_posix()}/{path}" for path in runner.CDN_FILES.values() if path}
    assert vendored <= served.keys(), vendored - served.keys()
    assert f"/{runner.VENDOR_DIR.as_posix()}/fontawesome-free-6.6.0/webfonts/fa-solid-900.woff2" in served


def test_checks_show_their_result_as_tables_and_the_data_docs_as_a_path(run):
    warehouse, result = run
    papers = evaluations(result)["papers_suite"]
    assert isinstance(papers.metadata["expectations"], dg.TableMetadataValue)
    (failure,) = papers.metadata["failures"].records
    assert failure.data["expectation"] == LONG_ABSTRACTS.describe()
    assert failure.data["severity"] == "WARN" and failure.data["ok"] is False
    assert failure.data["unexpected"] > 0 and failure.data["samples"].startswith("[")
    for name, evaluation in evaluations(result).items():
        if name.endswith("_suite"):
            page = evaluation.metadata["data_docs"]
            assert isinstance(page, dg.PathMetadataValue) and Path(page.value).is_file()
            assert Path(page.value).is_relative_to(warehouse / "data_docs" / "runs" / result.run_id)
            assert name.removesuffix("_suite") in Path(page.value).read_text(encoding="utf-8")


# --- item 9: one description per column --------------------------------------------------------

def test_every_published_column_has_its_description_from_the_contract(run):
    _, result = run
    assert set(contract.TABLES) == set(PUBLISHED_TABLES)
    published = materializations(result)
    for table in PUBLISHED_TABLES:
        columns = published[table].metadata["dagster/column_schema"].schema.columns
        described = contract.TABLES[table].columns
        assert [c.name for c in columns if not c.description] == [], f"{table}: columns without a description"
        assert sorted(described) == sorted(c.name for c in columns), f"{table}: the contract names other columns"
        assert all(c.description == described[c.name] for c in columns)


def test_the_readme_tables_section_is_the_contracts():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split(contract.START, 1)[1].split(contract.END, 1)[0]
    assert section.strip() == contract.readme_tables_markdown().strip(), (
        "README's tables section differs from etl_project/contract.py: run `python -m etl_project.contract --write-readme`"
    )


def test_comment_statements_describe_the_given_columns_in_duckdb(monkeypatch):
    tricky = contract.Table('o"dd', "one row per 'thing'", "It's quoted.", {"a": "Ann's column", 'b"c': "B; DROP"})
    monkeypatch.setitem(contract.TABLES, tricky.name, tricky)
    with duckdb.connect() as con:
        con.execute('CREATE TABLE "o""dd" (a INTEGER, "b""c" INTEGER, extra INTEGER)')
        statements = contract.comment_statements(tricky.name, ["a", 'b"c', "extra"])
        assert len(statements) == 3  # the table, and the two described columns
        for statement in statements:
            con.execute(statement)
        assert con.sql("SELECT comment FROM duckdb_tables() WHERE table_name = 'o\"dd'").fetchone() == (tricky.summary,)
        comments = dict(con.sql("SELECT column_name, comment FROM duckdb_columns() WHERE table_name = 'o\"dd'").fetchall())
    assert comments == {"a": "Ann's column", 'b"c': "B; DROP", "extra": None}
    assert contract.comment_statements("not_a_table", ["a"]) == []


# --- item 10: table metadata, nothing empty ----------------------------------------------------

def _empty(value: dg.MetadataValue) -> bool:
    inner = value.value
    if isinstance(value, dg.TableMetadataValue):
        return not value.records
    return inner is None or (isinstance(inner, (str, list, dict)) and len(inner) == 0)


def test_previews_and_breakdowns_are_tables_and_no_value_is_empty(run):
    _, result = run
    published = materializations(result)
    for table in PUBLISHED_TABLES:
        metadata = published[table].metadata
        if metadata["dagster/row_count"].value == 0:
            assert "preview" not in metadata  # rejected_records on the seeds: no empty table
            continue
        preview = metadata["preview"]
        assert isinstance(preview, dg.TableMetadataValue) and 1 <= len(preview.records) <= 5
    abstract = published["papers"].metadata["preview"].records[0].data["abstract"]
    assert len(abstract) > 80 and not abstract.endswith("…")  # whole, not cut at 80 characters
    # Every asset of the run but `warehouse` (its metadata is built by the publisher's owner).
    for key, materialization in published.items():
        if key == "warehouse":
            continue
        for name, value in materialization.metadata.items():
            assert not isinstance(value, (dg.MarkdownMetadataValue, dg.JsonMetadataValue)), (key, name)
            assert not _empty(value), (key, name)
    for name, evaluation in evaluations(result).items():
        for entry, value in evaluation.metadata.items():
            assert not isinstance(value, (dg.MarkdownMetadataValue, dg.JsonMetadataValue)), (name, entry)
            assert not _empty(value), (name, entry)
        if evaluation.passed and name.endswith("_suite"):
            assert "failures" not in evaluation.metadata


# --- item 11: the command Dagster recommends ------------------------------------------------------

def test_the_readme_leads_with_the_ui_command_dagster_recommends():
    from dagster._cli.dev import dev_command

    advice = dev_command.callback._superseded.additional_warn_text  # "Use 'dg dev' instead."
    recommended = re.search(r"'([^']+)'", advice)[1]
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    ui = readme.split("## The Dagster UI", 1)[1]
    first_command = re.search(r"```bash\n(.+?)\n", ui)[1].split("#")[0].split()
    assert " ".join(w for w in first_command if "=" not in w) == recommended
    # `dg dev` and `dagster dev` show the same code location, so its sensor state carries over.
    dg_config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["dg"]["project"]
    (workspace,) = yaml.safe_load((ROOT / "workspace.yaml").read_text(encoding="utf-8"))["load_from"]
    assert dg_config["code_location_name"] == workspace["python_module"]["location_name"]
