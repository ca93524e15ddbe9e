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

from faasml.catalog import Catalog
from faasml.runtime.platform import Platform, open_platform
from faasml.sync.stores.infinicache._options import Options

NODE_PLATFORMS = ("local", "ray")


def node_platforms(options: Options, catalog: Catalog) -> list[Platform]:
    """A platform per node of ``options.platform``, its idle instances reclaimed after
    ``options.reclaim`` seconds; close them in reverse order (see the module docstring)."""
    extra = {"address": "local"} if options.platform == "ray" else {}
    opened: list[Platform] = []
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
    except BaseException:
        close_platforms(opened)
        raise
    return opened


def close_platforms(platforms: list[Platform]) -> None:
    """Close node platforms last to first (the first may own the Ray session it started)."""
    for platform in reversed(platforms):
        platform.close()
