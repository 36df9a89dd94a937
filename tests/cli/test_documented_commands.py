"""Every `specbench` command the README shows runs, on tiny models and small sizes, and ends as it says.

The README is read here (its code blocks, continuation lines joined, comments dropped): a command added there
without an entry in EXAMPLES fails `test_every_documented_command_is_run`. Each entry is the README line made
runnable: placeholders (./llama, ./small, HEAD, results/<run-id>, ...) point at files this module builds, `...`
stands for a small sweep's options, and sizes shrink (prompts, tokens, repeats, concurrency) so the whole file
runs in about a minute. Every option the README line names is still passed (`test_examples_keep_the_documented
_options`), so a renamed or removed option fails here, and every command runs through the console entry point
with its other defaults (`--device auto` included), as a user would run it.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest

from specbench.errors import ExitStatus
from tests.support.cli_run import run_main
from tests.support.tiny_models import data_dir

README = Path(__file__).resolve().parents[2] / "README.md"


def documented_commands(text: str | None = None) -> list[str]:
    """The `specbench ...` lines of the README's code blocks, continuations joined, trailing comments dropped."""
    text = README.read_text() if text is None else text
    commands = []
    for block in re.findall(r"^```[a-z]*\n(.*?)^```", text, re.S | re.M):
        joined = re.sub(r"\\\n\s*", " ", block)
        for line in joined.splitlines():
            line = line.strip()
            if line.startswith("specbench "):
                tokens = shlex.split(line, comments=True)
                commands.append(" ".join(f"'{t}'" if " " in t else t for t in tokens))
    return commands


# `...` in a sweep-like README line: the rest of a small sweep on the tiny pair.
SMALL = ("--target {target} --draft {draft} -n 2 --max-tokens 4 --repeats 1 -c 1 --warmup 0 --shots 1 "
         "--data-dir {data}")


@dataclass(frozen=True)
class Example:
    run: str  # the command run (after `specbench`), placeholders in braces (Workspace's fields)
    exit_code: int = ExitStatus.PASSED
    stdout_has: str = ""  # a piece of the output that says the command did its job (any case; sweeps: the run written)
    # gate stages allowed to FAIL: speed verdicts across two runs on a shared CI box are load, not what this checks
    may_fail: tuple[str, ...] = ()
    skip: str = ""  # why it cannot run on this machine (the reason is printed with the skip)


HYBRID_CHAIN = ("two servers on a tiny Qwen3-Next left running: tests/stress/test_stress_hybrid_serve.py serves it "
                "and stresses it with --conditions hybrid")

EXAMPLES: dict[str, Example] = {
    "specbench generate --target default --method ngram --num-steps 3 -p 'The capital of France is'": Example(
        'generate --target default --method ngram --num-steps 3 -p "The capital of France is" --max-tokens 4',
        stdout_has="acceptance"),
    "specbench generate --target ./llama --method draft --draft ./llama-small -k 4 --temperature 1 "
    "--request-seed 0 -p Hi": Example(
        "generate --target {target} --method draft --draft {draft} -k 4 --temperature 1 --request-seed 0 -p Hi "
        "--max-tokens 4", stdout_has="acceptance"),
    "specbench generate --target llama-3.1-8b --load-format dummy --tokenizer ./llama-tok -p hi": Example(
        # the preset's 8B of dummy weights do not fit a CI box: the same dummy load from the tiny target's config
        'generate --target {target}/config.json --load-format dummy --tokenizer {target} -p "hi" --max-tokens 4',
        stdout_has="acceptance"),
    "specbench sweep --target ./llama --method draft --draft ./llama-small --workload gsm8k -c 1,16,64 -t 0,1 "
    "-k 0,1,3,5 --num-prompts 64 --repeats 3 --label before": Example(
        "sweep --target {target} --method draft --draft {draft} --workload gsm8k -c 1,4 -t 0,1 -k 0,3 "
        "--num-prompts 2 --repeats 2 --label before --max-tokens 4 --warmup 0 --shots 1 --data-dir {data} "
        "--results-dir {out}", stdout_has="manifest.json"),
    "specbench gsm8k --shots 5 --limit 200 --target ./llama --method ngram -k 0,3": Example(
        # 5 shots overflow the tiny target's 1024 positions
        "gsm8k --shots 1 --limit 2 --target {target} --method ngram -k 0,3 --max-tokens 4 --data-dir {data} "
        "--results-dir {out}", stdout_has="ccuracy"),
    "specbench mtbench --target ./llama --method draft --draft ./small": Example(
        "mtbench --target {target} --method draft --draft {draft} --num-prompts 2 --max-tokens 4 --data-dir {data} "
        "--results-dir {out}", stdout_has="categor"),
    "specbench sweep ... --resume results/<run-id>": Example(
        "sweep " + SMALL + " {before_args} --resume {run}", stdout_has="manifest.json"),
    "specbench sweep --workload speed_bench --speed-bench-data data/speed --speed-bench-split qualitative "
    "--target MODEL --method eagle3 --draft HEAD -c 1,16 --num-prompts 0": Example(
        "sweep --workload speed_bench --speed-bench-data {speed} --speed-bench-split qualitative --target {target} "
        "--method eagle3 --draft {eagle3} -c 1,4 --num-prompts 0 --max-tokens 4 -k 0,2 --repeats 1 --warmup 0 "
        "--results-dir {out}", stdout_has="manifest.json"),
    "specbench sweep --workload file:prompts.jsonl ...": Example(
        "sweep --workload file:{prompts} " + SMALL.replace(" --shots 1", "") + " --results-dir {out}",
        stdout_has="manifest.json"),
    "specbench sweep ... --goodput ttft:200,tpot:50": Example(
        "sweep " + SMALL + " --goodput ttft:200,tpot:50 --results-dir {out}", stdout_has="oodput"),
    "specbench sweep ... -k 0,1,3,5 --optimize tpot": Example(
        "sweep " + SMALL + " -k 0,1,3 --optimize tpot --results-dir {out}", stdout_has="best num-steps"),
    "specbench sweep ... --method eagle3 -k 0,3,5 --eagle-topk 1,4 --num-draft-tokens 8,16": Example(
        "sweep --target {target} -n 2 --max-tokens 4 --repeats 1 -c 1 --warmup 0 --shots 1 --data-dir {data} "
        "--method eagle3 --draft {eagle3} -k 0,3 --eagle-topk 1,4 --num-draft-tokens 8 --results-dir {out}",
        stdout_has="manifest.json"),
    "specbench sweep --backend openai ...": Example(
        "sweep --backend openai --base-url {server} -n 2 --max-tokens 4 --repeats 1 -c 1 --warmup 0 "
        "--data-dir {data} --results-dir {out}", stdout_has="manifest.json"),
    "specbench sweep ... --no-cache-reset": Example(
        "sweep --backend openai --base-url {server} -n 2 --max-tokens 4 --repeats 1 -c 1 --warmup 0 "
        "--data-dir {data} --no-cache-reset --results-dir {out}", stdout_has="manifest.json"),
    "specbench sweep ... --duration 60 --ramp-up-strategy linear --ramp-up-start-rps 1 --ramp-up-end-rps 20": Example(
        "sweep " + SMALL + " --duration 1 --ramp-up-strategy linear --ramp-up-start-rps 1 --ramp-up-end-rps 20 "
        "-k 0 --results-dir {out}", stdout_has="manifest.json"),
    "specbench compare results/<before> results/<after> --format md -o compare.md --plots plots/": Example(
        "compare {before} {after} --format md -o {ws}/compare.md --plots {ws}/plots/", stdout_has=""),
    "specbench compare before after --fail-on regressed:acceptance_length,accuracy_flexible": Example(
        "compare before after --fail-on regressed:acceptance_length,accuracy_flexible --results-dir {results}",
        stdout_has="Acceptance"),
    "specbench ab --target ./llama --draft ./small -k 3 -n 20 --repeats 6 --b-inject slow-step": Example(
        "ab --target {target} --draft {draft} -k 3 -n 2 --repeats 2 --b-inject slow-step --max-tokens 4 --shots 1 "
        "--data-dir {data}", stdout_has="slow-step"),
    "specbench plot results/<run-a> results/<run-b> --out-dir plots/": Example(
        "plot {before} {after} --out-dir {ws}/plots/", stdout_has="png"),
    "specbench gate --target ./llama --draft ./small -k 3 -n 50 --repeats 3 --write-reference gate-ref.json": Example(
        "gate --target {target} --draft {draft} -k 3 -n 4 --repeats 2 --write-reference {ws}/gate-ref.json "
        "--max-tokens 8 --shots 1 --data-dir {data}", stdout_has="specbench gate: PASS"),
    "specbench gate --target ./llama --draft ./small -k 3 -n 50 --repeats 3 --reference gate-ref.json "
    "--junit gate.xml --report-md gate.md": Example(
        "gate --target {target} --draft {draft} -k 3 -n 4 --repeats 2 --reference {gate_ref} "
        "--junit {ws}/gate.xml --report-md {ws}/gate.md --max-tokens 8 --shots 1 --data-dir {data}",
        stdout_has="## specbench gate: ", may_fail=("speed",)),
    "specbench gate --server-cmd preset:llama-server --target model.gguf -k 3 --reference gate-ref.json": Example(
        "", skip="needs llama-server (bash scripts/build_llama_server.sh, 10-35 min): "
                 "tests/serve/test_llama_server*.py run it when built"),
    "specbench gate --base-url http://127.0.0.1:8000 -k 3 --reference gate-ref.json": Example(
        "gate --base-url {server} -k 2 --reference {server_ref} -n 4 --max-tokens 8 --shots 1 --data-dir {data}",
        stdout_has="specbench gate: PASS"),
    "specbench stress --target ./llama --draft ./small -k 3": Example(
        "stress --target {target} --draft {draft} -k 3 --num-requests 2 --max-tokens 4 --conditions gentle,"
        "concurrency-8", stdout_has="specbench stress: PASS"),
    "specbench stress --base-url http://127.0.0.1:8000 --baseline-url http://127.0.0.1:8001 -k 3 "
    "--window-tokens 4096": Example(
        "", skip="needs a speculating server and its speculation-off twin: tests/stress/test_stress_server.py runs "
                 "it against two specbench serve"),
    # the hybrid chain (two servers left running, then stress): tests/stress/test_stress_hybrid_serve.py runs it
    "specbench serve --target ./tiny-qwen3-next --method ngram -k 3 --port 8000 &": Example(
        "", skip=HYBRID_CHAIN),
    "specbench serve --target ./tiny-qwen3-next --method none --port 8001 &": Example("", skip=HYBRID_CHAIN),
    "specbench stress --base-url http://127.0.0.1:8000 --baseline-url http://127.0.0.1:8001 -k 3 "
    "--conditions hybrid": Example("", skip=HYBRID_CHAIN),
    "specbench check": Example(
        # the default target (SmolLM2-135M) through every check takes 15-20 min on 2 cores; here the default model
        # and --device auto through greedy (its near-tie probe: test_check_device_auto.py runs sampled's on the tiny
        # pair), few tokens
        "check --checks greedy --budget fast --max-tokens 3 --data-dir {data}", stdout_has="specbench check"),
    "specbench check --target ./llama --draft ./small -k 3": Example(
        "check --target {target} --draft {draft} -k 3 --max-tokens 6 --data-dir {data}", stdout_has="oracle"),
    "specbench check ... --save-baseline base.json": Example(
        "check --target {target} --draft {draft} -k 3 --max-tokens 6 --checks greedy,baseline --data-dir {data} "
        "--save-baseline {ws}/base.json", stdout_has="baseline written"),
    # the seed target only: the window + MoE and hybrid targets' rows (on by default) are the CLI default runs of
    # tests/check/test_selftest_window_moe.py and test_selftest_hybrid.py; rows in-process (--jobs 1, as the other
    # selftest CLI tests): `auto` starts a worker per core, each importing torch again (~8 s apiece), on a box whose
    # cores the test workers already keep busy (test_selftest_jobs.py runs the workers)
    "specbench selftest": Example(
        "selftest --methods ngram --faults verify-kv-off-by-one --checks greedy --no-window-moe --no-hybrid --jobs 1",
        stdout_has="detected"),
    "specbench selftest --seeds 0-29 --faults none": Example(
        "selftest --seeds 0-1 --faults none --methods ngram --checks greedy --no-window-moe --no-hybrid --jobs 1",
        stdout_has="false alarms: 0"),
    "specbench gsm8k ... --inject catchup-sees-rejected": Example(
        "gsm8k " + SMALL + " --inject catchup-sees-rejected -k 0,2 --results-dir {out}",
        stdout_has="MUTANT"),
}


def _flags(command: str) -> set[str]:
    return {token for token in shlex.split(command) if re.fullmatch(r"--?[a-z][a-z0-9-]*", token)}


def test_every_documented_command_is_run():
    documented = documented_commands()
    assert len(documented) >= 25, documented  # the parse found the README's blocks
    assert set(documented) == set(EXAMPLES), (sorted(set(documented) - set(EXAMPLES)),
                                              sorted(set(EXAMPLES) - set(documented)))


@pytest.mark.parametrize("documented", list(EXAMPLES))
def test_examples_keep_the_documented_options(documented):
    example = EXAMPLES[documented]
    if example.skip:
        return
    missing = _flags(documented) - _flags(example.run)
    assert not missing, f"{documented!r}: the test drops {sorted(missing)}"


def test_the_readme_parse_joins_continuations_and_drops_comments():
    text = "```bash\nspecbench sweep --a 1 \\\n    --b 2   # why\nnot this\n```\nspecbench outside\n"
    assert documented_commands(text) == ["specbench sweep --a 1 --b 2"]


@dataclass(frozen=True)
class Workspace:
    ws: Path
    target: str
    draft: str
    eagle3: str
    data: str
    prompts: str
    speed: str
    results: str  # the runs labelled before / after (compare looks labels up here)
    out: str  # where the examples' own sweeps go
    run: str
    before_args: str  # the options that made `run` (a --resume must repeat them)
    before: str
    after: str
    gate_ref: str
    server: str
    server_ref: str


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    pytest.importorskip("fastapi")
    from specbench.config import EngineConfig
    from specbench.selftest.tiny import build_tiny_pair
    from specbench.selftest.tiny_eagle import build_tiny_eagle_head
    from specbench.serve import ServeConfig, start_server
    from tests.support.speed_bench_files import write_snapshot
    from tests.support.tiny_models import VOCAB_SIZE, load_tiny_tokenizer

    ws = tmp_path_factory.mktemp("documented")
    target, draft = build_tiny_pair(ws / "pair", seed=0, vocab_size=VOCAB_SIZE)
    for path in (target, draft):
        load_tiny_tokenizer().save_pretrained(path)
    eagle3 = build_tiny_eagle_head(target, ws / "eagle3")
    prompts = ws / "prompts.jsonl"
    prompts.write_text("".join(json.dumps({"prompt": f"Question {i}: what is {i} + {i}?"}) + "\n" for i in range(3)))
    speed = write_snapshot(ws / "data" / "speed")
    results = ws / "results"
    before_args = "-k 0,2 --repeats 2 --label before"

    def sweep(label: str, draft_dir: str) -> str:
        args = before_args.replace("before", label)
        done = run_main("sweep", *SMALL.format(target=target, draft=draft_dir, data=data_dir()).split(),
                        *args.split(), "--results-dir", str(results), "--quiet")
        assert done.exit_code == 0, done.stderr
        return str(max((p for p in results.iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime))

    before = sweep("before", draft)
    after = sweep("after", draft)
    engine = EngineConfig(target=target, method="draft", draft=draft, device="cpu", kv_cache_gb=0.05,
                          max_num_steps=2)
    with start_server(ServeConfig(engine, served_model_name="tiny")) as server:
        server_ref = ws / "server-ref.json"
        done = run_main("gate", "--base-url", server.url, "-k", "2", "-n", "4", "--max-tokens", "8", "--shots", "1",
                        "--data-dir", str(data_dir()), "--write-reference", str(server_ref))
        assert done.exit_code == 0, done.stdout + done.stderr
        gate_ref = ws / "gate-ref.json"
        yield Workspace(ws, target, draft, eagle3, str(data_dir()), str(prompts), str(speed), str(results),
                        str(ws / "out"), before, before_args, before, after, str(gate_ref), server.url,
                        str(server_ref))


@pytest.mark.slow
@pytest.mark.parametrize("documented", list(EXAMPLES))
def test_documented_command_runs(documented, workspace, monkeypatch):
    example = EXAMPLES[documented]
    if example.skip:
        pytest.skip(example.skip)
    monkeypatch.chdir(workspace.ws)
    if "{gate_ref}" in example.run and not Path(workspace.gate_ref).is_file():  # the write-reference line first
        _run(EXAMPLES[next(k for k in EXAMPLES if "--write-reference" in k and "--target" in k)], workspace)
    _run(example, workspace)


def _run(example: Example, workspace: Workspace) -> None:
    args = shlex.split(example.run.format(**vars(workspace)))
    done = run_main(*args)
    failed = {line.split("|")[1].strip() for line in done.stdout.splitlines() if "| FAIL |" in line}
    if example.may_fail and done.exit_code == ExitStatus.FAILED and failed <= set(example.may_fail):
        return
    assert done.exit_code == example.exit_code, (args, done.stdout[-3000:], done.stderr[-3000:])
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert example.stdout_has.lower() in done.stdout.lower(), (args, done.stdout[-3000:])
