"""Results of a fixed sweep, byte-identical apart from timings, between two commits (issue 26: refactors keep
behaviour). Runs one small embedded sweep with each tree (the working tree here, and `git archive <base>` extracted
to a temp dir), each under its own PYTHONPATH, then compares the parquet outputs column by column.

    .venv/bin/python scripts/sweep_identity.py [--base eed89bc] [--keep DIR]

The sweep: a tiny Llama (2 layers, the trained tiny BPE tokenizer; tests/support/tiny_models.py) and a draft derived
from it, fp32 on CPU, 3 GSM8K questions 1-shot, 32 new tokens; temperature 0 and 0.8 (seed 0), concurrency 1 and 2,
num-steps 0 and 3; once with n-gram drafts and once with the draft LM. Both trees load the same model files.

Ignored columns (declared once, below): timings (a rule on the column name: a time, a rate over time, or derived
from them, including the recommendations' ranking by a timed metric) and columns added since the base (not in its
schema, read from the base tree). Provenance (commit, versions, host) lives in manifest.json, not compared. Exit 0 when every other column is equal (NaN equal to NaN), 1 when one differs.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parents[1]
TABLES = ("cells", "requests", "steps", "categories", "recommendations")

# Timings: seconds, timestamps, per-second rates and everything derived from them (throughput, speedup, goodput,
# latency stats, acceptance per equal time window and its drift, the baseline's run-order drift).
TIMING = re.compile(r"(_s$|_s_|_ms$|_time|time_|_rps$|throughput|speedup|goodput|drift|acceptance_windows)")
# recommendations.parquet ranks the num-steps values by a timed metric (output throughput or median TPOT): its
# winner, runner-up, their values and ratio are timings too; its keys (workload, method, ...) are compared.
TIMED_RANKING = re.compile(r"^(best_|runner_up_|ratio)")
SWEEP = ("--workload", "gsm8k", "--limit", "3", "--shots", "1", "--max-tokens", "32", "-t", "0,0.8",
         "--seed", "0", "--concurrency", "1,2", "--num-steps", "0,3", "--dtype", "fp32", "--device", "cpu",
         "--kv-cache-gb", "0.05", "--warmup", "0", "--quiet", "--yes")


def is_ignored(table: str, column: str) -> str:
    """Why `column` of `table` is not compared ('' = compared)."""
    if TIMING.search(column) and not column.endswith("_count"):  # e2e_s_count: requests, not seconds
        return "timing"
    if table == "recommendations" and TIMED_RANKING.search(column):
        return "timed ranking"
    return ""


def build_models(out: Path) -> tuple[Path, Path]:
    sys.path.insert(0, str(REPO))
    from tests.support.tiny_models import build_tiny_model, derive_draft

    target, draft = out / "target", out / "draft"
    build_tiny_model(target, "llama", seed=0)
    derive_draft(target, draft, noise=0.1, seed=1)
    return target, draft


def run_sweeps(tree: Path, results: Path, target: Path, draft: Path, data_dir: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(tree), "SPECBENCH_DATA_DIR": data_dir}
    for method, extra in (("ngram", ()), ("draft", ("--draft", str(draft)))):
        cmd = [sys.executable, "-m", "specbench", "sweep", *SWEEP, "--target", str(target), "--method", method,
               *extra, "--data-dir", data_dir, "--results-dir", str(results), "--run-id", method]
        done = subprocess.run(cmd, check=False, cwd=tree, env=env, capture_output=True, text=True)
        if done.returncode:
            sys.exit(f"error: sweep ({method}) in {tree} failed:\n{done.stdout[-2000:]}{done.stderr[-4000:]}")


def base_columns(base_tree: Path) -> dict[str, set[str]]:
    """Each table's columns in the base tree's schema (runs/schema.py TABLES and RECOMMENDATION_COLUMNS)."""
    code = ("import json; from specbench.runs import schema as s; "
            "t = {name: [c[0] for c in cols] for name, cols in s.TABLES.items()}; "
            "t['recommendations'] = [c[0] for c in s.RECOMMENDATION_COLUMNS]; print(json.dumps(t))")
    env = {**os.environ, "PYTHONPATH": str(base_tree)}
    out = subprocess.run([sys.executable, "-c", code], cwd=base_tree, env=env, capture_output=True, text=True,
                         check=True).stdout
    return {name: set(cols) for name, cols in json.loads(out).items()}


def _same(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def compare(base: Path, head: Path, base_cols: dict[str, set[str]]
            ) -> tuple[list[str], list[str], list[str], int]:
    """(differing `run/table.column` with the first differing row, ignored columns, added columns, number of
    run/table/column triples compared)."""
    differing, ignored, added, num_compared = [], set(), set(), 0
    for run in sorted(p.name for p in base.iterdir() if p.is_dir()):
        for table in TABLES:
            fb, fh = base / run / f"{table}.parquet", head / run / f"{table}.parquet"
            if fb.exists() != fh.exists():
                differing.append(f"{run}/{table}: written by only one tree")
                continue
            if not fb.exists():
                continue
            tb, th = pq.read_table(fb), pq.read_table(fh)
            if tb.num_rows != th.num_rows:
                differing.append(f"{run}/{table}: {tb.num_rows} rows vs {th.num_rows}")
                continue
            for col in th.column_names:
                if col not in tb.column_names:
                    (added if col not in base_cols.get(table, set()) else set()).add(f"{table}.{col}")
                    if col in base_cols.get(table, set()):
                        differing.append(f"{run}/{table}.{col}: in the base schema but not in its output")
                    continue
                why = is_ignored(table, col)
                if why:
                    ignored.add(f"{table}.{col} ({why})")
                    continue
                num_compared += 1
                vb, vh = tb.column(col).to_pylist(), th.column(col).to_pylist()
                rows = [i for i, (x, y) in enumerate(zip(vb, vh)) if not _same(x, y)]
                if rows:
                    differing.append(f"{run}/{table}.{col}: {len(rows)} of {len(vb)} rows, first row {rows[0]}: "
                                     f"{vb[rows[0]]!r} vs {vh[rows[0]]!r}")
            for col in set(tb.column_names) - set(th.column_names):
                differing.append(f"{run}/{table}.{col}: in the base output only")
    return differing, sorted(ignored), sorted(added), num_compared


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", default="eed89bc", help="commit to compare the working tree against")
    ap.add_argument("--keep", help="work in this directory and keep it (default: a temp dir, removed)")
    ap.add_argument("--compare-only", action="store_true", help="compare the results already under --keep")
    ap.add_argument("--data-dir", default=os.environ.get("SPECBENCH_DATA_DIR", "/work/shared/data"))
    args = ap.parse_args()
    os.environ["SPECBENCH_DATA_DIR"] = args.data_dir  # the tiny tokenizer trains on its GSM8K questions
    work = Path(args.keep or tempfile.mkdtemp(prefix="sweep_identity_"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        base_tree = work / "base_tree"
        if not base_tree.exists():
            base_tree.mkdir()
            archive = subprocess.run(["git", "-C", str(REPO), "archive", args.base], capture_output=True, check=True)
            subprocess.run(["tar", "-x", "-C", str(base_tree)], input=archive.stdout, check=True)
        if not args.compare_only:
            target, draft = build_models(work / "models")
            for name, tree in (("base", base_tree), ("head", REPO)):
                shutil.rmtree(work / name, ignore_errors=True)
                run_sweeps(tree, work / name, target, draft, args.data_dir)
        differing, ignored, added, num_compared = compare(work / "base", work / "head", base_columns(base_tree))
        print(f"compared {args.base} with the working tree: ngram and draft sweeps, "
              f"tables {', '.join(TABLES)} where written; {num_compared} run/table columns compared")
        print(f"ignored ({len(ignored)}): {', '.join(ignored)}")
        print(f"added since {args.base} ({len(added)}): {', '.join(added)}")
        if differing:
            print(f"DIFFERENT ({len(differing)}):")
            print("\n".join(f"  {d}" for d in differing))
            return 1
        print("identical apart from timings")
        return 0
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
