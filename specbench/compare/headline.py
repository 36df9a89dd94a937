"""What a comparison leads with, before its tables: correctness (greedy outputs against k = 0), the ratios measured
inside each run (speedup, acceptance, tokens per emission: the robust signal across runs made under different
loads) and the load evidence every speed verdict is judged beside (compare/load.py)."""

from __future__ import annotations

from specbench.compare.comparison import Comparison, MetricDelta
from specbench.compare.formatting import delta_text, value_text, verdict_text
from specbench.compare.load import drift_text
from specbench.metrics.specs import ACCEPTANCE_LENGTH, OUTPUT_THROUGHPUT, SPEEDUP, TOKENS_PER_EMISSION

INSIDE_RUN = (SPEEDUP, ACCEPTANCE_LENGTH, TOKENS_PER_EMISSION)
SHORT = {SPEEDUP.name: "speedup", ACCEPTANCE_LENGTH.name: "acceptance length",
         TOKENS_PER_EMISSION.name: "tokens/emission"}


def correctness_lines(comparison: Comparison) -> list[str]:
    greedy = [k for k in comparison.matching.all_keys if k.num_steps and k.temperature == 0.0]
    if not comparison.divergences:
        return [f"correctness: greedy outputs equal k=0 in all {len(greedy)} greedy speculative cell(s)"] if greedy \
            else []
    lines = []
    for d in comparison.divergences:
        texts = " -> ".join("-" if v is None else f"{v:.3f}" for v in (d.before, d.after))
        if d.is_regression:
            head = "CORRECTNESS REGRESSION"
            what = "greedy outputs differ from k=0 after the change"
        else:
            head, what = "CORRECTNESS", "greedy outputs differ from k=0 " + (
                "in both runs" if d.before is not None and d.before < 1 and d.after is not None and d.after < 1
                else "before the change")
        lines.append(f"{head}: {d.key.describe()}: {what} (same text {texts}); speed and acceptance rows of this "
                     "cell are not comparable")
    return lines


def _ratio_text(row: MetricDelta) -> str:
    m = row.metric
    return (f"{SHORT[m.name]} {value_text(m, row.before)} -> {value_text(m, row.after)} "
            f"({delta_text(row)}, {verdict_text(row)})")


def inside_run_lines(comparison: Comparison) -> list[str]:
    by_key: dict = {}
    for row in comparison.rows:
        if row.metric in INSIDE_RUN and row.key.num_steps:
            by_key.setdefault(row.key, []).append(row)
    if not by_key:
        return []
    lines = ["ratios inside each run (robust to the runs' different loads):"]
    for key, rows in by_key.items():
        rows.sort(key=lambda r: INSIDE_RUN.index(r.metric))
        lines.append(f"  {key.describe()}: " + "; ".join(_ratio_text(r) for r in rows))
    return lines


def load_line(comparison: Comparison) -> str:
    moves = [r.control_delta for r in comparison.rows
             if r.metric == OUTPUT_THROUGHPUT and r.key.num_steps == 0 and r.control_delta is not None]
    control = (f"k=0 control throughput moved {min(moves):+.1%}..{max(moves):+.1%} between the runs"
               if moves else "no k=0 control measured in both runs with repeats")
    return f"load: {drift_text(comparison.drift)}; {control} (speed verdicts net of it: 'within drift')"


def headline(comparison: Comparison) -> list[str]:
    return [*correctness_lines(comparison), *inside_run_lines(comparison), load_line(comparison)]
