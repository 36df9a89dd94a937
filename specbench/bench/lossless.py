"""Greedy losslessness against a server pair: the same prompts, temperature 0, on a speculative and a reference
(non-speculative) OpenAI-compatible endpoint; every turn's text must be identical.

Library entry point for `specbench check-lossless` (and the later `specbench check`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from specbench.backends.near_tie import NEAR_TIE_MARGIN, TieDiagnosis
from specbench.bench.validate import validate_config
from specbench.errors import SpecbenchError
from specbench.runs.finished_turn import FinishedTurn
from specbench.runs.phase_progress import PhaseProgress
from specbench.runs.sweep_config import SweepConfig
from specbench.verification.first_turns import first_turns, load_samples
from specbench.verification.lossless import LosslessResult, OutputPair, each, judge_lossless


@dataclass(frozen=True)
class LosslessReport:
    spec_url: str
    ref_url: str
    result: LosslessResult  # one pair per (sample, turn) answered by both sides, in sample order


def check_lossless(spec: SweepConfig, ref: SweepConfig, near_tie_margin: float = NEAR_TIE_MARGIN,
                   progress: PhaseProgress | None = None) -> LosslessReport:
    """`spec`/`ref`: openai-backend configs (base_url, model, api key, workload, limit, max tokens, concurrency);
    temperature is forced to 0 and no warmup runs. Multi-turn samples ask turn t+1 with each side's own answer.
    Each mismatch of a text prompt is diagnosed on the reference server (near_tie.py). `progress`: a line on stderr
    as each side starts and ends (the CLI's)."""
    from specbench.backends.openai_backend import OpenAIBackend

    spec, ref = (dataclasses.replace(c, temperature=(0.0,), speedup=False) for c in (spec, ref))
    validate_config(spec)
    validate_config(ref)
    loaded = load_samples(spec)
    samples = loaded.samples
    results = []
    for config, side in ((spec, "speculative server"), (ref, "reference server")):
        phase = f"{side} ({len(samples)} prompts)"
        if progress is not None:
            progress.start(phase)
        backend = OpenAIBackend(config)
        try:
            planned = first_turns(config, backend.tokenizer, tokenize=backend.can_tokenize, loaded=loaded)
            results.append(backend.run_turns(
                list(planned.turns), max(spec.concurrency), id_prefix="lossless",
                next_turn=lambda t, text, planned=planned: planned.planner.next_turn(t, text, planned.settings)))
            if config is ref:
                result = judge_lossless(_pairs(samples, *results), _diagnosis(results[1], backend, near_tie_margin))
        finally:
            backend.close()
        if progress is not None:
            progress.done(phase)
    return LosslessReport(spec.base_url or "", ref.base_url or "", result)


def check_lossless_launched(config: SweepConfig, log_dir: Path, near_tie_margin: float = NEAR_TIE_MARGIN,
                            progress: PhaseProgress | None = None) -> LosslessReport:
    """`config.server_cmd` launched twice: at `config.num_steps` (the speculative side) and at 0 (the reference,
    `server_baseline_cmd` or the preset's); both are stopped afterwards, logs in `log_dir`."""
    from specbench.backends.launching_backend import start_server

    validate_config(config)
    num_steps = config.num_steps[0]
    if num_steps == 0:
        raise SpecbenchError("check-lossless --server-cmd needs --num-steps > 0 for the speculative server")
    servers = []
    try:
        for k in (num_steps, 0):
            servers.append(start_server(config, k, log_dir / f"k{k}.log"))

        def side(server, k: int) -> SweepConfig:
            return dataclasses.replace(config, base_url=server.url, server_cmd=None, server_baseline_cmd=None,
                                       num_steps=(k,))

        return check_lossless(side(servers[0], num_steps), side(servers[1], 0), near_tie_margin, progress)
    finally:
        for server in servers:
            server.stop()


def _diagnosis(ref_turns: Sequence[FinishedTurn], backend, margin: float):
    """A mismatch of a text prompt diagnosed on the reference server (chat ones stay unclassified)."""
    from specbench.backends.credentials import auth_headers
    from specbench.backends.deadline import DeadlineClient
    from specbench.backends.near_tie import diagnose_turn

    prompts = {(i.turn.sample.sample_id, i.turn.turn_index): i.turn.prompt for i in ref_turns}
    client = DeadlineClient(backend.root, auth_headers(backend.api_key))  # each probe: one completion, deadlined

    def probe(pair: OutputPair) -> TieDiagnosis:
        return diagnose_turn(client, backend.model, prompts[(pair.sample_id, pair.turn)], pair.ref or "",
                             pair.spec or "", margin, backend.timeout_s, "chat prompt: no text continuation to probe")

    return each(probe)


def _pairs(samples, spec: Sequence[FinishedTurn], ref: Sequence[FinishedTurn]) -> tuple[OutputPair, ...]:
    def by_turn(items: Sequence[FinishedTurn]) -> dict[tuple[str, int], FinishedTurn]:
        return {(i.turn.sample.sample_id, i.turn.turn_index): i for i in items}

    spec_turns, ref_turns = by_turn(spec), by_turn(ref)
    order = {s.sample_id: n for n, s in enumerate(samples)}
    keys = sorted(set(spec_turns) & set(ref_turns), key=lambda k: (order[k[0]], k[1]))
    pairs = []
    for k in keys:
        a, b = spec_turns[k], ref_turns[k]
        error = f"spec: {a.error}" if a.error else (f"ref: {b.error}" if b.error else None)
        pairs.append(OutputPair(k[0], k[1], None if a.error else a.output.text, None if b.error else b.output.text,
                                error))
    return tuple(pairs)


def format_lossless(report: LosslessReport, limit: int = 5) -> str:
    result = report.result
    verdict = "LOSSLESS" if result.is_lossless else ("NOT LOSSLESS" if result.mismatches else "INCONCLUSIVE")
    lines = [f"greedy outputs: {result.num_identical}/{len(result.pairs)} turns identical "
             f"(spec {report.spec_url} vs ref {report.ref_url}): {verdict}"]
    if result.mismatches:
        lines.append(f"mismatches: {result.num_near_ties} near-tie (top-2 margin < {NEAR_TIE_MARGIN:g} nats unless "
                     f"--near-tie-margin), {result.num_divergent} divergent or unclassified")
    for pair in result.mismatches[:limit]:
        at = pair.first_divergence or 0
        lines.append(f"  sample {pair.sample_id} turn {pair.turn}: differs at char {at}: "
                     f"spec {(pair.spec or '')[at:at + 30]!r} vs ref {(pair.ref or '')[at:at + 30]!r}"
                     f"{_diagnosis_text(pair.diagnosis)}")
    for pair in result.failures[:limit]:
        lines.append(f"  sample {pair.sample_id} turn {pair.turn}: not compared ({pair.error})")
    return "\n".join(lines)


def _diagnosis_text(diagnosis: TieDiagnosis | None) -> str:
    if diagnosis is None:
        return ""
    if diagnosis.margin is None:
        return f" [{diagnosis.verdict}: {diagnosis.note}]"
    first, second = diagnosis.candidates
    return f" [{diagnosis.verdict}: top-2 {first!r} vs {second!r}, margin {diagnosis.margin:.4f} nats]"
