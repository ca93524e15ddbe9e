"""`faasml tune --platform ray --address ...` runs the demo job on a 2-node local Ray cluster."""

from __future__ import annotations

from pathlib import Path

import pytest

from faasml.cli.main import main
from faasml.testing.ray_cluster import local_ray_cluster

pytest.importorskip("ray")

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_tune_runs_the_demo_job_on_the_cluster(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = tmp_path / "tune.yaml"
    text = (EXAMPLES / "tune-logreg.yaml").read_text()
    job.write_text(
        text.replace("trials: 16", "trials: 4").replace("samples: 20000", "samples: 4000")
    )
    with local_ray_cluster(nodes=2, cpus_per_node=2) as cluster:
        code = main(
            [
                "tune",
                str(job),
                "--budget",
                "0.05",
                "--platform",
                "ray",
                "--address",
                cluster.address,
                "--run-dir",
                str(tmp_path / "run"),
            ]
        )
    out = capsys.readouterr().out
    assert code == 0, out
    assert "finished" in out
    assert (tmp_path / "run" / "report.md").exists()
