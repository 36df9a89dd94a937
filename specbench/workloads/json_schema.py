"""The JSON workload (issue 46): chat requests whose answers are constrained by a JSON schema or a tool-call grammar
(json_schema_cases.py); scored for validity and schema conformance by the gate's structured stage, speed as any."""

from __future__ import annotations

from specbench.errors import SpecbenchError
from specbench.grammar.spec import GrammarSpec
from specbench.sampling_params import SamplingParams
from specbench.workloads.base import DataSource, LoadedData, Message, Prompt, Sample, Score, Tokenizer
from specbench.workloads.chat import render_conversation
from specbench.workloads.json_schema_cases import CASES, SchemaCase

SYSTEM = "You answer with JSON only."


def case_grammar(case: SchemaCase) -> GrammarSpec:
    return GrammarSpec.tool_call(list(case.tools)) if case.tools else GrammarSpec.json_schema(case.schema)


class JsonSchemaWorkload:
    name = "json_schema"
    version = "1"
    is_chat = True
    stop_strings: tuple[str, ...] = ()

    def __init__(self, max_tokens: int = 256) -> None:
        if max_tokens < 1:
            raise SpecbenchError(f"json_schema workload: max tokens must be >= 1, got {max_tokens}")
        self.max_tokens = max_tokens

    def load(self, source: DataSource, limit: int | None, seed: int) -> LoadedData:
        cases = CASES if limit is None else CASES[:limit]
        samples = tuple(Sample(sample_id=case.case_id, category=case.category, turns=(case.request,), system=SYSTEM,
                               grammar=case_grammar(case)) for case in cases)
        return LoadedData(samples, (), "synthetic")

    def first_prompt(self, sample: Sample, tokenizer: Tokenizer | None, *, chat_template: bool) -> Prompt:
        messages = (Message("system", sample.system or SYSTEM), Message("user", sample.turns[0]))
        return render_conversation(messages, tokenizer, chat_template=chat_template)

    def next_turn(self, sample: Sample, previous: Prompt, completion: str, tokenizer: Tokenizer | None, *,
                  chat_template: bool) -> Prompt | None:
        return None

    def sampling_params(self, sample: Sample, *, temperature: float | None = None, max_tokens: int | None = None,
                        seed: int | None = None) -> SamplingParams:
        return SamplingParams(temperature=0.0 if temperature is None else temperature,
                              max_tokens=max_tokens or self.max_tokens, seed=seed, grammar=sample.grammar)

    def score(self, sample: Sample, completion: str) -> Score | None:
        return None  # validity and conformance are the structured stage's (grammar/conformance.py), not exact match
