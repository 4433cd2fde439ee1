"""``scix serve``: the HTTP API of one index under uvicorn."""

from __future__ import annotations

import argparse
import os

from scix_core.cli.common import config_from, console
from scix_core.cli.registry import command
from scix_core.config import TUNED
from scix_core.embeddings.encoder import query_backend
from scix_core.errors import ConfigError, ScixError
from scix_core.extras import require
from scix_core.serve.front import INDEX_ENV, TUNED_ENV, run_front

#: asyncio's own event loop even where uvloop is installed: with uvloop (uvicorn's "auto" choice) the
#: serve bench answered 96 requests/s against 122-125 (docs/history.md#serving)
EVENT_LOOP = {"loop": "asyncio"}


#: the backend that encodes one short query fastest on every CPU measured (docs/results.md#embedding-backends)
QUERY_FASTEST = "onnx-int8"


def backend_hint(backend: str) -> str | None:
    """What to say at the start about the backend that encodes the served index's queries (the one it was
    built with); None when nothing is faster."""
    if backend == QUERY_FASTEST:
        return None
    return (
        f"queries are encoded by {backend}, the backend this index was built with; one short query "
        f"encodes in about half the time on {QUERY_FASTEST}: an index built to be served is best built "
        f"with SCIX_EMBED_BACKEND={QUERY_FASTEST} scix ingest … (docs/api.md#limits)"
    )


def _serve_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--index", required=True)
    p.add_argument("--host", default="127.0.0.1", help="listen address (default loopback only)")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument(
        "--workers",
        type=int,
        default=1,
        help="server processes behind one front process, which balances requests, restarts a worker that "
        "dies and answers for it; each reads its own copy of the embedded vector shard, all share the user "
        "state (docs/api.md#workers)",
    )


@command("serve", "serve search and recommendations of one index over HTTP (OpenAPI at /docs)", _serve_args)
def serve_cmd(args: argparse.Namespace) -> int:
    if not 1 <= args.workers <= 64:
        raise ConfigError(f"--workers must be in 1..64, not {args.workers}")
    if not 0 < args.port < 65536:
        raise ConfigError(f"--port must be in 1..65535, not {args.port}")
    uvicorn = require("uvicorn", "serve", "scix serve")
    require("fastapi", "serve", "scix serve")
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        console.print(f"[yellow]listening on {args.host}: reachable beyond this machine[/]", highlight=False)
    cfg = config_from(args)  # a bad config file fails here, once, not in every worker
    try:
        hint = backend_hint(query_backend(cfg, args.index))
    except ScixError:  # no such index: the server says so as it starts (a worker's reason)
        hint = None
    if hint:
        console.print(f"[yellow]{hint}[/]", highlight=False)
    if args.workers == 1:
        from scix_core.serve.app import create_app  # lazy: FastAPI and both stacks, only for this command

        uvicorn.run(
            create_app(args.index, cfg),
            host=args.host,
            port=args.port,
            log_level="warning",
            **EVENT_LOOP,
        )
        return 0
    os.environ[INDEX_ENV] = args.index  # the workers are new processes: they read the index and config here
    if getattr(args, "config", None) == TUNED:  # the index's preset over the configuration found as usual
        os.environ[TUNED_ENV] = "1"
    elif getattr(args, "config", None):
        os.environ["SCIX_CONFIG"] = str(args.config)
    return run_front(args.host, args.port, args.workers, os.environ.get("SCIX_SERVE_LOG_LEVEL", "warning"))
