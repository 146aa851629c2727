"""The one job: every asset and check, from the landing folder to the published warehouse."""

import dagster as dg

ETL_JOB = "etl"

etl_job = dg.define_asset_job(
    ETL_JOB,
    selection=dg.AssetSelection.all(),
    description="Every asset and check: landing folder to published warehouse. A run parses the "
    "new and changed landing files and rebuilds every cross-file asset.",
)
