"""Where cache nodes run: one function platform per node, of the kind the URL names.

Each node gets a platform of its own so that its invocations reach the warm instance that
holds its chunks, as a Lambda function's invocations reach its own warm containers:

- ``local``: a ``LocalPlatform``; the node's instance is a process on this machine.
- ``ray``: a ``RayPlatform``; the node's instance is a Ray actor (running the local
  platform's instance process inside it), reused warm by the node's next invocation. It
  joins the Ray session of this process, or starts a new local one (``address="local"``:
  never a cluster some other process started on this machine, which Ray would otherwise
  join); the first node's platform owns it, so platforms are closed last to first. The
  proxy listens on loopback, so the nodes must run on this machine.
"""

from __future__ import annotations

from faasml._imports import optional_import
from faasml.catalog import Catalog
from faasml.exceptions import ConfigError
from faasml.sync.stores.infinicache._options import Options
from faasml.sync.stores.infinicache._state import NodePlatform, OpenPlatform

NODE_PLATFORMS = ("local", "ray")


def node_platforms(
    options: Options, catalog: Catalog, open_platform: OpenPlatform
) -> list[NodePlatform]:
    """A platform per node of ``options.platform`` (opened by ``open_platform``), its idle
    instances reclaimed after ``options.reclaim`` seconds; close them in reverse order (see
    the module docstring)."""
    extra = {"address": "local"} if options.platform == "ray" else {}
    opened: list[NodePlatform] = []
    try:
        for _ in range(options.nodes):
            opened.append(
                open_platform(
                    options.platform,
                    catalog,
                    cpu=options.cpu,
                    idle_timeout_s=options.reclaim,
                    **extra,
                )
            )
        if options.platform == "ray":
            _check_ray_fits(options, catalog)
    except BaseException:
        close_platforms(opened)
        raise
    return opened


def _check_ray_fits(options: Options, catalog: Catalog) -> None:
    """ConfigError when the Ray session cannot hold every node at once (each reserves
    memory / mb_per_vcpu CPUs and its memory): a node left unplaced would never start."""
    total = optional_import("ray", "ray").cluster_resources()
    cpus = options.nodes * float(catalog.platform.vcpus(options.memory))
    if cpus > float(total.get("CPU", 0.0)) + 1e-9:
        raise ConfigError(
            f"infinicache nodes x CPUs is {cpus:.2f} ({options.nodes} nodes of "
            f"{options.memory} MB), but the Ray session has {float(total.get('CPU', 0.0)):g} "
            "CPUs: use fewer nodes or less memory"
        )
    mb = options.nodes * options.memory
    if mb * 2**20 > float(total.get("memory", float("inf"))):
        raise ConfigError(
            f"infinicache nodes x memory is {mb} MB, but the Ray session has "
            f"{float(total['memory']) / 2**20:.0f} MB of memory for tasks"
        )


def close_platforms(platforms: list[NodePlatform]) -> None:
    """Close node platforms last to first (the first may own the Ray session it started)."""
    for platform in reversed(platforms):
        platform.close()
