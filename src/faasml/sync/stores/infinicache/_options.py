"""The options of an InfiniCache deployment, read from its store URL and checked.

``infinicache://?data=4&parity=2&nodes=8&memory=256`` starts a deployment (a proxy in this
process and ``nodes`` cache-node functions); ``infinicache://127.0.0.1:PORT`` joins a running
one (its proxy tells the client d and p).
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import parse_qsl, urlsplit

from faasml.exceptions import ConfigError
from faasml.sync.stores.infinicache._codec import MAX_CHUNKS

RUNTIME_MB = 96
"""What a node's runtime takes of its memory before it holds any chunk (Python, numpy and
faasml: about 80 MB resident, measured)."""


@dataclass(frozen=True)
class Options:
    """A deployment: RS(d + p) over ``nodes`` functions of ``memory`` MB on ``platform``."""

    data: int = 4
    parity: int = 2
    nodes: int = 8
    memory: int = 256
    platform: str = "local"
    catalog: str = "local"
    cpu: str = "auto"
    """The node platform's CPU-share mode (auto, cgroup, duty-cycle, none)."""
    warmup: float = 60.0
    """Seconds between keep-alive invocations of an idle node (the paper: every minute)."""
    linger: float = 1.0
    """Seconds a node invocation waits for more work before it returns (and stops billing)."""
    lifetime: float = 3600.0
    """Seconds a node instance lives before it hands its chunks to a fresh one (backup)."""
    reclaim: float = 600.0
    """Seconds the platform keeps an idle node instance before reclaiming it (and its chunks)."""

    @property
    def chunks(self) -> int:
        return self.data + self.parity

    @property
    def node_capacity_bytes(self) -> int:
        """Chunk bytes one node holds: half of what its runtime leaves, the other half being
        room for a chunk on its way in."""
        return (self.memory - RUNTIME_MB) * 2**20 // 2

    def check(self) -> Options:
        """Self, or ConfigError naming the value and the rule it breaks."""
        if self.data < 1:
            raise ConfigError(f"infinicache data is {self.data}, but must be at least 1")
        if self.parity < 0:
            raise ConfigError(f"infinicache parity is {self.parity}, but must be at least 0")
        if self.nodes < 1:
            raise ConfigError(f"infinicache nodes is {self.nodes}, but must be at least 1")
        if self.parity >= self.nodes:
            raise ConfigError(
                f"infinicache parity is {self.parity}, but must be below nodes ({self.nodes})"
            )
        if self.chunks > self.nodes:
            raise ConfigError(
                f"infinicache data + parity is {self.chunks}, but each chunk needs its own "
                f"node and there are {self.nodes} nodes"
            )
        if self.chunks > MAX_CHUNKS:
            raise ConfigError(
                f"infinicache data + parity is {self.chunks}, but the RS code allows at most "
                f"{MAX_CHUNKS} chunks"
            )
        if self.memory <= RUNTIME_MB:
            raise ConfigError(
                f"infinicache memory is {self.memory} MB, but a node needs more than its "
                f"runtime's {RUNTIME_MB} MB to hold chunks"
            )
        if self.platform not in ("local", "ray"):
            raise ConfigError(
                f"infinicache platform is {self.platform!r}, but cache nodes run on 'local' "
                "or 'ray'"
            )
        for name in ("warmup", "linger", "lifetime", "reclaim"):
            if not getattr(self, name) > 0:
                raise ConfigError(
                    f"infinicache {name} is {getattr(self, name)}, but must be above 0 seconds"
                )
        return self

    def check_object(self, size: int) -> None:
        """ConfigError when an object's chunk would not fit in a node's memory."""
        chunk = max(1, -(-size // self.data))
        if chunk > self.node_capacity_bytes:
            raise ConfigError(
                f"an object of {size} bytes makes chunks of {chunk} bytes with data={self.data}, "
                f"but a node of {self.memory} MB holds at most {self.node_capacity_bytes} bytes "
                "of chunks: raise memory or data"
            )


_INTS = ("data", "parity", "nodes", "memory")
_FLOATS = ("warmup", "linger", "lifetime", "reclaim")
_TEXTS = ("platform", "catalog", "cpu")


def parse_url(url: str) -> tuple[str | None, int | None, Options]:
    """(host, port, options) of an ``infinicache://`` URL; host None starts a deployment."""
    parts = urlsplit(url)
    if parts.scheme != "infinicache":
        raise ConfigError(f"store URL {url!r} must start with 'infinicache://'")
    if parts.username or parts.password:
        raise ConfigError("an infinicache URL must not carry credentials")
    values: dict[str, object] = {}
    for name, text in parse_qsl(parts.query, keep_blank_values=True):
        if name not in (*_INTS, *_FLOATS, *_TEXTS):
            known = ", ".join((*_INTS, *_FLOATS, *_TEXTS))
            raise ConfigError(f"infinicache URL option {name!r} is unknown; choose from: {known}")
        try:
            values[name] = int(text) if name in _INTS else float(text) if name in _FLOATS else text
        except ValueError:
            kind = "a whole number" if name in _INTS else "a number"
            raise ConfigError(
                f"infinicache URL option {name} is {text!r}, but must be {kind}"
            ) from None
    try:
        port = parts.port
    except ValueError:
        raise ConfigError(f"infinicache URL {url!r} has a bad port") from None
    if parts.hostname and port is None:
        raise ConfigError(f"infinicache URL {url!r} must look like infinicache://host:port")
    if parts.hostname and values:
        raise ConfigError(
            f"infinicache URL {url!r} joins a running deployment, whose options are its own: "
            "give only infinicache://host:port"
        )
    return parts.hostname, port, Options(**values).check()  # type: ignore[arg-type]
