"""GPUs on the Ray platform (issue 30): ``gpus_per_function`` reserves them for each function,
so a training loop's ``ctx.device`` is a GPU where the cluster has one. Ray schedules declared
GPUs whether or not the machine has them, so a real local cluster declaring one GPU is enough
to see the reservation (``CUDA_VISIBLE_DEVICES`` in the function) and its limits."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from faasml.catalog import load_catalog
from faasml.cli.main import main
from faasml.exceptions import ConfigError
from faasml.runtime.platforms.contract import CapacityError, Platform, open_platform
from faasml.testing.ray_cluster import local_ray_cluster

pytest.importorskip("ray")

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    """One node with 2 CPUs and one declared GPU; shut down after the module."""
    with local_ray_cluster(nodes=1, cpus_per_node=2, gpus_per_node=1) as started:
        yield started


@pytest.fixture(scope="module")
def platform(cluster: Any) -> Iterator[Platform]:
    opened = open_platform(
        "ray", load_catalog("local"), address=cluster.address, gpus_per_function=1
    )
    yield opened
    opened.close()


def test_a_function_gets_its_gpu(platform: Platform) -> None:
    call = platform.invoke("faasml.testing.functions:visible_gpus", None, 256)
    assert call.result(timeout=120) == "0"


def test_a_second_function_waits_for_no_gpu_that_is_not_there(platform: Platform) -> None:
    busy = platform.invoke("faasml.testing.functions:sleep", 60, 256)
    try:
        with pytest.raises(CapacityError, match=r"\(0\.\d+ CPUs, 1 GPUs\)"):
            platform.invoke("faasml.testing.functions:echo", 0, 256)
    finally:
        busy.cancel()


def test_more_gpus_than_a_node_has_are_refused_in_one_line(cluster: Any) -> None:
    with pytest.raises(ConfigError, match="gpus_per_function is 2, but the Ray cluster's nodes"):
        open_platform("ray", load_catalog("local"), address=cluster.address, gpus_per_function=2)


def test_the_command_line_asks_only_ray_for_gpus(capsys: pytest.CaptureFixture[str]) -> None:
    job = str(EXAMPLES / "tune-logreg.yaml")
    assert main(["tune", job, "--budget", "0.05", "--gpus-per-function", "1"]) == 2
    err = capsys.readouterr().err
    assert "--gpus-per-function asks Ray for GPUs, but the platform is 'local'" in err
