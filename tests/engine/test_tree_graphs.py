"""Tree verify CUDA graphs (runtime/cuda_graph.py TreeBuffers, engine/model_runner.py prepare_tree_graphs): the
static tree buffers hold the real mask and its packed words before a replay and causal padding after, a batch picks
the runner of its kind and query length, and a graphed tree engine reproduces the eager one token for token.

On CPU the runners "replay" by rerunning the forward on their static buffers through the Triton interpreter (the
Triton tree kernel reads the packed static buffer), which tests everything but the capture itself; on a GPU the same
tests replay real graphs (tests/engine/test_tree_cuda.py has the default CUDA engine).
"""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("triton")

from tests.support.kernel_testing import RERUN_REASON, kernels_runnable_here  # noqa: E402

pytestmark = pytest.mark.skipif(not kernels_runnable_here(), reason=RERUN_REASON)

from specbench import LLM, SamplingParams  # noqa: E402
from specbench.attention.tree_mask import build_tree_metadata  # noqa: E402
from specbench.engine.builder import capture_graphs, graph_plan  # noqa: E402
from specbench.engine.model_runner import tree_graph_plan  # noqa: E402
from specbench.kernels.tree_attention import pack_tree_mask  # noqa: E402
from specbench.runtime.cuda_graph import GraphPlan, GraphShape, StaticBuffers  # noqa: E402
from specbench.speculation.draft_shape import DraftShape  # noqa: E402
from specbench.speculation.tree.draft_tree import tree_from_parents, verify_attention_mask  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
PARENTS = [[-1, -1, 0, 1], [-1, 0, 0, 2]]  # two requests, 4 nodes each: 5 verify rows per request


def _tree_md(block_size: int = 4):
    tree = tree_from_parents([[5, 6, 7, 8], [9, 10, 11, 12]], PARENTS)
    mask = verify_attention_mask(tree)  # [10, 5]
    depths = tree.depth.tolist()
    positions, storage = [], []
    for r, prefix in enumerate((7, 3)):
        positions += [prefix, *(prefix + 1 + d for d in depths[4 * r: 4 * r + 4])]
        storage += range(prefix, prefix + 5)
    return build_tree_metadata(positions=positions, storage_positions=storage, num_query=[5, 5],
                               num_tree_rows=[5, 5], seq_lens=[12, 8], mask=mask,
                               block_tables=[[0, 1, 2], [3, 4]], block_size=block_size, device=torch.device(DEVICE))


def test_tree_buffers_load_real_masks_and_pad_causally():
    buf = StaticBuffers(4, 5, 6, None, torch.float32, torch.device(DEVICE), is_tree=True)
    shape = GraphShape(4, 5)
    md = _tree_md()
    buf.load(shape, torch.zeros(10, dtype=torch.int64, device=DEVICE), md, None)
    causal = torch.ones(5, 5, dtype=torch.bool).tril()
    expected = torch.cat([md.tree.mask_cpu, causal, causal]).to(DEVICE)  # requests 2, 3: padding
    assert torch.equal(buf.tree.mask[:20], expected)
    assert torch.equal(buf.tree.packed[:20], pack_tree_mask(expected))
    graph_md = buf.metadata(shape, 4)
    tree = graph_md.tree
    assert tree.is_verify and tree.num_tree_rows == (5,) * 4
    assert tree.packed.data_ptr() == buf.tree.packed.data_ptr()  # views of the static buffers: what a graph reads
    assert tree.mask.data_ptr() == buf.tree.mask.data_ptr()
    # a smaller batch of the same bucket: the stale request-1 rows become padding again
    one = _tree_md()
    single = build_tree_metadata(positions=list(one.positions_cpu[:5]), storage_positions=list(range(7, 12)),
                                 num_query=[5], num_tree_rows=[5], seq_lens=[12], mask=one.tree.mask_cpu[:5],
                                 block_tables=[[0, 1, 2]], block_size=4, device=torch.device(DEVICE))
    buf.load(shape, torch.zeros(5, dtype=torch.int64, device=DEVICE), single, None)
    expected = torch.cat([one.tree.mask_cpu[:5], causal, causal, causal]).to(DEVICE)
    assert torch.equal(buf.tree.mask[:20], expected)
    assert torch.equal(buf.tree.packed[:20], pack_tree_mask(expected))
    assert buf.slot_mapping[5:20].eq(-1).all()


def test_reset_gives_a_valid_padding_batch():
    buf = StaticBuffers(2, 5, 6, None, torch.float32, torch.device(DEVICE), is_tree=True)
    buf.tree.mask.fill_(True)
    buf.reset(GraphShape(2, 5))
    causal = torch.ones(5, 5, dtype=torch.bool).tril().to(DEVICE)
    assert torch.equal(buf.tree.mask[:10], torch.cat([causal, causal]))
    assert buf.metadata(GraphShape(2, 5), 4).tree.num_tree_rows == (5, 5)


def test_causal_buffers_have_no_tree_part():
    buf = StaticBuffers(2, 4, 6, None, torch.float32, torch.device(DEVICE))
    assert buf.tree is None and buf.metadata(GraphShape(2, 4), 4).tree is None


def test_tree_graph_plan_widens_block_tables_only():
    plan = GraphPlan(max_num_reqs=8, max_blocks_per_req=10, max_positions=38, block_size=4, device=torch.device("cpu"))
    tree = tree_graph_plan(plan, 9)
    assert tree.max_blocks_per_req == 12 and tree.max_positions == 38  # ceil(47 / 4); RoPE tables never grow
    assert (tree.max_num_reqs, tree.block_size) == (8, 4)


def _build(tiny_pair, graphs: bool) -> LLM:
    target, draft = tiny_pair
    llm = LLM(target, method="draft", draft=draft, max_num_steps=3, dtype="fp32", device=DEVICE, block_size=4,
              max_concurrency=3, num_kv_blocks=96, attention_backend="triton", enforce_eager=True)
    if graphs:
        engine = llm.engine
        capture_graphs(graph_plan(llm.config, engine.device, engine.stop_checker.max_model_len), engine.runner,
                       engine.proposer, llm.config.max_num_steps)
    return llm


def test_batches_pick_the_runner_of_their_kind(tiny_pair):
    llm = _build(tiny_pair, graphs=True)
    runner = llm.engine.runner
    assert runner.tree_graphs == {}
    llm.engine.set_draft_shape(DraftShape(2, 4))  # k = 3: 4 nodes, 5 rows per request
    assert set(runner.tree_graphs) == {5} and runner.tree_graphs[5].is_tree
    assert runner.tree_graphs[5].num_graphs == len(runner.tree_graphs[5].buckets)
    md = _tree_md()
    tree_runner, shape = runner.graph_for(md)
    assert tree_runner is runner.tree_graphs[5] and shape == GraphShape(2, 5)
    assert runner.graphs.shape_for(md) is None  # the causal runner never takes a tree forward
    llm.engine.set_num_steps(2)  # k = 2: every candidate of top-2 x 2 steps (6) > 4 nodes: still 5 rows
    assert set(runner.tree_graphs) == {5}
    llm.engine.set_draft_shape(DraftShape(2, 3))
    assert set(runner.tree_graphs) == {4, 5}
    assert runner.graph_for(md)[0] is runner.tree_graphs[5]  # each query length its own runner
    saved, runner.graphs = runner.graphs, None  # GraphsOff: tree graphs are off with the rest
    assert runner.graph_for(md) is None
    runner.graphs = saved


def _run(llm: LLM, prompts, lengths):
    params = [SamplingParams(max_tokens=n, ignore_eos=True) for n in lengths]
    outs = llm.generate(prompts, params)
    return [(list(o.output_token_ids), o.stats.num_accepted_tokens, o.stats.num_draft_rounds) for o in outs]


@pytest.mark.slow  # graphs captured and rerun through the interpreter on CPU
def test_graphed_tree_rounds_match_eager(tiny_pair, prompt_ids):
    """Greedy fp32, 3 ragged requests (buckets 3, 2, 1 as they finish): the same tokens and acceptance graphed and
    eager, the graphed engine replaying tree graphs for its tree verifies."""
    prompts, lengths = prompt_ids[:3], [10, 16, 7]
    eager = _build(tiny_pair, graphs=False)
    eager.engine.set_draft_shape(DraftShape(2, 4))
    graphed = _build(tiny_pair, graphs=True)
    graphed.engine.set_draft_shape(DraftShape(2, 4))
    assert _run(graphed, prompts, lengths) == _run(eager, prompts, lengths)
    taken = graphed.engine.paths_taken()
    assert {"graph.verify_tree", "spec.tree_round", "attention.tree_triton"} <= taken
    assert graphed.engine.runner.tree_graphs[5].num_replays > 0
    assert "graph.verify_tree" not in eager.engine.paths_taken()


def test_inv_tree_checks_the_verify_flag_and_packed_rows():
    """The Triton backend trusts TreeMask.is_verify (graph metadata has no host views): the debug invariants check it
    against the layout, and the packed words' row count against the queries."""
    import dataclasses

    from specbench.attention.invariant_violation import InvariantViolation
    from specbench.attention.tree_mask import check_tree_positions_and_slots

    md = _tree_md()
    check_tree_positions_and_slots(md, "verify")
    assert md.tree.is_verify
    with pytest.raises(InvariantViolation, match="is_verify False"):
        check_tree_positions_and_slots(dataclasses.replace(md, tree=dataclasses.replace(md.tree, is_verify=False)))
    short = dataclasses.replace(md.tree, packed=pack_tree_mask(md.tree.mask[:4]))
    with pytest.raises(InvariantViolation, match="packed mask has 4 rows for 10 queries"):
        check_tree_positions_and_slots(dataclasses.replace(md, tree=short))


@pytest.mark.slow  # ~5 s under the Triton interpreter: the not-slow loop stays under 5 min
def test_eagle3_tree_draft_steps_on_the_triton_kernel_match_torch(tmp_path, prompt_ids):
    """An EAGLE-3-shaped head (the bench's drafter) drafting trees with its draft steps on the Triton tree kernel
    (tree rows > queries) and on the torch reference: the same greedy tokens and acceptance, graphs on for Triton."""
    from specbench.models.presets import get_preset
    from specbench.speculation.drafters.eagle.dummy import write_dummy_eagle3_head

    head = write_dummy_eagle3_head(get_preset("tiny-llama"), tmp_path / "head", draft_vocab_size=512)
    runs, engines = [], []
    for backend in ("torch", "triton"):
        llm = LLM("tiny-llama", load_format="dummy", dtype="fp32", device=DEVICE, method="eagle3", draft=str(head),
                  max_num_steps=3, max_concurrency=2, num_kv_blocks=128, block_size=4, attention_backend=backend,
                  enforce_eager=True)
        if backend == "triton":
            engine = llm.engine
            capture_graphs(graph_plan(llm.config, engine.device, engine.stop_checker.max_model_len), engine.runner,
                           engine.proposer, llm.config.max_num_steps)
        llm.engine.set_draft_shape(DraftShape(4, 8))
        runs.append(_run(llm, prompt_ids[:2], [10, 7]))
        engines.append(llm.engine)
    assert runs[0] == runs[1]
    assert "attention.tree_torch" in engines[0].paths_taken()
    taken = engines[1].paths_taken()
    assert {"attention.tree_triton", "graph.verify_tree", "proposer.eagle3"} <= taken
    assert "attention.tree_torch" not in taken
