"""Loaders of the idle-node event and jobs formats: what they read, and one-line errors
naming the file, the line and the rule."""

from __future__ import annotations

from pathlib import Path

import pytest

from faasml.cluster.scavenge import TraceFileError, load_idle_trace, load_jobs

from .scavenge_data import JOBS_HEADER, job_row, write_events, write_jobs


def test_events_are_grouped_by_instant_and_net(tmp_path: Path) -> None:
    path = write_events(
        tmp_path / "e.csv.gz",
        [(10, "a", 1), (10, "b", 1), (20, "a", 0), (20, "c", 1), (30, "c", 0), (30, "c", 1)],
    )
    trace = load_idle_trace(path)
    assert [c.time_s for c in trace.changes] == [10, 20]  # at 30, c leaves and returns: no change
    assert trace.changes[0].added == {"a", "b"}
    assert trace.changes[1].removed == {"a"} and trace.changes[1].added == {"c"}
    assert trace.nodes == {"a", "b", "c"}


def test_plain_csv_is_read_too(tmp_path: Path) -> None:
    path = write_events(tmp_path / "e.csv", [(0, "a", 1)], gz=False)
    assert load_idle_trace(path).changes[0].added == {"a"}


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("", "line 1: the file is empty"),
        ("time_s,node,idle\n", "line 2: the file has a header but no rows"),
        ("time_s,node\n1,a\n", "line 1: the header lacks column(s) idle"),
        ("time_s,node,idle\n-5,a,1\n", "line 2: time_s is -5, but must be >= 0"),
        ("time_s,node,idle\n5,a,1\n4,b,1\n", "line 3: time_s is 4, before"),
        (
            "time_s,node,idle\n5,a,1\n6,zz,0\n",
            "line 3: node 'zz' is taken back (idle 0), but is unknown",
        ),
        ("time_s,node,idle\n5,a,2\n", "line 2: idle is '2', but must be 0 or 1"),
        ("time_s,node,idle\nx,a,1\n", "line 2: time_s is 'x', but must be a number"),
        ("time_s,node,idle\n1,a\n", "line 2: has 2 fields"),
    ],
)
def test_bad_event_files_name_file_line_and_rule(tmp_path: Path, text: str, needle: str) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(TraceFileError) as err:
        load_idle_trace(path)
    assert str(path) in str(err.value) and needle in str(err.value)
    assert "\n" not in str(err.value)


def test_missing_and_non_gzip_files(tmp_path: Path) -> None:
    with pytest.raises(TraceFileError, match="no such file"):
        load_idle_trace(tmp_path / "nope.csv.gz")
    broken = tmp_path / "broken.csv.gz"
    broken.write_bytes(b"\x1f\x8b\x08garbage")
    with pytest.raises(TraceFileError, match="not a readable gzip file"):
        load_idle_trace(broken)


def test_jobs_are_read_in_submission_order(tmp_path: Path) -> None:
    path = write_jobs(tmp_path / "j.csv", [job_row("B", 50), job_row("A", 10, max_nodes=4)])
    jobs = load_jobs(path, checkpoint_s=120)
    assert [j.job for j in jobs] == ["A", "B"]
    assert jobs[0].max_nodes == 4 and jobs[0].nodes[:3] == (0, 1, 2)
    assert jobs[0].checkpoint_s == 120 and jobs[0].samples_per_s[1] == pytest.approx(100.0)


def test_checkpoint_column_is_a_job_setting(tmp_path: Path) -> None:
    path = tmp_path / "j.csv"
    path.write_text(JOBS_HEADER + ",checkpoint_s\n" + job_row("A", 0) + ",30\n")
    assert load_jobs(path, checkpoint_s=600)[0].checkpoint_s == 30


@pytest.mark.parametrize(
    ("row", "needle"),
    [
        (job_row("A", -1), "submit_s is -1, but must be >= 0"),
        (job_row("A", 0, min_nodes=4, max_nodes=2), "max_nodes is 2, but must be >= min_nodes"),
        (job_row("A", 0, max_nodes=32), "must cover min_nodes..max_nodes"),
        (job_row("A", 0, total=0), "total_samples is 0, but must be > 0"),
        ("A,m,0,1,2,1,1,100,0 1 2,0 5", "nodes has 3 values but samples_per_s has 2"),
        ("A,m,0,1,2,1,1,100,0 2 1,0 5 6", "nodes must increase"),
    ],
)
def test_bad_jobs_name_file_line_and_rule(tmp_path: Path, row: str, needle: str) -> None:
    path = write_jobs(tmp_path / "j.csv", [job_row("OK", 0), row])
    with pytest.raises(TraceFileError) as err:
        load_jobs(path)
    assert f"{path}: line 3: " in str(err.value) and needle in str(err.value)


def test_duplicate_job_and_missing_column(tmp_path: Path) -> None:
    path = write_jobs(tmp_path / "j.csv", [job_row("A", 0), job_row("A", 1)])
    with pytest.raises(TraceFileError, match="line 3: job 'A' appears twice"):
        load_jobs(path)
    path.write_text("job,model\nA,m\n")
    with pytest.raises(TraceFileError, match="line 1: the header lacks column"):
        load_jobs(path)
