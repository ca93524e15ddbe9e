"""Consistent hashing of object keys onto cache nodes (InfiniCache §4.1.1, Fig. 4.2).

Each node owns ``replicas`` points on a 64-bit ring; an object's chunks go to the first
d + p distinct nodes met clockwise from the hash of its key. Adding or removing one node
moves only the chunks whose walk meets that node, and every object's chunks land on d + p
distinct nodes, so losing one node costs an object at most one chunk.
"""

from __future__ import annotations

import bisect
import hashlib


def _point(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")


class HashRing:
    """A ring over node ids 0..nodes-1 with ``replicas`` virtual points each."""

    def __init__(self, nodes: list[int], replicas: int = 64) -> None:
        if not nodes:
            raise ValueError("a hash ring needs at least one node")
        points = sorted((_point(f"node-{n}#{r}"), n) for n in nodes for r in range(replicas))
        self._hashes = [h for h, _ in points]
        self._owners = [n for _, n in points]
        self.nodes = sorted(set(nodes))

    def place(self, key: str, count: int) -> list[int]:
        """The ``count`` distinct nodes that hold ``key``'s chunks, in chunk order."""
        if count > len(self.nodes):
            raise ValueError(f"{count} chunks need {count} nodes, the ring has {len(self.nodes)}")
        start = bisect.bisect(self._hashes, _point(key))
        chosen: list[int] = []
        for step in range(len(self._owners)):
            owner = self._owners[(start + step) % len(self._owners)]
            if owner not in chosen:
                chosen.append(owner)
                if len(chosen) == count:
                    break
        return chosen
