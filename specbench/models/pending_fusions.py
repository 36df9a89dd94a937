"""Fused paths that landed without a GPU run (session 25: no device came for the whole session), off by default
until one validates and times them:
- the MoE layer's post-attention RMSNorm (and a hybrid block's residual add) in the routing kernel's prologue at 1 to
  4 tokens (models/moe_forward.py `normed_moe_forward`, path moe.route_norm);
- Qwen3-Next's gated attention at 1 to 64 tokens as four kernels (models/gated_attention_fused.py, path
  hybrid.gated_attention_fused).
Their kernels are tested under the CPU interpreter against the eager layers and compile for sm90 (tests/kernels/
test_kernels_compile_for_hopper.py); `SPECBENCH_PENDING_FUSIONS=on` takes them, e.g. for the A/B that will decide
the default (same tree, off then on, as SPECBENCH_PDL's). Read at each forward's decision (a CUDA graph keeps what
it was captured with)."""

from __future__ import annotations

from specbench.env_modes import env_mode

ENV = "SPECBENCH_PENDING_FUSIONS"
MODES = ("off", "on")


def is_on() -> bool:
    return env_mode(ENV, MODES, "off") == "on"
