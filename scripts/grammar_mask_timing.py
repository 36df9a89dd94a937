"""CPU timing of the two grammar libraries issue 46 weighs (xgrammar, llguidance): per-token mask time while walking
a schema-valid JSON document, and a speculative step's cost (k + 1 masks, k advances, a rollback of the rejected).

    PYTHONPATH=/tmp/gramlib python scripts/grammar_mask_timing.py TOKENIZER_DIR [k]
"""

from __future__ import annotations

import json
import statistics
import sys
import time

import torch
from transformers import AutoTokenizer

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"}, "age": {"type": "integer"}, "role": {"enum": ["admin", "user", "guest"]},
        "tags": {"type": "array", "items": {"type": "string"}},
        "address": {"type": "object", "properties": {"city": {"type": "string"}, "zip": {"type": "string"}},
                    "required": ["city", "zip"]},
        "score": {"type": "number"},
    },
    "required": ["name", "age", "role", "tags", "address", "score"],
}
DOCUMENT = json.dumps({"name": "Ada Lovelace", "age": 36, "role": "admin", "tags": ["math", "engines", "poetry"],
                       "address": {"city": "London", "zip": "W1"}, "score": 9.75})


def walk(tokens, fill, accept, rollback, k):
    """(median per-token mask ms, median speculative-step ms) over the document's tokens."""
    mask_ms, step_ms = [], []
    for i, token in enumerate(tokens):
        start = time.perf_counter()
        fill()
        mask_ms.append((time.perf_counter() - start) * 1e3)
        drafts = tokens[i + 1 : i + 1 + k]
        start = time.perf_counter()
        accept(token)
        advanced = 0
        for draft in drafts:  # the rows after the committed token: one mask each, advancing over the drafts
            fill()
            if not accept(draft):
                break
            advanced += 1
        if advanced:
            rollback(advanced)
        step_ms.append((time.perf_counter() - start) * 1e3)
    return statistics.median(mask_ms), statistics.median(step_ms)


def main() -> None:
    tok_dir, k = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 3
    hf = AutoTokenizer.from_pretrained(tok_dir)
    tokens = hf.encode(DOCUMENT, add_special_tokens=False)
    vocab = len(hf)
    print(f"vocab {vocab}, document {len(tokens)} tokens, k={k}")

    import xgrammar as xgr
    start = time.perf_counter()
    info = xgr.TokenizerInfo.from_huggingface(hf, vocab_size=vocab)
    compiled = xgr.GrammarCompiler(info).compile_json_schema(json.dumps(SCHEMA))
    compile_ms = (time.perf_counter() - start) * 1e3
    matcher = xgr.GrammarMatcher(compiled, max_rollback_tokens=16)
    bitmask = xgr.allocate_token_bitmask(1, vocab)
    mask, step = walk(tokens, lambda: matcher.fill_next_token_bitmask(bitmask, 0), matcher.accept_token,
                      matcher.rollback, k)
    print(f"xgrammar 0.2.9: compile {compile_ms:.1f} ms, mask {mask:.3f} ms/token, spec step {step:.3f} ms")

    import llguidance
    import llguidance.hf
    import llguidance.torch
    start = time.perf_counter()
    lltok = llguidance.hf.from_tokenizer(hf, n_vocab=vocab)
    grammar = llguidance.LLMatcher.grammar_from_json_schema(json.dumps(SCHEMA))
    ll = llguidance.LLMatcher(lltok, grammar)
    compile_ms = (time.perf_counter() - start) * 1e3
    bitmask = llguidance.torch.allocate_token_bitmask(1, vocab)
    mask, step = walk(tokens, lambda: llguidance.torch.fill_next_token_bitmask(ll, bitmask, 0), ll.consume_token,
                      ll.rollback, k)
    print(f"llguidance 1.9.1: compile {compile_ms:.1f} ms, mask {mask:.3f} ms/token, spec step {step:.3f} ms, "
          f"error={ll.get_error()!r}")


if __name__ == "__main__":
    torch.set_num_threads(1)
    main()
