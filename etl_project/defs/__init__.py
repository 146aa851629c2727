"""The Dagster layer: assets, checks and resources over the plain stage functions."""
