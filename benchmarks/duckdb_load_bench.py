"""What the DuckLake publish costs per table, with no pipeline code involved: registering a
Parquet file that is already written (what etl_project/publish.py does) against DuckDB copying
the rows into DuckLake's own data files (``INSERT INTO ... SELECT * FROM read_parquet``).

Each repeat makes a fresh embedded lake (SQLite catalog, as the project's default) in a scratch
folder, then for every table, in one transaction each: ``CREATE TABLE`` from the file's schema and
``ducklake_add_data_files`` (register), or ``CREATE TABLE`` and ``INSERT`` (copy), and commits.
Registering reads only the file's footer and statistics, so its cost should not grow with the
rows; the copy is the floor under a publish that would let DuckDB write the data. The input files
are never changed (they are registered in place in a lake that is then thrown away).

    etl-project export /tmp/tables            # one Parquet file per table of the current snapshot
    python benchmarks/duckdb_load_bench.py /tmp/tables --repeat 3
"""

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import duckdb

from etl_project import lake

CONTRACT_TABLES = ["source_files", "raw_records", "records", "papers", "paper_occurrences", "rejected_records"]
WAYS = ("register", "insert")


def load_tables(folder: Path, tables: list[str], way: str, scratch: Path) -> dict[str, float]:
    """Seconds per table to make ``way`` hold it in a fresh lake under ``scratch``."""
    target = lake.Lake.of(scratch / "warehouse")
    con = lake.attach(target, read_only=False)
    seconds = {}
    try:
        for table in tables:
            path = lake.literal(str(folder / f"{table}.parquet"))
            started = time.perf_counter()
            con.execute("BEGIN")
            con.execute(f"CREATE TABLE {lake.quote(table)} AS SELECT * FROM read_parquet({path}) LIMIT 0")
            if way == "register":
                con.execute(f"CALL ducklake_add_data_files({lake.literal(lake.ALIAS)}, {lake.literal(table)}, {path})")
            else:
                con.execute(f"INSERT INTO {lake.quote(table)} SELECT * FROM read_parquet({path})")
            con.execute("COMMIT")
            seconds[table] = time.perf_counter() - started
        for table in tables:  # both ways hold the same rows
            rows = con.execute(f"SELECT count(*) FROM {lake.quote(table)}").fetchone()[0]
            expected = con.execute(f"SELECT count(*) FROM read_parquet({lake.literal(str(folder / f'{table}.parquet'))})").fetchone()[0]
            if rows != expected:
                raise RuntimeError(f"{way}: {table} holds {rows} rows, its file {expected}")
    finally:
        con.close()
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", type=Path, help="<table>.parquet files, e.g. from `etl-project export`")
    parser.add_argument("--tables", nargs="+", default=CONTRACT_TABLES)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    folder = args.folder.resolve()
    tables = [t for t in args.tables if (folder / f"{t}.parquet").exists()]
    if not tables:
        parser.error(f"none of {', '.join(args.tables)} is in {folder} as <table>.parquet")

    results: dict[str, list[dict[str, float]]] = {way: [] for way in WAYS}
    data_mb = []
    for _ in range(args.repeat):
        for way in WAYS:
            with tempfile.TemporaryDirectory() as scratch:
                results[way].append(load_tables(folder, tables, way, Path(scratch)))
                if way == "insert":
                    data_mb.append(sum(p.stat().st_size for p in (Path(scratch) / "warehouse" / "data").rglob("*.parquet")) / 1e6)

    print(f"DuckDB {duckdb.__version__}, DuckLake with a SQLite catalog, {args.repeat} runs, medians")
    print("| table | Parquet MB | register s | insert (copy) s |")
    print("|---|--:|--:|--:|")
    for table in tables:
        mb = (folder / f"{table}.parquet").stat().st_size / 1e6
        print(f"| {table} | {mb:,.0f} | {statistics.median(r[table] for r in results['register']):.2f} "
              f"| {statistics.median(r[table] for r in results['insert']):.2f} |")
    totals = {way: statistics.median(sum(r.values()) for r in results[way]) for way in WAYS}
    print(f"| all | {sum((folder / f'{t}.parquet').stat().st_size for t in tables) / 1e6:,.0f} "
          f"| {totals['register']:.2f} | {totals['insert']:.2f} |")
    print(f"data files DuckLake wrote for the copy: {statistics.median(data_mb):,.0f} MB")


if __name__ == "__main__":
    main()
