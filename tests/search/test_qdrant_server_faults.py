"""A Qdrant server that refuses, errors or hangs: the dense lane is dropped with the reason (within the client
timeout), the query is answered by the lexical lanes, and `scix doctor` says which server and why. The vectors
are the fixture's qdrant-client index; only the server URL it is told to use is hostile."""

from __future__ import annotations

import http.server
import socket
import threading
import time
import warnings

import pytest

from scix_core.cli.main import main
from scix_core.errors import BackendUnavailableError
from scix_core.search import Searcher
from scix_core.vectors.client import ClientVectorStore

pytestmark = pytest.mark.model


class _Errors(http.server.BaseHTTPRequestHandler):
    def _fail(self):
        body = b'{"status": {"error": "internal"}}'
        self.send_response(500)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PUT = do_DELETE = _fail

    def log_message(self, *args):
        pass


@pytest.fixture(params=["refuses", "errors", "hangs"])
def hostile(request):
    """(kind, URL) of a server that refuses connections, answers 500 to everything, or accepts and never
    replies."""
    if request.param == "refuses":
        with socket.socket() as s:  # a port that was free a moment ago: nothing listens there
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        yield request.param, f"http://127.0.0.1:{port}"
        return
    if request.param == "errors":
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Errors)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        yield request.param, f"http://127.0.0.1:{server.server_address[1]}"
        server.shutdown()
        return
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)  # connections complete in the kernel's backlog; nothing ever reads or answers them
    yield request.param, f"http://127.0.0.1:{listener.getsockname()[1]}"
    listener.close()


def test_dense_lane_dropped_with_the_reason_and_the_query_answered(built_client, hostile):
    kind, url = hostile
    cfg = built_client.config.replace(**{"vectors.url": url, "vectors.timeout_s": 1})
    t = time.perf_counter()
    searcher = Searcher(built_client.index, cfg)
    result = searcher.search("graph neural networks", limit=5)
    elapsed = time.perf_counter() - t
    reason = result.metadata["dropped_lanes"]["dense"]
    assert reason.startswith("backend_unavailable") and url in reason, reason
    assert result.metadata["degraded"] and "lexical" in result.metadata["lanes_run"] and len(result.hits) == 5
    assert elapsed < 8, f"{kind}: {elapsed:.1f} s (client timeout 1 s)"
    with pytest.raises(Exception, match="dense lane"):
        searcher.search("graph neural networks", "semantic")


def test_doctor_names_the_server_and_the_failure(home, hostile, tmp_path, monkeypatch, capsys):
    _, url = hostile
    # a hang ends at a one-second client timeout, not the default ten
    (tmp_path / "scix.toml").write_text("[vectors]\ntimeout_s = 1\n")
    monkeypatch.setenv("SCIX_CONFIG", str(tmp_path / "scix.toml"))
    monkeypatch.setenv("SCIX_VECTOR_BACKEND", "qdrant")
    monkeypatch.setenv("SCIX_QDRANT_URL", url)
    assert main(["doctor"]) == 1
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if "vectors" in ln)
    assert "FAIL" in line.upper() and url in line, line


def test_one_typed_error_and_not_the_clients_version_warning_beside_it(hostile):
    """The client's constructor warns "Failed to obtain server version" when the server does not answer; the
    first request then fails with our typed error naming the URL — that one message is enough."""
    _, url = hostile
    before = set(threading.enumerate())
    with warnings.catch_warnings(record=True) as caught:
        with pytest.raises(BackendUnavailableError, match=url):
            ClientVectorStore("papers", url=url, timeout_s=1)
        for thread in (
            set(threading.enumerate()) - before
        ):  # the client checks the version in a thread of its own
            thread.join(timeout=10)
    assert not [w for w in caught if "server version" in str(w.message)], [str(w.message) for w in caught]
