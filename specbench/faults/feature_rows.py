"""The engine hands the EAGLE catch-up its target features one verify row late.

A request's committed positions get the rows of the positions after them: the last is a rejected draft's row, or
at full acceptance the next request's first row. The proposer receives well-formed features at the right
positions, so its metadata and draft KV stay consistent; only an oracle that recomputes the features from the
committed tokens (not one replaying what the proposer was handed) sees the wrong rows.
"""

from __future__ import annotations

from specbench.faults.fault import EAGLE_METHODS, Fault, Mutant


class FeatureRowsOffByOne(Mutant):
    fault = Fault("feature-rows-off-by-one", "EAGLE target features handed over one verify row late",
                  "", "draft", EAGLE_METHODS)

    def target_feature_rows(self, first_row: int, num_rows: int, num_target_rows: int) -> int:
        return min(first_row + 1, num_target_rows - num_rows)  # the batch's last request keeps its own end
