"""Results the GPU run reports rather than asserts (bf16 greedy match rates), appended as JSON lines."""

import json
import os


def record_gpu_result(name: str, value) -> None:
    path = os.environ.get("SPECBENCH_TEST_REPORT")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps({"test": name, "value": value}) + "\n")
