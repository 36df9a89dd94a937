"""The lossless rule every front end calls (verification/lossless.py): pairs, first divergence, near-tie diagnosis
of mismatches only, and the pass rule (strict or near-tie tolerant, every prompt answered on both sides)."""

from __future__ import annotations

from specbench.backends.near_tie import DIVERGENT, NEAR_TIE, UNCLASSIFIED, TieDiagnosis
from specbench.verification.lossless import OutputPair, each, first_divergence, judge_lossless, paired_by_key


def test_first_divergence_of_texts_and_token_ids():
    assert first_divergence("abc", "abc") is None
    assert first_divergence("abx", "abc") == 2
    assert first_divergence((1, 2), (1, 2, 3)) == 2  # one a prefix of the other: the shorter length


def test_only_mismatches_are_diagnosed_in_order():
    asked = []

    def probe(pair: OutputPair) -> TieDiagnosis:
        asked.append(pair.sample_id)
        return TieDiagnosis(NEAR_TIE if pair.sample_id == "b" else DIVERGENT, 0.01, ("x", "y"), None)

    pairs = [OutputPair("a", 0, "same", "same"), OutputPair("b", 0, "k x", "k y"), OutputPair("c", 0, "1", "2"),
             OutputPair("d", 0, None, "z", error="spec: timeout")]
    result = judge_lossless(pairs, each(probe))
    assert asked == ["b", "c"]
    assert (result.num_identical, result.num_near_ties, result.num_divergent) == (1, 1, 1)
    assert [p.sample_id for p in result.failures] == ["d"] and not result.passes(strict=False)


def test_near_ties_pass_unless_strict_and_without_a_probe_a_mismatch_is_divergent():
    pairs = [OutputPair("a", 0, "k x", "k y")]
    near = judge_lossless(pairs, lambda ps: [TieDiagnosis(NEAR_TIE, 0.01, ("x", "y"), None) for _ in ps])
    assert near.passes(strict=False) and not near.passes(strict=True)
    unprobed = judge_lossless(pairs, None)
    assert unprobed.mismatches[0].diagnosis.verdict == UNCLASSIFIED and not unprobed.passes(strict=False)


def test_a_reference_answer_without_a_speculative_one_fails():
    pairs, missing = paired_by_key([(("a", 0), "t")], [(("a", 0), "t"), (("b", 0), "u")])
    assert [p.sample_id for p in pairs] == ["a"] and missing == 1
    assert not judge_lossless(pairs, None, missing).passes(strict=False)
    assert judge_lossless(pairs, None).passes(strict=True)
    assert not judge_lossless((), None).passes(strict=False)  # nothing compared proves nothing
