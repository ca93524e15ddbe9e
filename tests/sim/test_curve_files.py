from __future__ import annotations

from pathlib import Path

import pytest

from faasml.exceptions import ConfigError
from faasml.sim.curves import CurvePoint, read_curve, write_curve


def test_round_trip_keeps_points_metadata_and_optional_columns(tmp_path: Path) -> None:
    points = [CurvePoint(1, 0.9, 12.5, 0.01), CurvePoint(2, 0.7, 25.0, 0.02), CurvePoint(4, 0.6)]
    path = write_curve(tmp_path / "runs" / "a.csv", points, metadata={"workload": "lr-higgs"})
    curve = read_curve(path)
    assert curve.points == tuple(points)
    assert curve.metadata == {"workload": "lr-higgs"}
    assert curve.epochs == [1, 2, 4]
    assert path.read_text().splitlines()[1] == "epoch,loss,time_s,cost_usd"
    assert [p.name for p in path.parent.iterdir()] == ["a.csv"]  # no temporary left behind


def test_only_required_columns_when_no_point_has_the_others(tmp_path: Path) -> None:
    path = write_curve(tmp_path / "b.csv", [CurvePoint(0, 2.0), CurvePoint(1, 1.5)])
    assert path.read_text() == "epoch,loss\n0,2.0\n1,1.5\n"


def test_a_failed_write_leaves_the_old_file(tmp_path: Path) -> None:
    path = write_curve(tmp_path / "c.csv", [CurvePoint(1, 1.0)])
    with pytest.raises(ConfigError, match="increase strictly"):
        write_curve(path, [CurvePoint(2, 1.0), CurvePoint(1, 0.5)])
    assert read_curve(path).points == (CurvePoint(1, 1.0),)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "no header"),
        ("step,value\n1,2\n", "header"),
        ("epoch,loss\n1,abc\n", "line 2: loss is 'abc'"),
        ("# workload: x\nepoch,loss\n1,1.0\nx,2\n", "line 4: the epoch is 'x'"),
        ("epoch,loss\n2,1.0\n2,0.9\n", "increase strictly"),
        ("epoch,loss\n1,-1\n", "finite and >= 0"),
        ("epoch,loss\n1,1.0,3\n", "3 values"),
        ("epoch,loss\n", "no points"),
    ],
)
def test_bad_files_say_where_and_why(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        read_curve(path)


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        read_curve(tmp_path / "none.csv")


def test_a_curve_file_gets_the_permissions_of_a_new_file(tmp_path: Path) -> None:
    import os

    mask = os.umask(0o022)
    try:
        path = write_curve(tmp_path / "c.csv", [CurvePoint(1, 0.5)])
    finally:
        os.umask(mask)
    assert path.stat().st_mode & 0o777 == 0o644  # readable like any report, not mkstemp's 0600
