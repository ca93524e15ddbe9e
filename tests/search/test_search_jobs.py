"""Where a user meets the deployment search: a tuning job's ``workflow:`` (refused in one line
by ``faasml job check`` and ``faasml tune``) and ``planner: search`` in a training job."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from faasml.cli.main import main

EXAMPLES = Path(__file__).parents[2] / "examples"


def tuning_with_workflow(tmp_path: Path) -> Path:
    data = yaml.safe_load((EXAMPLES / "tune-logreg.yaml").read_text())
    data["workflow"] = {"batch_size_schedule": {0: 32, 1: 128}}
    path = tmp_path / "tune-flow.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize("command", [["job", "check"], ["tune", "--budget", "0.05"]])
def test_a_tuning_job_with_a_workflow_is_refused_in_one_line(
    command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tuning_with_workflow(tmp_path)
    args = [*command, str(path)]
    if command[0] == "tune":
        args += ["--run-dir", str(tmp_path / "run")]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert "workflow" in err and "tuning" in err
    assert not (tmp_path / "run").exists()  # refused before anything ran
