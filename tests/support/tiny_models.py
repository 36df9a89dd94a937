"""Tiny random HF checkpoints with a real (trained) byte-level BPE tokenizer, for tests of every area.

Weight scale: HF's default init (std 0.02) gives logits of std ~0.02 * sqrt(64) = 0.16 over 1024
tokens: nearly uniform, so greedy picks hinge on tiny margins that any rounding change flips. Here the
output head is N(0, (weight_scale / sqrt(hidden))^2) with weight_scale 4, so the unit-RMS final hidden
state gives logits of std ~4: peaky distributions (median top-1 prob ~0.35, top-2 margin < 1e-3 in
~0.1% of positions). Inner matrices use gain 0.5 / sqrt(fan_in): larger gains make the net chaotic,
and a draft derived by a 10% weight perturbation then disagrees with its target almost everywhere.
Norm weights and biases are random too, so a swapped or dropped norm/bias changes the outputs.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import torch
import transformers
from safetensors import safe_open
from safetensors.torch import save_file

transformers.utils.logging.disable_progress_bar()

REPO_ROOT = Path(__file__).resolve().parents[2]
TOKENIZER_CACHE = REPO_ROOT / ".cache" / "tiny_tokenizer"
VOCAB_SIZE = 1024
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|pad|>"]  # ids 0..3
BOS_ID, EOS_ID, PAD_ID = 0, 2, 3
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
DEFAULT_WEIGHT_SCALE = 4.0
LAYER_GAIN = 0.5  # larger gains make the net chaotic: a 5% weight perturbation then flips most argmaxes


def data_dir() -> Path:
    return Path(os.environ.get("SPECBENCH_DATA_DIR", REPO_ROOT.parent / "shared" / "data"))


def gsm8k_questions(split: str = "train") -> list[str]:
    with open(data_dir() / "gsm8k" / f"{split}.jsonl") as f:
        return [json.loads(line)["question"] for line in f]


def tiny_tokenizer_dir() -> Path:
    """Train the BPE once per checkout (cached under .cache/, git-ignored) and return its directory."""
    target = TOKENIZER_CACHE / f"v1-bpe{VOCAB_SIZE}"
    if (target / "tokenizer.json").exists():
        return target
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE, special_tokens=SPECIAL_TOKENS, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    bpe.train_from_iterator(gsm8k_questions("train"), trainer)
    tok = PreTrainedTokenizerFast(
        tokenizer_object=bpe, bos_token="<|endoftext|>", eos_token="<|im_end|>", pad_token="<|pad|>"
    )
    tok.chat_template = CHAT_TEMPLATE
    TOKENIZER_CACHE.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=TOKENIZER_CACHE))
    tok.save_pretrained(staging)
    try:
        os.rename(staging, target)  # atomic: concurrent test workers never see a half-written cache
    except OSError:
        shutil.rmtree(staging)  # another worker won the race
    return target


def load_tiny_tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_tokenizer_dir())


def _hf_config(arch: str, *, num_layers, hidden, heads, kv_heads, intermediate, tie, rope_scaling, rope_theta,
               **overrides):
    from transformers import (
        Glm4MoeConfig,
        LlamaConfig,
        MistralConfig,
        MixtralConfig,
        Qwen2Config,
        Qwen3Config,
        Qwen3MoeConfig,
    )

    cls = {"llama": LlamaConfig, "mistral": MistralConfig, "qwen2": Qwen2Config, "qwen3": Qwen3Config, "qwen3_moe": Qwen3MoeConfig,
           "mixtral": MixtralConfig, "glm4_moe": Glm4MoeConfig}[arch]
    rope = {"rope_type": "default", **(rope_scaling or {}), "rope_theta": rope_theta}
    return cls(
        vocab_size=VOCAB_SIZE, hidden_size=hidden, intermediate_size=intermediate or 2 * hidden,
        num_hidden_layers=num_layers, num_attention_heads=heads, num_key_value_heads=kv_heads,
        head_dim=hidden // heads, max_position_embeddings=2048, rms_norm_eps=1e-6, tie_word_embeddings=tie,
        rope_parameters=rope, bos_token_id=BOS_ID, eos_token_id=EOS_ID, pad_token_id=PAD_ID, **overrides,
    )


@torch.no_grad()
def _randomize(model, weight_scale: float, seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    for name, param in sorted(model.named_parameters()):
        if name == "model.norm.weight" and model.config.tie_word_embeddings:
            # The tied matrix is also the output head: with ~1 final-norm weights each token's own
            # embedding would score itself highest and the model would echo its input. Zero-mean
            # weights decorrelate the output from the input embedding.
            param.copy_(torch.randn(param.shape, generator=gen))
        elif name.endswith("norm.weight"):
            param.copy_(1.0 + 0.2 * torch.randn(param.shape, generator=gen))
        elif name.endswith(".bias"):
            param.copy_(0.5 * torch.randn(param.shape, generator=gen))
        elif name.endswith("embed_tokens.weight") and not model.config.tie_word_embeddings:
            param.copy_(torch.randn(param.shape, generator=gen))
        else:
            is_head = name.startswith("lm_head") or name.endswith("embed_tokens.weight")  # tied: one matrix
            gain = weight_scale if is_head else LAYER_GAIN
            # The last dim is the fan-in of a matrix and of a stacked [experts, out, in] MoE weight alike.
            param.copy_(torch.randn(param.shape, generator=gen) * (gain / param.shape[-1] ** 0.5))


def build_tiny_model(
    out_dir: str | Path,
    arch: str = "llama",
    *,
    num_layers: int = 2,
    hidden: int = 64,
    heads: int = 4,
    kv_heads: int = 2,
    intermediate: int | None = None,
    seed: int = 0,
    tie: bool = False,
    weight_scale: float = DEFAULT_WEIGHT_SCALE,
    rope_scaling: dict | None = None,
    rope_theta: float = 10000.0,
    **config_overrides,
):
    """Save an fp32 HF checkpoint (model.safetensors + config + tokenizer) to out_dir; returns the HF model.

    `rope_scaling` is an HF rope dict without theta (e.g. {"rope_type": "linear", "factor": 2.0});
    `config_overrides` go to the HF config class (e.g. attention_bias=True for Llama).
    """
    from transformers import AutoModelForCausalLM

    config = _hf_config(arch, num_layers=num_layers, hidden=hidden, heads=heads, kv_heads=kv_heads,
                        intermediate=intermediate, tie=tie, rope_scaling=rope_scaling, rope_theta=rope_theta,
                        **config_overrides)
    torch.manual_seed(seed)
    return save_random(AutoModelForCausalLM.from_config(config, dtype=torch.float32).eval(), out_dir, seed,
                       weight_scale)


def save_random(model, out_dir: str | Path, seed: int, weight_scale: float):
    """`model` (a fresh HF model) with random weights of `weight_scale` (seeded), saved to out_dir with the tiny
    tokenizer; returns it."""
    from transformers import AutoTokenizer

    _randomize(model, weight_scale, seed)
    out = Path(out_dir)
    model.save_pretrained(out)
    AutoTokenizer.from_pretrained(tiny_tokenizer_dir()).save_pretrained(out)
    return model


@torch.no_grad()
def derive_draft(target_dir: str | Path, out_dir: str | Path, *, noise: float = 0.1,
                 num_layers: int | None = None, seed: int = 1) -> Path:
    """A draft for the target's tokenizer: every weight w += noise * std(w) * N(0, 1), layers optionally cut."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(target_dir, dtype=torch.float32).eval()
    # Offset so a draft seed never replays a build seed's stream (noise = the weights themselves).
    gen = torch.Generator().manual_seed(1_000_000_007 + seed)  # CPU generators keep only 32 seed bits
    for _, param in sorted(model.named_parameters()):
        param.add_(noise * param.std() * torch.randn(param.shape, generator=gen))
    if num_layers is not None:
        model.model.layers = model.model.layers[:num_layers]
        model.config.num_hidden_layers = num_layers
        if getattr(model.config, "layer_types", None):
            model.config.layer_types = model.config.layer_types[:num_layers]
    model.save_pretrained(out_dir)
    AutoTokenizer.from_pretrained(target_dir).save_pretrained(out_dir)
    return Path(out_dir)


def write_sharded(src_dir: str | Path, out_dir: str | Path, *, max_shard_bytes: int = 64 * 1024) -> Path:
    """Copy an HF dir, splitting model.safetensors into shards plus model.safetensors.index.json."""
    src, out = Path(src_dir), Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for f in src.iterdir():
        if f.is_file() and f.name != "model.safetensors":
            shutil.copy(f, out / f.name)
    shards: list[dict[str, torch.Tensor]] = [{}]
    size = 0
    with safe_open(src / "model.safetensors", framework="pt") as f:
        for key in f.keys():
            tensor = f.get_tensor(key)
            if shards[-1] and size + tensor.nbytes > max_shard_bytes:
                shards.append({})
                size = 0
            shards[-1][key] = tensor
            size += tensor.nbytes
    weight_map, total = {}, 0
    for i, shard in enumerate(shards):
        name = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        save_file(shard, out / name, metadata={"format": "pt"})
        weight_map.update({k: name for k in shard})
        total += sum(t.nbytes for t in shard.values())
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (out / "model.safetensors.index.json").write_text(json.dumps(index, indent=2))
    return out


def _llama_cpp_permute(w: torch.Tensor, num_heads: int) -> torch.Tensor:
    # llama.cpp stores q/k rows interleaved per head (GPT-J rotary order); loaders undo this.
    return w.reshape(num_heads, 2, w.shape[0] // num_heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def write_gguf(hf_dir: str | Path, out_path: str | Path) -> Path:
    """Write a tiny Llama HF dir (model + byte-level BPE tokenizer) as an F32 llama.cpp GGUF file."""
    import gguf
    from safetensors.torch import load_file

    src = Path(hf_dir)
    cfg = json.loads((src / "config.json").read_text())
    if cfg["model_type"] != "llama":
        raise ValueError("write_gguf handles llama checkpoints only")
    heads, kv_heads = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    writer = gguf.GGUFWriter(str(out_path), "llama")
    writer.add_name("tiny-llama")
    writer.add_context_length(cfg["max_position_embeddings"])
    writer.add_embedding_length(cfg["hidden_size"])
    writer.add_block_count(cfg["num_hidden_layers"])
    writer.add_feed_forward_length(cfg["intermediate_size"])
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    writer.add_rope_dimension_count(cfg["head_dim"])
    writer.add_rope_freq_base(cfg["rope_parameters"]["rope_theta"])
    writer.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    writer.add_vocab_size(cfg["vocab_size"])

    tok = json.loads((src / "tokenizer.json").read_text())
    tokens = sorted(tok["model"]["vocab"], key=tok["model"]["vocab"].get)
    special = {t["content"] for t in tok["added_tokens"] if t["special"]}
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(tokens)
    writer.add_token_types([gguf.TokenType.CONTROL if t in special else gguf.TokenType.NORMAL for t in tokens])
    writer.add_token_merges([" ".join(m) if isinstance(m, list) else m for m in tok["model"]["merges"]])
    writer.add_bos_token_id(BOS_ID)
    writer.add_eos_token_id(EOS_ID)
    writer.add_pad_token_id(PAD_ID)
    writer.add_chat_template(CHAT_TEMPLATE)

    names = {"input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm",
             "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
             "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
             "mlp.down_proj": "ffn_down"}
    for key, tensor in load_file(src / "model.safetensors").items():
        if key == "model.embed_tokens.weight":
            name = "token_embd.weight"
        elif key == "model.norm.weight":
            name = "output_norm.weight"
        elif key == "lm_head.weight":
            name = "output.weight"
        else:
            _, _, layer, rest = key.split(".", 3)
            module = rest.rsplit(".", 1)[0]
            name = f"blk.{layer}.{names[module]}.weight"
            if module == "self_attn.q_proj":
                tensor = _llama_cpp_permute(tensor, heads)
            elif module == "self_attn.k_proj":
                tensor = _llama_cpp_permute(tensor, kv_heads)
        writer.add_tensor(name, tensor.float().contiguous().numpy())
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return Path(out_path)
