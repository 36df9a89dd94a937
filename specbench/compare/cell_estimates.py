"""Per-run estimates of one metric in one matched cell: point value plus bootstrap replicates or paired outcomes."""

from __future__ import annotations

from functools import cached_property

import numpy as np
import pandas as pd

from specbench.compare.bootstrap import (
    Estimate,
    RepeatReplicates,
    combine_repeats,
    repeat_replicates,
    rng_for,
)
from specbench.compare.cell_level import cell_level_estimate
from specbench.compare.draws import Draw, identity_draw, random_draw
from specbench.compare.estimators import estimator_of
from specbench.compare.loading import Run
from specbench.compare.matching import MatchKey, cell_ids_by_key
from specbench.compare.metrics_catalog import OUTPUT_THROUGHPUT, Metric, Resampling
from specbench.compare.paired import question_means, request_outcomes
from specbench.compare.request_sample import RequestSample
from specbench.metrics import definitions
from specbench.runs.cell_acceptance import cell_value
from specbench.runs.drafting import is_baseline_cell
from specbench.runs.greedy_divergence import same_text

MIN_POOLED_REQUESTS = 2  # a bootstrap over fewer requests has nothing to resample


class RunEstimates:
    """Caches each cell repeat's arrays and resample draw; `side` ("before"/"after") keeps the two seeds apart."""

    def __init__(self, run: Run, side: str, num_resamples: int, seed: int) -> None:
        self.run, self.side, self.num_resamples, self.seed = run, side, num_resamples, seed
        self._samples: dict[tuple[MatchKey, int], tuple[RequestSample, Draw]] = {}
        self._pooled_samples: dict[MatchKey, tuple[RequestSample, Draw]] = {}

    @cached_property
    def cells(self) -> dict[MatchKey, dict[int, str]]:
        return cell_ids_by_key(self.run.cells)

    @cached_property
    def _requests_by_cell(self) -> dict[str, pd.DataFrame]:
        return {cell_id: group for cell_id, group in self.run.requests.groupby("cell_id", sort=False)}

    @cached_property
    def _cell_rows(self) -> dict[str, dict]:
        return {str(row["cell_id"]): row for row in self.run.cells.to_dict("records")}

    def baseline_cells(self, key: MatchKey) -> dict[int, str]:
        """{repeat: cell_id} of the k = 0 cells `key` is compared with: never `key` itself, and only cells that
        did not draft (runs/drafting.py)."""
        if key == key.baseline:
            return {}
        found = self.cells.get(key.baseline, {})
        return {r: c for r, c in found.items() if is_baseline_cell(self._cell_rows[c])}

    def num_repeats(self, key: MatchKey) -> int:
        return len(self.cells.get(key, {}))

    def requests(self, cell_id: str) -> pd.DataFrame:
        return self._requests_by_cell.get(cell_id, self.run.requests.iloc[:0])

    def _sample(self, key: MatchKey, repeat: int) -> tuple[RequestSample, Draw]:
        if (key, repeat) not in self._samples:
            sample = RequestSample.of(self.requests(self.cells[key][repeat]))
            rng = rng_for(self.seed, self.side, key, repeat)
            self._samples[key, repeat] = (sample, random_draw(sample, self.num_resamples, rng))
        return self._samples[key, repeat]

    def _replicates(self, metric: Metric, key: MatchKey, repeat: int) -> RepeatReplicates:
        sample, draw = self._sample(key, repeat)
        return repeat_replicates(sample, estimator_of(metric), draw)

    def estimate(self, metric: Metric, key: MatchKey) -> Estimate:
        """REQUESTS, ROUNDS and SPEEDUP metrics."""
        if key not in self.cells:
            return Estimate(None, None, 0, 0)
        rng = rng_for(self.seed, self.side, key, metric.name, "repeats")
        if metric.cell_column is not None and not self._has_request_counts(key):
            return self._cell_level(metric.cell_column, key, rng)
        if metric.resampling is Resampling.ROUNDS:
            return self._pooled(metric, key)
        if metric.resampling is not Resampling.SPEEDUP:
            return combine_repeats([self._replicates(metric, key, r) for r in sorted(self.cells[key])], rng)
        return combine_repeats(self._speedup_repeats(key), rng)

    def _pooled(self, metric: Metric, key: MatchKey) -> Estimate:
        """Acceptance: the requests of all repeats pooled into one sample, each request a cluster of its rounds.
        Acceptance depends on the requests, not on the machine's load, so the repeats are more of the same
        requests: pooled, every request counts, and no minimum per repeat leaves a collapse without a verdict."""
        repeats = sorted(self.cells[key])
        points = tuple(self._replicates(metric, key, r).point for r in repeats)
        if key not in self._pooled_samples:
            frames = [self.requests(self.cells[key][r]) for r in repeats]
            sample = RequestSample.of(pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0])
            rng = rng_for(self.seed, self.side, key, "pooled")
            self._pooled_samples[key] = (sample, random_draw(sample, self.num_resamples, rng))
        sample, draw = self._pooled_samples[key]
        if sample.num_requests < MIN_POOLED_REQUESTS:
            replicates = None
        else:
            replicates = estimator_of(metric)(sample, draw)
        point = float(estimator_of(metric)(sample, identity_draw(sample))[0])
        return Estimate(None if np.isnan(point) else point, replicates, sample.num_requests, len(repeats), points)

    def same_text(self, key: MatchKey) -> float | None:
        """Greedy cells: the mean over repeats of exact-text agreement with k = 0 (runs/greedy_divergence.py)."""
        values = [v for c in self.cells.get(key, {}).values() if (v := same_text(self._cell_rows[c])) is not None]
        return float(np.mean(values)) if values else None

    def _has_request_counts(self, key: MatchKey) -> bool:
        """Some request of the cell carries per-request draft counts (engine, or the server's response bodies)."""
        return any(not np.isnan(self._sample(key, r)[0].counts.num_draft_rounds).all() for r in self.cells[key])

    def _cell_level(self, column: str, key: MatchKey, rng: np.random.Generator) -> Estimate:
        """Acceptance from per-cell values only (/metrics counter deltas): see cell_level.py."""
        repeats = sorted(self.cells[key])
        values = [cell_value(self._cell_rows[self.cells[key][r]], column) for r in repeats]
        num_requests = sum(self._sample(key, r)[0].num_requests for r in repeats)
        return cell_level_estimate(values, num_requests, self.num_resamples, rng)

    def _speedup_repeats(self, key: MatchKey) -> list[RepeatReplicates]:
        """Per repeat: this cell's throughput replicates / its k=0 cell's (independent draws)."""
        baseline = self.baseline_cells(key)
        out = []
        for repeat in sorted(r for r in self.cells[key] if r in baseline):
            cell = self._replicates(OUTPUT_THROUGHPUT, key, repeat)
            base = self._replicates(OUTPUT_THROUGHPUT, key.baseline, repeat)
            with np.errstate(divide="ignore", invalid="ignore"):
                out.append(RepeatReplicates(definitions.speedup(cell.point, base.point),
                                            definitions.speedup(cell.replicates, base.replicates), cell.num_requests))
        return out

    def outcomes(self, metric: Metric, key: MatchKey) -> tuple[float | None, pd.Series]:
        """PAIRED metrics: (cell value = mean over repeats of the mean outcome, per-question mean outcomes)."""
        if key not in self.cells:
            return None, pd.Series(dtype=float)
        baseline = self.baseline_cells(key)
        per_repeat = []
        for repeat, cell_id in sorted(self.cells[key].items()):
            base = self.requests(baseline[repeat]) if repeat in baseline else None
            per_repeat.append(request_outcomes(self.requests(cell_id), base, metric.outcome))
        means = [s.mean() for s in per_repeat if len(s)]
        return (float(np.mean(means)) if means else None), question_means([s for s in per_repeat if len(s)])
