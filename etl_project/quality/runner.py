"""Run a Suite with Great Expectations 1.x on a Polars frame, and render its Data Docs.

GX costs seconds to import, so it is imported on first use, and one ephemeral context serves the
whole process. GX validates pandas: only the columns a suite reads are converted.

Data Docs: each validation is stored in the context (in memory) and its page rendered into a
static site in the folder the caller gives (one per run: see etl_project/defs/checks.py).
"""

import functools
import os
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from etl_project.quality.suites import ERROR, WARN, Rule, Suite

SAMPLE_SIZE = 5


@dataclass(frozen=True)
class RuleResult:
    rule: Rule
    success: bool
    element_count: int | None = None
    unexpected_count: int | None = None
    unexpected_percent: float | None = None
    observed_value: object = None
    samples: list = field(default_factory=list)
    exception: str | None = None


@dataclass(frozen=True)
class SuiteResult:
    suite: Suite
    row_count: int
    results: list[RuleResult]
    docs_page: str | None = None  # file:// URL of this validation's Data Docs page
    docs_index: str | None = None

    @property
    def failed(self) -> list[RuleResult]:
        return [r for r in self.results if not r.success]

    @property
    def passed(self) -> bool:
        """False when any ERROR rule failed; failed WARN rules only lower the severity."""
        return not any(r.rule.severity == ERROR for r in self.failed)

    @property
    def severity(self) -> str:
        return ERROR if not self.passed else WARN


@functools.cache
def _gx():
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    import great_expectations as gx
    from great_expectations.data_context.types.base import ProgressBarsConfig

    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False, metric_calculations=False)
    batch_definition = (
        context.data_sources.add_pandas("etl_frames")
        .add_dataframe_asset("frame")
        .add_batch_definition_whole_dataframe("whole_frame")
    )
    return gx, context, batch_definition


@functools.cache
def _docs_site(docs_dir: Path) -> str:
    """The context's site writing into ``docs_dir`` (added once per process and folder)."""
    _, context, _ = _gx()
    name = f"site_{len(context.list_data_docs_sites())}"
    context.add_data_docs_site(name, {
        "class_name": "SiteBuilder",
        "show_how_to_buttons": False,
        "store_backend": {"class_name": "TupleFilesystemStoreBackend", "base_directory": str(docs_dir)},
        "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"},
    })
    return name


def run_suite(suite: Suite, frame: pl.DataFrame, docs_dir: Path | None = None) -> SuiteResult:
    gx, context, batch_definition = _gx()
    gx_suite = gx.ExpectationSuite(name=suite.name)
    for index, rule in enumerate(suite.rules):
        expectation_class = getattr(gx.expectations, rule.expectation)
        gx_suite.add_expectation(expectation_class(**rule.kwargs, meta={"rule_index": index}))
    gx_suite = context.suites.add_or_update(gx_suite)
    validation = context.validation_definitions.add_or_update(
        gx.ValidationDefinition(name=suite.name, data=batch_definition, suite=gx_suite)
    )
    columns = suite.columns() or frame.columns[:1]
    outcome = validation.run(
        batch_parameters={"dataframe": frame.select(columns).to_pandas()},
        result_format={"result_format": "SUMMARY", "partial_unexpected_count": SAMPLE_SIZE},
    )
    by_index = {r.expectation_config.meta["rule_index"]: r for r in outcome.results}
    results = [_rule_result(rule, by_index[i]) for i, rule in enumerate(suite.rules)]
    if docs_dir is None:
        return SuiteResult(suite, frame.height, results)
    page, index = _render_docs(context, docs_dir, suite.name)
    return SuiteResult(suite, frame.height, results, page, index)


def _render_docs(context, docs_dir: Path, suite_name: str) -> tuple[str | None, str | None]:
    """Render the newest validation of ``suite_name`` (and the index) into the site."""
    site = _docs_site(docs_dir.resolve())
    ours = [key for key in context.validation_results_store.list_keys()
            if key.expectation_suite_identifier.name == suite_name]
    newest = max(ours, key=lambda key: key.run_id.run_time)
    index = context.build_data_docs(site_names=[site], resource_identifiers=[newest])[site]
    pages = context.get_docs_sites_urls(resource_identifier=newest, site_name=site)
    return (pages[0]["site_url"] if pages else None), index


def _rule_result(rule: Rule, result) -> RuleResult:
    details = result.result or {}
    raised = result.exception_info.get("raised_exception") if result.exception_info else False
    return RuleResult(
        rule=rule,
        success=bool(result.success),
        element_count=details.get("element_count"),
        unexpected_count=details.get("unexpected_count"),
        unexpected_percent=details.get("unexpected_percent"),
        observed_value=details.get("observed_value"),
        samples=[_plain(v) for v in details.get("partial_unexpected_list", [])[:SAMPLE_SIZE]],
        exception=result.exception_info.get("exception_message") if raised else None,
    )


def _plain(value):
    """numpy scalars and tuples from GX, as JSON-friendly Python values."""
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    return value.item() if hasattr(value, "item") else value
