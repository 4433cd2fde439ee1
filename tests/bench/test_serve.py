"""The serve bench, suite-sized: four clients for a few seconds, then a SIGKILL and a restart."""

from __future__ import annotations

import csv

import pytest

from scix_core.bench import serve
from scix_core.config import load_config
from scix_core.ingest import ingest
from tests.corpus import CORPUS

pytestmark = pytest.mark.model


@pytest.fixture
def served(tmp_path, encoder, monkeypatch):
    cfg = load_config().replace(home=tmp_path)
    ingest(CORPUS, "served", config=cfg, progress=False, encoder=encoder)  # the server process owns the shard
    monkeypatch.setenv("SCIX_HOME", str(tmp_path))
    monkeypatch.delenv("SCIX_CONFIG", raising=False)
    return "served"


def test_load_then_a_kill_loses_no_acknowledged_save(served, encoder):
    out = serve.main(["--index", served, "--clients", "4", "--seconds", "4", "--kill-window", "6"])
    load = out["load"]["tally"]
    assert len(load.latency["search"]) > 10 and load.latency["recommend"], dict(load.errors)
    assert not load.errors, dict(load.errors)  # nothing fails under load
    # a user asking again before their next save gets their kept list: counted by /metrics, every worker's
    assert 0 < out["reused"] < len(load.latency["recommend"])
    killed = out["kill"]["tally"]
    # during the kill the front answers for the dead worker: reads elsewhere, writes with a typed 503
    assert all(serve.typed_503(k) for k in killed.errors), killed.errors
    assert out["kill"]["recovery"] is not None and out["acknowledged"] > 0
    assert out["missing"] == 0
    assert out["embedding_backend"] == encoder.config.backend  # the index's own, named in the report


def test_an_open_loop_sends_the_rate_asked_for_and_times_each_request_from_when_it_was_due(served, tmp_path):
    # closed loop, four clients on this corpus answer well over 100 requests a second; at 20 a second for
    # 5 s the clients send about 100, never many more (Poisson arrivals: ±2 standard deviations and slack)
    trace = tmp_path / "requests.csv"
    out = serve.main(
        [
            "--index",
            served,
            "--clients",
            "4",
            "--seconds",
            "5",
            "--rate",
            "20",
            "--no-kill",
            "--trace",
            str(trace),
        ]
    )
    tally = out["load"]["tally"]
    sent = sum(len(v) for v in tally.latency.values())
    assert 55 <= sent <= 140 and not tally.errors and out["rate"] == 20, (sent, dict(tally.errors))
    # the trace: every request once, due inside the phase, its time as the tally's
    with open(trace, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == sent and {r["phase"] for r in rows} == {"load"}
    assert all(0 <= float(r["due_s"]) <= 5.5 and r["status"] in ("200", "201") for r in rows)
    assert sorted(float(r["ms"]) for r in rows if r["endpoint"] == "search") == pytest.approx(
        sorted(s * 1000 for s in tally.latency["search"]), abs=0.01
    )
    with pytest.raises(SystemExit):
        serve.main(["--index", served, "--rate", "0"])


def test_the_bench_s_connection_opens_again_when_the_server_closed_a_kept_one():
    """A server that closes each connection after answering without saying so: the next request on the kept
    connection finds it closed and goes out once more on a new one; a refused connection raises."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class OneAnswer(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self):
            body = b'{"error": {"code": "bad_parameters"}}'
            self.send_response(422)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            self.close_connection = True  # closed, though the answer did not say so

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), OneAnswer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    conn = serve.Connection(url, timeout=5)
    try:
        for _ in range(3):
            code, body = conn.request("GET", "/search", {"q": "dark matter"})
            assert code == 422 and serve._code(body) == "bad_parameters"
    finally:
        conn.close()
        server.shutdown()
        server.server_close()
    with pytest.raises(ConnectionRefusedError):
        serve.Connection(url, timeout=5).request("GET", "/search")
