"""Enrichment assets: links, names and topics of each paper (their checks: etl_project/defs/checks.py),
and the search terms search_papers scores.

Each is computed only for the papers whose texts changed since the previous run's table, which
gives the rest (etl_project/enrich/reuse.py, etl_project/search_terms.py); a full refresh
computes every paper again. Texts are told apart by the fingerprints of every paper's texts that
the deduplication stages (etl_project.dedup_memo.paper_fingerprints), or, for a table computed
from the papers the deduplication started from, by the changes it staged since those
(dedup_memo.paper_changes); each step reads only the texts of the papers it computes, from the
parts of papers that hold them."""

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import polars as pl

from etl_project import dedup, dedup_memo, search_terms, stage
from etl_project.defs import launch
from etl_project.defs.metadata import (
    OWNERS,
    non_empty,
    table_metadata,
    table_value,
)
from etl_project.defs.resources import EtlSettings, staged_file
from etl_project.enrich import links, names, reuse, topics
from etl_project.quality import background

FINGERPRINTS = "{asset}.fingerprints"  # beside an enrichment table in the stage: what it was computed from


# An enrichment table is staged as parts of this many rows (the parts of papers whose rows stay are
# linked, not written again: etl_project.stage.stage_parts), and at most this many parts; small
# for the reason dedup.PART_PAPERS is.
PART_ROWS = 20_000
MAX_PARTS = 128


@dataclass(frozen=True)
class Enriched:
    folder: Path  # the table's parts, moved into place by the IO manager
    computed: reuse.Computed
    parts: stage.PartsStaged
    changes_from: str | None  # what told the changed papers apart: the deduplication's changes, or fingerprints

    def table(self) -> pl.LazyFrame:
        return pl.scan_parquet(self.folder)

    def metadata(self) -> dict:
        return non_empty({"papers_computed": self.computed.computed, "papers_reused": self.computed.reused,
                          "changes_from": self.changes_from,
                          "parts_linked": self.parts.linked, "parts_written": self.parts.rewritten + self.parts.written})


def computed_for_changes(context: dg.AssetExecutionContext, etl: EtlSettings, build: str, papers: Path,
                         current: pl.DataFrame, compute: Callable[[pl.Series | None], pl.DataFrame],
                         kind: str | None = None) -> Enriched:
    """The table ``compute(paper_ids)`` makes from ``papers`` (None: of every paper), asked only
    for the papers whose texts' fingerprints (``current``) differ from those the previous table of
    this asset was computed from, when it was computed by the same code and settings (``build``,
    taken before the asset read its rules or taxonomy: an edit in between then recomputes, never
    the other way round), staged as parts in this run's folder, the previous table's parts
    linked where they keep all their rows; the fingerprints are staged beside it for the next
    run, with the papers table they were taken from. ``kind``: which of the deduplication's
    fingerprints ``current`` is made from (dedup_memo.CHANGE_KINDS): when the previous table was
    computed from the papers this deduplication started from, the changes it staged say which
    papers differ, and no fingerprints are compared."""
    asset = context.asset_key.to_user_string()
    found = None if launch.full_refresh(context) else _previous_files(context, etl, asset, build)
    previous = delta = None
    if found is not None:
        delta = dedup_memo.paper_changes(papers, build, kind, found.papers) if kind and found.papers else None
        previous = delta or pl.read_parquet(found.sidecar).select(*reuse.FINGERPRINT_SCHEMA)
    computed = reuse.compute_for_changes(current, compute, previous)
    fingerprints = computed.fingerprints.with_columns(build=pl.lit(build), papers=pl.lit(str(papers)))
    stage.write(fingerprints, stage.run_path(etl.warehouse, context.run_id, FINGERPRINTS.format(asset=asset)))
    rows = stage.run_path(etl.warehouse, context.run_id, asset)
    folder = rows.with_name(f"{rows.name}.partial")
    parts = stage.stage_parts(folder, None if found is None else found.rows, "paper_id", None, computed.fresh,
                              PART_ROWS, MAX_PARTS, stage.placement_path(rows), dropped=computed.dropped)
    # Its checks validate only the rows of the papers computed, when those taken over met them all.
    passed = computed.asked is not None and _passed_checks(found, asset, build)
    stage.write_scope(rows, build, papers, computed.asked if passed else None)
    return Enriched(folder, computed, parts, None if found is None else "deduplication" if delta else "fingerprints")


@dataclass(frozen=True)
class _Previous:
    """An enrichment asset's latest staged table, the fingerprints it was computed from and the
    papers table those are of."""

    rows: Path
    sidecar: Path
    papers: str | None


def _passed_checks(found: _Previous, asset: str, build: str) -> bool:
    """Whether the previous table met every expectation of each per-paper check of ``asset``
    under ``build``, against the papers table it was computed from."""
    return bool(found.papers) and background.passed_before(found.rows, asset, build, Path(found.papers))


def _previous_files(context: dg.AssetExecutionContext, etl: EtlSettings, asset: str, build: str) -> _Previous | None:
    """The asset's latest staged table and its fingerprints, when the same build computed them."""
    try:
        rows = staged_file(context.instance, etl.warehouse, context.asset_key, None)
    except FileNotFoundError:
        return None
    sidecar = rows.with_name(f"{FINGERPRINTS.format(asset=asset)}.parquet")
    if not sidecar.exists():
        return None
    # The same build wrote every row; paper_terms' has no papers column.
    first = pl.scan_parquet(sidecar).select("build", "^papers$").head(1).collect()
    if not first.height or first["build"][0] != build:
        return None
    return _Previous(rows, sidecar, first["papers"][0] if "papers" in first.columns else None)


def _variants(papers: Path, paper_occurrences: pl.LazyFrame, records: pl.LazyFrame,
              build: str) -> tuple[pl.DataFrame, pl.DataFrame, Callable]:
    """``dedup.variant_hashes`` of every paper, their ``reuse.text_fingerprints``, and the texts
    (dedup.variant_texts) of the papers asked for (None: every paper). The hashes and
    fingerprints are those the deduplication that staged ``papers`` worked out, when this build
    did (etl_project.dedup_memo.paper_variants), else hashed from ``records``."""
    hashes, fingerprints = dedup_memo.paper_variants(papers, build), dedup_memo.paper_fingerprints(papers, build)
    if hashes is None or fingerprints is None:
        hashes = dedup.variant_hashes(paper_occurrences, records.select("record_id", *dedup_memo.text_hash("text")))
        fingerprints = reuse.text_fingerprints(hashes)
    return hashes, fingerprints, lambda paper_ids: dedup.variant_texts(paper_occurrences, records, hashes, paper_ids)


def _text_fingerprints(papers: Path, build: str, text: str) -> pl.DataFrame:
    """Fingerprints (reuse.FINGERPRINT_SCHEMA) of each paper's ``text`` (its abstract, or a
    column this build makes from it alone: the plain text): when this build deduplicated
    ``papers``, those of its canonical record's text, which the deduplication staged
    (dedup_memo.paper_fingerprints; no text is read), tagged with ``text`` (reuse.stand_in);
    else reuse.fingerprints of ``text`` itself, which an earlier build may have made otherwise.
    The two never match, so a table computed from one is not taken over by a run that has the
    other: the plain text of an earlier build equal to its raw text is not this build's plain text."""
    staged = dedup_memo.paper_fingerprints(papers, build)
    if staged is not None:
        return reuse.stand_in(reuse.pick(staged, "canonical"), text)
    return reuse.fingerprints(pl.scan_parquet(papers).select("paper_id", text), text)


def _share(part: int, whole: int) -> float:
    return round(part / whole, 4) if whole else 0.0


@dg.asset(group_name="enrich", kinds={"polars"}, owners=OWNERS, ins={"papers": dg.AssetIn(dagster_type=Path)})
def paper_links(context: dg.AssetExecutionContext, etl: EtlSettings, papers: Path,
                paper_occurrences: pl.LazyFrame, records: pl.LazyFrame) -> dg.Output[Path]:
    """Every URL in each paper's texts (the canonical abstract first, then its near-duplicate
    variants, which may carry a link the canonical lacks), trimmed as a linkifier would, with host,
    kind (code_repository, dataset, model, project_page, anonymous_review, ...) and, for GitHub,
    GitLab and Hugging Face, the repository's owner and name. Rules: etl_project/enrich/links.py."""
    build = etl.build_fingerprint()
    _, fingerprints, texts = _variants(papers, paper_occurrences, records, build)
    enriched = computed_for_changes(context, etl, build, papers, reuse.pick(fingerprints, "texts"),
                                    lambda paper_ids: links.extract_links(texts(paper_ids)), "texts")
    frame = enriched.table().select("paper_id", "kind").collect()
    with_code = frame.filter(pl.col("kind").is_in(links.CODE_KINDS))["paper_id"].n_unique()
    return dg.Output(
        enriched.folder,
        metadata=non_empty({
            **table_metadata(enriched.table(), "paper_links"),
            **enriched.metadata(),
            "papers_with_links": frame["paper_id"].n_unique(),
            "papers_with_code": with_code,
            "share_with_code": _share(with_code, enriched.computed.fingerprints.height),
            "by_kind": table_value(frame.group_by("kind").len().sort("len", "kind", descending=[True, False])),
        }),
    )


@dg.asset(group_name="enrich", kinds={"polars"}, owners=OWNERS, ins={"papers": dg.AssetIn(dagster_type=Path)})
def paper_names(context: dg.AssetExecutionContext, etl: EtlSettings, papers: Path) -> dg.Output[Path]:
    """The names papers give the method, model, benchmark or dataset they introduce ("we propose
    X", "termed X", "X—short for ...", ...), with the pattern that found each and the evidence.
    Precision first: papers that introduce no name have no row. Rules: etl_project/enrich/names.py."""
    build = etl.build_fingerprint()
    enriched = computed_for_changes(context, etl, build, papers, _text_fingerprints(papers, build, "abstract"),
                                    lambda paper_ids: names.extract_names(stage.rows_of(papers, "paper_id", paper_ids, "paper_id", "abstract")),
                                    "canonical")
    frame = enriched.table().select("paper_id", "pattern").collect()
    named = frame["paper_id"].n_unique()
    return dg.Output(
        enriched.folder,
        metadata=non_empty({
            **table_metadata(enriched.table(), "paper_names"),
            **enriched.metadata(),
            "papers_named": named,
            "share_named": _share(named, enriched.computed.fingerprints.height),
            "by_pattern": table_value(frame.group_by("pattern").len().sort("len", "pattern", descending=[True, False])),
        }),
    )


@dg.asset(group_name="enrich", kinds={"polars"}, owners=OWNERS, code_version=f"taxonomy-{topics.taxonomy_version()}",
          ins={"papers": dg.AssetIn(dagster_type=Path)})
def paper_topics(context: dg.AssetExecutionContext, etl: EtlSettings, papers: Path) -> dg.Output[Path]:
    """Each paper tagged with every topic of the taxonomy (etl_project/enrich/taxonomy.yaml, or
    $ETL_TAXONOMY) whose patterns its plain text matches, with the matched phrases; 'other' when
    none. The taxonomy is read on every run; its hash is this asset's code version, so an edited
    taxonomy shows as a code change once the code location is reloaded."""
    build = etl.build_fingerprint()
    taxonomy = topics.load_taxonomy()
    enriched = computed_for_changes(
        context, etl, build, papers, _text_fingerprints(papers, build, "abstract_plain"),
        lambda paper_ids: topics.tag_topics(stage.rows_of(papers, "paper_id", paper_ids, "paper_id", "abstract_plain"), taxonomy),
        "canonical")
    frame = enriched.table().select("paper_id", "topic", "label").collect()
    counts = frame.group_by("topic", "label").agg(papers=pl.col("paper_id").n_unique()).sort("papers", "topic", descending=[True, False])
    return dg.Output(
        enriched.folder,
        metadata=non_empty({
            **table_metadata(enriched.table(), "paper_topics"),
            **enriched.metadata(),
            "taxonomy": dg.MetadataValue.path(str(taxonomy.path)),
            "taxonomy_sha256": taxonomy.sha256,
            "taxonomy_topics": len(taxonomy.topics),
            "papers_other": frame.filter(pl.col("topic") == topics.OTHER).height,
            "by_topic": table_value(counts),
        }),
    )


@dg.asset(group_name="enrich", kinds={"duckdb"}, owners=OWNERS,
          ins={"papers": dg.AssetIn(dagster_type=Path), "paper_names": dg.AssetIn(dagster_type=Path)})
def paper_terms(context: dg.AssetExecutionContext, etl: EtlSettings, papers: Path, paper_names: Path,
                paper_occurrences: pl.LazyFrame, records: pl.LazyFrame) -> dg.Output:
    """Each paper's search terms and how often it holds each (its names, plain text and its
    near-duplicate variants' plain texts through DuckDB's fts tokenizer, stopwords and Porter
    stemmer): what search_papers scores with BM25, whose corpus statistics it computes at query
    time. Worked out only for the papers whose search texts changed since the previous run's
    table; a full refresh works out every paper. Rules: etl_project/search_terms.py."""
    asset = context.asset_key.to_user_string()
    build = etl.build_fingerprint()
    out = stage.run_path(etl.warehouse, context.run_id, asset)
    folder, fingerprints_file = out.with_name(f"{out.name}.partial"), out.with_name(f"{FINGERPRINTS.format(asset=asset)}.parquet")
    found = None if launch.full_refresh(context) else _previous_files(context, etl, asset, build)
    hashes, fingerprints, texts = _variants(papers, paper_occurrences, records, build)
    first = hashes["paper_id"].is_first_distinct()  # each paper's canonical text: the rest are its variants
    variants = search_terms.Variants(hashes.filter(~first).select("paper_id", "hash_a", "hash_b"),
                                     lambda paper_ids: search_terms.variants_of(texts(paper_ids)),
                                     reuse.pick(fingerprints, "variants"))
    staged = search_terms.stage_terms(papers, pl.scan_parquet(paper_names), folder, fingerprints_file,
                                      build, None if found is None else (found.rows, found.sidecar), etl.warehouse / stage.STAGE / "duckdb_tmp", variants,
                                      _text_fingerprints(papers, build, "abstract_plain"))
    return dg.Output(
        folder,  # a folder of parts, moved into place by the IO manager
        metadata=non_empty({
            **table_metadata(pl.scan_parquet(folder), "paper_terms"),
            "papers_with_variants": variants.hashes["paper_id"].n_unique(),
            "papers_computed": staged.computed,
            "papers_reused": staged.reused,
            "parts_linked": staged.parts_linked,
            "parts_written": staged.parts_written,
        }),
    )


ENRICH_ASSETS = [paper_links, paper_names, paper_topics, paper_terms]
