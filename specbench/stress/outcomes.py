"""What one side (speculation on or off) of one condition answered: per request, and the side's draft counts."""

from __future__ import annotations

from dataclasses import dataclass

from specbench.stress.canary import Canary
from specbench.stress.conditions import Condition


@dataclass(frozen=True, slots=True)
class RequestOutcome:
    index: int  # request i of the condition: the same prompt on both sides
    canary: Canary
    text: str  # the completion ("" when the request failed)
    token_ids: tuple[int, ...]  # [num_output_tokens]; () over HTTP when the server sends no ids
    error: str | None  # why the request failed; None = answered

    @property
    def is_answered(self) -> bool:
        return self.error is None and self.canary.is_answered(self.text)


@dataclass(frozen=True, slots=True)
class DraftCounts:
    num_draft_tokens: int | None  # drafted over the side's requests; None where nothing says
    num_accepted_tokens: int | None
    source: str  # "engine" | the server's counter family | "" when unknown


@dataclass(frozen=True, slots=True)
class SideRun:
    label: str  # "k=0" | "k=3"
    num_steps: int
    outcomes: tuple[RequestOutcome, ...]  # [num_requests] by index
    drafts: DraftCounts
    # prompt tokens served from the prefix cache / looked up, over the judged pass (the backend's window: engine
    # statistics or the server's /metrics); None where nothing says
    prefix_hit_rate: float | None = None


@dataclass(frozen=True, slots=True)
class ConditionRun:
    condition: Condition
    num_prompt_tokens: int  # the prompts' actual length (at least the question's own)
    is_exact_length: bool  # token ids of exactly that length (a local tokenizer) or text of about it
    off: SideRun
    on: SideRun
    seconds: float
