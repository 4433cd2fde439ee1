"""Two workers' /metrics summed into one exposition."""

from prometheus_client.parser import text_string_to_metric_families

from scix_core.serve.exposition import merged

ONE = """# HELP scix_requests_total HTTP requests
# TYPE scix_requests_total counter
scix_requests_total{endpoint="/search",status="200"} 3.0
scix_requests_created{endpoint="/search",status="200"} 1.7e+09
# HELP scix_request_seconds latency
# TYPE scix_request_seconds histogram
scix_request_seconds_bucket{endpoint="/search",le="0.01"} 2.0
scix_request_seconds_bucket{endpoint="/search",le="+Inf"} 3.0
scix_request_seconds_sum{endpoint="/search"} 0.025
"""
TWO = """# HELP scix_requests_total HTTP requests
# TYPE scix_requests_total counter
scix_requests_total{endpoint="/search",status="200"} 4.0
scix_requests_created{endpoint="/search",status="200"} 1.6e+09
scix_requests_total{endpoint="/healthz",status="200"} 1.0
# HELP scix_request_seconds latency
# TYPE scix_request_seconds histogram
scix_request_seconds_bucket{endpoint="/search",le="0.01"} 1.0
scix_request_seconds_bucket{endpoint="/search",le="+Inf"} 4.0
scix_request_seconds_sum{endpoint="/search"} 0.5
"""


def test_series_are_summed_once_each_and_the_families_stay_whole():
    text = merged([ONE, TWO])
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
    search = (("endpoint", "/search"), ("status", "200"))
    assert samples[("scix_requests_total", search)] == 7.0
    assert samples[("scix_requests_created", search)] == 1.6e9  # when the earliest began
    assert samples[("scix_requests_total", (("endpoint", "/healthz"), ("status", "200")))] == 1.0
    assert samples[("scix_request_seconds_bucket", (("endpoint", "/search"), ("le", "0.01")))] == 3.0
    assert samples[("scix_request_seconds_sum", (("endpoint", "/search"),))] == 0.525
    assert text.count("# TYPE scix_requests_total counter") == 1
    lines = text.splitlines()  # the second worker's extra series sits with its family, before the next one
    assert lines.index('scix_requests_total{endpoint="/healthz",status="200"} 1.0') < lines.index(
        "# HELP scix_request_seconds latency"
    )
    assert merged([ONE]) == merged([ONE, ""])  # a worker with nothing yet adds nothing
