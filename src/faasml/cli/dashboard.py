"""`faasml dashboard [RUN_DIR ...]`: a local web page of runs, live while they run.

It reads the run directories given (or the runs up to two folders under them) and serves one
page that lists them and shows one run, polling its record every two seconds.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from typing import Any

from rich.markup import escape

from faasml._imports import optional_import
from faasml.cli._common import console


def register(commands: Any) -> None:
    text = "serve a local web page of runs, live while they run"
    dashboard = commands.add_parser("dashboard", help=text, description=text[0].upper() + text[1:])
    dashboard.add_argument(
        "run_dirs",
        nargs="*",
        default=["."],
        metavar="RUN_DIR",
        help="run directories, or folders holding them up to two levels down (default: .)",
    )
    dashboard.add_argument(
        "--port", type=int, default=8700, help="the port (default: 8700; 0: any free one)"
    )
    dashboard.add_argument(
        "--host",
        default="127.0.0.1",
        help="the address to listen on (default: 127.0.0.1, this machine only)",
    )
    dashboard.set_defaults(func=run_dashboard)


def run_dashboard(args: argparse.Namespace) -> int:
    from faasml.exceptions import ConfigError

    if not 0 <= args.port <= 65535:
        raise ConfigError(f"--port is {args.port}, but must be a port from 0 to 65535")
    optional_import("starlette", "dashboard")
    optional_import("uvicorn", "dashboard")
    from faasml.dashboard.runs import check_roots, find_runs, no_runs_line
    from faasml.dashboard.server import bind, serve

    roots = check_roots(list(args.run_dirs))
    found = find_runs(roots)
    out = console()
    sock = bind(args.host, args.port)

    def announce(url: str) -> None:
        runs = f"{len(found)} run(s)" if found else no_runs_line(roots)
        out.print(escape(f"faasml dashboard on {url} ({runs}); Ctrl-C to stop"), soft_wrap=True)
        sys.stdout.flush()  # a reader of a pipe learns the URL before the first request

    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C: how a dashboard is meant to stop
        serve(roots, sock, announce)
    return 0
