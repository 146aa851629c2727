"""Run a Suite with Great Expectations 1.x on a Polars frame.

GX costs seconds to import, so it is imported on first use, and one ephemeral context serves the
whole process. GX validates pandas: only the columns a suite reads are converted.
"""

import functools
import os
from dataclasses import dataclass, field

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
    return gx, batch_definition


def run_suite(suite: Suite, frame: pl.DataFrame) -> SuiteResult:
    gx, batch_definition = _gx()
    gx_suite = gx.ExpectationSuite(name=suite.name)
    for index, rule in enumerate(suite.rules):
        expectation_class = getattr(gx.expectations, rule.expectation)
        gx_suite.add_expectation(expectation_class(**rule.kwargs, meta={"rule_index": index}))
    columns = suite.columns() or frame.columns[:1]
    batch = batch_definition.get_batch(batch_parameters={"dataframe": frame.select(columns).to_pandas()})
    validation = batch.validate(
        gx_suite, result_format={"result_format": "SUMMARY", "partial_unexpected_count": SAMPLE_SIZE}
    )
    by_index = {r.expectation_config.meta["rule_index"]: r for r in validation.results}
    return SuiteResult(suite, frame.height, [_rule_result(rule, by_index[i]) for i, rule in enumerate(suite.rules)])


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
