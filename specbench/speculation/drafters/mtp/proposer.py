"""The `mtp` proposer: the EAGLE-1 machinery (catch-up over the target's final hidden states, own paged KV,
argmax draft steps, round graphs, drafting ahead) around the target checkpoint's MTP module (head.py); several
modules chain as DeepSeek-V3 does (multi_module.py); loader.py builds either."""

from __future__ import annotations

from specbench.execution_paths import HYBRID, ExecutionPath
from specbench.speculation.drafters.eagle.proposer import EagleProposer
from specbench.speculation.drafters.mtp.head import QWEN3_NEXT_BLOCK_PATH


class MtpProposer(EagleProposer):
    """EagleProposer's capabilities, with the head loaded from the target checkpoint; its own class so that what
    only MTP hosts (the MTP module's inputs) is asked of this class."""

    execution_paths = (
        ExecutionPath(QWEN3_NEXT_BLOCK_PATH, "the MTP module of a Qwen3-Next (hybrid) target: its gated full-attention "
                      "block, (1 + w) norms (speculation/drafters/mtp/head.py)", ("cpu", "cuda"), target_kind=HYBRID),
    )
