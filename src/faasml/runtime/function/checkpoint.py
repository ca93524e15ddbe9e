"""Checkpoints in the object store: parameters, buffers, optimiser state and the data position.

A checkpoint is one npz value written with one ``Store.put`` (atomic by the Store contract), so
a reader sees a whole checkpoint or none; the coordinator records the key of the last complete
one in its run record only after the put returned.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from faasml.exceptions import FaasmlError
from faasml.sync.stores import Store


@dataclass(frozen=True)
class Checkpoint:
    """Everything a worker needs to continue training exactly where it stopped."""

    params: NDArray[np.float32]
    optimizer: bytes
    """``Optimizer.to_bytes()``."""
    epoch: int
    """The epoch the next batch belongs to (0-based)."""
    batch: int
    """The next batch of that epoch (0 = the epoch has not started)."""
    round_id: int
    """Synchronisation rounds done so far (the next round's id)."""
    meta: dict[str, Any] = field(default_factory=dict)
    buffers: NDArray[np.float32] = field(default_factory=lambda: np.zeros(0, dtype=np.float32))
    """The model's buffers (``Model.buffers()``), averaged over the workers; empty if none."""


def checkpoint_to_bytes(checkpoint: Checkpoint) -> bytes:
    buffer = io.BytesIO()
    header = {
        "epoch": checkpoint.epoch,
        "batch": checkpoint.batch,
        "round_id": checkpoint.round_id,
        "meta": checkpoint.meta,
    }
    np.savez(
        buffer,
        params=np.asarray(checkpoint.params, dtype=np.float32),
        buffers=np.asarray(checkpoint.buffers, dtype=np.float32),
        optimizer=np.frombuffer(checkpoint.optimizer, dtype=np.uint8),
        header=np.frombuffer(json.dumps(header).encode(), dtype=np.uint8),
    )
    return buffer.getvalue()


def checkpoint_from_bytes(data: bytes) -> Checkpoint:
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as archive:
            header = json.loads(archive["header"].tobytes().decode())
            return Checkpoint(
                params=archive["params"].astype(np.float32),
                optimizer=archive["optimizer"].tobytes(),
                epoch=int(header["epoch"]),
                batch=int(header["batch"]),
                round_id=int(header["round_id"]),
                meta=dict(header.get("meta", {})),
                buffers=(
                    archive["buffers"].astype(np.float32)
                    if "buffers" in archive.files
                    else np.zeros(0, dtype=np.float32)
                ),
            )
    except (OSError, ValueError, KeyError) as err:
        raise FaasmlError(f"the value is not a faasml checkpoint: {err}") from None


def save_checkpoint(store: Store, key: str, checkpoint: Checkpoint) -> None:
    """Write ``checkpoint`` under ``key`` atomically."""
    store.put(key, checkpoint_to_bytes(checkpoint))


def load_checkpoint(store: Store, key: str) -> Checkpoint:
    """Read the checkpoint under ``key``; a missing one is an error that names the key."""
    data = store.get(key)
    if data is None:
        raise FaasmlError(f"no checkpoint under {key!r} in {store.url}")
    return checkpoint_from_bytes(data)
