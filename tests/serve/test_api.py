"""``scix serve``: every endpoint and every error code on the fixture corpus in real indexes, the token, and
a real uvicorn process."""

from __future__ import annotations

import datetime as dt
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid

import httpx
import pytest
from fastapi.testclient import TestClient

from scix_core.config import load_config
from scix_core.embeddings.encoder import query_backend
from scix_core.ingest import ingest
from scix_core.recommend.reuse import REUSED
from scix_core.recommend.state import utc_text
from scix_core.recommend.state_postgres import open_state
from scix_core.search import Searcher
from scix_core.serve.app import SWITCH_INTERVAL_S, create_app
from scix_core.serve.front import MAX_BODY_BYTES
from tests.corpus import CORPUS, PAPERS

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def client(built):
    with TestClient(create_app(built.index, built.config)) as c:
        yield c


def _user() -> str:
    return f"u-{uuid.uuid4().hex[:8]}"


def test_search_is_the_search_json(client, built):
    r = client.get("/search", params={"q": "dark matter halos", "limit": 5})
    assert r.status_code == 200
    doc = r.json()
    want = Searcher(built.index, built.config).search("dark matter halos", "hybrid", None, 5).to_dict()
    assert [h["paper_id"] for h in doc["hits"]] == [h["paper_id"] for h in want["hits"]]
    assert set(doc) == set(want) and doc["metadata"]["mode"] == "hybrid"
    assert all(doc["timing_ms"][s] > 0 for s in ("total",))
    assert all("lanes" in h for h in doc["hits"])
    keyword = client.get("/search", params={"q": "galaxy", "mode": "keyword", "lexical_mode": "or"}).json()
    assert keyword["metadata"]["mode"] == "keyword" and keyword["metadata"]["lexical_mode"] == "or"
    years = client.get(
        "/search", params={"q": "galaxy", "year": "2020-2023", "category": "astro-ph.GA"}
    ).json()
    assert years["hits"] and years["metadata"]["filters"]["categories"] == ["astro-ph.GA"]


@pytest.mark.parametrize(
    ("params", "status", "code"),
    [
        ({"q": "   "}, 400, "invalid_query"),
        ({"q": "galaxy", "mode": "fuzzy"}, 422, "bad_parameters"),
        ({"q": "galaxy", "limit": 0}, 422, "bad_parameters"),
        ({}, 422, "bad_parameters"),
        ({"q": "galaxy " * 4000}, 413, "too_large"),
        ({"q": "galaxy", "year": "last week"}, 422, "invalid_filter"),
    ],
)
def test_search_errors_are_typed(client, params, status, code):
    r = client.get("/search", params=params)
    assert r.status_code == status, r.text
    error = r.json()["error"]
    assert error["code"] == code and error["status"] == status and error["message"]
    assert "Traceback" not in r.text


def test_users_interactions_and_recommendations(client):
    user = _user()
    created = client.post("/api/users", json={"user": user, "categories": ["astro-ph.GA"]})
    assert created.status_code == 201 and created.json()["user"] == user
    first = client.get("/api/recommendations", params={"user": user}).json()
    assert first["tier"] == 0 and first["items"] and first["next_tier"]
    for paper in ("p03", "p04", "p09"):
        r = client.post("/api/interactions", json={"user": user, "paper": paper, "kind": "save"})
        assert r.status_code == 201, r.text
    assert r.json()["saves"] == 3
    doc = client.get("/api/recommendations", params={"user": user, "limit": 5}).json()
    assert doc["tier"] == 2 and doc["reason"]
    ids = [i["paper_id"] for i in doc["items"]]
    assert not {"p03", "p04", "p09"} & set(ids)  # saved papers never come back
    # asked again with nothing changed: the same list, kept (a server's recommend.reuse_s), and counted
    again = client.get("/api/recommendations", params={"user": user, "limit": 5}).json()
    assert [i["paper_id"] for i in again["items"]] == ids and again["notes"][-1] == REUSED
    assert "scix_recommendations_reused_total" in client.get("/metrics").text


def test_a_served_list_is_logged_after_the_answer_as_served_when_it_was_answered(client, built):
    user = _user()
    client.post("/api/users", json={"user": user})
    for paper in ("p03", "p04", "p09"):
        client.post("/api/interactions", json={"user": user, "paper": paper, "kind": "save"})
    before = utc_text(dt.datetime.now(dt.UTC))
    doc = client.get("/api/recommendations", params={"user": user, "limit": 5}).json()
    after = utc_text(dt.datetime.now(dt.UTC))
    client.post(
        "/api/interactions", json={"user": user, "paper": doc["items"][0]["paper_id"], "kind": "save"}
    )
    state = open_state(built.config)
    (row,) = state.served(built.index, user)
    assert row["tier"] == doc["tier"] == 2 and before <= row["at"] <= after
    assert [i["paper_id"] for i in row["items"]] == [i["paper_id"] for i in doc["items"]]
    saved_after = [e for e in state.events(built.index, user) if utc_text(e.at) > row["at"]]
    assert [e.paper_id for e in saved_after] == [doc["items"][0]["paper_id"]]  # the scorer's label


@pytest.mark.parametrize(
    ("method", "path", "kwargs", "status", "code"),
    [
        ("get", "/api/recommendations", {"params": {"user": "nobody-here"}}, 404, "unknown_user"),
        (
            "post",
            "/api/interactions",
            {"json": {"user": "x", "paper": "p01", "kind": "like"}},
            422,
            "bad_parameters",
        ),
        ("post", "/api/users", {"json": {"user": ""}}, 422, "bad_parameters"),
        ("post", "/api/users", {"content": b"{" * (MAX_BODY_BYTES + 1)}, 413, "too_large"),
        ("get", "/no/such/endpoint", {}, 404, "not_found"),
    ],
)
def test_errors_are_typed(client, method, path, kwargs, status, code):
    r = getattr(client, method)(path, **kwargs)
    assert r.status_code == status, r.text
    assert r.json()["error"]["code"] == code


def test_an_unknown_paper_is_404(client):
    user = _user()
    client.post("/api/users", json={"user": user})
    r = client.post("/api/interactions", json={"user": user, "paper": "not-a-paper", "kind": "save"})
    assert r.status_code == 404 and r.json()["error"]["code"] == "unknown_paper"


def test_writes_need_the_token_when_one_is_set(client, monkeypatch):
    monkeypatch.setenv("SCIX_API_TOKEN", "s3cret")
    user = _user()
    assert client.post("/api/users", json={"user": user}).status_code == 401
    bad = client.post("/api/users", json={"user": user}, headers={"Authorization": "Bearer nope"})
    assert bad.status_code == 401 and bad.json()["error"]["code"] == "unauthorized"
    ok = client.post("/api/users", json={"user": user}, headers={"Authorization": "Bearer s3cret"})
    assert ok.status_code == 201
    assert client.get("/search", params={"q": "galaxy"}).status_code == 200  # reads need none


def test_health_reranker_health_and_metrics(client):
    health = client.get("/healthz")
    assert health.status_code == 200 and health.json()["status"] == "ok"
    assert {c["name"] for c in health.json()["checks"]} == {"lexical", "dense", "recommender", "user_state"}
    recommender = next(c for c in health.json()["checks"] if c["name"] == "recommender")
    fit = recommender["community"]["fit"]  # each co-save part's fit: the saves since and its age
    assert fit["refit_age_s"] == 600.0 and all(
        {"fitted_on", "saves_since", "age_s"} <= set(p) for p in fit["parts"]
    )
    reranker = client.get("/healthz/reranker").json()
    assert reranker["configured"] == "off" and reranker["scoring_with"] is None
    client.get("/search", params={"q": "zeta function primes, metered"})
    client.post("/api/users", content=b"{" * (MAX_BODY_BYTES + 1))
    client.get("/no/such/endpoint")
    text = client.get("/metrics").text
    assert 'scix_requests_total{endpoint="/search",status="200"}' in text
    # refused before routing (the body limit) and never routed: counted all the same
    assert 'scix_requests_total{endpoint="unmatched",status="413"}' in text
    assert 'scix_requests_total{endpoint="unmatched",status="404"}' in text
    assert 'scix_search_stage_seconds_count{stage="total"}' in text
    assert "scix_request_seconds_bucket" in text
    counts = {
        line.split()[0]: float(line.split()[1]) for line in text.splitlines() if line.startswith("scix_query")
    }  # the query encoder's calls and the queries they held (this search's at least)
    assert 1 <= counts["scix_query_encoder_calls_total"] <= counts["scix_query_encoder_texts_total"]
    assert client.get("/openapi.json").json()["paths"].keys() >= {
        "/search",
        "/api/recommendations",
        "/metrics",
    }


def test_a_served_app_hands_the_interpreter_lock_round_often_and_gives_the_old_interval_back(built):
    before = sys.getswitchinterval()
    sys.setswitchinterval(0.004)  # whatever the process had: given back when the app stops
    try:
        with TestClient(create_app(built.index, built.config)) as c:
            assert c.get("/healthz").status_code == 200
            assert sys.getswitchinterval() == pytest.approx(SWITCH_INTERVAL_S) and SWITCH_INTERVAL_S < 0.004
        assert sys.getswitchinterval() == pytest.approx(0.004)
    finally:
        sys.setswitchinterval(before)


def test_a_missing_dense_lane_is_a_503_naming_it(tmp_path, encoder):
    cfg = load_config().replace(home=tmp_path)
    ingest(CORPUS, "lexical-only", config=cfg, progress=False, embed=False)
    with TestClient(create_app("lexical-only", cfg)) as c:
        r = c.get("/search", params={"q": "galaxy", "mode": "semantic"})
        assert r.status_code == 503 and r.json()["error"]["code"] == "vector_index_unavailable"
        assert c.get("/search", params={"q": "galaxy", "mode": "keyword"}).status_code == 200
        health = c.get("/healthz")
        assert health.status_code == 503 and health.json()["status"] == "degraded"
        dense = next(check for check in health.json()["checks"] if check["name"] == "dense")
        assert dense["status"] == "fail" and dense["detail"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve(index: str, port: int) -> list[str]:
    """``scix serve`` with two workers (the front process), as a command line."""
    return [
        sys.executable,
        "-m",
        "scix_core",
        "serve",
        "--index",
        index,
        "--port",
        str(port),
        "--workers",
        "2",
    ]


def _env(home) -> dict[str, str]:
    env = {**os.environ, "SCIX_HOME": str(home)}
    env.pop("SCIX_CONFIG", None)
    return env


def _raw(port: int, request: bytes) -> bytes:
    """One request written as bytes, the front's whole answer (it closes the connection after an error)."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(request)
        chunks = []
        while chunk := s.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def test_scix_serve_answers_over_http_from_two_workers(tmp_path, encoder):
    """Two worker processes behind the front: one opens the embedded shard, the other a private copy; both
    answer hybrid searches with the dense lane; the front refuses what it cannot delimit with typed errors;
    a SIGKILLed worker's requests are answered (reads) or refused with a typed 503 (writes), never dropped;
    a new worker takes its place; the copies are gone after a clean stop."""
    cfg = load_config().replace(home=tmp_path)
    ingest(
        CORPUS, "served", config=cfg, progress=False, encoder=encoder
    )  # this process never opens the shard
    port = _free_port()
    proc = subprocess.Popen(
        _serve("served", port), env=_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    url = f"http://127.0.0.1:{port}"
    replicas = tmp_path / "indexes" / "served" / "replicas"
    try:
        deadline, workers = time.monotonic() + 180, {}
        while time.monotonic() < deadline and proc.poll() is None and len(workers) < 2:
            try:
                health = httpx.get(f"{url}/healthz", timeout=5)
                workers[health.json()["worker"]] = health
            except httpx.TransportError:
                time.sleep(0.3)
        assert len(workers) == 2, proc.stderr.read() if proc.poll() is not None else workers
        assert all(h.status_code == 200 for h in workers.values())
        assert len(list(replicas.glob("*/vectors-*"))) == 1  # the second worker's copy
        answered = set()
        with httpx.Client(base_url=url, timeout=60) as http:
            for _ in range(40):
                hits = http.get("/search", params={"q": "galaxy images"})
                body = hits.json()
                assert hits.status_code == 200 and body["hits"] and not body["metadata"].get("dropped_lanes")
                answered.add(http.get("/healthz").json()["worker"])
            assert http.head("/docs").status_code == 200  # no body: the front does not wait for one
            # /metrics of both workers, summed by the front: all 40 searches, whichever worker took them
            scrape = http.get("/metrics")
            assert scrape.headers["x-scix-workers"] == "2"
            assert 'scix_requests_total{endpoint="/search",status="200"} 40.0' in scrape.text
        assert answered == set(workers)

        # what the front refuses itself, typed like the API's own errors
        chunked = _raw(
            port, b"POST /api/users HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n"
        )
        assert chunked.startswith(b"HTTP/1.1 411") and b'"code": "length_required"' in chunked
        large = _raw(
            port, f"POST /api/users HTTP/1.1\r\ncontent-length: {MAX_BODY_BYTES + 1}\r\n\r\n".encode()
        )
        assert large.startswith(b"HTTP/1.1 413") and b'"code": "too_large"' in large
        head = _raw(port, b"GET /healthz HTTP/1.1\r\nx-pad: " + b"a" * (70 * 1024) + b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 431")

        # a worker killed under load: every read answered, every refused write a typed 503
        user = f"u-{uuid.uuid4().hex[:8]}"
        httpx.post(f"{url}/api/users", json={"user": user}, timeout=30).raise_for_status()
        outcomes: list[tuple[str, int, str]] = []

        def load(stop: threading.Event, n: int) -> None:
            with httpx.Client(base_url=url, timeout=60) as http:
                while not stop.is_set():
                    r = (
                        http.post(
                            "/api/interactions",
                            json={"user": user, "paper": PAPERS[n % 3].paper_id, "kind": "save"},
                        )
                        if n % 4 == 0
                        else http.get("/search", params={"q": "galaxy images"})
                    )
                    code = r.json()["error"]["code"] if r.status_code >= 400 else ""
                    outcomes.append((r.request.method, r.status_code, code))
                    n += 1

        stop = threading.Event()
        threads = [threading.Thread(target=load, args=(stop, i)) for i in range(4)]
        for t in threads:
            t.start()
        time.sleep(1.0)
        victim = min(workers)
        os.kill(victim, signal.SIGKILL)
        deadline, fresh = time.monotonic() + 180, None
        while time.monotonic() < deadline and fresh is None:
            pid = httpx.get(f"{url}/healthz", timeout=30).json()["worker"]
            fresh = pid if pid not in workers else None
            time.sleep(0.1)
        time.sleep(0.5)
        stop.set()
        for t in threads:
            t.join(timeout=60)
        assert fresh is not None, "no new worker answered after the kill"
        failed = [o for o in outcomes if o[1] != 200 and o[1] != 201]
        assert len(outcomes) > 20 and all(o[0] == "POST" and o[1:] == (503, "worker_lost") for o in failed), (
            failed
        )
        assert proc.poll() is None
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    assert not list(replicas.glob("*/vectors-*"))  # removed when the worker closed it


def test_a_worker_that_cannot_start_stops_the_server_with_its_reason(tmp_path):
    done = subprocess.run(
        _serve("nowhere", _free_port()), env=_env(tmp_path), capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 1 and "scix serve: worker" in done.stderr, done.stderr


def test_scix_serve_names_a_faster_query_encoder_when_there_is_one(built, encoder):
    from scix_core.cli.serve import QUERY_FASTEST, backend_hint

    assert query_backend(built.config, built.index) == encoder.config.backend  # the one it was built with
    assert backend_hint(QUERY_FASTEST) is None
    hint = backend_hint("openvino-int8")
    assert "encoded by openvino-int8" in hint and f"SCIX_EMBED_BACKEND={QUERY_FASTEST}" in hint
    assert "docs/api.md#limits" in hint


def test_a_bad_worker_count_is_refused_clearly(capsys):
    from scix_core.cli.main import main

    assert main(["serve", "--index", "x", "--workers", "0"]) == 2
    assert "--workers must be in 1..64" in capsys.readouterr().err


@pytest.mark.postgres
def test_the_api_on_postgres_user_state(built, postgresql):
    info = postgresql.info
    dsn = f"postgresql://{info.user}@{info.host}:{info.port}/{info.dbname}"
    cfg = built.config.replace(**{"postgres.state_dsn": dsn})
    with TestClient(create_app(built.index, cfg)) as c:
        user = _user()
        assert c.post("/api/users", json={"user": user}).status_code == 201
        for paper in ("p01", "p02"):
            assert (
                c.post("/api/interactions", json={"user": user, "paper": paper, "kind": "save"}).status_code
                == 201
            )
        doc = c.get("/api/recommendations", params={"user": user}).json()
        assert doc["tier"] == 3 and doc["items"]
        state = next(check for check in c.get("/healthz").json()["checks"] if check["name"] == "user_state")
        assert state["status"] == "ok" and "schema scix_state" in state["location"]


def test_workers_share_the_cores_between_their_thread_pools_unless_told():
    from scix_core.serve.front import THREAD_POOLS, Front

    cores = os.cpu_count() or 1
    front = Front("127.0.0.1", 0, 2, {"PATH": "/bin"})
    env = front._worker_env()
    assert all(env[name] == str(max(1, cores // 2)) for name in THREAD_POOLS) and env["PATH"] == "/bin"
    assert Front("127.0.0.1", 0, 2, {"OMP_NUM_THREADS": "3"})._worker_env()["OMP_NUM_THREADS"] == "3"
    front.run_dir.rmdir()
