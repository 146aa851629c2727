"""Enrichment assets: links, names and topics of each paper (their checks: etl_project/defs/checks.py)."""

import dagster as dg
import polars as pl

from etl_project import dedup
from etl_project.defs.metadata import OWNERS, non_empty, row_count, table_metadata, table_value
from etl_project.enrich import links, names, topics


def _share(part: int, whole: int) -> float:
    return round(part / whole, 4) if whole else 0.0


@dg.asset(group_name="enrich", kinds={"polars"}, owners=OWNERS)
def paper_links(papers: pl.LazyFrame, paper_occurrences: pl.LazyFrame, records: pl.LazyFrame) -> dg.Output[pl.DataFrame]:
    """Every URL in each paper's texts (the canonical abstract first, then its near-duplicate
    variants, which may carry a link the canonical lacks), trimmed as a linkifier would, with host,
    kind (code_repository, dataset, model, project_page, anonymous_review, ...) and, for GitHub,
    GitLab and Hugging Face, the repository's owner and name. Rules: etl_project/enrich/links.py."""
    frame = links.extract_links(dedup.variant_texts(papers, paper_occurrences, records))
    with_code = frame.filter(pl.col("kind").is_in(links.CODE_KINDS))["paper_id"].n_unique()
    return dg.Output(
        frame,
        metadata=non_empty({
            **table_metadata(frame, "paper_links"),
            "papers_with_links": frame["paper_id"].n_unique(),
            "papers_with_code": with_code,
            "share_with_code": _share(with_code, row_count(papers)),
            "by_kind": table_value(frame.group_by("kind").len().sort("len", "kind", descending=[True, False])),
        }),
    )


@dg.asset(group_name="enrich", kinds={"polars"}, owners=OWNERS)
def paper_names(papers: pl.LazyFrame) -> dg.Output[pl.DataFrame]:
    """The names papers give the method, model, benchmark or dataset they introduce ("we propose
    X", "termed X", "X—short for ...", ...), with the pattern that found each and the evidence.
    Precision first: papers that introduce no name have no row. Rules: etl_project/enrich/names.py."""
    frame = names.extract_names(papers)
    named = frame["paper_id"].n_unique()
    return dg.Output(
        frame,
        metadata=non_empty({
            **table_metadata(frame, "paper_names"),
            "papers_named": named,
            "share_named": _share(named, row_count(papers)),
            "by_pattern": table_value(frame.group_by("pattern").len().sort("len", "pattern", descending=[True, False])),
        }),
    )


@dg.asset(group_name="enrich", kinds={"polars"}, owners=OWNERS, code_version=f"taxonomy-{topics.taxonomy_version()}")
def paper_topics(papers: pl.LazyFrame) -> dg.Output[pl.DataFrame]:
    """Each paper tagged with every topic of the taxonomy (etl_project/enrich/taxonomy.yaml, or
    $ETL_TAXONOMY) whose patterns its plain text matches, with the matched phrases; 'other' when
    none. The taxonomy is read on every run; its hash is this asset's code version, so an edited
    taxonomy shows as a code change once the code location is reloaded."""
    taxonomy = topics.load_taxonomy()
    frame = topics.tag_topics(papers, taxonomy)
    counts = frame.group_by("topic", "label").agg(papers=pl.col("paper_id").n_unique()).sort("papers", "topic", descending=[True, False])
    return dg.Output(
        frame,
        metadata=non_empty({
            **table_metadata(frame, "paper_topics"),
            "taxonomy": dg.MetadataValue.path(str(taxonomy.path)),
            "taxonomy_sha256": taxonomy.sha256,
            "taxonomy_topics": len(taxonomy.topics),
            "papers_other": frame.filter(pl.col("topic") == topics.OTHER).height,
            "by_topic": table_value(counts),
        }),
    )


ENRICH_ASSETS = [paper_links, paper_names, paper_topics]
