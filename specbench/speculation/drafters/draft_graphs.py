"""What a drafter's CUDA graphs share, whichever model drafts (draft LM, EAGLE/MTP head): the draft-decode step
graphs (one query per request, every batch bucket of the plan), the plan the drafter's other graphs (whole rounds,
tree drafts) are captured from, and the pause that makes every round draft eagerly for a while (the captured graphs
are kept for afterwards). Each drafter holds one and keeps what only it captures (EAGLE's whole-round graphs, each
drafter's tree graphs)."""

from __future__ import annotations

from collections.abc import Callable

import torch

from specbench.attention.metadata import AttentionMetadata
from specbench.execution_paths import PathRecorder
from specbench.runtime.cuda_graph import CudaGraphRunner, GraphForward, GraphPlan, GraphShape
from specbench.runtime.hooks import PhaseHooks
from specbench.speculation.tree.plan import TreePlan


class DraftGraphs:
    def __init__(self, hooks: PhaseHooks) -> None:
        self.hooks = hooks  # the drafter's: hooks that draft phase by phase replay no round or tree graph
        self.plan: GraphPlan | None = None  # set once CUDA graphs are enabled
        self.steps: CudaGraphRunner | None = None  # the draft-decode step graphs; None until enabled, or paused
        self._paused_steps: CudaGraphRunner | None = None  # `steps` while pause(True) holds them
        self.is_paused = False  # pause(True): tree rounds skip their graphs too

    def enable(self, plan: GraphPlan, forward: GraphForward, *, name: str,
               check_metadata: Callable[[AttentionMetadata, str], None], paths: PathRecorder,
               hidden_size: int | None = None, hidden_dtype: torch.dtype = torch.bfloat16) -> None:
        """Capture `forward` (one draft-decode step; `hidden_size` when it is fed a hidden state) for every batch
        bucket of `plan`, and keep `plan` for the drafter's other graphs."""
        self.plan = plan
        self.steps = CudaGraphRunner(forward, plan, name=name, max_query_len=1, check_metadata=check_metadata,
                                     paths=paths, hidden_size=hidden_size, hidden_dtype=hidden_dtype)
        self.steps.capture(1)

    def run_step(self, md: AttentionMetadata, input_ids: torch.Tensor, hidden: torch.Tensor | None,
                 eager: Callable[[], tuple[torch.Tensor, ...]], *, where: str, paths: PathRecorder,
                 graph_path: str) -> tuple[torch.Tensor, ...]:
        """One draft-decode step (metadata `md`; `hidden` [num_reqs, H] or None): replayed from its graph, recording
        `graph_path`, where one was captured for this batch, else `eager()`. A replay's outputs are views of the
        graph's static outputs, valid until its next replay."""
        shape: GraphShape | None = None if self.steps is None else self.steps.shape_for(md)
        if shape is None:
            return eager()
        paths.record(graph_path)
        return self.steps.replay(shape, input_ids, md, hidden, where=where)

    def pause(self, is_paused: bool) -> None:
        """While paused every draft step and tree round runs eagerly; the captured graphs are kept."""
        self.is_paused = is_paused
        if is_paused and self.steps is not None:
            self._paused_steps, self.steps = self.steps, None
        elif not is_paused and self._paused_steps is not None:
            self.steps, self._paused_steps = self._paused_steps, None

    def captures_tree(self, plan: TreePlan, captured: dict[TreePlan, object]) -> bool:
        """Whether to capture the tree draft of `plan` now: graphs are enabled, the plan has draft steps, it is not in
        `captured` yet, and the hooks do not draft phase by phase."""
        return self.plan is not None and plan.depth >= 2 and plan not in captured and not self.hooks.eager_drafting

    def replays_trees(self, is_recording: bool) -> bool:
        """Tree rounds may replay their graphs: not paused, no hooks that draft phase by phase, and no oracle
        recorder attached (`is_recording`: it records the eager run of the code the graphs captured,
        tree/records.py)."""
        return not self.is_paused and not self.hooks.eager_drafting and not is_recording
