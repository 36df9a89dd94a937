"""Before/after comparison of sweep runs (tables with bootstrap intervals and verdicts) and their figures."""

from specbench.compare.comparison import CompareOptions, Comparison, MetricDelta, compare_runs
from specbench.compare.drilldown import acceptance_by_category, changed_answers
from specbench.compare.export import comparison_frame, render_csv, render_json
from specbench.compare.loading import Run, load_run
from specbench.compare.plots import plot_runs, write_plots
from specbench.compare.table import render_console, render_markdown
from specbench.compare.verdict import Verdict

__all__ = [
    "CompareOptions",
    "Comparison",
    "MetricDelta",
    "Run",
    "Verdict",
    "acceptance_by_category",
    "changed_answers",
    "compare_runs",
    "comparison_frame",
    "load_run",
    "plot_runs",
    "render_console",
    "render_csv",
    "render_json",
    "render_markdown",
    "write_plots",
]
