"""Enrichment of papers: links, introduced names, topics, and plain text without markup (Polars functions)."""
