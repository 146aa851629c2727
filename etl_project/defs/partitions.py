"""Per-file partitions, and how a run over many of them runs."""

import warnings

import dagster as dg

# backfill_policy is marked beta, and is the documented way to run many partitions in one step.
warnings.filterwarnings("ignore", message=r"Parameter `backfill_policy`", category=dg.BetaWarning)

# One partition per file of the landing folder; keys come from etl_project.landing.partition_key.
LANDING_FILES = dg.DynamicPartitionsDefinition(name="landing_files")

# A per-file asset of a run over many files materializes them all in one step, not one run each.
ONE_RUN_PER_BATCH = dg.BackfillPolicy.single_run()
