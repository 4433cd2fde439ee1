"""``scix serve``: the HTTP API of one index under uvicorn."""

from __future__ import annotations

import argparse

from scix_core.cli.common import config_from, console
from scix_core.cli.registry import command
from scix_core.errors import ConfigError
from scix_core.extras import require


def _serve_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--index", required=True)
    p.add_argument("--host", default="127.0.0.1", help="listen address (default loopback only)")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument(
        "--workers",
        type=int,
        default=1,
        help="server processes; more than one is not yet supported with the embedded vector shard",
    )


@command("serve", "serve search and recommendations of one index over HTTP (OpenAPI at /docs)", _serve_args)
def serve_cmd(args: argparse.Namespace) -> int:
    if args.workers != 1:
        raise ConfigError(
            "--workers above 1 is not supported yet: the embedded vector shard opens in one process at a "
            "time and user state is one SQLite file (docs/api.md)"
        )
    if not 0 < args.port < 65536:
        raise ConfigError(f"--port must be in 1..65535, not {args.port}")
    uvicorn = require("uvicorn", "serve", "scix serve")
    require("fastapi", "serve", "scix serve")
    from scix_core.serve.app import create_app  # lazy: FastAPI and both stacks, only for this command

    app = create_app(args.index, config_from(args))
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        console.print(f"[yellow]listening on {args.host}: reachable beyond this machine[/]", highlight=False)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    return 0
