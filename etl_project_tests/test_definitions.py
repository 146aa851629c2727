import subprocess
import sys
from pathlib import Path

import dagster as dg

from etl_project.definitions import ETL_JOB, defs

PROJECT = Path(__file__).resolve().parents[1]


def test_definitions_validate():
    dg.Definitions.validate_loadable(defs)
    job = defs.resolve_job_def(ETL_JOB)
    keys = {k.to_user_string() for k in job.asset_layer.executable_asset_keys}
    assert keys == {
        "parsed_files", "source_files", "raw_records", "rejected_records", "records",
        "papers", "paper_occurrences", "source_overlap", "warehouse",
        "paper_links", "paper_names", "paper_topics", "paper_terms",
    }
    checks = {k.name for k in defs.resolve_asset_graph().asset_check_keys}
    assert checks == {
        "source_files_suite", "raw_records_suite", "records_suite",
        "papers_suite", "paper_occurrences_suite", "source_overlap_suite", "near_duplicate_clusters",
        "papers_plain_text_suite", "paper_links_suite", "paper_names_suite", "paper_topics_suite",
    }


def test_dg_check_defs():
    dg_cli = Path(sys.executable).with_name("dg")
    done = subprocess.run([str(dg_cli), "check", "defs"], cwd=PROJECT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
