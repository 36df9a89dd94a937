"""Stop conditions applied token by token as a round's tokens are committed."""

from __future__ import annotations

from specbench.engine.request import Request

# Decoding only a tail keeps the per-token check O(1); stop strings longer than
# this many tokens are not supported.
_STOP_WINDOW_TOKENS = 32


class StopChecker:
    def __init__(self, tokenizer, eos_token_ids: frozenset[int], max_model_len: int) -> None:
        self.tokenizer = tokenizer
        self.eos_token_ids = eos_token_ids
        self.max_model_len = max_model_len

    def check(self, request: Request) -> str | None:
        """Finish reason after the last appended token, or None to continue."""
        params = request.sampling_params
        token = request.output_token_ids[-1]
        if not params.ignore_eos and token in self.eos_token_ids:
            return "stop"
        if params.stop and self.tokenizer is not None:
            tail = self.tokenizer.decode(request.output_token_ids[-_STOP_WINDOW_TOKENS:], skip_special_tokens=True)
            if any(s in tail for s in params.stop):
                return "stop"
        if request.num_output_tokens >= params.max_tokens or request.num_tokens >= self.max_model_len:
            return "length"
        return None

    def final_text(self, request: Request) -> str | None:
        if self.tokenizer is None:
            return None
        text = self.tokenizer.decode(request.output_token_ids, skip_special_tokens=True)
        cuts = [text.find(s) for s in request.sampling_params.stop if s in text]
        return text[: min(cuts)] if cuts else text
