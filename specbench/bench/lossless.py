"""Greedy losslessness against a server pair: the same prompts, temperature 0, on a speculative and a reference
(non-speculative) OpenAI-compatible endpoint; every turn's text must be identical.

Library entry point for `specbench check-lossless` (and the later `specbench check`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from specbench.backends.near_tie import NEAR_TIE, NEAR_TIE_MARGIN, TieDiagnosis
from specbench.bench.cell_runner import turn_settings
from specbench.bench.validate import validate_config
from specbench.errors import SpecbenchError
from specbench.runs.cell_key import CellKey
from specbench.runs.finished_turn import FinishedTurn
from specbench.runs.phase_progress import PhaseProgress
from specbench.runs.preflight import workload_options
from specbench.runs.sweep_config import SweepConfig
from specbench.runs.turns import TurnPlanner


@dataclass(frozen=True)
class TurnPair:
    sample_id: str
    turn: int
    spec_text: str | None  # None when the request failed
    ref_text: str | None
    error: str | None  # the failing side's error, "spec: ..." / "ref: ..."
    diagnosis: TieDiagnosis | None = None  # mismatches only: near-tie or divergent at the first divergent token

    @property
    def is_identical(self) -> bool:
        return self.error is None and self.spec_text == self.ref_text

    @property
    def first_divergence(self) -> int | None:
        """Character index of the first difference; None when identical or failed."""
        if self.error is not None or self.spec_text == self.ref_text:
            return None
        a, b = self.spec_text or "", self.ref_text or ""
        return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


@dataclass(frozen=True)
class LosslessReport:
    spec_url: str
    ref_url: str
    pairs: tuple[TurnPair, ...]  # one per (sample, turn) answered by both sides, in sample order

    @property
    def num_identical(self) -> int:
        return sum(p.is_identical for p in self.pairs)

    @property
    def mismatches(self) -> tuple[TurnPair, ...]:
        return tuple(p for p in self.pairs if p.error is None and not p.is_identical)

    @property
    def failures(self) -> tuple[TurnPair, ...]:
        return tuple(p for p in self.pairs if p.error is not None)

    @property
    def is_lossless(self) -> bool:
        return bool(self.pairs) and self.num_identical == len(self.pairs)

    @property
    def num_near_ties(self) -> int:
        return sum(p.diagnosis is not None and p.diagnosis.verdict == NEAR_TIE for p in self.mismatches)

    @property
    def num_divergent(self) -> int:
        """Mismatches not shown to be near-ties (unclassified ones included)."""
        return len(self.mismatches) - self.num_near_ties

    def passes(self, strict: bool) -> bool:
        """Every turn answered on both sides and no divergent mismatch (strict: no mismatch at all)."""
        if not self.pairs or self.failures:
            return False
        return self.is_lossless if strict else self.num_divergent == 0


def check_lossless(spec: SweepConfig, ref: SweepConfig, near_tie_margin: float = NEAR_TIE_MARGIN,
                   progress: PhaseProgress | None = None) -> LosslessReport:
    """`spec`/`ref`: openai-backend configs (base_url, model, api key, workload, limit, max tokens, concurrency);
    temperature is forced to 0 and no warmup runs. Multi-turn samples ask turn t+1 with each side's own answer.
    Each mismatch of a text prompt is diagnosed on the reference server (near_tie.py). `progress`: a line on stderr
    as each side starts and ends (the CLI's)."""
    from specbench.backends.openai_backend import OpenAIBackend
    from specbench.workloads import get_workload
    from specbench.workloads.data import resolve_data_source

    spec, ref = (dataclasses.replace(c, temperature=(0.0,), speedup=False) for c in (spec, ref))
    validate_config(spec)
    validate_config(ref)
    workload = get_workload(spec.workload, **workload_options(spec))
    samples = workload.load(resolve_data_source(spec.data_dir), spec.limit, spec.engine.seed).samples
    key = CellKey(0, 0.0, max(spec.concurrency), spec.num_steps[0])
    chat_template = workload.is_chat if spec.chat_template is None else spec.chat_template
    results = []
    for config, side in ((spec, "speculative server"), (ref, "reference server")):
        phase = f"{side} ({len(samples)} prompts)"
        if progress is not None:
            progress.start(phase)
        backend = OpenAIBackend(config)
        try:
            planner = TurnPlanner(workload, backend.tokenizer, tokenize=backend.can_tokenize)
            settings = turn_settings(config, key, chat_template)
            turns = [planner.first_turn(sample, settings) for sample in samples]
            results.append(backend.run_turns(turns, key.concurrency, id_prefix="lossless",
                                             next_turn=lambda t, text: planner.next_turn(t, text, settings)))
            if config is ref:
                pairs = _diagnosed(_pairs(samples, *results), results[1], backend, near_tie_margin)
        finally:
            backend.close()
        if progress is not None:
            progress.done(phase)
    return LosslessReport(spec.base_url or "", ref.base_url or "", pairs)


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


def _diagnosed(pairs: tuple[TurnPair, ...], ref_turns: Sequence[FinishedTurn], backend, margin: float):
    """Pairs with a near-tie diagnosis on every mismatch (text prompts; chat ones stay unclassified)."""
    from specbench.backends.credentials import auth_headers
    from specbench.backends.deadline import DeadlineClient
    from specbench.backends.near_tie import UNCLASSIFIED, diagnose

    prompts = {(i.turn.sample.sample_id, i.turn.turn_index): i.turn.prompt for i in ref_turns}
    out = []
    client = DeadlineClient(backend.root, auth_headers(backend.api_key))  # each probe: one completion, deadlined
    for pair in pairs:
        if pair.error is None and not pair.is_identical:
            prompt = prompts[(pair.sample_id, pair.turn)]
            if prompt.messages and not prompt.add_special_tokens:
                diagnosis = TieDiagnosis(UNCLASSIFIED, None, (), "chat prompt: no text continuation to probe")
            else:
                diagnosis = diagnose(client, backend.model, prompt.text, pair.ref_text or "", pair.spec_text or "",
                                     margin, backend.timeout_s)
            pair = dataclasses.replace(pair, diagnosis=diagnosis)
        out.append(pair)
    return tuple(out)


def _pairs(samples, spec: Sequence[FinishedTurn], ref: Sequence[FinishedTurn]) -> tuple[TurnPair, ...]:
    def by_turn(items: Sequence[FinishedTurn]) -> dict[tuple[str, int], FinishedTurn]:
        return {(i.turn.sample.sample_id, i.turn.turn_index): i for i in items}

    spec_turns, ref_turns = by_turn(spec), by_turn(ref)
    order = {s.sample_id: n for n, s in enumerate(samples)}
    keys = sorted(set(spec_turns) & set(ref_turns), key=lambda k: (order[k[0]], k[1]))
    pairs = []
    for k in keys:
        a, b = spec_turns[k], ref_turns[k]
        error = f"spec: {a.error}" if a.error else (f"ref: {b.error}" if b.error else None)
        pairs.append(TurnPair(k[0], k[1], None if a.error else a.output.text, None if b.error else b.output.text,
                              error))
    return tuple(pairs)


def format_lossless(report: LosslessReport, limit: int = 5) -> str:
    verdict = "LOSSLESS" if report.is_lossless else ("NOT LOSSLESS" if report.mismatches else "INCONCLUSIVE")
    lines = [f"greedy outputs: {report.num_identical}/{len(report.pairs)} turns identical "
             f"(spec {report.spec_url} vs ref {report.ref_url}): {verdict}"]
    if report.mismatches:
        lines.append(f"mismatches: {report.num_near_ties} near-tie (top-2 margin < {NEAR_TIE_MARGIN:g} nats unless "
                     f"--near-tie-margin), {report.num_divergent} divergent or unclassified")
    for pair in report.mismatches[:limit]:
        at = pair.first_divergence or 0
        lines.append(f"  sample {pair.sample_id} turn {pair.turn}: differs at char {at}: "
                     f"spec {(pair.spec_text or '')[at:at + 30]!r} vs ref {(pair.ref_text or '')[at:at + 30]!r}"
                     f"{_diagnosis_text(pair.diagnosis)}")
    for pair in report.failures[:limit]:
        lines.append(f"  sample {pair.sample_id} turn {pair.turn}: not compared ({pair.error})")
    return "\n".join(lines)


def _diagnosis_text(diagnosis: TieDiagnosis | None) -> str:
    if diagnosis is None:
        return ""
    if diagnosis.margin is None:
        return f" [{diagnosis.verdict}: {diagnosis.note}]"
    first, second = diagnosis.candidates
    return f" [{diagnosis.verdict}: top-2 {first!r} vs {second!r}, margin {diagnosis.margin:.4f} nats]"
