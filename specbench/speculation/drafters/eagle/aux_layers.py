"""Resolve an EAGLE-3 head's aux-layer ids to the HF `hidden_states` indices the target captures.

"hidden-states-index" (vLLM, speculators): id i is HF hidden_states[i], the input of decoder layer i.
"layer-output" (SGLang, SpecForge nested eagle_config): id i is the output of layer i = hidden_states[i + 1].
"""

from __future__ import annotations

from dataclasses import dataclass

from specbench.config import EAGLE_AUX_CONVENTIONS as CONVENTIONS
from specbench.errors import SpecbenchError
from specbench.speculation.drafters.eagle.config import HIDDEN_STATES_INDEX, AuxLayerSpec

AUTO = "auto"


@dataclass(frozen=True)
class AuxLayerResolution:
    ids: tuple[int, ...]  # [num_aux] as given (override, checkpoint, or the reference default)
    source: str  # where the ids came from
    requested_convention: str  # the --eagle-aux-convention flag
    convention: str  # the convention applied: HIDDEN_STATES_INDEX | LAYER_OUTPUT
    hf_indices: tuple[int, ...]  # [num_aux] HF hidden_states indices, in concatenation order

    def describe(self) -> dict[str, object]:
        return {
            "ids": list(self.ids),
            "source": self.source,
            "requested_convention": self.requested_convention,
            "convention": self.convention,
            "hf_hidden_states_indices": list(self.hf_indices),
        }


def default_aux_ids(num_target_layers: int) -> tuple[int, ...]:
    """The EAGLE reference's low/mid/high choice, as HF hidden_states indices."""
    n = num_target_layers
    return (2, n // 2, n - 3)


def resolve_aux_layers(
    spec: AuxLayerSpec,
    override_ids: tuple[int, ...] | None,
    requested: str,
    num_target_layers: int,
) -> AuxLayerResolution:
    """Override ids are read in the checkpoint field's convention unless `requested` names one."""
    if requested not in CONVENTIONS:
        raise SpecbenchError(f"unknown EAGLE aux-layer convention {requested!r}; supported: {', '.join(CONVENTIONS)}")
    if override_ids is not None:
        ids, source = tuple(override_ids), "override (--eagle-aux-layer-ids)"
    elif spec.ids is not None:
        ids, source = spec.ids, f"checkpoint {spec.source}"
    else:
        ids, source = default_aux_ids(num_target_layers), "default (2, L//2, L-3) of the EAGLE reference"
    if not ids:
        raise SpecbenchError("EAGLE-3 aux-layer ids must not be empty")
    convention = spec.convention if requested == AUTO else requested
    hf_indices = ids if convention == HIDDEN_STATES_INDEX else tuple(i + 1 for i in ids)
    bad = [i for i in hf_indices if not 0 <= i <= num_target_layers]
    if bad:
        raise SpecbenchError(
            f"EAGLE-3 aux-layer ids {list(ids)} ({source}) read as {convention} give hidden_states indices "
            f"{list(hf_indices)}, outside [0, {num_target_layers}] for a {num_target_layers}-layer target; "
            "check --eagle-aux-convention"
        )
    return AuxLayerResolution(ids, source, requested, convention, hf_indices)
