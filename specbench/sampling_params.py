"""Per-request sampling parameters, and the one declaration of which values the engine can represent."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from specbench.errors import SpecbenchError
from specbench.grammar.spec import GrammarSpec

# Sampling runs on device in float32 (speculation/sampling.py: logits.float() / temperature, top_p compared in float32) and
# seeds go to torch.Generator.manual_seed. These bounds are what those representations hold.
FLOAT32_MAX = 3.4028234663852886e38  # a larger temperature is inf on device
FLOAT32_TINY = 1.1754943508222875e-38  # smallest normal float32: a smaller top_p rounds to 0 and masks every token
# Below this a sampled temperature could overflow float32 when dividing logits (|logit| <= 65504, fp16's max, gives
# <= 6.6e9 here); vLLM treats temperatures under 1e-5 as greedy too. Send 0 for greedy.
MIN_SAMPLED_TEMPERATURE = 1e-5
INT64_MAX = 2**63 - 1
MAX_TOKENS = 2**24  # far above any context; a larger request is a typo or hostile
SEED_MIN, SEED_MAX = -(2**63), 2**64 - 1  # torch.Generator.manual_seed's range (it raises outside it)
MAX_LOGPROBS = 20  # top-n alternatives per token: OpenAI's top_logprobs limit (each one costs a host copy)


def _finite_in(low: float, high: float) -> Callable[[float], bool]:
    return lambda v: math.isfinite(v) and low <= v <= high


# field -> (is the value representable, what representable means). Checked by SamplingParams and, before anything is
# queued, by `specbench serve`'s request validation (serve/request_models.py), so both refuse the same values.
SAMPLING_LIMITS: dict[str, tuple[Callable[[float], bool], str]] = {
    "temperature": (lambda v: v == 0 or _finite_in(MIN_SAMPLED_TEMPERATURE, FLOAT32_MAX)(v),
                    f"must be >= 0 and finite: 0 (greedy) or in [{MIN_SAMPLED_TEMPERATURE:g}, {FLOAT32_MAX:.4g}]"),
    "top_p": (_finite_in(FLOAT32_TINY, 1.0), f"must be in (0, 1] (at least {FLOAT32_TINY:.4g}, float32's smallest)"),
    "top_k": (lambda v: v == -1 or 1 <= v <= INT64_MAX, "must be -1 (off) or >= 1"),
    "max_tokens": (lambda v: 1 <= v <= MAX_TOKENS, f"must be in [1, {MAX_TOKENS}]"),
    "seed": (lambda v: SEED_MIN <= v <= SEED_MAX, f"must be in [{SEED_MIN}, {SEED_MAX}] (what torch accepts)"),
    "logprobs": (lambda v: 0 <= v <= MAX_LOGPROBS, f"must be in [0, {MAX_LOGPROBS}]"),
    "prompt_logprobs": (lambda v: 0 <= v <= MAX_LOGPROBS, f"must be in [0, {MAX_LOGPROBS}]"),
}


def sampling_value_error(name: str, value: float, label: str | None = None) -> str | None:
    """Why `value` is not a representable `name` (a SAMPLING_LIMITS field), or None when it is. `label`: the name
    the message gives the value (an HTTP field such as max_completion_tokens)."""
    is_ok, rule = SAMPLING_LIMITS[name]
    if isinstance(value, float) and not math.isfinite(value):
        return f"{label or name} must be a finite number, got {value}"
    return None if is_ok(value) else f"{label or name} {rule}, got {value}"


@dataclass(frozen=True, slots=True)
class SamplingParams:
    temperature: float = 0.0  # 0 means greedy
    top_k: int = -1  # -1 disables
    top_p: float = 1.0
    max_tokens: int = 128
    ignore_eos: bool = False
    seed: int | None = None  # per-request seed; sampled runs are reproducible when set
    stop: tuple[str, ...] = field(default_factory=tuple)  # stop strings, matched on decoded text
    # Log-probabilities are the TARGET's raw distribution at the position that predicts the token: log_softmax of
    # its float32 logits before temperature / top-k / top-p (vLLM's default "raw_logprobs"), the same whether the
    # token was decoded plainly, an accepted draft, a recovered token or the bonus. None: not computed (no cost).
    logprobs: int | None = None  # per output token: its logprob and the top-n alternatives (0: the token's only)
    prompt_logprobs: int | None = None  # per prompt token after the first: its logprob given its prefix, top-n
    # Constrained decoding (grammar/): every emitted token is one the grammar allows (response_format, regex, a tool
    # call); None: unconstrained.
    grammar: GrammarSpec | None = None

    def __post_init__(self) -> None:
        for name in SAMPLING_LIMITS:
            value = getattr(self, name)
            message = None if value is None else sampling_value_error(name, value)
            if message is not None:
                raise SpecbenchError(message)

    @property
    def is_greedy(self) -> bool:
        return self.temperature == 0.0 or self.top_k == 1
