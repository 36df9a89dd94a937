"""Every deadline of an HTTP call specbench makes to a server, declared once: SweepConfig's defaults, the command
line's and the backends' all read these. A deadline bounds the whole call, connect to last byte
(backends/deadline.py)."""

from __future__ import annotations

REQUEST_TIMEOUT_S = 600.0  # one streamed completion
SERVER_READY_TIMEOUT_S = 600.0  # a launched server, until /health or /v1/models answers 200
READY_PROBE_TIMEOUT_S = 2.0  # one readiness probe of a launched server (polled until SERVER_READY_TIMEOUT_S)
INFO_TIMEOUT_S = 10.0  # each of /v1/models, /version, /props (once per server)
METRICS_TIMEOUT_S = 10.0  # one /metrics scrape (two per cell)
CACHE_RESET_TIMEOUT_S = 60.0  # one prefix-cache reset POST (a server may finish running requests first)
# A cell's side calls together (its cache reset, the /metrics scrapes at both ends of its window): each honours its
# own deadline, and this bounds their sum (at least the longest single deadline)
CELL_SIDE_TIMEOUT_S = 60.0
