"""The gate's reference file: what a trusted run measured (k = 0 greedy outputs per prompt, acceptance per position
with its per-request samples, accuracy with stderr, speed per repeat, k = 0 output and prompt logprobs with their
top-n) and the settings it was measured under. Version 1 files (before logprobs) are read with no logprobs.

Written with `specbench gate --write-reference FILE`, read with `--reference FILE`; read errors are one
SpecbenchError naming the file and the field (json_file.py conventions).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specbench.backends.server_logprobs import ServerTokenLogprob
from specbench.errors import SpecbenchError
from specbench.gate.logprobs_collect import LogprobsRun, LogprobsSample
from specbench.gate.observed import GreedyOutput, Observation, RequestAcceptance, SpeedSamples
from specbench.gate.report import write_text
from specbench.json_file import json_kind, read_json_object
from specbench.metrics.accuracy import Accuracy

FORMAT = "specbench-gate-reference"
VERSION = 2
READABLE_VERSIONS = (1, VERSION)  # 1: no logprobs field


@dataclass(frozen=True)
class GateSettings:
    """What must match between the reference and the gated run for the comparison to mean anything."""

    workload: str
    limit: int | None
    shots: int | None
    max_tokens: int | None
    num_steps: int
    concurrency: int


@dataclass(frozen=True)
class GateReference:
    settings: GateSettings
    source: str  # what was measured: "embedded <target> <method> <draft>" or the server URL / command
    greedy_outputs: tuple[GreedyOutput, ...]  # k = 0 (or the server's own, see greedy_source)
    greedy_source: str  # "k=0" | "k=<k> server (no k = 0 run)"
    acceptance: tuple[RequestAcceptance, ...] | None  # at settings.num_steps
    accuracy: Accuracy | None  # at settings.num_steps
    speed: SpeedSamples  # at settings.num_steps, one value per repeat
    logprobs: LogprobsRun | None = None  # k = 0 (or the server's own, see its label); None: the stage did not run


def reference_of(observation: Observation, settings: GateSettings, source: str,
                 logprobs: LogprobsRun | None = None) -> GateReference:
    greedy, greedy_source = observation.baseline_outputs, "k=0"
    if greedy is None:
        greedy, greedy_source = observation.spec_outputs, f"k={observation.num_steps} server (no k = 0 run)"
    return GateReference(settings, source, greedy, greedy_source, observation.acceptance, observation.accuracy,
                         observation.speed, logprobs)


def write_reference(reference: GateReference, path: Path) -> None:
    doc = {"format": FORMAT, "version": VERSION, **dataclasses.asdict(reference)}
    doc["accuracy"] = None if reference.accuracy is None else reference.accuracy._asdict()
    write_text(path, json.dumps(doc, indent=1) + "\n", "gate reference")  # whole or not at all


def read_reference(path: Path) -> GateReference:
    doc = read_json_object(Path(path), "gate reference")
    where = f"gate reference {path}"
    if doc.get("format") != FORMAT or doc.get("version") not in READABLE_VERSIONS:
        raise SpecbenchError(f"{where}: not a {FORMAT} file of version {' or '.join(map(str, READABLE_VERSIONS))} "
                             f"(format {doc.get('format')!r}, version {doc.get('version')!r})")
    try:
        settings = GateSettings(**_object(doc, "settings", where))
        greedy = tuple(GreedyOutput(str(o["sample_id"]), int(o["turn"]), str(o["text"]))
                       for o in _list(doc, "greedy_outputs", where))
        acceptance = None if doc.get("acceptance") is None else tuple(
            RequestAcceptance(str(a["sample_id"]), int(a["turn"]), int(a["num_draft_rounds"]),
                              tuple(int(v) for v in a["num_drafted_per_pos"]),
                              tuple(int(v) for v in a["num_accepted_per_pos"]))
            for a in _list(doc, "acceptance", where))
        accuracy = None if doc.get("accuracy") is None else Accuracy(**_object(doc, "accuracy", where))
        speed_doc = _object(doc, "speed", where)
        speed = SpeedSamples(tuple(float(v) for v in speed_doc["output_throughput"]),
                             tuple(float(v) for v in speed_doc["tpot_median_s"]))
        logprobs = None if doc.get("logprobs") is None else _logprobs_run(_object(doc, "logprobs", where))
        return GateReference(settings, str(doc["source"]), greedy, str(doc["greedy_source"]), acceptance, accuracy,
                             speed, logprobs)
    except (KeyError, TypeError, ValueError) as err:
        raise SpecbenchError(f"{where}: malformed ({type(err).__name__}: {err})") from None


def _logprobs_run(doc: dict[str, Any]) -> LogprobsRun:
    samples = None if doc["samples"] is None else tuple(
        LogprobsSample(str(s["sample_id"]), tuple(_token(e) for e in s["output"]),
                       None if s["prompt"] is None else tuple(None if e is None else _token(e) for e in s["prompt"]))
        for s in doc["samples"])
    return LogprobsRun(str(doc["label"]), samples, str(doc["missing"]),
                       tuple(str(m) for m in doc.get("malformed") or ()))  # absent before malformed was recorded


def _token(doc: dict[str, Any]) -> ServerTokenLogprob:
    return ServerTokenLogprob(str(doc["token"]), None if doc["logprob"] is None else float(doc["logprob"]),
                              tuple((str(t), float(v)) for t, v in doc["top"]),
                              None if doc["token_id"] is None else int(doc["token_id"]))


def check_matches(reference: GateReference, settings: GateSettings, path: Path) -> None:
    """The gated run must use the reference's prompts, budget and k: otherwise nothing compares."""
    ref = dataclasses.asdict(reference.settings)
    now = dataclasses.asdict(settings)
    differ = [f"{name} {ref[name]!r} vs {now[name]!r}" for name in ref if ref[name] != now[name]]
    if differ:
        raise SpecbenchError(f"gate reference {path} was measured with other settings ({'; '.join(differ)}): "
                             f"rerun with the reference's settings or write a new reference")


def _object(doc: dict[str, Any], key: str, where: str) -> dict[str, Any]:
    value = doc.get(key)
    if not isinstance(value, dict):
        raise SpecbenchError(f"{where}: field {key!r} must be a JSON object, got a JSON {json_kind(value)}")
    return value


def _list(doc: dict[str, Any], key: str, where: str) -> list[Any]:
    value = doc.get(key)
    if not isinstance(value, list):
        raise SpecbenchError(f"{where}: field {key!r} must be a JSON array, got a JSON {json_kind(value)}")
    return value
