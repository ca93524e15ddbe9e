"""Fuzzing of workload CSVs: mutations of the shipped Pollux workloads either load and
simulate, or fail with one line of :class:`FaasmlError` naming the file — never another
exception, never a hang."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from faasml.cluster import AppModel, Cluster, SimConfig, load_workload, make_policy, simulate
from faasml.cluster.traces import resolve_workload
from faasml.exceptions import FaasmlError

COLUMNS = ("min_gpus", "max_gpus", "min_batch", "max_batch", "epochs", "deadline")
CELLS = (
    "",
    " ",
    "0",
    "1",
    "-1",
    "2",
    "7",
    "64",
    "1.5",
    "1e3",
    "1e9",
    "1e400",
    "-0",
    "nan",
    "inf",
    "-inf",
    "2147483648",
    "99999999999999999999",
    "x",
    "bert",
    "ncf",
    "yolov3",
    "imagenet",
    "tiresias",
    '"q,uoted"',
    '"',
    "é",
    "\u2028",
    "\x00",
)


GOOD = ("", "1", "2", "4", "7", "64", "1e3", "3600")


def _base_rows(traces_dir: Path) -> list[list[str]]:
    text = resolve_workload("workload-6", traces_dir).read_text(encoding="utf-8")
    lines = text.splitlines()
    return [line.split(",") for line in lines[:6]]


@st.composite
def mutated_workloads(draw: st.DrawFn, rows: list[list[str]]) -> bytes:
    """A few rows of a shipped workload with cells replaced, columns added or dropped,
    rows duplicated or cut, and bytes inserted."""
    header = list(rows[0])
    body = [list(r) for r in rows[1 : 1 + draw(st.integers(0, len(rows) - 1))]]
    for column in draw(st.lists(st.sampled_from(COLUMNS), max_size=3, unique=True)):
        header.append(column)
        for row in body:
            row.append(draw(st.sampled_from(GOOD if draw(st.integers(0, 4)) else CELLS)))
    table = [header, *body]
    for _ in range(draw(st.integers(0, 2)) * draw(st.integers(0, 2))):
        i = draw(st.integers(0, len(table) - 1))
        row = table[i]
        kind = draw(st.sampled_from(["cell", "cell", "cell", "drop", "add", "dup", "rename"]))
        if kind == "cell" and row:
            row[draw(st.integers(0, len(row) - 1))] = draw(st.sampled_from(CELLS))
        elif kind == "drop" and row:
            del row[draw(st.integers(0, len(row) - 1))]
        elif kind == "add":
            row.append(draw(st.sampled_from(CELLS)))
        elif kind == "dup":
            table.insert(i, list(row))
        elif kind == "rename" and row:
            row[draw(st.integers(0, len(row) - 1))] = draw(st.sampled_from(COLUMNS))
    data = "\n".join(",".join(r) for r in table).encode("utf-8")
    if draw(st.booleans()):
        data = b"\xef\xbb\xbf" + data
    if draw(st.integers(0, 5)) == 0:
        at = draw(st.integers(0, len(data)))
        data = data[:at] + draw(st.binary(min_size=1, max_size=4)) + data[at:]
    return data


@pytest.mark.timeout(120)
def test_mutated_workloads_load_and_simulate_or_fail_in_one_line(
    tmp_path_factory: pytest.TempPathFactory,
    traces_dir: Path,
    models: dict[str, AppModel],
) -> None:
    rows = _base_rows(traces_dir)
    directory = tmp_path_factory.mktemp("fuzz")
    outcomes = {"error": 0, "simulated": 0}

    @settings(
        max_examples=120,
        deadline=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.too_slow],
    )
    @given(
        data=mutated_workloads(rows),
        policy=st.sampled_from(["fifo", "pollux", "fapes"]),
    )
    def check(data: bytes, policy: str) -> None:
        path = directory / "w.csv"
        path.write_bytes(data)
        try:
            jobs = load_workload(path)
            last = max(j.arrival_s for j in jobs)
            config = SimConfig(max_time_s=last + 600.0)
            result = simulate(jobs, models, Cluster.uniform(2, 4), make_policy(policy), config)
        except FaasmlError as err:
            message = str(err)
            assert message and "\n" not in message and "\r" not in message, message
            outcomes["error"] += 1
            return
        assert len(result.jobs) == len(jobs)
        assert all(0.0 <= u <= 1.0 for _, u in result.utilization)
        outcomes["simulated"] += 1

    check()
    assert outcomes["error"] > 10 and outcomes["simulated"] > 10, outcomes
