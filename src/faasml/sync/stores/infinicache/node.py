"""The cache-node function body (InfiniCache §4.1, "Lambda function runtime").

A node is a function invocation: ``serve({"host", "port", "slot", "token"})``. It connects
to its proxy (a function takes no inbound connections), says who it is and which chunks it
still holds, and serves PUT / GET / DEL / DUMP requests until the proxy says goodbye, then
returns. The chunks live in this module's globals, so they survive from one invocation to the
next for as long as the platform keeps this instance warm (the proxy's keep-alive
invocations see to that); an instance the platform reclaims or that dies takes them with it,
and the proxy repairs them from the other nodes.
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from typing import Any

from faasml.sync.param_server import _recv_frame, _send_frame

N_HELLO, N_PUT, N_GET, N_DEL, N_DUMP, N_PING, N_BYE = 20, 21, 22, 23, 24, 25, 26
OK, MISSING = 0, 1

_CHUNKS: dict[str, bytes] = {}
_INSTANCE = uuid.uuid4().hex
_STARTED = time.time()


def serve(payload: dict[str, Any]) -> dict[str, Any]:
    """Serve the proxy at payload host:port as node ``slot`` until it says goodbye."""
    served = 0
    with socket.create_connection((payload["host"], int(payload["port"])), timeout=60) as sock:
        sock.settimeout(None)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        hello = {
            "slot": payload["slot"],
            "token": payload["token"],
            "instance": _INSTANCE,
            "pid": os.getpid(),
            "started": _STARTED,
            "chunks": sorted(_CHUNKS),
        }
        _send_frame(sock, N_HELLO, hello, b"")
        while True:
            try:
                op, header, data = _recv_frame(sock)
            except (ConnectionError, OSError):
                break
            served += 1
            if op == N_BYE:
                _send_frame(sock, OK, {}, b"")
                break
            _send_frame(sock, *_serve(op, header, data))
    return {"served": served, "instance": _INSTANCE, "chunks": len(_CHUNKS)}


def _serve(op: int, header: dict[str, Any], data: bytes) -> tuple[int, dict[str, Any], bytes]:
    if op == N_PUT:
        _CHUNKS[header["id"]] = data
        return OK, {}, b""
    if op == N_GET:
        chunk = _CHUNKS.get(header["id"])
        return (MISSING, {}, b"") if chunk is None else (OK, {}, chunk)
    if op == N_DEL:
        removed = sum(_CHUNKS.pop(i, None) is not None for i in header["ids"])
        return OK, {"removed": removed}, b""
    if op == N_DUMP:  # the ids only: a backup then moves chunks one by one
        return OK, {"ids": sorted(_CHUNKS)}, b""
    if op == N_PING:
        return OK, {"chunks": len(_CHUNKS)}, b""
    return MISSING, {"error": f"unknown operation {op}"}, b""
