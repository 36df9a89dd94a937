"""The hybrid-state mutants (faults/state_*.py) act on a Mamba-2 target's state as on Gated DeltaNet's: its conv and
SSM state ride on the same commit (the rows each part takes) and the same verify forward, so the mutants written for
Qwen3-Next bend Bamba unchanged, and the same checks catch them: the state oracle (INV-STATE) under forced acceptance,
and greedy identity with the clean engine (itself HF's: tests/models/test_bamba_vs_hf.py) under lossless scripted
n-gram rounds."""

from __future__ import annotations

import pytest

from tests.support.hf_greedy import tiny_prompt_ids
from tests.support.hybrid_runs import NGRAM, hybrid_llm, run_with_oracle
from tests.support.scripted_drafts import install_scripted
from tests.support.tiny_bamba import build_tiny_bamba
from tests.support.tiny_models import build_tiny_model

from specbench import SamplingParams
from specbench.faults import injection

PROMPT_LENGTHS = (6, 33, 13, 21, 9, 17)
MAX_TOKENS = 8
# the rollback mutants (which rows the commit takes, which tokens the verify runs); conv-only / recurrent-only bend
# one of the two parts of the Mamba-2 state. state-conv-only-rolled-back (the SSM state keeps the rejected drafts)
# leaves these 6 x 8 greedy tokens as they were (the decays, ~0.8 a token, fade the stray writes before they flip
# an argmax): only the state oracle sees it here, the case it exists for.
GREEDY_CAUGHT = ["state-not-rolled-back", "state-recurrent-only-rolled-back", "state-verify-one-token"]
ORACLE_CAUGHT = ["state-not-rolled-back", "state-conv-only-rolled-back"]


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("bamba_mutants")
    build_tiny_bamba(root / "target", seed=0)
    build_tiny_model(root / "draft", "qwen3", num_layers=1, seed=5)
    return root


@pytest.fixture(scope="module")
def prompts():
    return tiny_prompt_ids(PROMPT_LENGTHS)


@pytest.fixture(scope="module")
def clean(dirs, prompts):
    outs = hybrid_llm(dirs / "target").generate(prompts, SamplingParams(max_tokens=MAX_TOKENS, ignore_eos=True))
    return [list(o.output_token_ids) for o in outs]


def _scripted(dirs, prompts, clean, fault=None):
    llm = hybrid_llm(dirs / "target", fault=fault, **NGRAM)
    install_scripted(llm, prompts, clean)
    return llm


@pytest.mark.parametrize("name", GREEDY_CAUGHT)
def test_greedy_identity_catches_the_mutant_on_mamba2(dirs, prompts, clean, name):
    params = SamplingParams(max_tokens=MAX_TOKENS, ignore_eos=True)
    assert [list(o.output_token_ids) for o in _scripted(dirs, prompts, clean).generate(prompts, params)] == clean
    outs = _scripted(dirs, prompts, clean, injection(name)).generate(prompts, params)
    assert [list(o.output_token_ids) for o in outs] != clean, name


@pytest.mark.parametrize("name", ORACLE_CAUGHT)
def test_the_state_oracle_catches_the_mutant_on_mamba2(dirs, prompts, name):
    def make(fault=None):
        return hybrid_llm(dirs / "target", fault=fault, method="draft", draft=str(dirs / "draft"), max_num_steps=3,
                          synthetic_acceptance=(0.8, 0.6, 0.5))

    _, clean_worst, _ = run_with_oracle(make(), prompts[:4], max_tokens=6)
    assert clean_worst < 1e-4
    _, worst, num_checked = run_with_oracle(make(injection(name)), prompts[:4], max_tokens=6)
    assert num_checked > 0 and worst > 1e-2, (name, worst)
