"""Did the gated run speculate at the k it was gated with? A gate that passes a server drafting nothing (or drafting
another k) judges the wrong system, so each rule below is a FAIL with "speculation off?" in its reason:

1. The server's own word (backends/server_info.py: specbench serve's /version, llama.cpp's /props) says k = 0,
   method none, or another k than -k. llama.cpp's `speculative.types` is a per-request default that reads "none"
   on some builds that do draft, so server_info never reports it as a method; its `speculative.n_max` is judged.
   vLLM and SGLang say nothing: rule 2 and the acceptance counters judge them.
2. The reference was measured with draft counts (acceptance) and this run has none: nothing drafted, or the server
   stopped reporting it; either way acceptance cannot have been measured, so the gate must not pass it as N/A.
"""

from __future__ import annotations

from specbench.backends.server_info import ServerSpeculation

OFF = "speculation off?"


def declared_mismatch(declared: ServerSpeculation | None, num_steps: int) -> str | None:
    """Why the server's own speculative config contradicts -k, or None (it agrees, or does not say)."""
    if declared is None:
        return None
    said = f"the server reports method {declared.method or 'unknown'}, num_steps {declared.num_steps} " \
           f"({declared.source})"
    if declared.method == "none" or declared.num_steps == 0:
        return f"{said} but the gate ran with -k {num_steps}: {OFF}"
    if declared.num_steps is not None and declared.num_steps != num_steps:
        return f"{said}, not -k {num_steps}: {OFF} (or gate with -k {declared.num_steps})"
    return None


def counts_missing(now_has_counts: bool, reference_has_counts: bool) -> str | None:
    """Why a run without draft counts fails against a reference that had them, or None."""
    if reference_has_counts and not now_has_counts:
        return f"the reference has draft counts (acceptance) and this run has none: {OFF}"
    return None
