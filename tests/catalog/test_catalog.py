from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from faasml.catalog import builtin_catalogs, load_catalog, parse_catalog
from faasml.exceptions import CatalogError, UnknownNameError

AWS = Path(load_catalog("aws-lambda").path or "")


def aws_data() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(AWS.read_text())
    return data


def test_builtin_catalogs_load_with_sources_and_dates() -> None:
    assert {"aws-lambda", "local"} <= set(builtin_catalogs())
    for name in builtin_catalogs():
        catalog = load_catalog(name)
        assert catalog.sources, name
        assert catalog.date and catalog.version
        assert catalog.platform.data_store in catalog.storages


def test_aws_lambda_figures() -> None:
    aws = load_catalog("aws-lambda")
    platform = aws.platform
    assert (platform.memory_min_mb, platform.memory_max_mb) == (128, 10240)
    assert platform.max_duration_s == 900
    assert platform.vcpus([1769])[0] == pytest.approx(1.0)
    assert platform.vcpus([10240])[0] == pytest.approx(10240 / 1769)
    assert platform.vcpus([10240 * 2])[0] == pytest.approx(6.0)  # capped at max_vcpus
    assert platform.with_architecture("arm").price_per_gb_s < platform.price_per_gb_s
    assert aws.storage("dynamodb").max_item_kb == 400
    assert {"s3", "dynamodb", "redis", "memcached", "vm-ps"} <= set(aws.storages)
    assert aws.storage("vm-ps").schemes == ("param-server",)
    assert aws.storage("redis").pricing == "time"
    # Bandwidth grows with memory and never falls.
    bandwidth = platform.network_mbps(np.arange(128, 10241, 64))
    assert np.all(np.diff(bandwidth) >= 0)


def test_local_catalog_capacity_comes_from_the_machine() -> None:
    local = load_catalog("local").platform
    assert local.capacity_vcpus is not None and local.capacity_vcpus >= 1
    # Never more functions at once than the machine's vCPUs allow.
    memory = np.array([128, 1769, 3538])
    assert np.all(local.max_concurrent(memory) * local.vcpus(memory) <= local.capacity_vcpus + 1e-9)


def test_user_catalog_file_by_path(tmp_path: Path) -> None:
    data = aws_data()
    data["name"] = "my-cloud"
    data["platform"]["concurrency_limit"] = 50
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(data))
    catalog = load_catalog(path)
    assert catalog.name == "my-cloud"
    assert catalog.platform.concurrency_limit == 50


def test_a_measured_scheme_latency_replaces_the_store_latency_for_that_scheme_only() -> None:
    data = copy.deepcopy(aws_data())
    data["storage"]["s3"]["scheme_latency_s"] = {"allreduce": 0.5}
    s3 = parse_catalog(data).storage("s3")
    assert s3.latency_for("allreduce") == 0.5
    assert s3.latency_for("scatter-reduce") == s3.latency_s == data["storage"]["s3"]["latency_s"]


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (
            lambda d: d["platform"].pop("price_per_invocation"),
            "platform.price_per_invocation is missing",
        ),
        (lambda d: d["platform"].update(memory_min_mb=-5), "platform.memory_min_mb is -5"),
        (lambda d: d["platform"].update(mb_per_vcpu="fast"), "platform.mb_per_vcpu is 'fast'"),
        (lambda d: d["storage"]["s3"].update(pricing="free"), "storage.s3.pricing is 'free'"),
        (lambda d: d["storage"]["s3"].update(schemes=["gossip"]), "storage.s3.schemes[0]"),
        (lambda d: d["storage"]["redis"].update(node="cache.none"), "storage.redis.node"),
        (lambda d: d["storage"]["s3"].update(latency="1ms"), "unknown field(s): latency"),
        (lambda d: d["platform"].update(data_store="gcs"), "platform.data_store is 'gcs'"),
        (lambda d: d.update(format=7), "format is 7"),
        (
            lambda d: d["storage"]["vm-ps"].update(scheme_latency_s={"allreduce": 0.001}),
            "storage.vm-ps.scheme_latency_s.allreduce is 0.001, but must be one of: param-server",
        ),
        (
            lambda d: d["storage"]["s3"].update(scheme_latency_s={"allreduce": -1}),
            "storage.s3.scheme_latency_s.allreduce is -1",
        ),
        (
            lambda d: d["platform"].update(network_mbps=[[512, 1], [128, 2]]),
            "must be sorted by memory",
        ),
    ],
)
def test_bad_fields_are_named(mutate: Any, message: str) -> None:
    data = copy.deepcopy(aws_data())
    mutate(data)
    with pytest.raises(CatalogError, match=re.escape(message)):
        parse_catalog(data)


def test_unknown_catalog_lists_choices_and_bad_yaml_names_file(tmp_path: Path) -> None:
    with pytest.raises(UnknownNameError, match="aws-lambda"):
        load_catalog("azure")
    broken = tmp_path / "broken.yaml"
    broken.write_text("platform: [unclosed")
    with pytest.raises(CatalogError, match=r"broken\.yaml"):
        load_catalog(broken)
    with pytest.raises(CatalogError, match="cannot read"):
        load_catalog(tmp_path / "missing.yaml")


def test_restricting_storages_and_architectures() -> None:
    aws = load_catalog("aws-lambda")
    only_ps = aws.restricted_to(["vm-ps"])
    assert only_ps.sync_options() == (("vm-ps", "param-server"),)
    assert "s3" in only_ps.storages  # the data store stays: training data is read from it
    with pytest.raises(UnknownNameError, match="no storage 'gcs'"):
        aws.restricted_to(["gcs"])
    with pytest.raises(CatalogError, match="offers: arm, x86"):
        aws.with_architecture("riscv")


def test_cold_start_scales_with_the_cpu_share_only_where_the_platform_says_so() -> None:
    aws = load_catalog("aws-lambda").platform
    local = load_catalog("local").platform
    memory = np.array([128, 884, 1769, 4096])
    assert np.all(aws.cold_start_time(memory) == aws.cold_start_s)
    local_start = local.cold_start_time(memory)
    assert local_start[2] == pytest.approx(local.cold_start_s)
    assert local_start[1] == pytest.approx(local.cold_start_s * 1769 / 884)
    assert local_start[3] == pytest.approx(local.cold_start_s)  # never faster than at 1 vCPU
    assert np.all(np.diff(local_start) <= 0)
