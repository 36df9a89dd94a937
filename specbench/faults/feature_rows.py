"""The engine hands the EAGLE catch-up its target features one verify row late.

A request's committed positions get the rows of the positions after them: the last is a rejected draft's row, or
at full acceptance the next request's first row. The proposer receives well-formed features at the right
positions, so its metadata and draft KV stay consistent; only an oracle that recomputes the features from the
committed tokens (not one replaying what the proposer was handed) sees the wrong rows.
"""

from __future__ import annotations

from specbench.faults.fault import Fault, Mutant
from specbench.faults.path_mutant import wrap_method
from specbench.speculation.capabilities import ConsumesTargetFeatures


class FeatureRowsOffByOne(Mutant):
    fault = Fault("feature-rows-off-by-one", "EAGLE target features handed over one verify row late",
                  "", "draft", ConsumesTargetFeatures)

    def install(self, engine) -> None:
        proposer = engine.proposer

        def make_read(read_verify):
            def late_rows(launch, output_rows, accepted, *, hands_features: bool):
                # The engine hands request r the rows [offset_r, offset_r + num_new) of launch.features, in request
                # order, where offset_r counts the verify rows (1 + drafts) of the requests before it.
                num_drafts = (launch.proposal.num_draft_tokens if launch.proposal is not None
                              else (0,) * len(launch.requests))
                offsets = [sum(1 + n for n in num_drafts[:r]) for r in range(len(launch.requests))]
                calls = iter(offsets)
                add = proposer.add_target_features

                def shifted(request_id, start, features):
                    num_rows, total = features.shape[0], launch.features.shape[0]
                    first = min(next(calls) + 1, total - num_rows)  # the batch's last request keeps its own end
                    add(request_id, start, launch.features[first : first + num_rows])

                proposer.add_target_features = shifted
                try:
                    return read_verify(launch, output_rows, accepted, hands_features=hands_features)
                finally:
                    proposer.add_target_features = add
            return late_rows

        wrap_method(engine.step_runner, "read_verify", make_read)
