"""Target-side, prompt logprobs only: on a speculative engine, each prompt token's logprob is read from the prefill
row after the one that predicts it (row p + 1 for prompt token p + 1; the last row stays), vLLM #53488's class:
prompt_logprobs silently corrupted while generation is untouched, found there by a perplexity scan.

Greedy outputs, draft counts and output logprobs are unchanged (the prefill's sampled row and its output logprobs
come from `logits`, not `prompt_logits`), so every check but a prompt-logprob comparison passes it: the gate's
logprobs stage (its perplexity scan, k > 0 vs k = 0) is the one that must catch it. A plain engine (k = 0) is clean.
"""

from __future__ import annotations

import dataclasses

import torch

from specbench.faults.fault import Fault, Mutant
from specbench.faults.path_mutant import wrap_method
from specbench.speculation.capabilities import Proposer


class PromptLogprobsShift(Mutant):
    fault = Fault("prompt-logprobs-shift", "a speculative engine's prompt logprobs are read from the prefill row "
                  "after their own", "", "logprobs", Proposer)

    def install(self, engine) -> None:
        if engine.config.max_num_steps == 0:
            return  # the bug lives where speculation is on; a k = 0 server of the same build is the clean reference

        def make_prefill(prefill):
            def shifted_prefill(inp):
                out = prefill(inp)
                rows = out.prompt_logits  # [num_prompt_rows, vocab]
                if rows is None or rows.shape[0] < 2:
                    return out
                return dataclasses.replace(out, prompt_logits=torch.cat([rows[1:], rows[-1:]]))
            return shifted_prefill

        wrap_method(engine.runner, "prefill", make_prefill)
