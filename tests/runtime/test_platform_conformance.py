"""Every registered platform that can run here passes the conformance suite."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from faasml.catalog import load_catalog
from faasml.runtime.platforms.contract import Platform, open_platform
from faasml.testing.platform_conformance import *  # noqa: F403


@pytest.fixture(scope="module", params=["local"])
def platform(request: pytest.FixtureRequest) -> Iterator[Platform]:
    opened = open_platform(request.param, load_catalog("local"))
    yield opened
    opened.close()
