"""Fit tiny EAGLE heads to a tiny target's own greedy outputs (test fixtures; cached by eagle_heads.py).

Data: gsm8k train questions cut to a fixed length, continued greedily by the target (HF generate); the
target's features come from one teacher-forced forward of our DecoderLM, exactly as the engine captures
them. Training unrolls the head like the engine drafts: step 0 reads target features, step s >= 1 its own
previous hidden, with the training-time-test mask (step 0 causal over target-feature keys, step s also
sees its own earlier-step keys at the same base position), so draft positions >= 1 learn too.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F

from specbench.attention.metadata import build_metadata
from specbench.kv.kv_cache import KVCache
from specbench.models.config import ModelConfig
from specbench.speculation.drafters.eagle.config import EAGLE1, HIDDEN_STATES_INDEX, AuxLayerSpec, EagleHeadConfig
from specbench.speculation.drafters.eagle.head import EagleHead, HeadShape


@dataclass(frozen=True)
class FitRecipe:
    kind: str  # "eagle1" | "eagle3"
    fc_bias: bool = False
    norm_before_residual: bool = False
    draft_vocab_size: int = 0  # 0 = the target's vocabulary
    aux_hf_indices: tuple[int, ...] = ()  # EAGLE-3: target hidden_states indices the head reads
    rope_theta: float = 10000.0  # the head's own RoPE (EAGLE-3 heads here differ from the target on purpose)
    num_prompts: int = 512
    prompt_len: int = 16
    gen_len: int = 48
    steps: int = 200
    batch: int = 12
    lr: float = 3e-2
    unroll: int = 3
    seed: int = 0
    version: int = 2  # bump when the fitting code changes meaning

    def key(self) -> str:
        return repr(sorted(asdict(self).items()))


class UnrolledAttention:
    """Dense attention over [batch, seq] for fitting; step s of base t sees step-0 keys [0, t] and steps 1..s at t."""

    name = "unrolled-dense"
    check_invariants = False  # the backend protocol's: no paged metadata to check here

    def __init__(self, batch: int, seq_len: int) -> None:
        from specbench.execution_paths import PathRecorder
        from specbench.speculation.registry import path_names

        self.batch, self.seq_len = batch, seq_len
        self.paths = PathRecorder(path_names())  # the backend protocol's: layers record their execution paths here
        self._kv: dict[int, list[tuple[torch.Tensor, torch.Tensor]]] = {}

    def reset(self) -> None:
        self._kv = {}

    def begin_forward(self, md, where: str) -> None:
        pass

    def forward(self, layer, q, k, v, kv_cache, md, score=None):  # [B*T, heads, hd] each -> [B*T, heads, hd]
        assert score is None or score.is_plain, "the tiny EAGLE heads' layers are Llama's: plain scores"
        b, t = self.batch, self.seq_len
        q, k, v = (x.view(b, t, *x.shape[1:]).transpose(1, 2) for x in (q, k, v))  # [B, heads, T, hd]
        steps = self._kv.setdefault(layer, [])
        steps.append((k, v))
        group = q.shape[1] // k.shape[1]
        keys = torch.cat([kk for kk, _ in steps], dim=2).repeat_interleave(group, dim=1)
        values = torch.cat([vv for _, vv in steps], dim=2).repeat_interleave(group, dim=1)
        pos = torch.arange(t)
        causal = pos[None, :] <= pos[:, None]  # [T, T]
        mask = torch.cat([causal] + [torch.eye(t, dtype=torch.bool)] * (len(steps) - 1), dim=1)
        out = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask)
        return out.transpose(1, 2).reshape(b * t, out.shape[1], out.shape[3])


@dataclass(frozen=True)
class _PositionsOnly:
    positions: torch.Tensor  # [B*T] what the head's RoPE reads; the unrolled backend needs nothing else
    max_seq_len: int


def head_config(target_cfg: ModelConfig, recipe: FitRecipe) -> EagleHeadConfig:
    """The head fitted for `recipe`: one decoder layer shaped like the target's."""
    from dataclasses import replace

    # A plain Llama layer, as eagle_heads.layer_config writes it, whatever the target's own (q/k norm, experts).
    layer = replace(target_cfg, architecture="llama", num_hidden_layers=1, rope_theta=recipe.rope_theta,
                    rope_scaling=None, tie_word_embeddings=False, attention_bias=False, use_qk_norm=False, moe=None,
                    moe_layer_ids=(), attention_kinds=(), has_attention_sinks=False, query_pre_attn_scalar=None,
                    attn_logit_softcapping=None, final_logit_softcapping=None, sliding_rope_theta=None)
    eagle1 = recipe.kind == "eagle1"
    return EagleHeadConfig(
        dialect=EAGLE1 if eagle1 else "eagle3-native", dialect_reason="fitted", layer=layer, num_layers=1,
        vocab_size=target_cfg.vocab_size, draft_vocab_size=recipe.draft_vocab_size or target_cfg.vocab_size,
        target_hidden_size=target_cfg.hidden_size, fc_bias=recipe.fc_bias,
        norm_before_residual=recipe.norm_before_residual, norm_output=False,
        aux=None if eagle1 else AuxLayerSpec(recipe.aux_hf_indices, "fitted", HIDDEN_STATES_INDEX),
    )


def _greedy_sequences(target_dir: str, recipe: FitRecipe) -> torch.Tensor:
    """[N, prompt_len + gen_len]: gsm8k train prompts and the target's greedy continuations (HF generate)."""
    from tests.support.tiny_models import gsm8k_questions, load_tiny_tokenizer
    from transformers import AutoModelForCausalLM

    tok = load_tiny_tokenizer()
    prompts = [ids[: recipe.prompt_len] for ids in (tok(q)["input_ids"] for q in gsm8k_questions("train"))
               if len(ids) >= recipe.prompt_len][: recipe.num_prompts]
    hf = AutoModelForCausalLM.from_pretrained(target_dir, dtype=torch.float32).eval()
    hf.generation_config.eos_token_id = None
    x = torch.tensor(prompts)
    with torch.no_grad():
        return hf.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=recipe.gen_len, do_sample=False,
                           pad_token_id=0)


_DATA: dict[tuple, tuple] = {}  # heads fitted on the same target and features share one data set


def _training_data(target_dir: str, recipe: FitRecipe):
    """(tokens [N, T], features [N, T, F], target logits [N, T, V], target DecoderLM)."""
    key = (target_dir, recipe.kind, recipe.aux_hf_indices, recipe.num_prompts, recipe.prompt_len, recipe.gen_len)
    if key not in _DATA:
        _DATA[key] = _compute_training_data(target_dir, recipe)
    return _DATA[key]


def _compute_training_data(target_dir: str, recipe: FitRecipe):
    from specbench.models.loader import load_model

    tokens = _greedy_sequences(target_dir, recipe)
    model = load_model(target_dir, dtype=torch.float32, device="cpu", attn_backend="torch").model
    n, t = tokens.shape
    blocks_per_seq = -(-t // 16)
    md = build_metadata(positions=list(range(t)) * n, num_query=[t] * n, seq_lens=[t] * n,
                        block_tables=[list(range(i * blocks_per_seq, (i + 1) * blocks_per_seq)) for i in range(n)],
                        block_size=16, device=torch.device("cpu"))
    kv = KVCache(model.kv_cache_spec(), n * blocks_per_seq, 16, torch.device("cpu"))
    with torch.inference_mode():  # the features exactly as the engine's target runner captures them
        out = model(tokens.reshape(-1), md, kv, aux_layer_ids=recipe.aux_hf_indices, phase="fit")
        feats = out.hidden_states if recipe.kind == "eagle1" else out.aux_hidden_states
        logits = model.compute_logits(out.hidden_states)
    return tokens, feats.reshape(n, t, -1).clone(), logits.reshape(n, t, -1).clone(), model


def fit_head(target_dir: str, recipe: FitRecipe) -> dict[str, torch.Tensor]:
    """Canonical-name tensors of a fitted head (plus d2t/t2d for a reduced draft vocabulary)."""
    torch.manual_seed(recipe.seed)
    tokens, feats, logits, model = _training_data(target_dir, recipe)
    cfg = head_config(model.config, recipe)
    mapping = _draft_vocab(tokens, logits, cfg)  # [draft_vocab] target ids, or None
    attn = UnrolledAttention(recipe.batch, tokens.shape[1])
    head = _new_head(cfg, recipe, model, mapping, attn)
    # labels[n, t]: the target's greedy token after position t as a draft id (-100 when outside the draft vocab)
    draft_index = torch.full((cfg.vocab_size,), -100, dtype=torch.int64)
    draft_index[torch.arange(cfg.vocab_size) if mapping is None else mapping] = torch.arange(cfg.draft_vocab_size)
    _train(head, attn, recipe, tokens, feats, draft_index[logits.argmax(-1)])
    return export_tensors(head, mapping)


def random_head_tensors(target_cfg: ModelConfig, recipe: FitRecipe) -> dict[str, torch.Tensor]:
    """Unfitted tensors with the recipe's shapes (draft vocab = every other target id), for load tests."""
    cfg = head_config(target_cfg, recipe)
    head = _new_head(cfg, recipe, None, None, None)
    reduced = cfg.draft_vocab_size < cfg.vocab_size
    return export_tensors(head, torch.arange(cfg.draft_vocab_size) * 2 if reduced else None)


def export_tensors(head: EagleHead, mapping: torch.Tensor | None) -> dict[str, torch.Tensor]:
    """Canonical checkpoint tensors of a head, plus d2t/t2d when `mapping` (draft id -> target id) is given."""
    targets = head.checkpoint_targets()
    tensors = {name: param[start:end].detach().clone() for name, (param, start, end) in targets.items()}
    if mapping is not None:
        tensors["d2t"] = mapping - torch.arange(len(mapping))  # offsets: target id = draft id + d2t[draft id]
        tensors["t2d"] = torch.zeros(head.config.vocab_size, dtype=torch.bool).index_fill_(0, mapping, True)
    return tensors


def _new_head(cfg: EagleHeadConfig, recipe: FitRecipe, model, mapping, attn) -> EagleHead:
    """A randomly initialised head; with the target `model` bound (and EAGLE-3 output started from it)."""
    eagle1 = recipe.kind == "eagle1"
    fc_in = (2 if eagle1 else len(recipe.aux_hf_indices)) * cfg.target_hidden_size
    head = EagleHead(HeadShape(cfg, fc_in, has_own_embed=False, has_own_lm_head=not eagle1), attn,
                     torch.float32, "cpu")
    _init(head, recipe.seed)
    if model is None:
        return head
    head.bind_target(model.embed_weight, model.lm_head_weight)
    if not eagle1:  # start the head's own output from the target's (restricted to the draft vocab)
        with torch.no_grad():
            head.norm.weight.copy_(model.norm.weight)
            head.lm_head.weight.copy_(model.lm_head_weight if mapping is None else model.lm_head_weight[mapping])
    return head


def _train(head: EagleHead, attn: UnrolledAttention, recipe: FitRecipe, tokens, feats, labels) -> None:
    """tokens/labels [N, T], feats [N, T, F]: Adam over unrolled drafting from every base position."""
    n, t = tokens.shape
    params = list(head.parameters())
    for p in params:
        p.requires_grad_(True)
    opt = torch.optim.Adam(params, lr=recipe.lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, recipe.steps)
    gen = torch.Generator().manual_seed(recipe.seed)
    base = torch.arange(t)
    for _step in range(recipe.steps):
        idx = torch.randint(0, n, (recipe.batch,), generator=gen)
        attn.reset()
        hidden = head.project_target_features(feats[idx].reshape(recipe.batch * t, -1))
        loss = 0.0
        for s in range(recipe.unroll):
            src = base + 1 + s  # step s at base t reads token t+1+s and predicts like the target at t+1+s
            is_valid = src < t  # [T]
            src = src.clamp(max=t - 1)
            md = _PositionsOnly((base + s).repeat(recipe.batch), t + s)
            out = head(tokens[idx][:, src].reshape(-1), hidden, md, None, phase="fit")
            step_labels = torch.where(is_valid, labels[idx][:, src], -100).reshape(-1)
            loss = loss + F.cross_entropy(head.compute_logits(out.logits_input), step_labels)
            if recipe.kind == "eagle1":  # the EAGLE-1 head's output stands in for the target feature at t+1+s
                reg = F.smooth_l1_loss(out.hidden.view(recipe.batch, t, -1), feats[idx][:, src], reduction="none")
                loss = loss + (reg.mean(-1) * is_valid).sum() / (is_valid.sum() * recipe.batch)
            hidden = out.hidden
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()


@torch.no_grad()
def _init(head: EagleHead, seed: int) -> None:
    # Random norm weights and biases (as in tiny_models), so a head loaded without its fc bias or with a
    # swapped norm measurably changes its drafts.
    gen = torch.Generator().manual_seed(seed)
    for name, param in sorted(head.named_parameters()):
        if name.endswith("norm.weight"):
            param.copy_(1.0 + 0.2 * torch.randn(param.shape, generator=gen))
        elif name.endswith(".bias"):
            param.copy_(0.5 * torch.randn(param.shape, generator=gen))
        else:
            param.copy_(torch.randn(param.shape, generator=gen) / param.shape[1] ** 0.5)


def _draft_vocab(tokens: torch.Tensor, logits: torch.Tensor, cfg: EagleHeadConfig) -> torch.Tensor | None:
    """The draft_vocab_size target ids the target predicts most often, sorted; None for the full vocabulary."""
    if cfg.draft_vocab_size == cfg.vocab_size:
        return None
    counts = torch.bincount(logits.argmax(-1).reshape(-1), minlength=cfg.vocab_size).float()
    counts += torch.bincount(tokens.reshape(-1), minlength=cfg.vocab_size).float() * 1e-3  # break ties by text
    return counts.topk(cfg.draft_vocab_size).indices.sort().values
