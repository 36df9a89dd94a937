"""The library entry point shared by notebooks and the CLI."""

from __future__ import annotations

from typing import Sequence

from specbench.config import EngineConfig
from specbench.engine.llm_engine import LLMEngine
from specbench.engine.outputs import RequestOutput
from specbench.runtime.hooks import NO_HOOKS, EngineFault
from specbench.sampling_params import SamplingParams


def create_engine(config: EngineConfig, fault: EngineFault | None = None) -> LLMEngine:
    """The engine of `config`; `fault` (test machinery, given by the caller: specbench.faults.injection) makes it
    that fault's mutant. None: the production engine."""
    hooks = NO_HOOKS if fault is None else fault.new_hooks(config.method)
    engine = LLMEngine(config, hooks=hooks)
    hooks.install(engine)
    return engine


class LLM:
    """`LLM(target=..., draft=..., method=..., max_num_steps=...).generate(prompts, SamplingParams(...))`."""

    def __init__(self, target: str | EngineConfig, *, fault: EngineFault | None = None, **kwargs):
        """`target`: a model source (with EngineConfig fields as keywords), or a whole EngineConfig; `fault`: see
        create_engine."""
        if isinstance(target, EngineConfig):
            if kwargs:
                raise TypeError(f"LLM(EngineConfig) takes no other options, got {sorted(kwargs)}")
            self.config = target
        else:
            self.config = EngineConfig(target=target, **kwargs)
        self.engine = create_engine(self.config, fault)

    @property
    def tokenizer(self):
        return self.engine.tokenizer

    def generate(
        self,
        prompts: Sequence[str | list[int]],
        sampling_params: SamplingParams | Sequence[SamplingParams] | None = None,
    ) -> list[RequestOutput]:
        """Outputs in prompt order."""
        params = sampling_params or SamplingParams()
        per_prompt = [params] * len(prompts) if isinstance(params, SamplingParams) else list(params)
        ids = [self.engine.add_request(p, sp) for p, sp in zip(prompts, per_prompt)]
        by_id = {o.request_id: o for o in self.engine.run_until_done()}
        return [by_id[i] for i in ids]
