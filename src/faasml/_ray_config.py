"""Settings for the local Ray clusters faasml starts (its tests, `faasml cluster run`)."""

from __future__ import annotations

import socket
from typing import Any

from faasml.exceptions import ConfigError

LOCAL_SYSTEM_CONFIG: dict[str, int] = {"worker_niceness": 0}
"""Ray starts its worker processes at nice 15: beside any busy process they get a few per
cent of a core (an actor importing PyTorch took 100 s instead of 5 beside two busy loops).
faasml's workers are the work itself, so they run at the caller's priority."""


def local_head_args(num_cpus: int) -> dict[str, Any]:
    """``head_node_args`` of a local ``ray.cluster_utils.Cluster`` faasml starts: no dashboard,
    workers at the caller's priority."""
    return {
        "num_cpus": num_cpus,
        "include_dashboard": False,
        "_system_config": LOCAL_SYSTEM_CONFIG,
    }


REACH_TIMEOUT_S = 5.0
"""How long a TCP connect to a Ray address may take before the address is called unreachable:
ray.init itself retries a dead address for minutes."""


def check_reachable(address: str, timeout_s: float = REACH_TIMEOUT_S) -> None:
    """ConfigError, in one line naming the address, when nothing accepts a TCP connection at
    ``address`` ('host:port' or 'ray://host:port'); 'auto', 'local' and addresses without a
    port are left to Ray."""
    host, port = _host_port(address)
    if port is None:
        return
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            pass
    except OSError as err:
        reason = "timed out" if isinstance(err, TimeoutError) else err.strerror or str(err)
        raise ConfigError(
            f"cannot reach the Ray cluster at {address!r}: nothing accepts a connection on "
            f"{host} port {port} ({reason}; a TCP connect with a {timeout_s:g} s timeout)"
        ) from None


def _host_port(address: str) -> tuple[str, int | None]:
    """Host and port of a Ray address; port None where it names none (or is not a number)."""
    rest = address.strip()
    if "://" in rest:
        rest = rest.split("://", 1)[1]
    rest = rest.split("/", 1)[0]
    host, sep, port = rest.rpartition(":")
    if not sep or not port.isdigit() or not host:
        return rest, None
    number = int(port)
    if not 0 < number < 65536:
        raise ConfigError(f"the Ray address {address!r} has port {number}, but ports are 1-65535")
    return host.strip("[]"), number
