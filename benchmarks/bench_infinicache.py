"""InfiniCache against Redis and the embedded store: latency, codes, faults and cost (issue 16).

Sections (each prints a plain table):
  latency  GET and PUT latency (median, p99) and single-client throughput for 1 KB, 1 MB and
           10 MB objects (100 MB with --big) on InfiniCache, Redis (redis-server on loopback)
           and the embedded store, side by side in one run.
  codes    GET latency of 10 MB objects as d, p and the node count change (the paper's
           (10+1), (10+2), (4+2), (5+1) and (10+0)).
  faults   a read/write workload while up to p random nodes are killed every few seconds:
           objects lost, bytes returned wrong, GET latency while repairing.
  cost     the bill of a workload run here (node GB-seconds and invocations, keep-alives
           included), priced with the aws-lambda catalog, against the ElastiCache node that
           holds the same data, for cold large objects and hot small ones.
  sync     the sync benchmark's scatter-reduce with InfiniCache as the store (--sync-workers).

    .venv/bin/python benchmarks/bench_infinicache.py                    # the documented run
    .venv/bin/python benchmarks/bench_infinicache.py --sections latency --big

Cache nodes run on the local platform (``--platform ray``: on a local Ray session) with
``cpu=none`` unless --cpu says otherwise: on a
2-core machine the CPU share of a small function (duty-cycle throttle) would dominate every
figure; ``--cpu auto`` shows that cost.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import yaml

from faasml.catalog import DATA_DIR, load_catalog
from faasml.runtime.platforms.contract import open_platform
from faasml.sync.stores import Store, open_store
from faasml.sync.stores.infinicache import InfiniCache, Options
from faasml.testing.servers import RedisServer

KB, MB = 1024, 2**20


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def table(header: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, ["-" * w for w in widths], *rows]:
        print("  ".join(str(c).rjust(w) for c, w in zip(row, widths, strict=True)))
    print()


def timed(call: Callable[[], Any]) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


@contextlib.contextmanager
def stores(options: Options, with_redis: bool) -> Iterator[dict[str, Store]]:
    with contextlib.ExitStack() as stack:
        out: dict[str, Store] = {}
        start = time.perf_counter()
        cache = stack.enter_context(InfiniCache(options, open_platform))
        print(
            f"({options.nodes} nodes on {options.platform} started in "
            f"{time.perf_counter() - start:.1f} s)\n"
        )
        out[f"infinicache({options.data}+{options.parity})"] = stack.enter_context(
            open_store(cache.url)
        )
        if with_redis and RedisServer.available():
            redis = stack.enter_context(RedisServer())
            out["redis"] = stack.enter_context(open_store(redis.url))
        elif with_redis:
            print("(redis-server is not installed: Redis rows are skipped)\n")
        embedded = open_store("embedded://")
        stack.callback(embedded.destroy)  # type: ignore[attr-defined]
        out["embedded"] = embedded
        yield out


def latency(args: argparse.Namespace) -> None:
    sizes = [KB, MB, 10 * MB] + ([100 * MB] if args.big else [])
    options = Options(
        data=4,
        parity=2,
        nodes=8,
        memory=args.memory,
        cpu=args.cpu,
        platform=args.platform,
        linger=30,
        warmup=600,
    )
    print(
        f"== latency: one client, InfiniCache RS({options.data}+{options.parity}) over "
        f"{options.nodes} nodes of {options.memory} MB on {options.platform} (cpu={args.cpu}) =="
    )
    rows = []
    with stores(options, with_redis=True) as named:
        for size in sizes:
            count = max(3, min(args.repeats, int(args.repeats * MB / size) or 3))
            value = os.urandom(size)
            for name, store in named.items():
                key = f"lat/{size}"
                store.put(key, value)  # warm: connections, nodes
                puts = [timed(lambda s=store, k=key, v=value: s.put(k, v)) for _ in range(count)]
                gets = []
                for _ in range(count):
                    start = time.perf_counter()
                    got = store.get(key)
                    gets.append(time.perf_counter() - start)
                    assert got == value, f"{name} returned wrong bytes"
                store.delete("lat/")
                rows.append(
                    [
                        _size(size),
                        name,
                        str(count),
                        f"{statistics.median(puts) * 1e3:.2f}",
                        f"{pct(puts, 0.99) * 1e3:.2f}",
                        f"{statistics.median(gets) * 1e3:.2f}",
                        f"{pct(gets, 0.99) * 1e3:.2f}",
                        f"{size * count / sum(puts) / MB:.1f}",
                        f"{size * count / sum(gets) / MB:.1f}",
                    ]
                )
    table(
        ["size", "store", "n", "PUT ms", "PUT p99", "GET ms", "GET p99", "PUT MB/s", "GET MB/s"],
        rows,
    )


def codes(args: argparse.Namespace) -> None:
    size = 10 * MB
    print(f"== codes: GET of {_size(size)} objects as d, p and nodes change (cpu={args.cpu}) ==")
    value = os.urandom(size)
    rows = []
    for data, parity, nodes in [
        (10, 1, 12),
        (10, 2, 12),
        (4, 2, 12),
        (5, 1, 12),
        (10, 0, 12),
        (4, 2, 6),
        (4, 2, 24),
    ]:
        options = Options(
            data=data,
            parity=parity,
            nodes=nodes,
            memory=256,
            cpu=args.cpu,
            platform=args.platform,
            linger=30,
        )
        with InfiniCache(options, open_platform) as cache, open_store(cache.url) as store:
            gets = []
            for i in range(args.repeats):
                store.put(f"c/{i % 4}", value)
            for i in range(args.repeats):
                start = time.perf_counter()
                assert store.get(f"c/{i % 4}") == value
                gets.append(time.perf_counter() - start)
        rows.append(
            [
                f"({data}+{parity})",
                str(nodes),
                f"{statistics.median(gets) * 1e3:.1f}",
                f"{pct(gets, 0.99) * 1e3:.1f}",
                f"{size / statistics.median(gets) / MB:.0f}",
            ]
        )
    table(["RS code", "nodes", "GET ms", "GET p99", "GET MB/s"], rows)


def faults(args: argparse.Namespace) -> None:
    options = Options(
        data=4, parity=2, nodes=8, memory=256, cpu=args.cpu, platform=args.platform, linger=30
    )
    objects, size = 48, 256 * KB
    print(
        f"== faults: {args.fault_s:g} s of reads and writes ({objects} objects of "
        f"{_size(size)}, 1 write in 10) while 1..{options.parity} random nodes are killed "
        f"every {args.kill_every:g} s; RS({options.data}+{options.parity}), {options.nodes} "
        "nodes =="
    )
    rng = random.Random(7)
    expected: dict[str, bytes] = {}
    kills = wrong = lost = gets = 0
    calm: list[float] = []
    repairing: list[float] = []
    in_repair = threading.Event()
    with InfiniCache(options, open_platform) as cache, open_store(cache.url) as store:
        for i in range(objects):
            expected[f"f/{i}"] = os.urandom(size)
            store.put(f"f/{i}", expected[f"f/{i}"])
        stop = threading.Event()

        def killer() -> None:
            nonlocal kills
            while not stop.wait(args.kill_every):
                victims = rng.sample(range(options.nodes), rng.randint(1, options.parity))
                in_repair.set()
                for node in victims:
                    cache.kill_node(node)
                kills += len(victims)
                cache.warm_up()  # a keep-alive finds the lost nodes; the proxy repairs
                cache.wait_repaired(120)
                in_repair.clear()

        thread = threading.Thread(target=killer)
        thread.start()
        end = time.monotonic() + args.fault_s
        try:
            while time.monotonic() < end:
                key = f"f/{rng.randrange(objects)}"
                if rng.random() < 0.1:
                    expected[key] = os.urandom(size)
                    store.put(key, expected[key])
                    continue
                repairing_now = in_repair.is_set()
                start = time.perf_counter()
                got = store.get(key)
                (repairing if repairing_now else calm).append(time.perf_counter() - start)
                gets += 1
                if got is None:
                    lost += 1
                elif got != expected[key]:
                    wrong += 1
        finally:
            stop.set()
            thread.join()
        stats = cache.stats
    table(
        ["GETs", "nodes killed", "lost", "wrong bytes", "chunks repaired", "objects lost"],
        [
            [
                str(gets),
                str(kills),
                str(lost),
                str(wrong),
                str(stats.chunks_repaired),
                str(stats.objects_lost),
            ]
        ],
    )
    rows = [
        [name, str(len(v)), f"{statistics.median(v) * 1e3:.2f}", f"{pct(v, 0.99) * 1e3:.2f}"]
        for name, v in (("calm", calm), ("repairing", repairing))
        if v
    ]
    table(["GET while", "n", "median ms", "p99 ms"], rows)


def elasticache_nodes() -> dict[str, dict[str, float]]:
    """The ElastiCache Redis node types of the aws-lambda catalog (name -> price, memory)."""
    with open(DATA_DIR / "aws-lambda.yaml") as fh:
        data = yaml.safe_load(fh)
    nodes: dict[str, dict[str, float]] = data["storage"]["redis"]["nodes"]
    return nodes


def elasticache_usd_per_hour(data_mb: float) -> tuple[str, float]:
    """The cheapest set of one node type that holds ``data_mb`` (several of the largest if
    needed)."""
    nodes = elasticache_nodes()
    best: tuple[str, float] | None = None
    for name, node in nodes.items():
        count = max(1, -(-int(data_mb) // int(node["memory_mb"])))
        usd = count * node["hourly_usd"]
        if best is None or usd < best[1]:
            best = (f"{count} x {name}" if count > 1 else name, usd)
    assert best is not None
    return best


def _run_rate(
    cache: InfiniCache, store: Store, size: int, rate: float, seconds: float
) -> tuple[float, float, float]:
    """GETs at ``rate`` per second for ``seconds``: (GETs, invocations, GB-s) billed."""
    value = os.urandom(size)
    keys = [f"cost/{i}" for i in range(8)]
    for key in keys:
        store.put(key, value)
    cache.settle()
    before = cache.bill()
    start = time.monotonic()
    done = 0
    while time.monotonic() - start < seconds:
        assert store.get(keys[done % len(keys)]) == value
        done += 1
        pause = start + done / rate - time.monotonic()
        if pause > 0:
            time.sleep(pause)
    cache.settle()
    after = cache.bill()
    store.delete("cost/")
    return done, after["invocations"] - before["invocations"], after["gb_s"] - before["gb_s"]


def cost(args: argparse.Namespace) -> None:
    aws = load_catalog("aws-lambda").platform

    def usd(gb_s: float, calls: float) -> float:
        return gb_s * aws.price_per_gb_s + calls * aws.price_per_invocation

    options = Options(
        data=10, parity=2, nodes=12, memory=1024, cpu=args.cpu, platform=args.platform, linger=0.1
    )
    data_mb = options.nodes * options.node_capacity_bytes / MB * options.data / options.chunks
    print(
        f"== cost: RS(10+2) over 12 nodes of 1024 MB (the paper's 1536 MB x 12 does not fit "
        "this machine's function capacity), linger 0.1 s ==\n"
        f"   node bills measured here, priced with the aws-lambda catalog (Lambda "
        f"${aws.price_per_gb_s:.10f}/GB-s + ${aws.price_per_invocation:.7f}/invocation);\n"
        f"   the ElastiCache Redis node(s) from the same catalog that hold the same data "
        f"({data_mb / 1024:.1f} GB)"
    )
    rows = []
    with InfiniCache(options, open_platform) as cache, open_store(cache.url) as store:
        cache.settle()
        before = cache.bill()
        cache.warm_up()
        cache.settle()
        after = cache.bill()
        keep_calls = (after["invocations"] - before["invocations"]) / options.nodes
        keep_gb_s = (after["gb_s"] - before["gb_s"]) / options.nodes
        units: dict[int, tuple[float, float]] = {}
        for name, size, rate in [
            ("large, cold", 10 * MB, 1.0),
            ("large, warm", 10 * MB, 20.0),
            ("small, hot", KB, 500.0),
        ]:
            gets, calls, gb_s = _run_rate(cache, store, size, rate, args.cost_s)
            if name == "large, cold":
                units[size] = (calls / gets, gb_s / gets)
            hour = 3600 / args.cost_s
            keep = options.nodes * 60 * usd(keep_gb_s, keep_calls)
            node, ec_usd = elasticache_usd_per_hour(data_mb)
            ic_usd = usd(gb_s * hour, calls * hour) + keep
            rows.append(
                [
                    name,
                    _size(size),
                    f"{gets / args.cost_s:.0f}",
                    f"{calls * hour:.0f}",
                    f"{gb_s * hour:.0f}",
                    f"{ic_usd:.4f}",
                    node,
                    f"{ec_usd:.3f}",
                    f"{ec_usd / ic_usd:.1f}x",
                ]
            )
    table(
        [
            *("workload", "object", "GET/s", "invk/h", "GB-s/h"),
            *("IC $/h", "ElastiCache", "EC $/h", "EC/IC"),
        ],
        rows,
    )
    print(
        f"   keep-alive: {keep_calls:.0f} invocation(s) and {keep_gb_s:.3f} GB-s per node, "
        "once a minute per node (included above).\n"
        f"   one GET of a 10 MB object invoked {units[10 * MB][0]:.1f} nodes and billed "
        f"{units[10 * MB][1]:.3f} GB-s.\n"
    )
    print(
        "== cost at scale: the unit costs above, for the large working sets of the paper "
        "(10 MB objects) =="
    )
    calls_get, gb_s_get = units[10 * MB]
    node_data_mb = options.node_capacity_bytes / MB * options.data / options.chunks
    rows = []
    for working_gb in (data_mb / 1024, 100.0, 400.0):
        nodes = max(options.nodes, int(-(-working_gb * 1024 // node_data_mb)))
        keep = nodes * 60 * usd(keep_gb_s, keep_calls)
        node, ec_usd = elasticache_usd_per_hour(working_gb * 1024)
        for per_hour in (60, 3600, 36000):
            ic_usd = keep + per_hour * usd(gb_s_get, calls_get)
            rows.append(
                [
                    f"{working_gb:.1f}",
                    str(nodes),
                    str(per_hour),
                    f"{ic_usd:.4f}",
                    node,
                    f"{ec_usd:.3f}",
                    f"{ec_usd / ic_usd:.1f}x",
                ]
            )
    table(["data GB", "IC nodes", "GET/h", "IC $/h", "ElastiCache", "EC $/h", "EC/IC"], rows)
    print("   EC/IC above 1: InfiniCache is cheaper by that factor; below 1: ElastiCache is.\n")


def sync(args: argparse.Namespace) -> None:
    from faasml.sync.harness import digest, expected_mean, run_reduce

    workers, floats = args.sync_workers, args.sync_floats
    print(f"== sync: scatter-reduce, {workers} workers, {floats * 4 / MB:.1f} MB model ==")
    rows = []
    options = Options(
        data=4, parity=2, nodes=8, memory=512, cpu=args.cpu, platform=args.platform, linger=30
    )
    with contextlib.ExitStack() as stack:
        urls = {"infinicache(4+2)": stack.enter_context(InfiniCache(options, open_platform)).url}
        if RedisServer.available():
            urls["redis"] = stack.enter_context(RedisServer()).url
        embedded = open_store("embedded://")
        stack.callback(embedded.destroy)  # type: ignore[attr-defined]
        urls["embedded"] = embedded.url
        for name, url in urls.items():
            run = run_reduce(url, "scatter-reduce", workers, floats, rounds=4, seed=1)
            errors = run.errors()
            later = run.round_seconds()[1:] if not errors else [float("nan")]
            right = {o.digests[-1] for o in run.outcomes} == {
                digest(expected_mean(1, workers, 3, floats))
            }
            rows.append(
                [
                    name,
                    str(len(run.outcomes)),
                    str(len(errors)),
                    "yes" if right and not errors else "NO",
                    f"{statistics.median(later):.3f}",
                ]
            )
    table(["store", "workers", "errors", "exact mean", "comm s/round (median, 2-4)"], rows)


def _size(size: int) -> str:
    return f"{size // MB} MB" if size >= MB else f"{size // KB} KB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sections",
        nargs="+",
        default=["latency", "codes", "faults", "cost"],
        choices=["latency", "codes", "faults", "cost", "sync"],
    )
    parser.add_argument("--big", action="store_true", help="add 100 MB objects")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--memory", type=int, default=512, help="node memory (MB)")
    parser.add_argument("--cpu", default="none", help="node CPU-share mode of the platform")
    parser.add_argument(
        "--platform", default="local", choices=["local", "ray"], help="nodes' platform"
    )
    parser.add_argument("--fault-s", type=float, default=60.0)
    parser.add_argument("--kill-every", type=float, default=5.0)
    parser.add_argument("--cost-s", type=float, default=20.0)
    parser.add_argument("--sync-workers", type=int, default=16)
    parser.add_argument("--sync-floats", type=int, default=250_000)
    args = parser.parse_args()
    for section in args.sections:
        globals()[section](args)


if __name__ == "__main__":
    main()
