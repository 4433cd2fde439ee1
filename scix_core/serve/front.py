"""``scix serve --workers N``: one front process on the public port, N worker processes behind it.

The front accepts the clients' connections and hands each request to the worker with the fewest requests
in flight, over a private Unix socket (``<run dir>/worker-<i>.sock``) with connections kept open. It
supervises the workers: one that dies is started again, and while it starts the others take its share.
A worker that dies under a request does not drop the client's connection, as it would with workers
sharing a listening socket (uvicorn's own supervisor): a GET is answered by another worker (searches,
recommendations and health checks only read), a write gets a typed 503 (``worker_lost``: it may or may not
have been recorded; never acknowledged) with ``Retry-After``. A request that finds no worker ready gets a
typed 503 (``no_worker``). The front parses only what it must to delimit a message (the request line,
``Content-Length``, chunked response bodies); everything else passes through unchanged.

Requests with a chunked body are refused (411); a head over 64 KiB 431, a body over the API's limit 413
— typed JSON like every other error of the API (docs/api.md#errors).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from scix_core.serve.exposition import merged

INDEX_ENV = "SCIX_SERVE_INDEX"  # the index a worker serves (read by ``scix_core.serve.app.from_environment``)
# set: the workers read the index's tuned preset (``scix serve --config tuned``)
TUNED_ENV = "SCIX_SERVE_TUNED"
#: a request body larger than this is refused with 413 before it is read (by the front and by a worker)
MAX_BODY_BYTES = 64 * 1024
MAX_HEAD_BYTES = 64 * 1024
#: GETs only read: one that a dying worker dropped is asked again of another worker, this many times
RETRIES = 2
#: a worker that has not answered a request within this many seconds is given up on for that request (504)
UPSTREAM_TIMEOUT_S = 300.0
READY_TIMEOUT_S = 900.0  # a first start loads the model and fits the community's co-save model
IDEMPOTENT = (b"GET", b"HEAD", b"OPTIONS")
METRICS_PATH = b"/metrics"  # asked of every worker and summed (scix_core.serve.exposition)
#: the native thread pools a worker's share of the cores is given to (unless set in the environment); the
#: query encoder's (ONNX Runtime, OpenVINO) too: with both cores in each worker's, a query's encoding took
#: 3.9 ms (p99 7.8) with the other core busy against 3.0 (4.5) on one thread
THREAD_POOLS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "SCIX_ONNX_THREADS")


class WorkerLost(Exception):
    """The worker's connection broke before a whole response came back."""


@dataclass
class Worker:
    number: int
    socket: Path
    proc: subprocess.Popen | None = None
    ready: bool = False
    inflight: int = 0
    starts: int = 0
    idle: list = field(default_factory=list)  # open (reader, writer) pairs to it

    def drop_connections(self) -> None:
        for _, writer in self.idle:
            writer.close()
        self.idle.clear()


def error_response(status: int, code: str, message: str, close: bool = False, **headers: str) -> bytes:
    body = json.dumps({"error": {"status": status, "code": code, "message": message}}).encode()
    reason = {411: "Length Required", 413: "Content Too Large", 431: "Request Header Fields Too Large"}
    lines = [
        f"HTTP/1.1 {status} {reason.get(status, 'Service Unavailable' if status == 503 else 'Error')}",
        "content-type: application/json",
        f"content-length: {len(body)}",
        *(f"{k.replace('_', '-')}: {v}" for k, v in headers.items()),
        *(["connection: close"] if close else []),
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def _headers(head: bytes) -> tuple[bytes, dict[bytes, bytes]]:
    """(the start line, lower-cased header names -> values) of a message head."""
    first, _, rest = head.partition(b"\r\n")
    headers = {}
    for line in rest.split(b"\r\n"):
        name, sep, value = line.partition(b":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    return first, headers


async def _read_body(
    reader: asyncio.StreamReader, headers: dict[bytes, bytes], bodiless: bool = False
) -> bytes:
    """A response body as it came (chunked framing kept); none for a HEAD's answer or a 204 / 304."""
    if bodiless:
        return b""
    if b"chunked" in headers.get(b"transfer-encoding", b"").lower():
        parts = []
        while True:
            size_line = await reader.readuntil(b"\r\n")
            size = int(size_line.split(b";")[0], 16)
            parts.append(size_line)
            if size == 0:
                parts.append(await _trailer(reader))
                return b"".join(parts)
            parts.append(await reader.readexactly(size + 2))
    length = headers.get(b"content-length")
    return await reader.readexactly(int(length)) if length else b""


async def _trailer(reader: asyncio.StreamReader) -> bytes:
    lines = []
    while True:
        line = await reader.readuntil(b"\r\n")
        lines.append(line)
        if line == b"\r\n":
            return b"".join(lines)


class Front:
    """The front process: supervises ``workers`` worker processes and proxies to them."""

    def __init__(self, host: str, port: int, workers: int, env: dict[str, str], log_level: str = "warning"):
        self.host, self.port, self.env, self.log_level = host, port, env, log_level
        self.run_dir = Path(tempfile.mkdtemp(prefix="scix-serve-"))
        self.workers = [Worker(i, self.run_dir / f"worker-{i}.sock") for i in range(workers)]
        self._ready = asyncio.Event()
        self.stopping = False

    # -- workers ---------------------------------------------------------------------------------------
    def _worker_env(self) -> dict[str, str]:
        """The workers' environment: each its share of the cores for the native thread pools (OpenBLAS,
        OpenMP: torch) unless the operator set them. With a pool as wide as the machine in every worker,
        the pools of two busy workers wait on each other's cores: a small matrix product took 8 ms in place
        of 0.7 with the other core busy (docs/history.md#serving)."""
        share = str(max(1, (os.cpu_count() or 1) // len(self.workers)))
        return {**{name: share for name in THREAD_POOLS}, **self.env}

    def _spawn(self, worker: Worker) -> None:
        worker.socket.unlink(missing_ok=True)
        worker.proc = subprocess.Popen(
            [
                *(sys.executable, "-m", "uvicorn", "scix_core.serve.app:from_environment", "--factory"),
                *("--uds", str(worker.socket), "--loop", "asyncio", "--log-level", self.log_level),
                # the front closes idle connections itself; the worker never closes one under it
                *("--timeout-keep-alive", "86400", "--no-access-log"),
            ],
            env=self._worker_env(),
        )
        worker.starts += 1

    async def _probe(self, worker: Worker) -> bool:
        try:
            reader, writer = await asyncio.open_unix_connection(worker.socket)
        except OSError:
            return False
        try:
            writer.write(b"GET /healthz/reranker HTTP/1.1\r\nhost: front\r\n\r\n")
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
            await _read_body(reader, _headers(head)[1])
        except (TimeoutError, OSError, asyncio.IncompleteReadError):
            writer.close()
            return False
        worker.idle.append((reader, writer))
        return True

    async def _supervise(self, worker: Worker, first: asyncio.Future) -> None:
        """Keep one worker running: start it, mark it ready once it answers, start it again when it dies."""
        while not self.stopping:
            self._spawn(worker)
            started = time.monotonic()
            while not self.stopping and worker.proc.poll() is None and not worker.ready:
                if await self._probe(worker):
                    worker.ready = True
                    self._ready.set()
                    if not first.done():
                        first.set_result(True)
                elif time.monotonic() - started > READY_TIMEOUT_S:
                    worker.proc.kill()
                else:
                    await asyncio.sleep(0.1)
            while not self.stopping and worker.proc.poll() is None:
                await asyncio.sleep(0.05)
            worker.ready = False
            worker.drop_connections()
            if not first.done():  # it never came up: a broken configuration, not a crash to retry
                first.set_exception(RuntimeError(f"worker {worker.number} exited ({worker.proc.returncode})"))
                return

    def _pick(self, avoid: Worker | None) -> Worker | None:
        ready = [w for w in self.workers if w.ready and w is not avoid] or [
            w for w in self.workers if w.ready
        ]
        if not ready:
            return None
        fewest = min(w.inflight for w in ready)
        return random.choice([w for w in ready if w.inflight == fewest])  # ties at random, not in turn

    # -- requests --------------------------------------------------------------------------------------
    async def _exchange(self, worker: Worker, request: bytes) -> tuple[bytes, bool]:
        """Send one request to ``worker``; (the whole response, whether the worker keeps the connection)."""
        try:
            reader, writer = (
                worker.idle.pop() if worker.idle else await asyncio.open_unix_connection(worker.socket)
            )
        except OSError as exc:
            raise WorkerLost(str(exc)) from exc
        try:
            writer.write(request)
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), UPSTREAM_TIMEOUT_S)
            start, headers = _headers(head)
            status = start.split(b" ", 2)[1] if start.count(b" ") else b""
            body = await _read_body(
                reader, headers, request.startswith(b"HEAD ") or status in (b"204", b"304")
            )
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError) as exc:
            writer.close()
            raise WorkerLost(str(exc) or type(exc).__name__) from exc
        except TimeoutError:
            writer.close()
            raise
        keep = headers.get(b"connection", b"").lower() != b"close"
        if keep and worker.ready:
            worker.idle.append((reader, writer))
        else:
            writer.close()
        return head + body, keep

    async def forward(self, method: bytes, request: bytes) -> bytes:
        tried: Worker | None = None
        for attempt in range(RETRIES + 1):
            worker = self._pick(tried)
            if worker is None:
                return error_response(503, "no_worker", "no worker is ready; retry shortly", retry_after="1")
            worker.inflight += 1
            try:
                return (await self._exchange(worker, request))[0]
            except TimeoutError:
                return error_response(
                    504, "worker_timeout", f"the worker did not answer within {UPSTREAM_TIMEOUT_S:.0f} s"
                )
            except WorkerLost:
                tried = worker
                if worker.proc is not None and worker.proc.poll() is not None:
                    worker.ready = False
                    worker.drop_connections()
                if method not in IDEMPOTENT or attempt == RETRIES:
                    return error_response(
                        503,
                        "worker_lost",
                        "the worker serving this request stopped before it answered; a write may or may not "
                        "have been recorded (it was not acknowledged) — retry",
                        retry_after="1",
                    )
            finally:
                worker.inflight -= 1
        raise AssertionError("unreachable")  # pragma: no cover

    async def metrics(self, request: bytes) -> bytes:
        """``GET /metrics`` of every ready worker, summed into one exposition (each worker counts only the
        requests it answered); a worker that fails to answer is left out (``x-scix-workers`` says how many
        are in)."""

        async def one(worker: Worker) -> bytes | None:
            worker.inflight += 1
            try:
                return (await self._exchange(worker, request))[0]
            except (WorkerLost, TimeoutError):
                return None
            finally:
                worker.inflight -= 1

        answers = await asyncio.gather(*(one(w) for w in self.workers if w.ready))
        bodies = [a.split(b"\r\n\r\n", 1)[1].decode() for a in answers if a and a.startswith(b"HTTP/1.1 200")]
        if not bodies:
            return error_response(503, "no_worker", "no worker is ready; retry shortly", retry_after="1")
        body = merged(bodies).encode()
        return (
            b"HTTP/1.1 200 OK\r\ncontent-type: text/plain; version=0.0.4; charset=utf-8\r\n"
            + f"content-length: {len(body)}\r\nx-scix-workers: {len(bodies)}\r\n\r\n".encode()
            + body
        )

    async def client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except asyncio.LimitOverrunError:
                    writer.write(error_response(431, "too_large", "request head over 64 KiB", close=True))
                    break
                except (asyncio.IncompleteReadError, ConnectionError):
                    break
                start, headers = _headers(head)
                method = start.split(b" ", 1)[0]
                if b"chunked" in headers.get(b"transfer-encoding", b"").lower():
                    writer.write(
                        error_response(
                            411, "length_required", "send the body with Content-Length", close=True
                        )
                    )
                    break
                length = headers.get(b"content-length", b"0")
                if not length.isdigit() or int(length) > MAX_BODY_BYTES:
                    message = f"request body over {MAX_BODY_BYTES} bytes"
                    writer.write(error_response(413, "too_large", message, close=True))
                    break
                body = await reader.readexactly(int(length)) if int(length) else b""
                target = start.split(b" ", 2)[1].split(b"?", 1)[0] if start.count(b" ") >= 1 else b""
                if method == b"GET" and target == METRICS_PATH:
                    writer.write(await self.metrics(head + body))
                else:
                    writer.write(await self.forward(method, head + body))
                await writer.drain()
                if headers.get(b"connection", b"").lower() == b"close":
                    break
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    # -- the process -----------------------------------------------------------------------------------
    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        done = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, done.set)
        firsts = [loop.create_future() for _ in self.workers]
        keepers = [asyncio.create_task(self._supervise(w, f)) for w, f in zip(self.workers, firsts)]
        try:
            await asyncio.gather(*firsts)  # every worker answered once: the port opens
        except RuntimeError as exc:
            print(f"scix serve: {exc}", file=sys.stderr)
            await self._stop(keepers)
            return 1
        server = await asyncio.start_server(self.client, self.host, self.port, limit=MAX_HEAD_BYTES)
        async with server:
            await done.wait()
        await self._stop(keepers)
        return 0

    async def _stop(self, keepers) -> None:
        self.stopping = True
        for w in self.workers:
            if w.proc is not None and w.proc.poll() is None:
                w.proc.terminate()
        for w in self.workers:
            if w.proc is not None:
                try:
                    await asyncio.to_thread(w.proc.wait, 60)
                except subprocess.TimeoutExpired:
                    w.proc.kill()
            w.drop_connections()
            w.socket.unlink(missing_ok=True)
        for task in keepers:
            task.cancel()
        await asyncio.gather(*keepers, return_exceptions=True)
        try:
            self.run_dir.rmdir()
        except OSError:
            pass


def run_front(host: str, port: int, workers: int, log_level: str = "warning") -> int:
    return asyncio.run(Front(host, port, workers, dict(os.environ), log_level).run())
