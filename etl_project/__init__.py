"""etl_project: raw paper-list dumps to a deduplicated, validated warehouse (a DuckLake) you query with SQL."""

from etl_project.lake import connect

__all__ = ["connect"]
