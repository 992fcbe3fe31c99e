"""The server's metrics in Prometheus's text format (the maintained ``prometheus-client``).

Request-level metrics are kept by the server as it answers; the executor's own
counters (batches, failed batches, erasures, crashes, hangs, restarts, flagged
workers, re-dispatches, ...) and its batcher's fill are read from the executor
at each scrape, so they never drift from ``executor.stats``.

=======================================  ============================================================
``gencc_request_seconds``                histogram of answered requests' latency (seconds)
``gencc_answers_total{kind}``            answered inputs, ``exact`` or ``decoded``
``gencc_requests_refused_total{reason}`` refused before reaching the executor: ``bad_request``,
                                         ``unknown_model``, ``too_large``, ``overloaded``, ``shutting_down``
``gencc_requests_failed_total{reason}``  accepted and not answered (the exception's name, ``timeout``,
                                         ``not_exact``)
``gencc_queue_depth``                    input rows accepted and not yet answered
``gencc_executor_events_total{kind}``    ``executor.stats`` (``crashes``, ``hangs``, ``flagged``, ...)
``gencc_worker_restarts_total``          crashes + hangs + slow restarts
``gencc_batches_dispatched_total``       batches the request batcher sent, and ``..._partial_total``
                                         those sent at the window's expiry, not full
=======================================  ============================================================
"""

from __future__ import annotations

__all__ = ["ServerMetrics"]

_RESTARTS = ("crashes", "hangs", "slow_restarts")


class _ExecutorCollector:
    """Reads the executor's counters at scrape time."""

    def __init__(self, executor):
        self.executor = executor

    def collect(self):
        from prometheus_client.core import CounterMetricFamily

        stats = dict(self.executor.stats)
        events = CounterMetricFamily("gencc_executor_events", "The executor's event counters (executor.stats)",
                                     labels=["kind"])
        for kind, value in sorted(stats.items()):
            events.add_metric([kind], float(value))
        yield events
        yield CounterMetricFamily("gencc_worker_restarts", "Workers restarted (crashes, hangs, slow restarts)",
                                  value=float(sum(stats.get(k, 0) for k in _RESTARTS)))
        batcher = getattr(self.executor, "_batcher", None)
        yield CounterMetricFamily("gencc_batches_dispatched", "Batches the request batcher dispatched",
                                  value=float(getattr(batcher, "batches", 0)))
        yield CounterMetricFamily("gencc_batches_dispatched_partial",
                                  "Batches dispatched at the batching window's expiry, not full",
                                  value=float(getattr(batcher, "partial", 0)))


class ServerMetrics:
    """The metrics of one served model.

    Parameters
    ----------
    executor : CodedExecutor or HedgedExecutor
    registry : prometheus_client.CollectorRegistry, optional
        Default: a new registry of its own (so two servers in one process never share counters).
    """

    def __init__(self, executor, registry=None):
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.registry = CollectorRegistry() if registry is None else registry
        buckets = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
        self.latency = Histogram("gencc_request_seconds", "Latency of answered requests", buckets=buckets,
                                 registry=self.registry)
        self.answers = Counter("gencc_answers", "Answered inputs, exact or decoded", ["kind"], registry=self.registry)
        self._refused = Counter("gencc_requests_refused", "Requests refused before reaching the executor", ["reason"],
                                registry=self.registry)
        self._failed = Counter("gencc_requests_failed", "Requests accepted and not answered", ["reason"],
                               registry=self.registry)
        self.queue_depth = Gauge("gencc_queue_depth", "Input rows accepted and not yet answered",
                                 registry=self.registry)
        self.registry.register(_ExecutorCollector(executor))

    def refused(self, reason: str):
        self._refused.labels(reason).inc()

    def failed(self, reason: str):
        self._failed.labels(reason).inc()

    def answered(self, exact, seconds: float):
        n_exact = int(sum(bool(e) for e in exact))
        self.answers.labels("exact").inc(n_exact)
        self.answers.labels("decoded").inc(len(exact) - n_exact)
        self.latency.observe(seconds)

    def exposition(self) -> tuple[bytes, str]:
        """The metrics page and its content type."""
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        return generate_latest(self.registry), CONTENT_TYPE_LATEST
