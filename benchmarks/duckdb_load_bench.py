"""How long DuckDB itself takes to hold a release's tables in a database file.

The table contract puts the same tables into warehouse.duckdb as into Parquet. This measures the
least that costs, with no pipeline code involved: DuckDB's own parallel Parquet reader copies
each table (``CREATE TABLE AS SELECT * FROM read_parquet(...)``) into a fresh database file and
checkpoints it; the same copy into an in-memory database shows what persisting adds. The
sum is a floor under any publish that honours the contract.

    python benchmarks/duckdb_load_bench.py <warehouse>/parquet --repeat 3
"""

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import duckdb

CONTRACT_TABLES = ["source_files", "raw_records", "records", "papers", "paper_occurrences", "rejected_records"]


def copy_tables(parquet_dir: Path, tables: list[str], database: str, compression: str) -> dict[str, float]:
    seconds = {}
    with duckdb.connect(database) as con:
        con.execute(f"SET force_compression = '{compression}'")
        for table in tables:
            started = time.perf_counter()
            con.execute(f"CREATE TABLE {table} AS SELECT * FROM read_parquet(?)", [str(parquet_dir / f"{table}.parquet")])
            con.execute("CHECKPOINT")
            seconds[table] = time.perf_counter() - started
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("parquet_dir", type=Path, help="a release's parquet/ folder")
    parser.add_argument("--tables", nargs="+", default=CONTRACT_TABLES)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--force-compression", default="auto",
                        help="DuckDB's force_compression: auto (its choice, FSST for long strings) or e.g. uncompressed")
    args = parser.parse_args()
    tables = [t for t in args.tables if (args.parquet_dir / f"{t}.parquet").exists()]
    if not tables:
        parser.error(f"none of {', '.join(args.tables)} is in {args.parquet_dir} as <table>.parquet")

    persisted, in_memory, file_mb = [], [], []
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory() as scratch:
            database = Path(scratch) / "load.duckdb"
            persisted.append(copy_tables(args.parquet_dir, tables, str(database), args.force_compression))
            file_mb.append(database.stat().st_size / 1e6)
        in_memory.append(copy_tables(args.parquet_dir, tables, ":memory:", args.force_compression))

    print(f"DuckDB {duckdb.__version__}, force_compression={args.force_compression}, {args.repeat} runs, medians")
    print("| table | Parquet MB | into a file s | into memory s |")
    print("|---|--:|--:|--:|")
    for table in tables:
        mb = (args.parquet_dir / f"{table}.parquet").stat().st_size / 1e6
        print(f"| {table} | {mb:,.0f} | {statistics.median(r[table] for r in persisted):.1f} "
              f"| {statistics.median(r[table] for r in in_memory):.1f} |")
    total_file = statistics.median(sum(r.values()) for r in persisted)
    total_memory = statistics.median(sum(r.values()) for r in in_memory)
    print(f"| all | {sum((args.parquet_dir / f'{t}.parquet').stat().st_size for t in tables) / 1e6:,.0f} "
          f"| {total_file:.1f} | {total_memory:.1f} |")
    print(f"database file: {statistics.median(file_mb):,.0f} MB")


if __name__ == "__main__":
    main()
