"""Small idle-node traces and jobs files in the shared formats, written by the tests."""

from __future__ import annotations

import gzip
from collections.abc import Sequence
from pathlib import Path

JOBS_HEADER = (
    "job,model,submit_s,min_nodes,max_nodes,scale_up_s,scale_down_s,total_samples,"
    "nodes,samples_per_s"
)


def write_events(path: Path, rows: Sequence[tuple[float, str, int]], *, gz: bool = True) -> Path:
    text = "time_s,node,idle\n" + "".join(f"{t:g},{n},{i}\n" for t, n, i in rows)
    if gz:
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    return path


def amdahl_rates(s1: float, sigma: float, counts: Sequence[int]) -> list[float]:
    return [0.0 if n == 0 else s1 * n / (1 + sigma * (n - 1)) for n in counts]


def job_row(
    name: str,
    submit: float,
    *,
    s1: float = 100.0,
    sigma: float = 0.05,
    max_nodes: int = 8,
    min_nodes: int = 1,
    up: float = 20.0,
    down: float = 5.0,
    total: float = 1e6,
) -> str:
    counts = [0, 1, 2, 4, 8, 16]
    rates = amdahl_rates(s1, sigma, counts)
    return (
        f"{name},m,{submit:g},{min_nodes},{max_nodes},{up:g},{down:g},{total:g},"
        f"{' '.join(map(str, counts))},{' '.join(f'{r:.3f}' for r in rates)}"
    )


def write_jobs(path: Path, rows: Sequence[str]) -> Path:
    path.write_text(JOBS_HEADER + "\n" + "\n".join(rows) + "\n")
    return path
