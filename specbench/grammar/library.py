"""The one place llguidance is imported (the `grammar` extra): its tokenizer view of ours, built once per engine, and
compiled grammars, built once per GrammarSpec. Chosen over xgrammar for unbounded token-accurate rollback and no
dependencies of its own; scripts/grammar_mask_timing.py measured both (BENCHMARKS.md, "Grammar masks")."""

from __future__ import annotations

import json
from functools import lru_cache

from specbench.errors import SpecbenchError
from specbench.grammar.spec import GrammarSpec


def require_llguidance():
    try:
        import llguidance
        import llguidance.hf
        import llguidance.torch
    except ImportError:
        raise SpecbenchError("grammar-constrained decoding needs llguidance: pip install 'specbench-cli[grammar]'") \
            from None
    return llguidance


class GrammarLibrary:
    """llguidance bound to one tokenizer and vocabulary: compiles specs and makes matchers."""

    def __init__(self, tokenizer, vocab_size: int, eos_token_ids: frozenset[int]) -> None:
        if tokenizer is None:
            raise SpecbenchError("grammar-constrained decoding needs a tokenizer: pass --tokenizer PATH")
        self.llg = require_llguidance()
        self.tokenizer = tokenizer
        self.vocab_size = vocab_size  # the model's logits width: ids past the tokenizer's are never allowed
        eos = sorted(eos_token_ids) or None
        self.lltokenizer = self.llg.hf.from_tokenizer(tokenizer, n_vocab=vocab_size, eos_token=eos)
        self._compiled = lru_cache(maxsize=256)(self._compile)

    def matcher(self, spec: GrammarSpec):
        """A fresh llguidance LLMatcher at the start of `spec`'s grammar."""
        return self.llg.LLMatcher(self.lltokenizer, self._compiled(spec))

    def marker_token_ids(self, text: str) -> tuple[int, ...]:
        return tuple(self.tokenizer.encode(text, add_special_tokens=False))

    def _compile(self, spec: GrammarSpec) -> str:
        matcher_class = self.llg.LLMatcher
        if spec.kind == "regex":
            grammar = matcher_class.grammar_from_regex(spec.source)
        elif spec.kind == "lark":
            grammar = matcher_class.grammar_from_lark(spec.source)
        else:
            # Compact JSON (no free whitespace): a weak model cannot spend its tokens on blanks, and speculation on
            # and off produce comparable text.
            schema = {**spec.json_schema_of(), "x-guidance": {"whitespace_flexible": False}}
            grammar = matcher_class.grammar_from_json_schema(json.dumps(schema))
        error = matcher_class.validate_grammar(grammar, self.lltokenizer)  # "" when valid
        if error:
            raise SpecbenchError(f"invalid {spec.kind} grammar: {error.strip()}")
        return grammar
