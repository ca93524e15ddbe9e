"""InfiniCache deployments whose cache nodes run on faasml's platforms.

``start_infinicache(url)`` starts one (the runs and the profiler do); as a program it runs one
until interrupted, the parameter server's counterpart::

    python -m faasml.runtime.platforms.infinicache 'infinicache://?data=4&parity=2&nodes=8&memory=256'

prints ``faasml-infinicache listening infinicache://127.0.0.1:PORT`` once every node has
started; any process joins it with that URL. On SIGINT or SIGTERM it lets the nodes go, stops
them and prints the bill (invocations, GB-seconds, USD priced with the catalog).
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading

from faasml.exceptions import FaasmlError
from faasml.runtime.platforms.contract import open_platform
from faasml.sync.stores.infinicache import InfiniCache, parse_url


def start_infinicache(url: str) -> InfiniCache:
    """Start the deployment a URL without a host asks for (``infinicache://?data=...``), its
    nodes on the platform the URL names (``local`` or ``ray``); the caller closes it."""
    host, _, options = parse_url(url)
    if host is not None:
        raise FaasmlError("give options (infinicache://?data=...), not a running deployment")
    return InfiniCache(options, open_platform).start()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m faasml.runtime.platforms.infinicache",
        description="Run an InfiniCache deployment until interrupted.",
    )
    parser.add_argument("url", nargs="?", default="infinicache://", help="infinicache://?options")
    args = parser.parse_args(argv)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        cache = start_infinicache(args.url)
    except FaasmlError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    try:
        print(f"faasml-infinicache listening {cache.url}", flush=True)
        stop.wait()
    finally:
        cache.close()
    bill = cache.bill()
    print(
        f"faasml-infinicache stopped: {bill['invocations']:.0f} invocations, "
        f"{bill['gb_s']:.3f} GB-s, {bill['usd']:.6f} USD",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
