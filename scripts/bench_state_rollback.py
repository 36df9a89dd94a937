"""CPU timing of the two ways to leave a Gated DeltaNet state after the last accepted token of a verify:
keep (the verify writes each position's state; the commit gathers one: what the engine does) or replay (the verify
writes none; the accepted tokens' q/k/v/gates, kept from the verify, are run again from the slot's state).

    PYTHONPATH=. python scripts/bench_state_rollback.py [--k 3] [--reqs 8]

One layer at Qwen3-Next-80B's linear-attention shape (16 key heads, 32 value heads, 128 x 128 state per head),
torch reference on one thread; accepted counts uniform in [0, k]."""

from __future__ import annotations

import argparse
import time

import torch

from specbench.recurrent.gated_delta_rule import gated_delta_rule

HK, HV, D = 16, 32, 128


def _inputs(n: int, gen: torch.Generator):
    return (torch.randn(n, HK, D, generator=gen), torch.randn(n, HK, D, generator=gen),
            torch.randn(n, HV, D, generator=gen), -torch.rand(n, HV, generator=gen), torch.rand(n, HV, generator=gen))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--k", type=int, default=3)
    parser.add_argument("--reqs", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(0)
    n = args.k + 1
    reqs = [_inputs(n, gen) for _ in range(args.reqs)]
    slots = torch.randn(args.reqs, HV, D, D, generator=gen) * 0.1
    accepted = torch.randint(0, n, (args.reqs,), generator=gen).tolist()

    def keep() -> torch.Tensor:
        out = slots.clone()
        for r, (q, k, v, g, b) in enumerate(reqs):
            rule = gated_delta_rule(q, k, v, g, b, slots[r], keep_states=True)
            out[r] = rule.states[accepted[r]]  # the commit's gather
        return out

    def replay() -> torch.Tensor:
        out = slots.clone()
        for r, (q, k, v, g, b) in enumerate(reqs):
            gated_delta_rule(q, k, v, g, b, slots[r])  # the verify: outputs only
            m = accepted[r] + 1
            out[r] = gated_delta_rule(q[:m], k[:m], v[:m], g[:m], b[:m], slots[r]).final_state
        return out

    torch.testing.assert_close(keep(), replay(), atol=0, rtol=0)  # both leave the same state
    for name, fn in (("keep", keep), ("replay", replay)):
        fn()
        times = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
        state_mb = args.reqs * n * HV * D * D * 4 / 2**20
        extra = f", kept states {state_mb:.0f} MiB per layer" if name == "keep" else ""
        print(f"{name:6s} k={args.k} reqs={args.reqs}: median {sorted(times)[len(times) // 2] * 1e3:.1f} ms per "
              f"layer-verify (accepted {accepted}){extra}")


if __name__ == "__main__":
    main()
