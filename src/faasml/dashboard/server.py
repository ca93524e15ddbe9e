"""The dashboard's web server (Starlette on uvicorn; ``faasml[dashboard]``): the page, its
script and styles, and two JSON endpoints the page polls, each read afresh from the run
directories on every request, so the page follows a run as its record is rewritten.

``GET /api/runs``: the runs found under the folders given. ``GET /api/run?path=DIR``: one
run's view (``faasml.dashboard.view``); an unknown run answers 404 and a record that cannot be
read 422, each with ``{"error": "<one line>"}``.
"""

from __future__ import annotations

import errno
import socket
from collections.abc import Callable
from importlib import resources

import uvicorn
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from faasml.dashboard.page import json_text, live_page, plain
from faasml.dashboard.runs import find_runs, no_runs_line, run_entry
from faasml.dashboard.view import run_view
from faasml.exceptions import ConfigError, FaasmlError
from faasml.runtime.record.run_dir import RunDir

ROUTES = "/, /api/runs and /api/run?path=RUN_DIR"


class _Json(JSONResponse):
    """JSON as the page reads it: NaN and infinities as null, '<' escaped."""

    def render(self, content: object) -> bytes:
        return json_text(content).encode("utf-8")


def _error(status: int, message: str) -> Response:
    return _Json({"error": message}, status_code=status)


def create_app(roots: list[str]) -> Starlette:
    """The dashboard of the runs at or under ``roots`` (folders, checked by the caller)."""

    def page(request: Request) -> Response:
        return HTMLResponse(live_page(roots), headers={"Cache-Control": "no-store"})

    def runs(request: Request) -> Response:
        entries = [plain(run_entry(path)) for path in find_runs(roots)]
        return _Json({"runs": entries, "empty": no_runs_line(roots)})

    def run(request: Request) -> Response:
        path = request.query_params.get("path")
        if path is None:
            return _error(400, "name the run: /api/run?path=RUN_DIR (see /api/runs)")
        found = find_runs(roots)
        if path not in found:
            shown = ", ".join(found) or "none"
            return _error(404, f"no run {path!r} in this dashboard's folders (runs: {shown})")
        try:
            record = RunDir(path).read_record()
        except FaasmlError as err:
            return _error(422, str(err))
        return _Json(plain(run_view(record, path)), headers={"Cache-Control": "no-store"})

    async def not_found(request: Request, exc: Exception) -> Response:
        status = exc.status_code if isinstance(exc, HTTPException) else 500
        return PlainTextResponse(
            f"not found: {request.url.path} (the dashboard serves {ROUTES})", status_code=status
        )

    static = str(resources.files("faasml.dashboard") / "static")
    return Starlette(
        routes=[
            Route("/", page),
            Route("/api/runs", runs),
            Route("/api/run", run),
            Mount("/static", StaticFiles(directory=static), name="static"),
        ],
        exception_handlers={404: not_found},
    )


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port`` (0: any free port), or one line saying why not."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as err:
        sock.close()
        if err.errno == errno.EADDRINUSE:
            raise ConfigError(
                f"port {port} on {host} is in use (another dashboard?); pass --port with "
                "another, or --port 0 for any free one"
            ) from None
        raise ConfigError(f"cannot listen on {host}:{port}: {err.strerror}") from None
    sock.listen(128)
    return sock


def url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://{f'[{host}]' if ':' in host else host}:{port}/"


def serve(roots: list[str], sock: socket.socket, announce: Callable[[str], None]) -> None:
    """Serve the dashboard on ``sock`` until interrupted (Ctrl-C)."""
    app = create_app(roots)
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
    server = uvicorn.Server(config)
    announce(url_of(sock))
    server.run(sockets=[sock])
