"""Communication time per iteration against worker count, every store x scheme (MISSION C8).

Like SMLT Fig. 8-9 and CE-scaling Table II: n real worker processes (2, 4, 8, 16) reduce a
gradient of 0.1, 12 or 90 MB through each store with each scheme; every row beside the store's
raw bandwidth measured in the same run (one client, PUT + GET of one model-sized value) and the
time CE-scaling eq. 3 predicts from that bandwidth and the measured latency:
  allreduce      (3n - 2)(M / b + l)          one aggregator, whole-model transfers
  scatter-reduce (3n - 2)(M / (n b) + l)      per worker, shard-sized transfers, in parallel
  param-server   2 (M / b + l)                per worker; the server adds the n gradients
The servers (redis-server, memcached, moto, faasml's parameter server) are started on loopback
and stopped at the end; a store whose program is missing is skipped with a note.

    .venv/bin/python benchmarks/bench_sync.py                     # the documented run
    .venv/bin/python benchmarks/bench_sync.py --stores embedded --sizes 12 --workers 2 16

Communication time of a round: from the first worker entering ``reduce`` to the last leaving it
(all workers released together by a barrier), median over the rounds after the first.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import statistics
import sys
import time
import uuid
from collections.abc import Iterator

from faasml.sync.harness import run_reduce
from faasml.sync.param_server import ParameterServer
from faasml.sync.stores import open_store
from faasml.testing.servers import MemcachedServer, MotoServer, RedisServer

SCHEMES = {"ps": ["param-server", "allreduce", "scatter-reduce"]}
DEFAULT_SCHEMES = ["allreduce", "scatter-reduce"]
SLOW = {"s3", "dynamodb"}  # moto answers in Python: the big models take minutes there


@contextlib.contextmanager
def store_urls(names: list[str]) -> Iterator[dict[str, str]]:
    """Start what each named store needs; yields name -> URL for those that could start."""
    urls: dict[str, str] = {}
    with contextlib.ExitStack() as stack:
        for name in names:
            try:
                if name == "embedded":  # one fresh directory shared by the run's processes
                    embedded = open_store("embedded://")
                    stack.callback(embedded.destroy)  # type: ignore[attr-defined]
                    urls[name] = embedded.url
                elif name == "ps":
                    urls[name] = stack.enter_context(ParameterServer()).url
                elif name == "redis":
                    urls[name] = stack.enter_context(RedisServer()).url
                elif name == "memcached":
                    urls[name] = stack.enter_context(MemcachedServer(memory_mb=4096)).url
                elif name in ("s3", "dynamodb"):
                    server = urls.get("_moto") or stack.enter_context(MotoServer()).url
                    urls["_moto"] = server
                    query = f"endpoint_url={server}&region=us-east-1&create=true"
                    urls[name] = f"{name}://faasml-bench?{query}"
            except Exception as err:  # a missing program: say so and go on
                print(f"# {name}: skipped ({err})")
        urls.pop("_moto", None)
        yield urls


def raw_bandwidth(url: str, size: int, repeats: int = 3) -> tuple[float, float]:
    """(MB/s of one client's PUT + GET of ``size`` bytes, median small-GET latency in s)."""
    value = bytes(size)
    key = f"bench-raw-{uuid.uuid4().hex[:8]}"
    with open_store(url) as store:
        store.put(key + "/warm", value)
        start = time.perf_counter()
        for i in range(repeats):
            store.put(f"{key}/{i}", value)
            store.get(f"{key}/{i}")
        seconds = time.perf_counter() - start
        store.put(key + "/tiny", b"x")
        latencies = []
        for _ in range(20):
            t = time.perf_counter()
            store.get(key + "/tiny")
            latencies.append(time.perf_counter() - t)
        store.delete(key)
    return 2 * repeats * size / seconds / 1e6, statistics.median(latencies)


def predicted_s(scheme: str, n: int, size: int, mbps: float, latency: float) -> float:
    """CE-scaling eq. 3 with the measured bandwidth and latency (see the module docstring)."""
    bandwidth = mbps * 1e6
    if scheme == "allreduce":
        return (3 * n - 2) * (size / bandwidth + latency)
    if scheme == "scatter-reduce":
        return (3 * n - 2) * (size / n / bandwidth + latency)
    return 2 * (size / bandwidth + latency)


def main() -> None:
    # A stopped benchmark still stops the servers it started (ExitStack in store_urls).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--stores", nargs="+", default=["embedded", "ps", "redis", "memcached", "s3", "dynamodb"]
    )
    parser.add_argument("--schemes", nargs="+", default=None, help="default: all that apply")
    parser.add_argument("--sizes", nargs="+", type=float, default=[0.1, 12.0, 90.0], help="MB")
    parser.add_argument("--workers", nargs="+", type=int, default=[2, 4, 8, 16])
    parser.add_argument("--rounds", type=int, default=4, help="rounds per run (first is warm-up)")
    parser.add_argument(
        "--worker-mbps",
        type=float,
        default=None,
        help="hold each worker to a function's network bandwidth in MB/s (e.g. 75 for a "
        "1769 MB Lambda); raw bandwidth and eq. 3 then use min(raw, this)",
    )
    parser.add_argument(
        "--max-workers-90mb", type=int, default=4, help="cap on n for models of 50 MB and more"
    )
    parser.add_argument(
        "--max-workers-slow", type=int, default=4, help="cap on n for s3/dynamodb at >= 12 MB"
    )
    args = parser.parse_args()

    header = (
        f"{'store':<10}{'scheme':<15}{'MB':>6}{'n':>4}{'comm s/iter':>13}{'eq.3 s':>9}"
        f"{'MB moved':>10}{'eff. MB/s':>11}{'raw MB/s':>10}{'% of raw':>10}"
    )
    link = f"{args.worker_mbps:g} MB/s per worker" if args.worker_mbps else "unthrottled"
    with store_urls(args.stores) as urls:
        print(f"# workers' network: {link}; {args.rounds} rounds per row, median of rounds 2..")
        print(header)
        print("-" * len(header))
        for name, url in urls.items():
            schemes = args.schemes or SCHEMES.get(name, DEFAULT_SCHEMES)
            for mb in args.sizes:
                size = int(mb * 1e6) // 4 * 4
                mbps, latency = raw_bandwidth(url, size)
                if args.worker_mbps is not None:
                    mbps = min(mbps, args.worker_mbps)
                for scheme in schemes:
                    if scheme == "param-server" and name != "ps":
                        continue
                    for n in args.workers:
                        cap = args.max_workers_90mb if mb >= 50 else None
                        if name in SLOW and mb >= 12:
                            cap = min(cap or n, args.max_workers_slow)
                        if cap is not None and n > cap:
                            continue
                        run = run_reduce(
                            url,
                            scheme,
                            n,
                            size // 4,
                            rounds=args.rounds,
                            seed=1,
                            worker_mbps=args.worker_mbps,
                        )
                        if run.errors():
                            print(f"{name:<10}{scheme:<15}{mb:>6g}{n:>4}  failed: {run.errors()}")
                            continue
                        seconds = statistics.median(run.round_seconds()[1:])
                        stats = run.total_stats()
                        moved = (stats.bytes_written + stats.bytes_read) / args.rounds / 1e6
                        print(
                            f"{name:<10}{scheme:<15}{mb:>6g}{n:>4}{seconds:>13.4f}"
                            f"{predicted_s(scheme, n, size, mbps, latency):>9.4f}{moved:>10.1f}"
                            f"{moved / seconds:>11.0f}{mbps:>10.0f}"
                            f"{100 * moved / seconds / mbps:>9.0f}%",
                            flush=True,
                        )


if __name__ == "__main__":
    main()
