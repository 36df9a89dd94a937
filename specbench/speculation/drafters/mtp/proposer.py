"""The `mtp` proposer: the EAGLE-1 machinery (catch-up over the target's final hidden states, own paged KV,
argmax draft steps, round graphs, drafting ahead) around the target checkpoint's MTP module (head.py); several
modules chain as DeepSeek-V3 does (multi_module.py); loader.py builds either."""

from __future__ import annotations

from specbench.speculation.drafters.eagle.proposer import EagleProposer


class MtpProposer(EagleProposer):
    """EagleProposer's capabilities, with the head loaded from the target checkpoint; its own class so that what
    only MTP hosts (the MTP module's inputs) is asked of this class."""
