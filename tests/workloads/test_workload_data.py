"""Data-source resolution, malformed data, sha256 records, hub fallback (simulated) and the registry."""

from __future__ import annotations

import hashlib
import json

import pytest

from specbench.errors import SpecbenchError
from specbench.workloads import WORKLOADS, data, get_workload
from specbench.workloads.data import DATA_DIR_ENV, resolve_data_source
from specbench.workloads.gsm8k import Gsm8kWorkload
from specbench.workloads.mt_bench import MtBenchWorkload

GSM8K_ROWS = [{"question": f"q{i}?", "answer": f"s{i}\n#### {i}"} for i in range(8)]


def _jsonl(rows) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


@pytest.fixture
def gsm8k_dir(tmp_path):
    (tmp_path / "gsm8k").mkdir()
    (tmp_path / "gsm8k" / "train.jsonl").write_text(_jsonl(GSM8K_ROWS))
    (tmp_path / "gsm8k" / "test.jsonl").write_text(_jsonl(GSM8K_ROWS[:3]))
    return tmp_path


@pytest.fixture(autouse=True)
def no_hub(monkeypatch):
    """Tests never reach the hub: any hub read fails as it would offline."""
    monkeypatch.delenv(DATA_DIR_ENV, raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(data, "default_data_dirs", lambda: ())  # a ../shared/data on this machine is not looked at

    def offline(hub):
        raise ConnectionError("offline")

    monkeypatch.setattr(data, "load_hub_rows", offline)


def test_resolution_order(tmp_path, monkeypatch):
    assert resolve_data_source(None).origin == "hub"
    env_dir = tmp_path / "env"
    env_dir.mkdir()
    monkeypatch.setenv(DATA_DIR_ENV, str(env_dir))
    assert resolve_data_source(None).data_dir == env_dir
    assert resolve_data_source(tmp_path).data_dir == tmp_path  # explicit wins


@pytest.mark.parametrize("where", ["cwd", "repo"])
def test_shared_data_beside_the_checkout_is_the_default(where, gsm8k_dir, tmp_path, monkeypatch):
    """With neither --data-dir nor $SPECBENCH_DATA_DIR: ../shared/data from the current directory, then from the
    repository checkout (the README's layout)."""
    monkeypatch.undo()
    monkeypatch.delenv(DATA_DIR_ENV, raising=False)
    shared = tmp_path / "shared" / "data"
    shared.parent.mkdir()
    (shared).symlink_to(gsm8k_dir, target_is_directory=True)
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    elsewhere = tmp_path / "a" / "b"
    elsewhere.mkdir(parents=True)
    monkeypatch.chdir(checkout if where == "cwd" else elsewhere)
    monkeypatch.setattr(data, "_REPO_ROOT", checkout if where == "repo" else elsewhere)
    source = resolve_data_source(None)
    assert source.data_dir == shared.resolve() and source.origin == "../shared/data"
    assert len(Gsm8kWorkload().load(source, None, seed=0).samples) == 3


def test_no_data_anywhere_fails_fast_naming_where_it_looked(tmp_path, monkeypatch):
    """Offline or unreachable hub: one error at once (no `datasets` retries), naming every place looked."""
    import time

    import huggingface_hub

    monkeypatch.undo()
    monkeypatch.delenv(DATA_DIR_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(data, "_REPO_ROOT", tmp_path)
    for offline in (True, False):
        if offline:
            monkeypatch.setenv("HF_HUB_OFFLINE", "1")
        else:
            monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
            monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)

            def unreachable(*args, **kwargs):
                raise ConnectionError("Name or service not known")

            monkeypatch.setattr(huggingface_hub.HfApi, "dataset_info", unreachable)
        start = time.monotonic()
        with pytest.raises(SpecbenchError) as err:
            Gsm8kWorkload().load(resolve_data_source(None), None, seed=0)
        assert time.monotonic() - start < 2
        message = str(err.value)
        assert "openai/gsm8k" in message and "--data-dir (not given)" in message
        assert f"${DATA_DIR_ENV} (not set)" in message
        assert f"{(tmp_path / '..' / 'shared' / 'data').resolve()} (missing)" in message
        assert ("offline mode" if offline else "the hub is unreachable") in message


@pytest.mark.parametrize("use_env", [False, True])
def test_missing_directory_is_one_error(tmp_path, monkeypatch, use_env):
    missing = tmp_path / "nope"
    if use_env:
        monkeypatch.setenv(DATA_DIR_ENV, str(missing))
    with pytest.raises(SpecbenchError, match="does not exist"):
        resolve_data_source(None if use_env else missing)


def test_missing_file_names_both_options(tmp_path):
    with pytest.raises(SpecbenchError) as err:
        MtBenchWorkload().load(resolve_data_source(tmp_path), None, seed=0)
    assert "mt_bench/question.jsonl" in str(err.value)
    assert "--data-dir" in str(err.value) and DATA_DIR_ENV in str(err.value)


def test_no_local_data_and_unreachable_hub_is_one_error_naming_both_options():
    with pytest.raises(SpecbenchError) as err:
        Gsm8kWorkload().load(resolve_data_source(None), None, seed=0)
    message = str(err.value)
    assert "openai/gsm8k" in message and "--data-dir" in message and DATA_DIR_ENV in message
    with pytest.raises(SpecbenchError, match="no Hugging Face hub copy"):
        MtBenchWorkload().load(resolve_data_source(None), None, seed=0)


def test_hub_rows_hash_like_the_upstream_file(gsm8k_dir, monkeypatch):
    by_split = {"train": GSM8K_ROWS, "test": GSM8K_ROWS[:3]}
    monkeypatch.setattr(data, "load_hub_rows", lambda hub: [dict(r) for r in by_split[hub.split]])
    from_hub = Gsm8kWorkload().load(resolve_data_source(None), None, seed=0)
    local = Gsm8kWorkload().load(resolve_data_source(gsm8k_dir), None, seed=0)
    assert from_hub.source == "hub:openai/gsm8k" and local.source.startswith("local:")
    assert from_hub.samples == local.samples
    assert from_hub.files == local.files and from_hub.data_sha256 == local.data_sha256


def test_sha256_of_every_file_used(gsm8k_dir):
    loaded = Gsm8kWorkload().load(resolve_data_source(gsm8k_dir), 2, seed=0)
    for record in loaded.files:
        assert record.sha256 == hashlib.sha256((gsm8k_dir / record.name).read_bytes()).hexdigest()
    assert [(f.name, f.num_rows) for f in loaded.files] == [("gsm8k/test.jsonl", 3), ("gsm8k/train.jsonl", 8)]
    before = loaded.data_sha256
    (gsm8k_dir / "gsm8k" / "train.jsonl").write_text(_jsonl(GSM8K_ROWS[::-1]))
    assert Gsm8kWorkload().load(resolve_data_source(gsm8k_dir), 2, seed=0).data_sha256 != before


@pytest.mark.parametrize(
    ("line", "match"),
    [
        ("{not json", "malformed JSON in .*test.jsonl line 3"),
        ('{"question": "q"}', "test.jsonl line 3: missing key 'answer'"),
        ('{"question": 5, "answer": "#### 1"}', "test.jsonl line 3: key 'question' should be str"),
        ('{"question": "q", "answer": "no marker"}', "test.jsonl line 3: answer has no"),
        ("[1, 2]", "test.jsonl line 3: expected a JSON object"),
    ],
)
def test_malformed_rows_name_file_and_line(gsm8k_dir, line, match):
    rows = _jsonl(GSM8K_ROWS[:2]) + line + "\n"
    (gsm8k_dir / "gsm8k" / "test.jsonl").write_text(rows)
    with pytest.raises(SpecbenchError, match=match):
        Gsm8kWorkload().load(resolve_data_source(gsm8k_dir), None, seed=0)


def test_malformed_question_rows(tmp_path):
    (tmp_path / "mt_bench").mkdir()
    (tmp_path / "mt_bench" / "question.jsonl").write_text('{"question_id": 1, "category": "x", "turns": []}\n')
    with pytest.raises(SpecbenchError, match="question.jsonl line 1: 'turns' should be a non-empty list"):
        MtBenchWorkload().load(resolve_data_source(tmp_path), None, seed=0)


def test_registry_lists_supported_names_and_options():
    assert WORKLOADS.supported() == ["file", "gsm8k", "json_schema", "mt_bench", "random", "spec_bench", "speed_bench"]
    with pytest.raises(SpecbenchError, match="supported: file:PATH, gsm8k, json_schema, mt_bench, random, spec_bench, speed_bench"):
        get_workload("hellaswag")
    with pytest.raises(SpecbenchError, match="no option.*shotz.*num_shots"):
        get_workload("gsm8k", shotz=3)
    workload = get_workload("gsm8k", num_shots=3)
    assert workload.name == "gsm8k" and workload.num_shots == 3 and workload.version
