"""The selftest's HF cross-check of a Bamba target (selftest/hf_reference.py): transformers before 5.23 normalizes the
gated RMSNorm over every group together, so with mamba_n_groups > 1 it is no reference (the GPU image's 5.17 made
the CUDA selftest's two Mamba-2 rows false alarms); with one group, or from 5.23 on, it is."""

from __future__ import annotations

import json

import pytest

from specbench.selftest import hf_reference
from specbench.selftest.hf_reference import cross_check_reference, hf_bamba_mismatch, hf_reference_mismatch


@pytest.mark.parametrize(("version", "n_groups", "refused"), [
    ("5.17.0", 2, True), ("5.22.0", 8, True), ("5.9.1", 2, True), ("5.17.0", 1, False), ("5.23.0", 2, False),
    ("5.23.0.dev0", 2, False), ("5.25.0", 8, False), ("6.0.0", 2, False),
])
def test_an_older_transformers_is_no_reference_for_grouped_norms(version, n_groups, refused):
    mismatch = hf_bamba_mismatch(n_groups, version)
    assert (mismatch is not None) == refused
    if refused:
        assert f"transformers {version} normalizes Bamba's gated RMSNorm over all {n_groups} groups" in mismatch


def test_the_cross_check_says_it_did_not_compare_and_only_for_bamba(tmp_path, monkeypatch):
    monkeypatch.setattr(hf_reference, "transformers_version", lambda: "5.17.0")
    (tmp_path / "bamba").mkdir()
    (tmp_path / "bamba" / "config.json").write_text(json.dumps({"model_type": "bamba", "mamba_n_groups": 2}))
    (tmp_path / "llama").mkdir()
    (tmp_path / "llama" / "config.json").write_text(json.dumps({"model_type": "llama"}))
    check = cross_check_reference(str(tmp_path / "bamba"), ((1, 2, 3),), 4, [(5, 6, 7, 8)])
    assert check.is_agreed and "not compared: transformers 5.17.0" in check.detail
    assert hf_reference_mismatch(str(tmp_path / "llama")) is None
