"""The attention-kind plug point: each layer's kind is declared by the model config; one builder per kind makes that
kind's metadata for every forward; backends implement kinds (they declare which: every key-window kind, and the kinds
they name in `supported_kinds`; they read the kind metadata of the layer they run through its methods).

A kind's class owns its facts: its name, the Hugging Face `layer_types` entries it stands for, its builder, whether
masking kernels attend it, what it releases of the KV cache, and its debug invariant (INV-KIND). Adding a kind = a
class here registered with `register_kind` and its metadata (a KindMetadata subclass), kernels unless it is a key
window (then every masking backend attends it as is), and tests (docs/attention-kinds.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Protocol, TypeVar

from specbench.attention.invariant_violation import InvariantViolation
from specbench.attention.kind_metadata import FullAttentionMetadata, KindMetadata, WindowMetadata
from specbench.attention.metadata import AttentionMetadata
from specbench.attention.window import check_window, first_visible_keys
from specbench.errors import SpecbenchError
from specbench.registry import Registry


class AttentionKind(Protocol):
    name: ClassVar[str]  # registry name; a backend with a kernel of its own for the kind lists it in `supported_kinds`
    hf_layer_types: ClassVar[tuple[str, ...]]  # the Hugging Face `layer_types` entries this kind stands for
    # Every query sees every earlier key: the kind's metadata adds nothing to the causal contract (a model whose
    # layers are all such skips building kind metadata).
    is_full: ClassVar[bool]
    # The kind's metadata is a window over the causal keys (its key_window() says all a masking kernel needs): every
    # backend that attends key windows attends it with no kernel of its own.
    is_key_window: ClassVar[bool]
    # The layer mixes tokens through a per-request state, not the paged KV (recurrent_kind.py): no attention backend
    # is involved, and the engine keeps a state slot per request for it.
    is_recurrent_state: ClassVar[bool]
    # The layer verifies a draft tree (each node sees its own path: a tree mask, or its parent's state).
    verifies_trees: ClassVar[bool]

    @classmethod
    def from_hf(cls, sliding_window: int) -> AttentionKind:
        """This kind for a layer an HF config lists as one of `hf_layer_types`; `sliding_window` is the config's
        window, resolved by the architecture's rule (models/config_attention.py)."""

    @property
    def kv_window(self) -> int | None:
        """A query of this layer sees at most its kv_window latest keys, itself included (the scheduler may release
        KV blocks no future query sees); None: every key stays visible."""

    def build(self, md: AttentionMetadata) -> KindMetadata:
        """This kind's metadata for the forward `md` describes, from its device tensors only (no host sync, so a
        CUDA graph captures the builder and every replay rebuilds it from the replay's own positions)."""

    def check(self, built: KindMetadata, md: AttentionMetadata, layer: int, where: str) -> None:
        """INV-KIND (debug invariant) for `built`, this kind's metadata of `md`, against an independent
        recomputation from the requests' lengths; raises InvariantViolation naming `where` and `layer`."""


ATTENTION_KINDS: Registry[AttentionKind] = Registry("attention kind")
HF_LAYER_TYPES: Registry[AttentionKind] = Registry("attention layer type")  # HF `layer_types` entry -> kind class

K = TypeVar("K")


KIND_FLAGS = ("is_full", "is_key_window", "is_recurrent_state", "verifies_trees")  # AttentionKind's ClassVar[bool]s


def register_kind(cls: type[K]) -> type[K]:
    """Class decorator: `cls` under its name and under each HF layer type it stands for; a kind that leaves one of
    the protocol's flags undeclared fails here, naming it (never later as an AttributeError mid-load)."""
    missing = [flag for flag in KIND_FLAGS if not isinstance(getattr(cls, flag, None), bool)]
    if missing:
        raise SpecbenchError(f"attention kind {cls.__name__} declares no {', '.join(missing)} "
                             f"(ClassVar[bool]; AttentionKind says what each means)")
    ATTENTION_KINDS.register(cls.name)(cls)
    for layer_type in cls.hf_layer_types:
        HF_LAYER_TYPES.register(layer_type)(cls)
    return cls


def kind_of_hf_layer_type(layer_type: str) -> type[AttentionKind]:
    """The kind class an HF `layer_types` entry stands for; unknown entries fail naming the supported ones."""
    if layer_type not in HF_LAYER_TYPES:
        raise SpecbenchError(f"unsupported attention layer type {layer_type!r}; "
                             f"supported: {', '.join(HF_LAYER_TYPES.supported())}")
    return HF_LAYER_TYPES.get(layer_type)


@register_kind
@dataclass(frozen=True)
class FullAttention:
    name: ClassVar[str] = "full"
    hf_layer_types: ClassVar[tuple[str, ...]] = ("full_attention",)
    is_full: ClassVar[bool] = True
    is_key_window: ClassVar[bool] = True  # no window: key_window() is None
    is_recurrent_state: ClassVar[bool] = False
    verifies_trees: ClassVar[bool] = True

    @classmethod
    def from_hf(cls, sliding_window: int) -> FullAttention:
        return cls()

    def __str__(self) -> str:
        return "full attention"

    @property
    def kv_window(self) -> int | None:
        return None

    def build(self, md: AttentionMetadata) -> KindMetadata:
        return _FULL

    def check(self, built: KindMetadata, md: AttentionMetadata, layer: int, where: str) -> None:
        pass  # nothing beyond the causal contract, which INV-0 checks


@register_kind
@dataclass(frozen=True)
class SlidingWindowAttention:
    window: int  # keys each query sees, itself included (HF `sliding_window`)
    name: ClassVar[str] = "sliding_window"
    hf_layer_types: ClassVar[tuple[str, ...]] = ("sliding_attention",)
    is_full: ClassVar[bool] = False
    is_key_window: ClassVar[bool] = True
    is_recurrent_state: ClassVar[bool] = False
    verifies_trees: ClassVar[bool] = False  # the tree kernels mask paths, not windows

    def __post_init__(self) -> None:
        check_window(self.window)

    @classmethod
    def from_hf(cls, sliding_window: int) -> SlidingWindowAttention:
        return cls(sliding_window)

    def __str__(self) -> str:
        return f"a window of {self.window} keys"

    @property
    def kv_window(self) -> int | None:
        return self.window

    def build(self, md: AttentionMetadata) -> KindMetadata:
        # positions[t] is query t's own position (INV-0), so its window starts w - 1 keys before it.
        starts = (md.positions - (self.window - 1)).clamp_(min=0).to(md.seq_lens.dtype)  # [num_tokens] int32
        return WindowMetadata(self, window_starts=starts)

    def check(self, built: KindMetadata, md: AttentionMetadata, layer: int, where: str) -> None:
        """Query j of request r sits at p = seq_lens[r] - num_query[r] + j (from the request's lengths, not from
        `positions` nor from the builder) and must see keys from first_visible_key(p, w) on. Catches a window carried
        over from another forward (a draft step reusing step 1's) and a window start off by one."""
        expected = first_visible_keys(md.query_start_loc_cpu, md.seq_lens_cpu, self.window)
        starts = built.window_starts.view(-1).tolist()  # a WindowMetadata: the caller checked built.kind == self
        if starts != expected:
            t = next(i for i, (a, b) in enumerate(zip(starts, expected)) if a != b) if len(starts) == len(
                expected) else 0
            raise InvariantViolation(
                f"{where}: INV-KIND violated: layer {layer} (window {self.window}) query token {t} starts its window "
                f"at key {starts[t] if starts else None}, its position says {expected[t] if expected else None}")


_FULL = FullAttentionMetadata(FullAttention())
