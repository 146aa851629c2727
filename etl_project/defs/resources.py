"""Resources: the folders and limits of a run, the lock that makes runs take turns, the process
that runs Great Expectations, and the stage that keeps frames between steps."""

import contextlib
import os
import shutil
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

import dagster as dg
import polars as pl

from etl_project import build_info, ingest, run_lock, settings, stage
from etl_project.enrich import topics
from etl_project.lake import Lake
from etl_project.near_dedup import NearConfig
from etl_project.quality import background, runner
from etl_project.quality.suites import SUITE_CHECKS, SuiteCheck

SETTLE_ENV = "ETL_SENSOR_SETTLE_SECONDS"


class EtlSettings(dg.ConfigurableResource):
    """Folders and limits. Empty folders fall back to ``ETL_SEEDS_DIR`` / ``ETL_WAREHOUSE_DIR``,
    then to the project's own ``seeds/`` and ``warehouse/``, resolved when the run starts."""

    seeds_dir: str = ""
    warehouse_dir: str = ""
    max_file_bytes: int = ingest.DEFAULT_MAX_FILE_BYTES
    max_record_chars: int = ingest.DEFAULT_MAX_RECORD_CHARS
    # The landing sensor picks a file up only once it stopped changing for this long
    # (ETL_SENSOR_SETTLE_SECONDS, read when the code location loads; default 10).
    settle_seconds: float = float(os.environ.get(SETTLE_ENV, "10"))
    # Near-duplicate matching (etl_project/near_dedup.py): on/off, and the verified Jaccard
    # similarity from which two abstracts are one paper; the other parameters keep their defaults.
    # The DuckLake catalog and data path (empty: ETL_CATALOG / ETL_DATA_PATH, then the embedded
    # <warehouse>/catalog.sqlite and <warehouse>/data/; see etl_project/lake.py).
    catalog: str = ""
    data_path: str = ""
    near_duplicates: bool = True
    near_threshold: float = NearConfig.threshold

    def build_fingerprint(self) -> str:
        """The code and the settings that shape the published rows (recorded in each snapshot),
        the topic taxonomy in use among them (ETL_TAXONOMY may name one outside the package) by
        its bytes, not its path: a checkout moved elsewhere is the same build."""
        return build_info.fingerprint({
            "max_file_bytes": self.max_file_bytes, "max_record_chars": self.max_record_chars,
            "near_duplicates": self.near_duplicates, "near_threshold": self.near_threshold,
            "taxonomy_version": topics.taxonomy_version(),
        })

    def parse_version(self) -> str:
        """What parses a landing file: stage.parse_version with these limits."""
        return stage.parse_version(self.max_file_bytes, self.max_record_chars)

    def near_config(self) -> NearConfig | None:
        if not self.near_duplicates:
            return None
        defaults = NearConfig()
        return replace(defaults, threshold=self.near_threshold, chain_guard=min(defaults.chain_guard, self.near_threshold))

    @property
    def seeds(self) -> Path:
        return settings.seeds_dir(self.seeds_dir)

    @property
    def warehouse(self) -> Path:
        return settings.warehouse_dir(self.warehouse_dir)

    @property
    def lake(self) -> Lake:
        return Lake.of(self.warehouse, self.catalog, self.data_path)


class WarehouseLock(dg.ConfigurableResource):
    """One run at a time per warehouse (etl_project/run_lock.py): taken when the run initializes
    its resources, before its first step, and released when the run ends, failed or not. The
    in-process executor initializes it once per run; every step needs it (through the IO manager).
    A run that waits logs which run it waits for (WARNING: shown on the CLI's terminal too).
    The key is the warehouse's DuckLake catalog: a file lock beside an embedded catalog, a
    PostgreSQL advisory lock on the catalog's server for a ``postgres:`` one."""

    etl: EtlSettings

    @contextlib.contextmanager
    def yield_for_execution(self, context: dg.InitResourceContext):
        lake = self.etl.lake
        log = context.log or dg.get_dagster_logger()  # no run's log outside a run (build_resources)
        with run_lock.hold(lake.catalog, lake.warehouse, context.run_id, log):
            yield self


class GxValidation(dg.ConfigurableResource):
    """Where the suite checks run Great Expectations: this process's GxWorker
    (etl_project/quality/runner.py), started when the run initializes its resources, so GX's
    import (seconds) overlaps the steps before the first check instead of delaying it. A check is
    validated there as soon as the run has staged its tables (etl_project/quality/background.py),
    while the run goes on; its step, and the publish, wait for the verdict. The worker renders the
    Data Docs pages while the run goes on; the run ends once they are written."""

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        runner.GxWorker.shared()

    def teardown_after_execution(self, context: dg.InitResourceContext) -> None:
        log = context.log or dg.get_dagster_logger()
        for failure in runner.GxWorker.flush_shared():  # the checks' verdicts stand either way
            log.error(f"Data Docs pages could not be written ({failure}); the checks' results stand")
        if context.run_id:
            background.forget(context.run_id)

    def verdict(self, context: dg.AssetCheckExecutionContext, warehouse: Path, check: SuiteCheck,
                build: str) -> tuple[runner.SuiteResult, str]:
        """``check``'s result on the tables as this run staged them (or, for a table it did not
        stage, as the latest materialization left it), and which of their rows it validated."""
        paths = {table: staged_file(context.instance, warehouse, dg.AssetKey(table), context.run.run_id)
                 for table in check.tables}
        return (background.verdict(context.run.run_id, warehouse, check, paths, build),
                background.validated_rows(check, paths, build))

    def blocking_failures(self, context: dg.AssetExecutionContext, warehouse: Path, staged: Mapping[str, Path],
                          build: str) -> list[str]:
        """The suite checks that fail at ERROR severity on the tables about to be published
        (``staged``: each table's file), as ``asset:check``: what stops the publish. Waits for the
        validations this run started when it staged those files, and validates now the files it
        did not stage (taken from earlier runs: a run of only some assets, a re-execution)."""
        failed = []
        for check in SUITE_CHECKS.values():
            if not all(table in staged for table in check.tables):
                continue
            paths = {table: staged[table] for table in check.tables}
            if background.verdict(context.run.run_id, warehouse, check, paths, build).blocks:
                failed.append(f"{check.asset}:{check.name}")
        return failed


class StageIOManager(dg.ConfigurableIOManager):
    """Keeps each asset's value in the stage (see etl_project.stage). An input annotated ``pl.LazyFrame`` is scanned rather than
    read, and a LazyFrame output is streamed to disk: the big tables never sit whole in memory
    in a step that only passes them on or reads a few columns. An output that is a path (a
    Parquet file, or a folder of Parquet parts, the step wrote in its run's stage folder) is moved
    into place, not copied."""

    etl: EtlSettings
    # Not used here: it makes every step of every run (any asset selection) require the lock.
    lock: WarehouseLock

    def handle_output(self, context: dg.OutputContext, obj) -> None:
        asset = context.asset_key.to_user_string()
        path = stage.run_path(self.etl.warehouse, context.run_id, asset)
        if isinstance(obj, Path) and obj.parent == path.parent:  # a file or folder of parts the step wrote: moved
            if obj.is_dir() and path.exists():  # a retried step's, moved aside first: the name is never gone for long
                aside = path.with_name(f"{path.name}.replaced")
                shutil.rmtree(aside, ignore_errors=True)
                path.replace(aside)
                obj.replace(path)
                shutil.rmtree(aside)
            else:
                obj.replace(path)
        elif isinstance(obj, Path):  # anyone else's file stays where it is
            stage.write(pl.scan_parquet(obj), path)
        else:
            stage.write(obj, path)
        background.start_ready(context.run_id, self.etl.warehouse, asset, self.etl.build_fingerprint())

    def load_input(self, context: dg.InputContext):
        path = staged_file(context.instance, self.etl.warehouse, context.asset_key, _producing_run(context))
        if context.dagster_type.typing_type is Path:  # the file itself (what publish links)
            return path
        if context.dagster_type.typing_type is pl.LazyFrame:
            return pl.scan_parquet(path)
        return pl.read_parquet(path)


def staged_output(context: dg.AssetExecutionContext, etl: EtlSettings, frame: pl.DataFrame, output: str = "result") -> Path:
    """``frame`` written where the IO manager keeps the step's output ``output``, to return in its
    place: Dagster's in-process execution keeps every output value until the run ends (for
    ExecuteInProcessResult.output_for_node), so a step that returned a big frame would hold it
    through every later step; a path costs nothing to keep."""
    path = stage.run_path(etl.warehouse, context.run_id, context.asset_key_for_output(output).to_user_string())
    stage.write(frame, path)
    return path


def staged_file(instance: dg.DagsterInstance, warehouse: Path, asset_key: dg.AssetKey, run_id: str | None) -> Path:
    """The asset's staged file from run ``run_id``, else from the run of its latest
    materialization: the instance is asked only then (a query of its event log per input adds up).
    Raises FileNotFoundError when neither staged it."""
    def runs():
        yield run_id
        latest = instance.get_latest_materialization_event(asset_key)
        yield latest.run_id if latest else None

    asset = asset_key.to_user_string()
    path = stage.existing(stage.run_path(warehouse, run, asset) for run in runs() if run)
    if path is None:
        raise FileNotFoundError(f"{asset!r} has no staged output in {warehouse}: materialize it first")
    return path


def _producing_run(context: dg.InputContext) -> str | None:
    try:
        return context.upstream_output.run_id if context.upstream_output else None
    except dg.DagsterInvariantViolationError:  # an input from outside the run has no run id
        return None


def build_resources(seeds_dir: str = "", warehouse_dir: str = "") -> dict:
    etl = EtlSettings(seeds_dir=seeds_dir, warehouse_dir=warehouse_dir)
    # The lock is the IO manager's only (not a resource key of its own), so a run initializes it once.
    return {"etl": etl, "gx": GxValidation(), "io_manager": StageIOManager(etl=etl, lock=WarehouseLock(etl=etl))}
