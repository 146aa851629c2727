"""etl_project: raw paper-list dumps to a deduplicated, validated DuckDB + Parquet warehouse."""
