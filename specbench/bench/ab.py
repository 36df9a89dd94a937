"""`run_ab`: an interleaved A/B of two engines (or servers) in one invocation, the way a sweep interleaves its k's.

Two runs made at different times cannot tell a slower engine from a busier machine (compare/load.py: the k = 0
control moves alike). Here both backends are built once and their cells alternate: per repeat and grid point one
cell of each, in ABBA order (bench/grid.interleaved_sides), so the two cells of a pair share the machine's load and
the paired log ratios over the repeats judge B against A (compare/interleaved.py). Both sides run the same prompts
and settings; what differs is the engine (fault, draft, method, k). Nothing is written: the report is the result.

Before the judged repeats each side runs one discarded pass over the grid (WARM_PASS): a backend's first cells pay
one-off costs (CUDA-graph capture and kernel compiles for shapes the per-cell warmup does not reach). On an H100 the
first judged cell of side A ran at 132 tok/s against ~620 for the rest, and that one pair's log ratio widened the
paired interval to [-46%, +82%]: a 22% slowdown went unnoticed.
"""

from __future__ import annotations

import dataclasses
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from specbench.bench.cell_runner import CellRun, run_cell
from specbench.bench.grid import interleaved_sides
from specbench.bench.validate import check_fault, validate_config
from specbench.compare.formatting import signed_text
from specbench.compare.interleaved import PairedSpeed, paired_speed
from specbench.errors import SpecbenchError
from specbench.metrics.cell_metrics import CellMetrics
from specbench.metrics.request_metrics import RequestMetrics
from specbench.metrics.specs import OUTPUT_THROUGHPUT, TPOT
from specbench.runs.cell_key import CellKey
from specbench.runs.preflight import workload_options
from specbench.runs.sweep_config import SweepConfig
from specbench.runs.turns import TurnPlanner
from specbench.runtime.hooks import EngineFault

TPOT_MEAN = TPOT.metric("mean")
JUDGED = (OUTPUT_THROUGHPUT, TPOT_MEAN)
WARM_PASS = -1  # the repeat index of each side's discarded first pass over the grid  # what each pair measures: the output rate and the per-token latency


@dataclass(frozen=True)
class AbSide:
    label: str
    config: SweepConfig  # one num-steps value; the grid's temperatures and concurrencies are A's
    fault: EngineFault | None = None


@dataclass(frozen=True)
class AbPoint:
    temperature: float | None
    concurrency: int
    judged: tuple[tuple[str, PairedSpeed], ...]  # (metric name, B against A) per JUDGED metric
    same_text: float | None  # greedy: fraction of requests where B's text equals A's (None: sampled)


@dataclass(frozen=True)
class AbReport:
    a: AbSide
    b: AbSide
    repeats: int
    points: tuple[AbPoint, ...]

    @property
    def verdicts(self) -> list[str]:
        return [speed.verdict.value for point in self.points for _, speed in point.judged]


def _metric(run: CellRun, name: str) -> float | None:
    metrics = CellMetrics.of([RequestMetrics.from_stats(t.output.stats) for t in run.finished if t.error is None])
    return metrics.output_throughput if name == OUTPUT_THROUGHPUT.name else metrics.tpot_s.mean


def _one_k(side: AbSide) -> int:
    steps = side.config.num_steps
    if len(steps) != 1:
        raise SpecbenchError(f"ab: side {side.label} must measure one --num-steps value, got {list(steps)}")
    return steps[0]


def check_sides(a: AbSide, b: AbSide) -> None:
    """Both sides valid, and measuring the same prompts the same way (only the engine may differ)."""
    for side in (a, b):
        validate_config(side.config)
        check_fault(side.config, side.fault)
        _one_k(side)
    for name in ("workload", "limit", "shots", "max_tokens", "temperature", "concurrency", "data_dir"):
        if getattr(a.config, name) != getattr(b.config, name):
            raise SpecbenchError(f"ab: the sides differ in {name}; only the engine may differ")
    if a.config.repeats < 2:
        raise SpecbenchError("ab: --repeats must be >= 2 (the verdict is a paired interval over the repeats)")


def share_device(a: AbSide, b: AbSide) -> AbSide:
    """Side A, sized to leave the device's memory for B: two embedded engines live in one process, and an engine
    sized by --gpu-memory-utilization takes that share of the card's memory minus what is in use when it is built, so
    B, built second, found no room for one KV block on an H100. A gets half the share; B, built next, about the
    same (the share minus what A took). Explicit KV sizes (--kv-cache-gb, num_kv_blocks) are kept as given."""
    if a.config.backend != "embedded" or b.config.backend != "embedded":
        return a
    engine = a.config.engine
    if engine.kv_cache_gb is not None or engine.num_kv_blocks is not None:
        return a
    half = dataclasses.replace(engine, gpu_memory_utilization=engine.gpu_memory_utilization / 2)
    return dataclasses.replace(a, config=dataclasses.replace(a.config, engine=half))


def run_ab(a: AbSide, b: AbSide, on_cell: Callable[[str], None] | None = None) -> AbReport:
    from specbench.backends import create_backend
    from specbench.workloads import get_workload
    from specbench.workloads.data import resolve_data_source

    check_sides(a, b)
    config = a.config
    workload = get_workload(config.workload, **workload_options(config))
    data = workload.load(resolve_data_source(config.data_dir), config.limit, config.engine.seed)
    on_cell = on_cell or (lambda line: None if config.quiet else print(line, file=sys.stderr))
    values: dict[tuple, list[float | None]] = {}
    texts: dict[tuple, list[str | None]] = {}
    a = share_device(a, b)
    with tempfile.TemporaryDirectory(prefix="specbench-ab-") as scratch:  # a launched server's log goes here
        backends = {"a": create_backend(a.config, Path(scratch) / "a", a.fault)}
        try:
            backends["b"] = create_backend(b.config, Path(scratch) / "b", b.fault)
            sides = {"a": a, "b": b}
            chat = workload.is_chat if config.chat_template is None else config.chat_template
            planners = {s: TurnPlanner(workload, backends[s].tokenizer, tokenize=backends[s].can_tokenize)
                        for s in sides}
            for repeat in range(WARM_PASS, config.repeats):
                for temperature in config.temperature:
                    for concurrency in config.concurrency:
                        for s in interleaved_sides(repeat):
                            key = CellKey(repeat, temperature, concurrency, _one_k(sides[s]))
                            run = run_cell(backends[s], planners[s], data.samples, key, sides[s].config, chat)
                            if repeat == WARM_PASS:
                                on_cell(f"ab: warm-up pass {sides[s].label} t={temperature} c={concurrency} "
                                        "(not judged)")
                                continue
                            point = (temperature, concurrency)
                            for metric in JUDGED:
                                values.setdefault((s, point, metric.name), []).append(_metric(run, metric.name))
                            ordered = sorted(run.finished, key=lambda t: t.request_index)
                            texts.setdefault((s, point, repeat), []).extend(t.output.text for t in ordered)
                            throughput = values[(s, point, OUTPUT_THROUGHPUT.name)][-1]
                            on_cell(f"ab: repeat {repeat} {sides[s].label} t={temperature} c={concurrency} "
                                    f"k={key.num_steps}: {throughput or 0:.2f} tok/s")
        finally:
            for backend in backends.values():
                backend.close()
    points = []
    for temperature in config.temperature:
        for concurrency in config.concurrency:
            point = (temperature, concurrency)
            judged = tuple((m.name, paired_speed(values[("a", point, m.name)], values[("b", point, m.name)],
                                                 m.higher_is_better)) for m in JUDGED)
            points.append(AbPoint(temperature, concurrency, judged, _same_text(texts, point, config, temperature)))
    return AbReport(a, b, config.repeats, tuple(points))


def _same_text(texts: dict, point: tuple, config: SweepConfig, temperature: float | None) -> float | None:
    if temperature != 0.0:
        return None
    same = [x == y for r in range(config.repeats) for x, y in zip(texts[("a", point, r)], texts[("b", point, r)])]
    return sum(same) / len(same) if same else None


def format_ab(report: AbReport) -> str:
    a, b = report.a, report.b
    lines = [f"interleaved A/B: A = {a.label}, B = {b.label}; {report.repeats} repeats, cells alternating A B, B A, "
             "... (each pair shares the machine's load; paired t interval of log(B/A) over the repeats)"]
    for point in report.points:
        where = f"t={'default' if point.temperature is None else format(point.temperature, 'g')} c={point.concurrency}"
        if point.same_text is not None:
            head = "CORRECTNESS: " if point.same_text < 1 else ""
            lines.append(f"  {head}{where}: greedy outputs of B equal A's in {point.same_text:.0%} of requests")
        for name, speed in point.judged:
            metric = next(m for m in JUDGED if m.name == name)
            value = (lambda v: "N/A" if v is None else f"{v * metric.scale:.{metric.digits}f}")
            interval = ("-" if speed.interval is None else
                        f"[{signed_text(metric, speed.interval.low)}, {signed_text(metric, speed.interval.high)}]")
            delta = "N/A" if speed.delta is None else signed_text(metric, speed.delta)
            verdict = speed.verdict.value.upper() if speed.verdict.value == "regressed" else speed.verdict.value
            lines.append(f"  {where} {metric.title}: A {value(speed.a)}, B {value(speed.b)}: B/A {delta} {interval} "
                         f"{verdict} ({speed.num_pairs} pairs, sd {100 * (speed.spread or 0):.1f}%)")
    return "\n".join(lines)

