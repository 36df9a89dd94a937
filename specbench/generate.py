"""Library side of `specbench generate`: run prompts, report outputs and acceptance."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from specbench.config import EngineConfig
from specbench.engine.outputs import RequestOutput
from specbench.errors import SpecbenchError
from specbench.metrics import definitions
from specbench.metrics.acceptance import AcceptanceMetrics
from specbench.metrics.request_metrics import RequestMetrics
from specbench.runtime.hooks import EngineFault
from specbench.sampling_params import SamplingParams


@dataclass(frozen=True)
class GenerateRequest:
    prompts: tuple[str, ...] = ()
    prompts_file: Path | None = None
    chat_template: bool = False
    max_tokens: int = 64
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = -1
    request_seed: int | None = None
    ignore_eos: bool = False


@dataclass(frozen=True)
class GenerateReport:
    method: str
    num_steps: int
    outputs: tuple[RequestOutput, ...]
    acceptance: AcceptanceMetrics
    elapsed_s: float
    num_output_tokens: int

    @property
    def output_tokens_per_s(self) -> float:
        return self.num_output_tokens / self.elapsed_s if self.elapsed_s > 0 else float("nan")


def read_prompts(req: GenerateRequest) -> list[str]:
    prompts = list(req.prompts)
    if req.prompts_file is not None:
        try:
            lines = Path(req.prompts_file).read_text().splitlines()
        except OSError as exc:
            raise SpecbenchError(f"cannot read prompts file {req.prompts_file}: {exc.strerror}") from None
        prompts.extend(line for line in lines if line.strip())
    if not prompts:
        raise SpecbenchError("no prompts: pass --prompt TEXT or --prompts-file FILE")
    return prompts


def sampling_params(req: GenerateRequest) -> SamplingParams:
    return SamplingParams(
        temperature=req.temperature,
        top_p=req.top_p,
        top_k=req.top_k,
        max_tokens=req.max_tokens,
        seed=req.request_seed,
        ignore_eos=req.ignore_eos,
    )


def generate_with(llm, prompts: list[str], req: GenerateRequest) -> GenerateReport:
    """Run prompts through an already-built `LLM` and summarise."""
    if req.chat_template:
        from specbench.models.tokenizer import apply_chat_template

        prompts = [apply_chat_template(llm.tokenizer, [{"role": "user", "content": p}]) for p in prompts]
    params = sampling_params(req)
    start = time.perf_counter()
    outputs = llm.generate(prompts, params)
    elapsed = time.perf_counter() - start
    metrics = [RequestMetrics.from_stats(o.stats) for o in outputs]
    return GenerateReport(
        method=llm.config.method,
        num_steps=llm.engine.num_steps,
        outputs=tuple(outputs),
        acceptance=AcceptanceMetrics.of(metrics),
        elapsed_s=elapsed,
        num_output_tokens=sum(len(o.output_token_ids) for o in outputs),
    )


def run_generate(req: GenerateRequest, config: EngineConfig, fault: EngineFault | None = None) -> GenerateReport:
    """`fault`: test machinery (--inject), applied to the engine built."""
    from specbench.llm import LLM

    prompts = read_prompts(req)
    sampling_params(req)  # a bad sampling value fails here, before any model is loaded
    llm = LLM(config, fault=fault)
    return generate_with(llm, prompts, req)


def format_acceptance(report: GenerateReport) -> str:
    acc = report.acceptance
    lines = [
        f"method={report.method} num_steps={report.num_steps} requests={len(report.outputs)} "
        f"output_tokens={report.num_output_tokens} time={report.elapsed_s:.2f}s "
        f"({report.output_tokens_per_s:.1f} tok/s)"
    ]
    if acc.num_draft_rounds:
        per_pos = " ".join(f"{p:.3f}" for p in acc.accept_rate_per_pos)
        lines.append(
            f"draft rounds={acc.num_draft_rounds} drafted={acc.num_draft_tokens} accepted={acc.num_accepted_tokens} "
            f"acceptance_rate={acc.acceptance_rate:.3f} acceptance_length={acc.acceptance_length:.3f}"
        )
        lines.append(f"per-position acceptance: {per_pos}")
    else:
        lines.append("no draft rounds (plain decoding)")
    return "\n".join(lines)


def print_generation(report: GenerateReport) -> None:
    for i, out in enumerate(report.outputs):
        s = out.stats
        al = definitions.acceptance_length(s.num_accepted_tokens, s.num_draft_rounds) if s.num_draft_rounds else 1.0
        print(f"--- [{i}] {len(out.output_token_ids)} tokens, finish={out.finish_reason}, acceptance length {al:.2f}")
        print(out.text if out.text is not None else list(out.output_token_ids))
    print("---")
    print(format_acceptance(report))
