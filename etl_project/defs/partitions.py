"""Per-file partitions and the pool that serializes every step touching the stage or warehouse."""

import warnings

import dagster as dg

# backfill_policy is marked beta, and is the documented way to run many partitions in one step.
warnings.filterwarnings("ignore", message=r"Parameter `backfill_policy`", category=dg.BetaWarning)

# One partition per file of the landing folder; keys come from etl_project.landing.partition_key.
LANDING_FILES = dg.DynamicPartitionsDefinition(name="landing_files")

# Every step of the pipeline claims a slot of this pool; the instance settings
# (.dagster_home/dagster.yaml) give it one slot with op granularity, so two runs (CLI and UI, two
# sensor ticks) interleave step by step and never write the stage or the warehouse at once.
WAREHOUSE_POOL = "etl_warehouse"

# A per-file asset of a run over many files materializes them all in one step, not one run each.
ONE_RUN_PER_BATCH = dg.BackfillPolicy.single_run()
