"""Issue 25 item 1-2: debug invariants and the fused-kernel policy are engine options, read once when the engine is
built and handed down as values; nothing reads an environment variable while the engine runs."""

from __future__ import annotations

from specbench import LLM, SamplingParams
from specbench.config import ENGINE_OPTION_NAMES, EngineConfig
from specbench.models.fused_kernels import UsesFusedKernels


def test_the_default_comes_from_the_environment_once_per_config(monkeypatch):
    monkeypatch.setenv("SPECBENCH_DEBUG_INVARIANTS", "1")
    on = EngineConfig()
    monkeypatch.setenv("SPECBENCH_DEBUG_INVARIANTS", "0")
    assert on.debug_invariants and not EngineConfig().debug_invariants
    assert EngineConfig(debug_invariants=True).debug_invariants  # an explicit value wins
    monkeypatch.delenv("SPECBENCH_DEBUG_INVARIANTS")
    assert not EngineConfig().debug_invariants
    assert {"debug_invariants", "fused_kernels"} <= set(ENGINE_OPTION_NAMES)  # --debug-invariants, --fused-kernels


def test_the_engine_hands_its_values_down(tiny_model_dir, tiny_draft_dir, monkeypatch):
    monkeypatch.setenv("SPECBENCH_DEBUG_INVARIANTS", "1")  # the explicit values win over it
    llm = LLM(str(tiny_model_dir), method="draft", draft=str(tiny_draft_dir), max_num_steps=2, device="cpu",
              block_size=4, num_kv_blocks=64, debug_invariants=False, fused_kernels="off")
    engine = llm.engine
    assert not engine.runner.model.attn_backend.check_invariants and not engine.proposer.debug_invariants
    policies = {m.fused_policy for model in (engine.runner.model, engine.proposer.model) for m in model.modules()
                if isinstance(m, UsesFusedKernels)}
    assert policies == {"off"}
    monkeypatch.delenv("SPECBENCH_DEBUG_INVARIANTS")  # and turn the checks on without it
    checked = LLM(str(tiny_model_dir), method="draft", draft=str(tiny_draft_dir), max_num_steps=2, device="cpu",
                  block_size=4, num_kv_blocks=64, debug_invariants=True)
    assert checked.engine.runner.model.attn_backend.check_invariants and checked.engine.proposer.debug_invariants
    outs = checked.generate([[5, 6, 7, 8]], SamplingParams(max_tokens=4, ignore_eos=True))
    assert len(outs[0].output_token_ids) == 4
