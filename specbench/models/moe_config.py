"""The shape and routing of one mixture-of-experts MLP layer, as the architectures of 2026 combine them.

| architecture    | scoring       | norm_topk_prob | scaling | router bias | correction bias | expert bias + activation | shared expert      |
|-----------------|---------------|----------------|---------|-------------|-----------------|--------------------------|--------------------|
| Mixtral         | softmax       | yes            | 1.0     | no          | no              | no, silu                 | none               |
| Qwen3-MoE       | softmax       | config (yes)   | 1.0     | no          | no              | no, silu                 | none               |
| Qwen2-MoE       | softmax       | config (no)    | 1.0     | no          | no              | no, silu                 | one, sigmoid-gated |
| gpt-oss         | topk_softmax  | (implied)      | 1.0     | yes         | no              | yes, swiglu_oai          | none               |
| GLM-4.5 / 4.7   | sigmoid       | yes            | 2.5     | no          | yes             | no, silu                 | one, ungated       |
| DeepSeek-V3     | sigmoid       | yes            | 2.5     | no          | yes             | no, silu                 | one, ungated       |

GLM-4.5 routes with one expert group (n_group = topk_group = 1); DeepSeek-V3's group-limited selection (n_group 8,
topk_group 4) is not modelled here: the config has no groups, so such a checkpoint must be refused by its loader.
"""

from __future__ import annotations

from dataclasses import dataclass

from specbench.errors import SpecbenchError

# softmax:      softmax over all experts' logits, then the top k of the probabilities (Mixtral, Qwen).
# sigmoid:      independent sigmoid scores; selection may add the correction bias (DeepSeek-V3, GLM-4.5).
# topk_softmax: the top k of the logits, then a softmax over those k alone (gpt-oss).
SCORINGS = ("softmax", "sigmoid", "topk_softmax")
# silu:       silu(gate) * up (every architecture above but gpt-oss).
# swiglu_oai: gpt-oss's clamped variant, (clamp(up, -limit, limit) + 1) * g * sigmoid(alpha * g), g = min(gate, limit).
ACTIVATIONS = ("silu", "swiglu_oai")


@dataclass(frozen=True)
class MoeConfig:
    hidden_size: int
    num_experts: int
    num_experts_per_tok: int  # top k
    moe_intermediate_size: int  # each routed expert's gate (and up) width
    scoring: str = "softmax"  # one of SCORINGS
    norm_topk_prob: bool = True  # the k selected weights are divided by their sum
    routed_scaling_factor: float = 1.0  # multiplies the routed experts' weights after any renormalisation
    has_router_bias: bool = False  # the router is Linear(hidden, num_experts) with a bias (gpt-oss)
    # A per-expert bias added to the scores for selection only; the weights come from the unbiased scores.
    has_score_correction_bias: bool = False
    has_expert_bias: bool = False  # gate_up and down projections of each expert have biases (gpt-oss)
    activation: str = "silu"  # one of ACTIVATIONS
    swiglu_alpha: float = 1.702  # swiglu_oai only
    swiglu_limit: float = 7.0  # swiglu_oai only
    shared_intermediate_size: int = 0  # 0: no shared expert; else one always-on silu MLP this wide
    is_shared_expert_gated: bool = False  # the shared expert's output is scaled by sigmoid(x @ w) (Qwen2-MoE)

    def __post_init__(self) -> None:
        if self.scoring not in SCORINGS:
            raise SpecbenchError(f"unknown MoE scoring {self.scoring!r}; supported: {', '.join(SCORINGS)}")
        if self.activation not in ACTIVATIONS:
            raise SpecbenchError(f"unknown MoE activation {self.activation!r}; supported: {', '.join(ACTIVATIONS)}")
        if not 1 <= self.num_experts_per_tok <= self.num_experts:
            raise SpecbenchError(f"MoE top-k {self.num_experts_per_tok} must be in [1, {self.num_experts}]")
        if self.scoring == "topk_softmax" and self.norm_topk_prob:
            # Its k weights already sum to one: a second way of saying the same thing would be a second fact.
            raise SpecbenchError("MoE scoring topk_softmax already normalises the top k: set norm_topk_prob=False")
        if self.has_score_correction_bias and self.scoring != "sigmoid":
            raise SpecbenchError("the MoE score-correction bias goes with sigmoid scoring (DeepSeek-V3, GLM-4.5)")
        if self.is_shared_expert_gated and not self.shared_intermediate_size:
            raise SpecbenchError("a gated shared expert needs shared_intermediate_size > 0")
        if min(self.hidden_size, self.moe_intermediate_size) < 1:
            raise SpecbenchError(f"MoE widths must be positive, got hidden {self.hidden_size}, "
                                 f"intermediate {self.moe_intermediate_size}")

    @property
    def has_shared_expert(self) -> bool:
        return self.shared_intermediate_size > 0

    def num_params_per_expert(self) -> int:
        """One routed expert's gate, up and down projections (and their biases)."""
        h, inter = self.hidden_size, self.moe_intermediate_size
        return 3 * h * inter + ((2 * inter + h) if self.has_expert_bias else 0)

    def num_params(self) -> int:
        """Parameters of one such layer: router, every routed expert, the shared expert (its gate included)."""
        h, e = self.hidden_size, self.num_experts
        router = e * h + (e if self.has_router_bias else 0)
        shared = 3 * h * self.shared_intermediate_size + (h if self.is_shared_expert_gated else 0)
        return router + e * self.num_params_per_expert() + shared

    def num_active_params(self) -> int:
        """Parameters one token reads: router, its k experts, the shared expert (what bounds a c=1 decode step)."""
        return self.num_params() - (self.num_experts - self.num_experts_per_tok) * self.num_params_per_expert()
