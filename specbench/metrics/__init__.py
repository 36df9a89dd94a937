"""Metrics: per-request and per-cell latency, throughput, acceptance and accuracy (see definitions.py)."""

from specbench.metrics.acceptance import AcceptanceMetrics
from specbench.metrics.accuracy import Accuracy, AnswerAgreement, accuracy, answer_agreement
from specbench.metrics.cell_metrics import CellMetrics, speedup
from specbench.metrics.distribution import Distribution
from specbench.metrics.request_metrics import RequestMetrics

__all__ = [
    "AcceptanceMetrics",
    "Accuracy",
    "AnswerAgreement",
    "CellMetrics",
    "Distribution",
    "RequestMetrics",
    "accuracy",
    "answer_agreement",
    "speedup",
]
