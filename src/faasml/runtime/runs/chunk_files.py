"""Online learning from a watched folder (``workflow.online.watch``): the chunk files that land
there, taken in name order, each read in the job's format and joined to the data landed before.

A file is taken once it is complete: hidden files (a leading '.') and files still being written
under a temporary name (``.tmp``, ``.part``, ``.partial``) are left until renamed — a writer
writes elsewhere (or under such a name) and renames the finished file into the folder, which
is atomic. A file that cannot be read, or whose samples are not the job's (another sample shape,
a class the job does not have), is rejected with the reason, never trained on, and the wait
goes on for the next.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection
from pathlib import Path

import numpy as np

from faasml.exceptions import ConfigError, WorkloadError
from faasml.job.workflow import WatchSpec
from faasml.workloads.data import Dataset, load_dataset

UNFINISHED_SUFFIXES = (".tmp", ".part", ".partial")
"""Names a writer gives a file it has not finished: left until it is renamed."""


def landed_files(folder: str | Path, taken: Collection[str]) -> list[Path]:
    """The complete files in ``folder`` not ``taken`` yet, in name order."""
    try:
        entries = sorted(Path(folder).iterdir())
    except OSError:  # the folder went away: nothing lands
        return []
    return [
        path
        for path in entries
        if path.is_file()
        and path.name not in taken
        and not path.name.startswith(".")
        and not path.name.endswith(UNFINISHED_SUFFIXES)
    ]


def joined(data: Dataset, chunk: Dataset, name: str) -> Dataset:
    """``data`` with ``chunk``'s samples after it; WorkloadError naming the file and the rule
    where its samples are not the job's."""
    if len(chunk) == 0:
        raise WorkloadError(f"{name}: it holds no sample, but a chunk must hold at least one")
    if chunk.input_shape != data.input_shape:
        raise WorkloadError(
            f"{name}: its samples have shape {chunk.input_shape}, but must have the job's "
            f"{data.input_shape}"
        )
    if int(chunk.labels.max()) >= data.num_classes:
        raise WorkloadError(
            f"{name}: its labels reach {int(chunk.labels.max())}, but must lie in "
            f"[0, {data.num_classes}) (the job's classes)"
        )
    return Dataset(
        np.concatenate([data.features, chunk.features.astype(data.features.dtype, copy=False)]),
        np.concatenate([data.labels, chunk.labels]),
        data.num_classes,
    )


def join_file(watch: WatchSpec, data: Dataset, path: Path) -> tuple[Dataset, int]:
    """``data`` joined with the chunk file at ``path`` (read in ``watch.format``), and the
    samples it brought; WorkloadError saying why not, whatever kept it out (unreadable, not
    the format, not the job's samples)."""
    try:
        chunk = load_dataset(watch.format, path)
    except (WorkloadError, ConfigError, OSError, ValueError) as err:
        raise WorkloadError(str(err)) from None
    return joined(data, chunk, path.name), len(chunk)


def await_chunk(
    watch: WatchSpec,
    data: Dataset,
    taken: set[str],
    reject: Callable[[str, str], None],
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[str, Dataset, int] | None:
    """Wait up to ``watch.timeout_s`` for the next complete file, looking every ``poll_s``:
    (its name, ``data`` joined with it, its samples), or None when none landed in time. Each
    file looked at is added to ``taken``; one that cannot join is passed to ``reject`` (name,
    reason) and the wait goes on."""
    give_up = clock() + watch.timeout_s
    while True:
        for path in landed_files(watch.folder, taken):
            taken.add(path.name)
            try:
                return (path.name, *join_file(watch, data, path))
            except WorkloadError as err:
                reject(path.name, str(err))
        left = give_up - clock()
        if left <= 0:
            return None
        sleep(min(watch.poll_s, left))
