"""Synthetic prompts of random token ids with fixed input/output lengths (ignore_eos), for engine throughput only."""

from __future__ import annotations

import warnings

import numpy as np

from specbench.errors import SpecbenchError
from specbench.sampling_params import SamplingParams
from specbench.workloads.base import LoadedData, Prompt, Sample, Score, Tokenizer
from specbench.workloads.base import DataSource


class RandomTokensWarning(UserWarning):
    """Issued by `load` via `warnings.warn`: tests can assert it, the default filter shows it once per call
    site, and the CLI can route it to logging with `logging.captureWarnings(True)`."""


ACCEPTANCE_WARNING = (
    "random-token prompts: acceptance rate and length measured on them say nothing about a real drafter "
    "(no drafter predicts noise); use them for engine overhead and throughput only"
)


class RandomTokensWorkload:
    name = "random"
    version = "1"
    is_chat = False
    stop_strings: tuple[str, ...] = ()

    def __init__(
        self, input_len: int = 128, output_len: int = 128, num_prompts: int = 64, vocab_size: int | None = None
    ) -> None:
        for label, value in (("input length", input_len), ("output length", output_len), ("prompts", num_prompts)):
            if value < 1:
                raise SpecbenchError(f"random workload: {label} must be >= 1, got {value}")
        if vocab_size is not None and vocab_size < 1:
            raise SpecbenchError(f"random workload: vocab size must be >= 1, got {vocab_size}")
        self.input_len, self.output_len, self.num_prompts = input_len, output_len, num_prompts
        self.vocab_size = vocab_size

    def load(self, source: DataSource, limit: int | None, seed: int) -> LoadedData:
        warnings.warn(ACCEPTANCE_WARNING, RandomTokensWarning, stacklevel=2)
        num = self.num_prompts if limit is None else limit
        # One independent stream per prompt: prompt i is the same whatever the limit.
        seeds = [int(s.generate_state(1)[0]) for s in np.random.SeedSequence(seed).spawn(num)]
        samples = tuple(
            Sample(
                sample_id=str(i),
                category="random",
                num_prompt_tokens=self.input_len,
                num_output_tokens=self.output_len,
                seed=s,
            )
            for i, s in enumerate(seeds)
        )
        return LoadedData(samples, (), "synthetic")

    def allowed_token_ids(self, tokenizer: Tokenizer | None) -> np.ndarray:  # [num_allowed]
        """Vocabulary ids minus the tokenizer's special ids (a BOS/EOS mid-prompt would end or reset it)."""
        if self.vocab_size is not None:
            vocab_size = self.vocab_size
        elif tokenizer is not None:
            vocab_size = len(tokenizer)  # type: ignore[arg-type]
        else:
            raise SpecbenchError("random workload needs a tokenizer or an explicit vocab size")
        special = getattr(tokenizer, "all_special_ids", None) or []
        allowed = np.setdiff1d(np.arange(vocab_size), np.asarray(special, dtype=np.int64))
        if allowed.size == 0:
            raise SpecbenchError("random workload: no non-special token ids to draw from")
        return allowed

    def first_prompt(self, sample: Sample, tokenizer: Tokenizer | None, *, chat_template: bool) -> Prompt:
        if chat_template:
            raise SpecbenchError("random workload sends token ids; run it with chat_template off")
        if sample.seed is None or sample.num_prompt_tokens is None:
            raise ValueError(f"sample {sample.sample_id} was not made by the random workload")
        allowed = self.allowed_token_ids(tokenizer)
        rng = np.random.default_rng(sample.seed)
        token_ids = allowed[rng.integers(0, allowed.size, size=sample.num_prompt_tokens)]
        return Prompt(text="", token_ids=tuple(int(t) for t in token_ids), add_special_tokens=False)

    def next_turn(
        self, sample: Sample, previous: Prompt, completion: str, tokenizer: Tokenizer | None, *, chat_template: bool
    ) -> Prompt | None:
        return None

    def sampling_params(
        self,
        sample: Sample,
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
        seed: int | None = None,
    ) -> SamplingParams:
        return SamplingParams(
            temperature=0.0 if temperature is None else temperature,
            max_tokens=max_tokens or sample.num_output_tokens or self.output_len,
            ignore_eos=True,
            seed=seed,
        )

    def score(self, sample: Sample, completion: str) -> Score | None:
        return None
