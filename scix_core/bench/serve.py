"""Load bench of ``scix serve`` on loopback: concurrent clients, a request mix, then a SIGKILL.

    python -m scix_core.bench.serve --index citeulike-a [--clients 16] [--seconds 120] [--workers N]
        [--state-dsn DSN] [--rate R] [--trace requests.csv]

Starts ``scix serve`` in a process of its own (a fresh port on 127.0.0.1), waits for ``/healthz`` and
then until no worker is refitting a co-save part in the background (a workspace whose newest cached fit is
of other saves — an offline evaluation's, say — has every worker refit it first, minutes beside the
requests; the wait is printed), and runs ``--clients`` threads for ``--seconds``: 80% searches (titles
of the index's papers as queries, hybrid; ``--feed F`` makes F of them feed reads), 15% recommendations,
5% saves, each client its own user (created
first; its HTTP client made before the clock starts). It prints requests/s
and p50/p95/p99 latency per endpoint and every error by status (the API's typed 503s apart). Then, with
``--kill`` (default on), it SIGKILLs one worker (``--workers``, default the cores; with one worker the
server, which it restarts) a third of the way through a second, shorter phase while the clients keep
going, and reports how long until a new worker (or the restarted server) answered ``/healthz``, the errors
seen meanwhile (connection refusals are counted apart: nothing listened), and whether every save the
server acknowledged is in the user state afterwards. ``--state-dsn`` serves user state from PostgreSQL
(``SCIX_STATE_DSN``).

Two ways to load the server. By default (closed loop) each client sends its next request as soon as the
last one is answered: the server runs flat out, and the latency is mostly the queue of 16 requests in
flight (Little's law: 16 / requests per second). With ``--rate R`` (open loop) the clients together send R
requests a second at Poisson arrival times, whatever the server does, and each latency is counted from
when its request was due, not when it was sent — a slow answer delays its client's next request and that
wait counts too (no "coordinated omission"): the latency users see at that load.

Bounded: ``--seconds`` per phase, a ``--max-requests`` cap, 30 s client timeouts, loopback only.
"""

from __future__ import annotations

import argparse
import csv
import http.client
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlencode, urlsplit

import httpx
import numpy as np
from rich.console import Console
from rich.table import Table

from scix_core.bench import TEXT
from scix_core.config import load_config
from scix_core.embeddings.encoder import query_backend
from scix_core.recommend.state import UserState
from scix_core.recommend.state_postgres import PostgresUserState
from scix_core.serve.app import SWITCH_INTERVAL_S
from scix_core.stores import PaperStore
from scix_core.workspace import Workspace

console = Console(width=150)
MIX = (("search", 0.80), ("recommend", 0.15), ("save", 0.05))


def with_feed(share: float) -> tuple[tuple[str, float], ...]:
    """The request mix with ``share`` of the requests the user's feed (``GET /api/feed``, the index's newest
    listing day), taken from the searches."""
    if not 0 <= share <= MIX[0][1]:
        raise ValueError(f"--feed must be a share within [0, {MIX[0][1]}], not {share}")
    return (("search", MIX[0][1] - share), *MIX[1:], *((("feed", share),) if share else ()))


@dataclass
class Tally:
    latency: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    errors: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    acknowledged: list[tuple[str, str]] = field(default_factory=list)
    requests: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: (kind, when it was due in seconds from the phase's start, seconds taken, status) per request
    trace: list[tuple[str, float, float, int | str]] = field(default_factory=list)
    start: float = field(default_factory=time.perf_counter)

    def add(
        self, kind: str, due: float, seconds: float, status: int | str, ack: tuple[str, str] | None = None
    ) -> None:
        with self.lock:
            self.requests += 1
            self.trace.append((kind, due - self.start, seconds, status))
            if status == 200 or status == 201:
                self.latency[kind].append(seconds)
                if ack:
                    self.acknowledged.append(ack)
            else:
                self.errors[f"{kind} {status}"] += 1


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_text(errors="replace")
    except OSError:  # gone meanwhile
        return "resource_tracker"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """``scix serve`` in its own process; restartable on the same port."""

    def __init__(self, index: str, port: int, env: dict[str, str], log: Path, workers: int = 1):
        self.index, self.port, self.env, self.proc, self.log = index, port, env, None, log
        self.workers = workers
        self.url = f"http://127.0.0.1:{port}"
        self.respawned: float | None = None  # after a worker kill: seconds until a new process started

    def tail(self) -> str:
        return (
            self.log.read_text(**{k: v for k, v in TEXT.items() if k != "text"})[-2000:]
            if self.log.exists()
            else ""
        )

    def start(self, timeout: float = 180.0) -> float:
        """Start and wait for ``/healthz``; seconds until it answered."""
        t = time.perf_counter()
        with open(self.log, "ab") as log:  # a file, never a pipe nobody reads: a full pipe blocks the server
            self.proc = subprocess.Popen(
                [
                    *(sys.executable, "-m", "scix_core", "serve", "--index", self.index),
                    *("--port", str(self.port), "--workers", str(self.workers)),
                ],
                env=self.env,
                stdout=log,
                stderr=log,
            )
        while time.perf_counter() - t < timeout:
            if self.proc.poll() is not None:
                raise RuntimeError(f"scix serve exited: {self.tail()}")
            try:
                if httpx.get(f"{self.url}/healthz", timeout=5).status_code in (200, 503):
                    return time.perf_counter() - t
            except httpx.TransportError:
                time.sleep(0.1)
        raise RuntimeError(f"scix serve did not answer within {timeout:.0f} s")

    def settle(self, timeout: float = 900.0) -> float:
        """Wait until no worker is refitting a co-save part in the background (a worker that started from
        a stale cached fit refits it beside the requests: minutes of a child process, then the new fit read
        in): ``2 × workers`` answers of ``/healthz`` in a row without one. Any worker's answer says whether
        one of them is refitting (``refit_elsewhere``): the front may hand every probe to a worker that
        left the refit to another. Seconds waited."""
        t, quiet = time.perf_counter(), 0
        while quiet < 2 * self.workers:
            if time.perf_counter() - t > timeout:
                raise RuntimeError(f"the workers were still refitting after {timeout:.0f} s")
            checks = httpx.get(f"{self.url}/healthz", timeout=30).json()["checks"]
            rec = next(c for c in checks if c["name"] == "recommender")
            community = rec.get("community") or {}
            busy = bool(community.get("refitting") or community.get("refit_elsewhere"))
            quiet = 0 if busy else quiet + 1
            time.sleep(1.0 if busy else 0.05)
        return time.perf_counter() - t

    def worker_pids(self) -> list[int]:
        """The worker processes of a ``--workers N`` server (its children), [] for one process."""
        if self.workers == 1 or not self.proc:
            return []
        children = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children")
        pids = [int(p) for p in children.read_text().split()] if children.exists() else []
        # the front process starts the workers; nothing else of its own (a resource tracker, say) is a worker
        return [p for p in pids if "resource_tracker" not in _cmdline(p)]

    def kill_worker(self, timeout: float = 180.0) -> float:
        """SIGKILL one worker; seconds until a new worker (a pid not seen before) answered ``/healthz``."""
        before = set(self.worker_pids())
        victim = sorted(before)[0]
        t = time.perf_counter()
        os.kill(victim, signal.SIGKILL)
        self.respawned = None
        while time.perf_counter() - t < timeout:
            if self.respawned is None and set(self.worker_pids()) - before:
                self.respawned = time.perf_counter() - t
            try:
                pid = httpx.get(f"{self.url}/healthz", timeout=5).json().get("worker")
                if pid is not None and pid not in before:
                    return time.perf_counter() - t
            except (httpx.TransportError, ValueError):
                pass
            time.sleep(0.05)
        raise RuntimeError(f"no new worker answered within {timeout:.0f} s of the kill")

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()


def queries_and_papers(index: str, cfg, n: int = 2000, seed: int = 0) -> tuple[list[str], list[str]]:
    store = PaperStore(Workspace(cfg.home).index_dir(index) / "papers.sqlite")
    try:
        papers = [(p.paper_id, p.title) for p in store.papers()]
    finally:
        store.close()
    rng = random.Random(seed)
    rng.shuffle(papers)
    titles = [t for _, t in papers if t and t.strip()][:n]
    return titles, [p for p, _ in papers[:n]]


class Connection:
    """One client's keep-alive HTTP/1.1 connection to the server (the standard library's: a third of
    httpx's CPU a request — 0.19 against 0.58 ms measured here — on the cores the server shares), opened
    again after any failure."""

    def __init__(self, url: str, timeout: float = 30.0):
        parts = urlsplit(url)
        self.host, self.port, self.timeout = parts.hostname, parts.port, timeout
        self.conn: http.client.HTTPConnection | None = None

    def request(self, method: str, path: str, params: dict | None = None, body: dict | None = None):
        """(status, body bytes); raises OSError or http.client's errors, the connection then closed. A
        kept connection the server had closed meanwhile (before any answer) is opened again once, as
        httpx's pool does."""
        target = f"{path}?{urlencode(params)}" if params else path
        data = json.dumps(body).encode() if body is not None else None
        headers = {"content-type": "application/json"} if data is not None else {}
        while True:  # twice at most: a fresh connection's failure is raised
            kept = self.conn is not None and self.conn.sock is not None
            if self.conn is None:
                self.conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
            try:
                self.conn.request(method, target, body=data, headers=headers)
                response = self.conn.getresponse()
                return response.status, response.read()
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                self.close()
                if not kept:
                    raise
            except (OSError, http.client.HTTPException):
                self.close()
                raise

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def client(
    conn: Connection,
    user: str,
    titles,
    papers,
    tally: Tally,
    stop: threading.Event,
    seed: int,
    cap: int,
    interval: float | None = None,
    mix=MIX,
):
    """One client's requests on ``conn`` until ``stop``: back to back, or (``interval``) at Poisson arrivals
    of that mean gap, each timed from when it was due; ``mix``: (endpoint, share) pairs."""
    rng = random.Random(seed)
    due = time.perf_counter() + (rng.expovariate(1 / interval) if interval else 0.0)
    try:
        while not stop.is_set() and tally.requests < cap:
            kind = rng.choices([k for k, _ in mix], [w for _, w in mix])[0]
            if interval:
                if stop.wait(max(0.0, due - time.perf_counter())):
                    break
                t, due = due, due + rng.expovariate(1 / interval)
            else:
                t = time.perf_counter()
            ack = None
            try:
                if kind == "search":
                    code, body = conn.request("GET", "/search", {"q": rng.choice(titles), "limit": 10})
                elif kind == "recommend":
                    code, body = conn.request("GET", "/api/recommendations", {"user": user, "limit": 10})
                elif kind == "feed":
                    code, body = conn.request("GET", "/api/feed", {"user": user, "limit": 10})
                else:
                    paper = rng.choice(papers)
                    code, body = conn.request(
                        "POST", "/api/interactions", body={"user": user, "paper": paper, "kind": "save"}
                    )
                    ack = (user, paper)
                status: int | str = code
                if code >= 400:
                    status = f"{code} {_code(body)}"  # a typed error names itself
            except ConnectionRefusedError:
                status = "refused"
                time.sleep(0.05)
            except (OSError, http.client.HTTPException) as exc:
                status = type(exc).__name__
            tally.add(kind, t, time.perf_counter() - t, status, ack)
    finally:
        conn.close()


def _code(body: bytes) -> str:
    try:
        return str(json.loads(body)["error"]["code"])
    except (ValueError, KeyError, TypeError):
        return "untyped"


def typed_503(error: str) -> bool:
    """An error key of the tally (``"save 503 worker_lost"``) that is the API's typed 503."""
    parts = error.split()
    return len(parts) == 3 and parts[1] == "503" and parts[2] != "untyped"


def phase(
    server,
    users,
    titles,
    papers,
    seconds: float,
    cap: int,
    kill_at: float | None = None,
    rate: float | None = None,
    mix=MIX,
) -> dict:
    """``rate``: requests a second over all clients (open loop); None: each client back to back."""
    tally, stop = Tally(), threading.Event()
    interval = len(users) / rate if rate else None
    connections = [Connection(server.url) for _ in users]  # each opened at its first request
    threads = [
        threading.Thread(
            target=client, args=(h, u, titles, papers, tally, stop, i, cap, interval, mix), daemon=True
        )
        for i, (u, h) in enumerate(zip(users, connections))
    ]
    # the clients' threads share this interpreter: an answer read back while another client's thread runs
    # Python waited for the lock up to the 5 ms default switch interval (twice or more under 16 clients),
    # the bench's own delay counted as the server's; handed round as often as the server does
    switch = sys.getswitchinterval()
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    t0 = time.perf_counter()
    for th in threads:
        th.start()
    recovery = None
    if kill_at is not None:
        time.sleep(kill_at)
        if server.workers > 1:  # one worker dies; the others keep answering; the supervisor starts another
            recovery = server.kill_worker()
        else:
            server.kill()
            recovery = server.start()
    remaining = seconds - (time.perf_counter() - t0)
    if remaining > 0:
        stop.wait(remaining)
    stop.set()
    for th in threads:
        th.join(timeout=60)
    wall = time.perf_counter() - t0
    sys.setswitchinterval(switch)
    return {
        "tally": tally,
        "wall": wall,
        "recovery": recovery,
        "respawned": server.respawned,
        "mix": mix,
    }


def report(title: str, result: dict) -> None:
    tally, wall = result["tally"], result["wall"]
    table = Table("endpoint", "ok", "req/s", "p50 ms", "p95 ms", "p99 ms", title=title)
    for kind, _ in result.get("mix", MIX):
        lat = np.asarray(tally.latency.get(kind, []), dtype=float) * 1000
        if len(lat):
            p50, p95, p99 = np.percentile(lat, [50, 95, 99])
            table.add_row(
                kind, str(len(lat)), f"{len(lat) / wall:.1f}", f"{p50:.1f}", f"{p95:.1f}", f"{p99:.1f}"
            )
        else:
            table.add_row(kind, "0", "0", "-", "-", "-")
    console.print(table)
    total = sum(len(v) for v in tally.latency.values())
    other = {k: v for k, v in tally.errors.items() if not typed_503(k)}
    typed = sum(v for k, v in tally.errors.items() if typed_503(k))
    console.print(
        f"{total / wall:.1f} requests/s over {wall:.1f} s; typed 503s: {typed}; other errors: "
        f"{other or 'none'}",
        highlight=False,
    )


def write_trace(path: Path, phases: dict[str, dict | None]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        rows = csv.writer(f)
        rows.writerow(["phase", "endpoint", "due_s", "ms", "status"])
        for name, result in phases.items():
            for kind, due, seconds, status in result["tally"].trace if result else ():
                rows.writerow([name, kind, f"{due:.4f}", f"{seconds * 1000:.2f}", status])


def reused(url: str) -> float:
    """How many recommendations the server answered with a user's kept list (``/metrics``, every worker's
    summed by the front); 0 when the server keeps none."""
    from prometheus_client.parser import text_string_to_metric_families  # the serve extra, as the server

    families = text_string_to_metric_families(httpx.get(f"{url}/metrics", timeout=30).text)
    return next((f.samples[0].value for f in families if f.name == "scix_recommendations_reused"), 0.0)


def missing_saves(acknowledged, state: UserState, index: str) -> int:
    have = {}
    for user in {u for u, _ in acknowledged}:
        have[user] = {e.paper_id for e in state.events(index, user) if e.kind == "save"}
    return sum(1 for user, paper in acknowledged if paper not in have[user])


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--index", default="citeulike-a")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--max-requests", type=int, default=200_000)
    parser.add_argument("--kill", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument(
        "--kill-window",
        type=float,
        help="seconds of the kill phase (default a quarter of --seconds, 10 at least)",
    )
    parser.add_argument("--state-dsn", help="serve user state from this PostgreSQL database")
    parser.add_argument(
        "--rate",
        type=float,
        help="open loop: requests a second over all clients, at Poisson arrivals, each timed from when it "
        "was due (default: closed loop, every client back to back)",
    )
    parser.add_argument(
        "--trace",
        type=Path,
        help="write every request to this CSV file: phase, endpoint, when it was due (seconds from the "
        "phase's start), milliseconds taken, status — to see when the slow ones came",
    )
    parser.add_argument(
        "--feed",
        type=float,
        default=0.0,
        help="the share of requests that read the user's feed (GET /api/feed), taken from the searches "
        "(default 0)",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=os.cpu_count() or 1,
        help="server processes (default: the cores); with more than one, the kill takes one worker",
    )
    args = parser.parse_args(argv)
    if args.rate is not None and args.rate <= 0:
        parser.error(f"--rate must be a positive number of requests a second, not {args.rate}")
    try:
        mix = with_feed(args.feed)
    except ValueError as exc:
        parser.error(str(exc))
    cfg = load_config()
    env = {**os.environ}
    if args.state_dsn:
        env["SCIX_STATE_DSN"] = args.state_dsn
        cfg = cfg.replace(**{"postgres.state_dsn": args.state_dsn})
    state = PostgresUserState(args.state_dsn) if args.state_dsn else UserState.for_home(cfg.home)
    titles, papers = queries_and_papers(args.index, cfg)
    log = Path(tempfile.mkdtemp(prefix="scix-bench-serve-")) / "server.log"
    server = Server(args.index, free_port(), env, log, args.workers)
    out: dict = {"server_log": str(log), "rate": args.rate}
    try:
        out["startup_s"] = server.start(timeout=900)  # a first start fits the community's co-save model
        out["settle_s"] = server.settle()
        out["embedding_backend"] = query_backend(cfg, args.index)
        console.print(
            f"server up after {out['startup_s']:.1f} s; background refits done {out['settle_s']:.1f} s "
            f"later; queries encoded by {out['embedding_backend']} (the index's backend: docs/api.md#limits)",
            highlight=False,
        )
        stamp = int(time.time())
        users = [f"bench-{stamp}-{i}" for i in range(args.clients)]
        with httpx.Client(base_url=server.url, timeout=30) as http:
            for u in users:
                http.post("/api/users", json={"user": u}).raise_for_status()
        run = phase(server, users, titles, papers, args.seconds, args.max_requests, rate=args.rate, mix=mix)
        load = f"open loop at {args.rate:g} requests/s" if args.rate else "closed loop"
        report(
            f"{args.clients} clients, {load}, {args.workers} workers, {args.seconds:.0f} s, "
            f"state {state.location}",
            run,
        )
        out["load"] = run
        out["reused"] = reused(server.url)
        asked = len(run["tally"].latency["recommend"])
        console.print(f"kept lists answered {out['reused']:.0f} of {asked} recommendations", highlight=False)
        acknowledged = list(run["tally"].acknowledged)
        if args.kill:
            window = args.kill_window or max(10.0, args.seconds / 4)
            killed = phase(
                server,
                users,
                titles,
                papers,
                window,
                args.max_requests,
                kill_at=window / 3,
                rate=args.rate,
                mix=mix,
            )
            what = "one worker" if args.workers > 1 else "the server"
            report(f"SIGKILL of {what} at {window / 3:.0f} s of {window:.0f} s", killed)
            console.print(
                f"{'a new worker' if args.workers > 1 else 'the server'} answered {killed['recovery']:.1f} s "
                "after the kill"
                + (
                    f" (its process started {killed['respawned']:.1f} s after)"
                    if killed.get("respawned") is not None
                    else ""
                ),
                highlight=False,
            )
            out["kill"] = killed
            acknowledged += killed["tally"].acknowledged
        if args.trace:
            write_trace(args.trace, {"load": run, "kill": out.get("kill")})
        out["acknowledged"] = len(acknowledged)
        out["missing"] = missing_saves(acknowledged, state, args.index)
        console.print(
            f"acknowledged saves: {out['acknowledged']}, missing from the user state: {out['missing']}",
            highlight=False,
        )
    finally:
        server.stop()
    return out


if __name__ == "__main__":
    result = main()
    sys.exit(1 if result.get("missing") else 0)
