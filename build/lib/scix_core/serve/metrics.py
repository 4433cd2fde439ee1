"""Prometheus metrics of one server, in a registry of its own: requests and latency per endpoint, search
stage latency, typed backend errors, and how many queries the query encoder's calls encoded (concurrent
searches share a call: ``scix_core.embeddings.batching``), and how many recommendations were a user's
kept list (``scix_core.recommend.reuse``)."""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily

#: seconds; from sub-millisecond stages to slow first loads
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class Metrics:
    content_type = CONTENT_TYPE_LATEST

    def __init__(self):
        self.registry = CollectorRegistry()
        self._requests = Counter(
            "scix_requests",
            "HTTP requests by endpoint and status",
            ["endpoint", "status"],
            registry=self.registry,
        )
        self._latency = Histogram(
            "scix_request_seconds",
            "request latency by endpoint",
            ["endpoint"],
            buckets=BUCKETS,
            registry=self.registry,
        )
        self._stages = Histogram(
            "scix_search_stage_seconds",
            "search stage latency",
            ["stage"],
            buckets=BUCKETS,
            registry=self.registry,
        )
        self._backend = Counter(
            "scix_backend_errors", "typed backend errors answered with 503", ["code"], registry=self.registry
        )

    def query_encoder(self, read: Callable[[], tuple[int, int]]) -> None:
        """Report the query encoder's (calls, texts encoded) as read at each scrape."""
        self.registry.register(
            _ReadAtScrape(
                read,
                (
                    ("scix_query_encoder_calls", "calls of the query encoder (concurrent queries share one)"),
                    ("scix_query_encoder_texts", "queries the query encoder encoded"),
                ),
            )
        )

    def reused_lists(self, read: Callable[[], int]) -> None:
        """Report how many recommendations answered with a user's kept list, as read at each scrape."""
        help_ = (
            "recommendations answered with the user's last list (no interaction or community change since)"
        )
        self.registry.register(_ReadAtScrape(lambda: (read(),), (("scix_recommendations_reused", help_),)))

    def request(self, endpoint: str, status: int, seconds: float) -> None:
        self._requests.labels(endpoint, str(status)).inc()
        self._latency.labels(endpoint).observe(seconds)

    def stages(self, timing_ms: dict) -> None:
        for stage, ms in timing_ms.items():
            if isinstance(ms, (int, float)):
                self._stages.labels(stage).observe(ms / 1000.0)

    def backend_error(self, code: str) -> None:
        self._backend.labels(code).inc()

    def render(self) -> str:
        return generate_latest(self.registry).decode()


class _ReadAtScrape:
    """Counters kept elsewhere (``read()``: their values, in the order of ``families``' (name, help) pairs),
    read when the registry is scraped."""

    def __init__(self, read: Callable[[], tuple], families: tuple[tuple[str, str], ...]):
        self.read, self.families = read, families

    def collect(self):
        for (name, help_), value in zip(self.families, self.read()):
            yield CounterMetricFamily(name, help_, value)
