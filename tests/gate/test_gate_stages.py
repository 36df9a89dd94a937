"""Each gate stage's rule on hand-made measurements: it passes what it should, and fails (or says N/A) with its
reason."""

from __future__ import annotations

import json
import math
import xml.etree.ElementTree as ET

import pytest

from specbench.backends.near_tie import DIVERGENT, NEAR_TIE, TieDiagnosis
from specbench.errors import SpecbenchError
from specbench.gate.acceptance_stage import acceptance_stage
from specbench.gate.accuracy_stage import accuracy_stage
from specbench.gate.lossless_stage import lossless_stage
from specbench.gate.observed import GreedyOutput, Observation, OutputProblem, RequestAcceptance, SpeedSamples
from specbench.gate.outputs_stage import outputs_stage
from specbench.gate.reference import GateSettings, check_matches, read_reference, reference_of, write_reference
from specbench.gate.report import GateReport, to_junit, to_markdown
from specbench.gate.speed_stage import speed_stage
from specbench.gate.stage import LOGPROBS, Status
from specbench.gate.stages import STAGES, check_requested, parse_skip
from specbench.gate.tolerances import Tolerances
from specbench.metrics.accuracy import Accuracy

T = Tolerances()


def _outputs(*texts: str) -> tuple[GreedyOutput, ...]:
    return tuple(GreedyOutput(str(i), 0, t) for i, t in enumerate(texts))


def test_lossless_passes_identical_and_fails_a_divergent_mismatch():
    assert lossless_stage(_outputs("a b", "c"), _outputs("a b", "c"), "k=0", T, None).status is Status.PASS
    failed = lossless_stage(_outputs("a b", "c x"), _outputs("a b", "c y"), "k=0", T, None)
    assert failed.status is Status.FAIL and "1 prompt(s) differ" in failed.reason
    assert "unclassified: no logprobs probe" in failed.details[0] and "differs at char 2" in failed.details[0]


def test_lossless_near_tie_passes_unless_strict_and_a_divergent_probe_fails():
    def probe(verdict):
        return lambda *args: TieDiagnosis(verdict, 0.01 if verdict == NEAR_TIE else 3.0, ("x", "y"), None)

    spec, base = _outputs("a x"), _outputs("a y")
    assert lossless_stage(spec, base, "k=0", T, probe(NEAR_TIE)).status is Status.PASS
    assert lossless_stage(spec, base, "k=0", Tolerances(strict=True), probe(NEAR_TIE)).status is Status.FAIL
    assert lossless_stage(spec, base, "k=0", T, probe(DIVERGENT)).status is Status.FAIL


def test_lossless_fails_a_prompt_without_a_k_answer_and_is_na_without_k0():
    missing = lossless_stage(_outputs("a"), _outputs("a", "b"), "k=0", T, None)
    assert missing.status is Status.FAIL and "without a k answer" in missing.reason
    assert lossless_stage(_outputs("a"), None, "", T, None).status is Status.NOT_AVAILABLE


def test_accuracy_fails_a_drop_beyond_tolerance_and_noise_only():
    ref = Accuracy(0.60, 0.05, 0.62, 0.05, 100)
    assert accuracy_stage(Accuracy(0.55, 0.05, 0.58, 0.05, 100), ref, T).status is Status.PASS  # 0.05 < 0.02+0.116
    dropped = accuracy_stage(Accuracy(0.30, 0.046, 0.62, 0.05, 100), ref, T)
    assert dropped.status is Status.FAIL and "strict dropped 0.300" in dropped.reason
    assert "flexible" not in dropped.reason and "80% power" in dropped.power
    assert accuracy_stage(Accuracy(0.3, 0.05, 0.3, 0.05, 100), None, T).status is Status.NOT_AVAILABLE


def test_accuracy_at_zero_has_an_interval_and_no_power_claim_it_cannot_keep():
    """Issue 40: the default model scores 0: the gate printed 0.000±0.000 and claimed to detect a drop >= 0.020
    against a reference of 0, where no drop is possible."""
    zero = accuracy_stage(Accuracy(0.0, 0.0, 0.0, 0.0, 6), Accuracy(0.0, 0.0, 0.0, 0.0, 6), T)
    assert zero.status is Status.PASS and "0.000 [0.000, 0.390]" in zero.metric and "±0.000" not in zero.metric
    assert zero.power.startswith("N/A: no drop that large is possible") and "detects" not in zero.power
    # a perfect reference: a stderr of 0 would call any drop beyond accuracy_drop real; the interval does not
    assert accuracy_stage(Accuracy(0.9, 0.12, 0.9, 0.12, 10), Accuracy(1.0, 0.0, 1.0, 0.0, 10),
                          T).status is Status.PASS


def _requests(rates: tuple[float, ...], num_rounds: int = 400, n: int = 4) -> tuple[RequestAcceptance, ...]:
    """n requests; position k accepted in rate_k of the rounds (drafted every round)."""
    return tuple(RequestAcceptance(str(i), 0, num_rounds, (num_rounds,) * len(rates),
                                   tuple(round(r * num_rounds) for r in rates)) for i in range(n))


def test_acceptance_passes_the_reference_and_fails_a_drop_by_length_and_position():
    ref = _requests((0.8, 0.6, 0.4))
    assert acceptance_stage(_requests((0.8, 0.6, 0.4)), ref, T, 3).status is Status.PASS
    dropped = acceptance_stage(_requests((0.8, 0.6, 0.2)), ref, T, 3)  # AL 2.8 -> 2.6: -7%, inside rtol 0.1
    assert dropped.status is Status.FAIL and "pos 3 dropped" in dropped.reason and "AL" not in dropped.reason
    assert "(ref 2.800, -7.1%)" in dropped.metric
    collapsed = acceptance_stage(_requests((0.3, 0.1, 0.0)), ref, T, 3)
    assert collapsed.status is Status.FAIL and "beyond ±10%" in collapsed.reason


def test_acceptance_is_two_sided_on_length_and_the_floor_option_replaces_the_test():
    ref = _requests((0.5, 0.3, 0.1))
    inflated = acceptance_stage(_requests((0.9, 0.8, 0.7)), ref, T, 3)
    assert inflated.status is Status.FAIL and "AL +" in inflated.reason
    floor = Tolerances(acceptance_floor=0.95)
    small = _requests((0.49, 0.3, 0.1))  # 98% of the reference at pos 1
    assert acceptance_stage(small, ref, floor, 3).status is Status.PASS
    low = acceptance_stage(_requests((0.45, 0.3, 0.1)), ref, floor, 3)  # 90%
    assert low.status is Status.FAIL and "pos 1 rate 0.450 < 0.95 x 0.500" in low.reason


def test_acceptance_is_na_without_a_reference_and_fails_without_counts_against_one():
    assert acceptance_stage(_requests((0.5,)), None, T, 1).status is Status.NOT_AVAILABLE
    assert acceptance_stage(None, None, T, 1).status is Status.NOT_AVAILABLE
    # the reference drafted; this run has no draft counts at all: nothing was measured at k, never a silent N/A
    off = acceptance_stage(None, _requests((0.5,)), T, 1)
    assert off.status is Status.FAIL and "speculation off?" in off.reason


def test_acceptance_fails_when_the_server_says_it_does_not_speculate_at_k():
    from specbench.backends.server_info import ServerSpeculation

    ref = _requests((0.8, 0.6, 0.4))
    for told in (ServerSpeculation("none", 0, "/version"), ServerSpeculation(None, 0, "/props")):
        off = acceptance_stage(None, None, T, 3, told)  # no reference needed: the server's own word contradicts -k
        assert off.status is Status.FAIL and "speculation off?" in off.reason and "-k 3" in off.reason
    other_k = acceptance_stage(_requests((0.8, 0.6, 0.4)), ref, T, 3, ServerSpeculation("ngram", 2, "/version"))
    assert other_k.status is Status.FAIL and "num_steps 2" in other_k.reason and "gate with -k 2" in other_k.reason
    agrees = acceptance_stage(_requests((0.8, 0.6, 0.4)), ref, T, 3, ServerSpeculation("ngram", 3, "/version"))
    assert agrees.status is Status.PASS


def test_speed_is_na_on_one_repeat_and_judges_with_compare_on_several():
    ref = SpeedSamples((100.0, 101.0, 99.0), (0.010, 0.0101, 0.0099))
    one = speed_stage(SpeedSamples((50.0,), (0.02,)), ref, T, 3)
    assert one.status is Status.NOT_AVAILABLE and "no verdict on noise" in one.reason
    same = speed_stage(SpeedSamples((100.5, 99.5, 100.0), (0.0100, 0.0101, 0.0099)), ref, T, 3)
    assert same.status is Status.PASS and "within noise" in same.metric
    slow = speed_stage(SpeedSamples((70.0, 71.0, 69.5), (0.0140, 0.0142, 0.0139)), ref, T, 3)
    assert slow.status is Status.FAIL and "output_throughput regressed" in slow.reason
    assert "tpot_median regressed" in slow.reason
    assert speed_stage(ref, None, T, 3).status is Status.NOT_AVAILABLE


def test_speed_at_exactly_the_minimum_of_two_repeats_a_side():
    """--repeats 2, the documented minimum, judged without timing anything: fixed per-repeat values."""
    from specbench.compare.noise import MIN_RUNS

    assert MIN_RUNS == 2
    ref = SpeedSamples((100.0, 102.0), (0.0100, 0.0102))
    same = speed_stage(SpeedSamples((101.0, 99.0), (0.0101, 0.0099)), ref, T, 3)
    assert same.status is Status.PASS and "repeats now 2, ref 2" in same.metric, same
    assert "smallest change called: output_throughput ±" in same.power
    slow = speed_stage(SpeedSamples((70.0, 71.0), (0.0140, 0.0142)), ref, T, 3)
    assert slow.status is Status.FAIL and "output_throughput regressed -30" in slow.reason, slow
    assert "tpot_median regressed" in slow.reason
    for now, reference in ((SpeedSamples((70.0,), (0.014,)), ref), (ref, SpeedSamples((70.0,), (0.014,)))):
        one_side = speed_stage(now, reference, T, 3)
        assert one_side.status is Status.NOT_AVAILABLE and "needs >= 2 repeats a side" in one_side.reason
    # a repeat that measured nothing (NaN throughput) leaves one: no verdict rather than one on a single value
    nan = speed_stage(SpeedSamples((70.0, math.nan), (0.014, math.nan)), ref, T, 3)
    assert nan.status is Status.NOT_AVAILABLE, nan


def _observation(problems=(), num_requests=4) -> Observation:
    return Observation(2, _outputs("a"), _outputs("a"), _requests((0.5, 0.25)), Accuracy(0.5, 0.1, 0.5, 0.1, 20),
                       SpeedSamples((10.0,), (0.1,)), tuple(problems), num_requests)


def test_outputs_fails_on_failed_empty_and_truncated_requests():
    assert outputs_stage(_observation()).status is Status.PASS
    problems = [OutputProblem("r0-k2", "0", 0, "failed", "http 500"), OutputProblem("r0-k2", "1", 0, "empty", ""),
                OutputProblem("r0-k0", "2", 0, "truncated", "finish reason 'abort'")]
    failed = outputs_stage(_observation(problems))
    assert failed.status is Status.FAIL and failed.reason == "1 failed, 1 empty, 1 truncated"
    assert failed.metric == "1/4 requests ok" and "http 500" in failed.details[0]
    assert outputs_stage(_observation(num_requests=0)).status is Status.FAIL


def test_report_is_one_line_per_stage_and_junit_carries_failure_reasons():
    stages = (lossless_stage(_outputs("a"), _outputs("b"), "k=0", T, None),
              accuracy_stage(None, None, T), outputs_stage(_observation()))
    report = GateReport("embedded tiny, k=2", "none", "/tmp/run", stages)
    assert report.exit_code == 1
    md = to_markdown(report)
    assert md.startswith("## specbench gate: FAIL (lossless)")
    assert [line.split("|")[2].strip() for line in md.splitlines() if line.startswith("| ") and "---" not in line][1:] \
        == ["FAIL", "N/A", "PASS"]
    suite = ET.fromstring(to_junit(report).split("?>", 1)[1]).find("testsuite")
    assert suite.get("tests") == "3" and suite.get("failures") == "1" and suite.get("skipped") == "1"
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    assert cases["lossless"].find("failure").get("message") == "1 prompt(s) differ from the baseline"
    assert cases["accuracy"].find("skipped") is not None and cases["outputs"].find("failure") is None


def test_reference_round_trips_and_refuses_other_settings_and_bad_files(tmp_path):
    settings = GateSettings("gsm8k", 4, 1, 16, 2, 1)
    path = tmp_path / "ref.json"
    write_reference(reference_of(_observation(), settings, "embedded tiny"), path)
    back = read_reference(path)
    assert back.settings == settings and back.greedy_outputs == _outputs("a") and back.greedy_source == "k=0"
    assert back.acceptance == _requests((0.5, 0.25)) and back.accuracy == Accuracy(0.5, 0.1, 0.5, 0.1, 20)
    check_matches(back, settings, path)
    with pytest.raises(SpecbenchError, match="max_tokens 16 vs 32"):
        check_matches(back, GateSettings("gsm8k", 4, 1, 32, 2, 1), path)
    doc = json.loads(path.read_text())
    del doc["speed"]
    path.write_text(json.dumps(doc))
    with pytest.raises(SpecbenchError, match="'speed' must be a JSON object"):
        read_reference(path)
    path.write_text('{"format": "other"}')
    with pytest.raises(SpecbenchError, match="not a specbench-gate-reference file"):
        read_reference(path)


def test_stage_names_are_checked():
    assert parse_skip("speed, accuracy") == {"speed", "accuracy"}
    with pytest.raises(SpecbenchError, match="unknown stage; stages: lossless, logprobs, accuracy"):
        parse_skip("latency")
    assert check_requested(None) == STAGES[:-2] and STAGES[-2:] == ("stress", "structured")  # opt-in: by name
    assert check_requested(f"outputs,{LOGPROBS}") == (LOGPROBS, "outputs")
    with pytest.raises(SpecbenchError, match="out of range"):
        Tolerances(acceptance_rtol=-1)


def test_an_empty_output_that_k0_gave_too_is_the_models_answer_not_a_failure():
    from specbench.gate.observed import GreedyOutput

    empty_both = [OutputProblem("r0-k0", "1", 0, "empty", "finish reason stop, 1 output tokens"),
                  OutputProblem("r0-k2", "1", 0, "empty", "finish reason stop, 1 output tokens")]
    baseline = (GreedyOutput("0", 0, "42"), GreedyOutput("1", 0, ""))
    result = outputs_stage(_observation(empty_both), baseline)
    assert result.status is Status.PASS and "2 empty at k = 0 too" in result.reason
    assert all("the model's own answer" in line for line in result.details)
    # empty at k only (k = 0 answered): speculation or the server lost the text
    only_k = [OutputProblem("r0-k2", "0", 0, "empty", "finish reason stop, 1 output tokens")]
    assert outputs_stage(_observation(only_k), baseline).status is Status.FAIL
    assert outputs_stage(_observation(empty_both)).status is Status.FAIL  # no k = 0 outputs to excuse it


def test_acceptance_and_speed_are_withheld_when_lossless_failed():
    from specbench.gate.comparability import unless_outputs_differ
    from specbench.gate.stage import ACCEPTANCE, LOSSLESS, SPEED, StageResult

    def stage(name, status, reason="ok"):
        return StageResult(name, status, "AL 2.4 (ref 2.0, +21%)", "-", "-", reason)

    judged = (stage(LOSSLESS, Status.FAIL), stage(ACCEPTANCE, Status.PASS), stage(SPEED, Status.PASS))
    lossless, acceptance, speed = unless_outputs_differ(judged)
    assert lossless == judged[0]
    for withheld in (acceptance, speed):
        assert withheld.status is Status.NOT_AVAILABLE and "not comparable: outputs differ" in withheld.reason
        assert "+21%" not in withheld.metric
    clean = (stage(LOSSLESS, Status.PASS), stage(ACCEPTANCE, Status.PASS), stage(SPEED, Status.PASS))
    assert unless_outputs_differ(clean) == clean
    off = (stage(LOSSLESS, Status.FAIL), stage(ACCEPTANCE, Status.FAIL, "... speculation off?"))
    assert unless_outputs_differ(off) == off  # not speculating fails whatever the outputs did
