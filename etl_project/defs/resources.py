"""Resources: the folders and limits of a run, and the Parquet-backed storage between steps."""

from pathlib import Path

import dagster as dg
import polars as pl

from etl_project import ingest, settings


class EtlSettings(dg.ConfigurableResource):
    """Folders and limits. Empty folders fall back to ``ETL_SEEDS_DIR`` / ``ETL_WAREHOUSE_DIR``,
    then to the project's own ``seeds/`` and ``warehouse/``, resolved when the run starts."""

    seeds_dir: str = ""
    warehouse_dir: str = ""
    max_file_bytes: int = ingest.DEFAULT_MAX_FILE_BYTES
    max_record_chars: int = ingest.DEFAULT_MAX_RECORD_CHARS

    @property
    def seeds(self) -> Path:
        return settings.seeds_dir(self.seeds_dir)

    @property
    def warehouse(self) -> Path:
        return settings.warehouse_dir(self.warehouse_dir)


class StageIOManager(dg.ConfigurableIOManager):
    """Keeps each asset's Polars frame as ``<warehouse>/.stage/<asset>.parquet`` between steps."""

    etl: EtlSettings

    def _path(self, asset_key: dg.AssetKey) -> Path:
        return self.etl.warehouse / ".stage" / ("/".join(asset_key.path) + ".parquet")

    def handle_output(self, context: dg.OutputContext, obj: pl.DataFrame) -> None:
        path = self._path(context.asset_key)
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".partial")
        obj.write_parquet(partial, compression="lz4")  # fast to write and read; not published
        partial.replace(path)

    def load_input(self, context: dg.InputContext) -> pl.DataFrame:
        return pl.read_parquet(self._path(context.asset_key))


def build_resources(seeds_dir: str = "", warehouse_dir: str = "") -> dict:
    etl = EtlSettings(seeds_dir=seeds_dir, warehouse_dir=warehouse_dir)
    return {"etl": etl, "io_manager": StageIOManager(etl=etl)}
