"""eagle.fused_head: the draft head's fused first layer rotates one-query forwards one position on (seed class:
off-by-one positions).

On the fused head (speculation/drafters/eagle/fused_head.py) the first layer's q/k/v projection rotates q and k and
stores K/V itself. Here a forward with one query per request (every draft step, and a one-position catch-up) takes each
token's cos/sin row one position on, as a RoPE table indexed by the sequence length instead of the position would:
the step's query and the K it stores sit one position off the catch-up's K in the head's cache. Drafts change,
greedy output stays the target's (the verifier rejects what is drafted wrong); only the draft oracle, which
recomputes every step with the reference head, or acceptance sees it. Only the fused path is bent.
"""

from __future__ import annotations

from specbench.faults.fault import Fault
from specbench.faults.path_mutant import PathMutant, recapture_draft_graphs, wrap_method
from specbench.speculation.drafters.eagle import fused_head
from specbench.speculation.drafters.eagle.proposer import EagleProposer


class FusedHeadRopeShift(PathMutant):
    fault = Fault("fused-head-rope-shift", "the draft head's fused first layer rotates one-query forwards one "
                  "position on", "", "draft", EagleProposer, path="eagle.fused_head")

    def install(self, engine) -> None:
        head = engine.proposer.head
        wrap_method(head, "forward", lambda forward: _shifted_steps(head, forward))
        recapture_draft_graphs(engine)


def _shifted_steps(head, forward):
    rotary = head.rotary
    clean_cos_sin = rotary.cos_sin

    def bent(input_ids, hidden, md, kv_cache, phase, check_metadata=True):
        # The first layer's input has the head input's rows and dtype: the condition the fused path takes.
        if md.max_query_len != 1 or not fused_head.first_layer_fuses(head.layers[0], hidden):
            return forward(input_ids, hidden, md, kv_cache, phase, check_metadata)
        rotary.cos_sin = lambda positions, max_seq_len: clean_cos_sin(positions + 1, max_seq_len + 1)
        try:
            return forward(input_ids, hidden, md, kv_cache, phase, check_metadata)
        finally:
            rotary.cos_sin = clean_cos_sin
    return bent
