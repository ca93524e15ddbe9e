"""Billing prices every invocation and request with the catalog; checkpoints round-trip."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from faasml.catalog import load_catalog
from faasml.exceptions import FaasmlError, UnknownNameError
from faasml.runtime.coordinator.meter import Meter
from faasml.runtime.function.checkpoint import (
    Checkpoint,
    checkpoint_from_bytes,
    checkpoint_to_bytes,
)
from faasml.runtime.platforms.contract import Billed, open_platform

AWS = load_catalog("aws-lambda")


@settings(max_examples=60, deadline=None)
@given(
    durations=st.lists(st.floats(0, 900), min_size=1, max_size=20),
    memory=st.integers(128, 10240),
)
def test_function_bill_is_duration_times_memory_plus_request(
    durations: list[float], memory: int
) -> None:
    meter = Meter(AWS)
    for index, seconds in enumerate(durations):
        meter.invocation(Billed(seconds, memory, cold=False, init_s=0.0, ok=True), float(index))
    platform = AWS.platform
    expected = sum(durations) * memory / 1024 * platform.price_per_gb_s
    expected += len(durations) * platform.price_per_invocation
    assert math.isclose(meter.total_usd, expected, rel_tol=1e-9, abs_tol=1e-15)
    kinds = meter.by_kind()
    assert math.isclose(sum(kinds.values()), meter.total_usd, rel_tol=1e-12, abs_tol=1e-15)
    again = Meter.from_list(AWS, meter.to_list())
    assert again.total_usd == pytest.approx(meter.total_usd)


@settings(max_examples=40, deadline=None)
@given(puts=st.integers(0, 1000), gets=st.integers(0, 1000), kb=st.integers(1, 400))
def test_request_priced_storage_bills_units(puts: int, gets: int, kb: int) -> None:
    service = AWS.storage("dynamodb")
    stats = {
        "puts": puts,
        "gets": gets,
        "bytes_written": puts * kb * 1000,
        "bytes_read": gets * kb * 1000,
    }
    usd = Meter(AWS).requests(service, stats, 0.0)
    assert usd >= puts * service.put_usd + gets * service.get_usd - 1e-12
    if service.put_unit_kb is not None and puts:
        units = math.ceil(kb * 1000 / 1e6 * 1024 / service.put_unit_kb)
        assert usd >= puts * service.put_usd * units - 1e-12


def test_checkpoint_round_trip_and_bad_bytes() -> None:
    params = np.arange(7, dtype=np.float32) / 3
    data = checkpoint_to_bytes(Checkpoint(params, b"\x01\x02", 4, 17, 99, {"note": "x"}))
    back = checkpoint_from_bytes(data)
    np.testing.assert_array_equal(back.params, params)
    assert (back.optimizer, back.epoch, back.batch, back.round_id) == (b"\x01\x02", 4, 17, 99)
    assert back.meta == {"note": "x"}
    with pytest.raises(FaasmlError, match="checkpoint"):
        checkpoint_from_bytes(b"not a checkpoint")


def test_unknown_platform_lists_the_choices() -> None:
    with pytest.raises(UnknownNameError, match="local"):
        open_platform("lambda-on-mars", AWS)
