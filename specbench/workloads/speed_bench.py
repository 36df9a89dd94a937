"""SPEED-Bench from a local copy: one split (qualitative or a throughput_<N>k bucket), optionally some categories.

Multi-turn rows are replayed as MT-Bench's are (each user turn after the model's own answer). The row's category
is the sample's (per-category tables), its sub_category the sample's subcategory. Greedy with a 4K output cap
unless the grid says otherwise; no accuracy (speed and acceptance only). Layout and sources: speed_bench_layout.py.
"""

from __future__ import annotations

from pathlib import Path

from specbench.errors import SpecbenchError
from specbench.workloads.base import LoadedData, Sample
from specbench.workloads.data import DATA_DIR_ENV
from specbench.workloads.base import DataSource
from specbench.workloads.questions import ChatQuestionWorkload, sample_across_categories
from specbench.workloads.speed_bench_layout import (
    DEFAULT_DIR_NAME,
    DEFAULT_MAX_TOKENS,
    DEFAULT_SPLIT,
    DEFAULT_TEMPERATURE,
    SPLITS,
    categories_of,
)
from specbench.workloads.speed_bench_reader import SpeedBenchRow, read_speed_bench


class SpeedBenchWorkload(ChatQuestionWorkload):
    name = "speed_bench"
    version = "1"

    def __init__(self, path: str | None = None, split: str = DEFAULT_SPLIT, categories: tuple[str, ...] = (),
                 max_tokens: int = DEFAULT_MAX_TOKENS) -> None:
        super().__init__(max_tokens=max_tokens)
        if split not in SPLITS:
            raise SpecbenchError(f"--speed-bench-split: unknown split {split!r}; supported: {', '.join(SPLITS)}")
        unknown = [c for c in categories if c not in categories_of(split)]
        if unknown:
            raise SpecbenchError(f"--speed-bench-categories: {', '.join(map(repr, unknown))} not in the {split} "
                                 f"split; supported: {', '.join(categories_of(split))}")
        self.path = None if path is None else Path(path).expanduser()
        self.split = split
        self.categories = tuple(categories)  # () = all

    def load(self, source: DataSource, limit: int | None, seed: int) -> LoadedData:
        root = self._root(source)
        data = read_speed_bench(root, self.split)
        samples = tuple(_sample(row) for row in data.rows if not self.categories or row.category in self.categories)
        if not samples:
            raise SpecbenchError(f"{root}: no {self.split} rows in categories {', '.join(self.categories)}")
        return LoadedData(sample_across_categories(samples, limit, seed), data.files, f"local:{root}")

    def default_temperature(self, sample: Sample) -> float:
        return DEFAULT_TEMPERATURE

    def _root(self, source: DataSource) -> Path:
        if self.path is not None:
            return self.path
        default = None if source.data_dir is None else source.data_dir / DEFAULT_DIR_NAME
        if default is None or not default.exists():
            where = "no data root" if default is None else f"no {default}"
            raise SpecbenchError(
                f"no local SPEED-Bench copy ({where}; specbench never downloads it): pass --speed-bench-data PATH, "
                f"or put it under <data root>/{DEFAULT_DIR_NAME}/ (--data-dir or ${DATA_DIR_ENV})"
            )
        return default


def _sample(row: SpeedBenchRow) -> Sample:
    return Sample(sample_id=row.question_id, category=row.category, turns=row.turns, subcategory=row.sub_category)
