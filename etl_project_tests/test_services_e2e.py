"""End to end with the real services, as a user runs the project: `dagster dev` (webserver and
daemon) on 127.0.0.1, a run launched with the Dagster GraphQL client, the landing sensor picking
up a dropped file, and the asset graph rendered by headless Chromium.

Artifacts (screenshot, rendered DOM, the services' log) are saved under ARTIFACTS, also when the
test fails; failure messages carry the tail of the services' log.
"""

import os
import re
import shutil
import uuid
from pathlib import Path

import pytest
from dagster_graphql import DagsterGraphQLClient

import etl_project
from etl_project.defs.resources import SETTLE_ENV
from etl_project.defs.sensors import INTERVAL_ENV
from etl_project.settings import PROJECT_ROOT, SEEDS_ENV, WAREHOUSE_ENV, instance_settings
from etl_project_tests.services import (
    LOCALHOST, UNFINISHED_RUN_STATUSES, DagsterDev, find_chromium, png_size, render_page, visible_text,
)

ARTIFACTS = Path(__file__).resolve().parent / "artifacts" / "services_e2e"
LOCATION = "etl_project"
JOB = "etl"
SENSOR = "landing_sensor"
ASSETS = [
    "parsed_files", "source_files", "raw_records", "rejected_records", "records", "papers", "paper_occurrences",
    "source_overlap", "paper_links", "paper_names", "paper_topics", "paper_terms", "warehouse",
]
GROUPS = ["ingest", "transform", "enrich", "publish"]

# Bounded waits, generous for a loaded 2-core machine (the whole test takes ~1.5 min there).
LOAD_TIMEOUT = 180
SENSOR_TIMEOUT = 120
RUN_TIMEOUT = 300
PUBLISH_TIMEOUT = 240


@pytest.fixture
def dagster_dev(tmp_path: Path, seeds_copy: Path, monkeypatch):
    """`dagster dev` over a temporary DAGSTER_HOME (the project's dagster.yaml), landing folder
    (a copy of seeds/) and warehouse, with a fast sensor; stopped with its whole process group."""
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copyfile(instance_settings(), home / "dagster.yaml")
    env = {
        **os.environ,
        "DAGSTER_HOME": str(home),
        SEEDS_ENV: str(seeds_copy),
        WAREHOUSE_ENV: str(tmp_path / "warehouse"),
        INTERVAL_ENV: "5",
        SETTLE_ENV: "1",
        "GX_ANALYTICS_ENABLED": "false",
    }
    # The GraphQL client (requests) must not route 127.0.0.1 through a proxy from the environment.
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.setenv(name, LOCALHOST)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    log = tmp_path / "dagster_dev.log"
    print(f"artifacts: {ARTIFACTS}")
    try:
        with DagsterDev(PROJECT_ROOT, env, log) as dev:
            yield dev
    finally:
        if log.exists():
            shutil.copyfile(log, ARTIFACTS / "dagster_dev.log")


def query(warehouse: Path, sql: str, params: list | None = None) -> list[tuple]:
    """Read the published warehouse as an analyst would: read-only, one short connection."""
    with etl_project.connect(warehouse) as con:
        return con.execute(sql, params or []).fetchall()


def test_dagster_dev_graphql_sensor_and_ui(dagster_dev: DagsterDev, seeds_copy: Path, tmp_path: Path):
    dev = dagster_dev
    warehouse = tmp_path / "warehouse"
    chromium = find_chromium()
    assert chromium, "headless Chromium not found: install Debian's `chromium` (.ci/run does: apt-get install chromium)"
    dev.wait_until_loaded(LOCATION, LOAD_TIMEOUT)

    # 1. Materialize everything, as the UI's "Materialize all" does: one run of the etl job, whose
    # parse step finds the landing files itself. The landing sensor is on by default and may ask
    # for a run of its own; the two share the pool and take turns on the warehouse.
    seed_keys = sorted(p.name for p in seeds_copy.iterdir())
    client = DagsterGraphQLClient(LOCALHOST, port_number=dev.port, timeout=60)
    run_id = client.submit_job_execution(JOB)

    def finished(run: str):
        status = client.get_run_status(run).value
        if status in ("FAILURE", "CANCELED"):
            raise dev.fail(f"run {run} ended {status}:\n{dev.run_errors(run)}")
        return status if status == "SUCCESS" else None

    dev.wait_for(f"run {run_id} (materialize everything) to succeed", lambda: finished(run_id), RUN_TIMEOUT)
    materialized = dev.graphql(MATERIALIZATIONS_QUERY, {"runId": run_id})["runOrError"]["assetMaterializations"]
    assert sorted(m["assetKey"]["path"][-1] for m in materialized) == sorted(ASSETS)

    def queue_drained():
        runs = dev.assert_no_failed_runs()
        return runs if not any(r["status"] in UNFINISHED_RUN_STATUSES for r in runs) else None

    dev.wait_for("every run to finish", queue_drained, RUN_TIMEOUT)
    assert query(warehouse, "SELECT (SELECT count(*) FROM source_files), (SELECT count(*) FROM raw_records), "
                 "(SELECT count(*) FROM papers)") == [(2, 38, 31)]

    # 2. Drop a new paper list into the landing folder, written aside and renamed in as a
    # well-behaved uploader does; the sensor must parse it and publish its records.
    token = uuid.uuid4().hex[:8]
    name = f"002_e2e_{token}.txt"
    title = f"E2E upload {token} — Zürich"
    seed_abstract = (seeds_copy / seed_keys[0]).read_text(encoding="utf-8").split("\n\n")[1].strip()
    abstracts = [
        f"We study quokka-shaped attention priors ({token}-1) and show they shrink auroral tensors by 3.5%.",
        f"A naïve baseline ({token}-2) beats “tuned” ensembles on the Zürich lantern benchmark—twice.",
        f"Sparse glacier embeddings ({token}-3): $p<$0.01, see `GlacierNet` and \\emph{{ablation}}.",
        seed_abstract,  # already published from a seed file: must dedup into the existing paper
    ]
    aside = seeds_copy / f".{name}.part"
    aside.write_text("\n\n".join([title, *abstracts]) + "\n", encoding="utf-8")
    os.replace(aside, seeds_copy / name)

    def published():
        dev.assert_no_failed_runs()
        rows = query(warehouse, "SELECT raw_text FROM raw_records WHERE source_file = ? ORDER BY ordinal", [name])
        return rows if rows else None

    rows = dev.wait_for(f"the sensor's run to publish {name} into DuckDB", published, PUBLISH_TIMEOUT)
    assert [r[0] for r in rows] == abstracts
    assert query(warehouse, "SELECT title, status, record_count FROM source_files WHERE source_file = ?", [name]) == [
        (title, "ok", 4)
    ]
    assert query(warehouse, "SELECT (SELECT count(*) FROM source_files), (SELECT count(*) FROM raw_records), "
                 "(SELECT count(*) FROM papers)") == [(3, 42, 34)]
    assert query(
        warehouse,
        "SELECT o.match_kind, p.first_source_file FROM paper_occurrences o JOIN papers p USING (paper_id) "
        "WHERE o.source_file = ? AND o.ordinal = 4",
        [name],
    ) == [("exact", seed_keys[0])]
    runs = dev.wait_for("every run to finish", queue_drained, RUN_TIMEOUT)
    newest = runs[0]
    assert newest["tags"].get("etl_project/trigger") == SENSOR
    materialized = dev.graphql(MATERIALIZATIONS_QUERY, {"runId": newest["runId"]})["runOrError"]["assetMaterializations"]
    [parse] = [m for m in materialized if m["assetKey"]["path"] == ["parsed_files"]]
    parsed = {e["label"]: e.get("intValue") for e in parse["metadataEntries"]}
    assert (parsed["files_parsed"], parsed["files_new"]) == (1, 1), "the run parsed more than the new file"

    # 3. The asset graph in headless Chromium, every group expanded. The one-time community
    # dialog is dismissed first, as a user would, so it does not cover the graph.
    dev.graphql("mutation { setNuxSeen }")
    expanded = ",".join(f"global@global:{group}" for group in GROUPS)
    url = f"{dev.url}/asset-groups?expanded={expanded}"
    screenshot = ARTIFACTS / "asset_graph.png"
    screenshot.unlink(missing_ok=True)
    # A window large enough for the whole graph: the UI renders only the nodes in view.
    window = (3000, 3000)
    dom = render_page(chromium, url, ARTIFACTS / "asset_graph.html", screenshot, tmp_path / "chromium_profile", window=window)
    text = visible_text(dom)
    missing = [a for a in [*ASSETS, *GROUPS] if not re.search(rf"(?<![\w]){a}(?![\w])", text)]
    assert not missing, f"asset graph at {url} does not show {missing}; page text: {text[:1500]}"
    assert png_size(screenshot) == window
    assert screenshot.stat().st_size > 20_000, "the screenshot looks blank"


MATERIALIZATIONS_QUERY = """
query ($runId: ID!) {
  runOrError(runId: $runId) {
    ... on Run { assetMaterializations { assetKey { path } metadataEntries { label ... on IntMetadataEntry { intValue } } } }
  }
}
"""
