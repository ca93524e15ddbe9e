"""Every registered platform that can run here passes the conformance suite."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from faasml.catalog import load_catalog
from faasml.runtime.platforms.contract import Platform, open_platform
from faasml.testing.platform_conformance import *  # noqa: F403

OPTIONS: dict[str, dict[str, str]] = {"local": {}, "local-process": {"start": "process"}}
"""Platform options by test id: the local platform's instances forked from its template (the
default) and started as new processes."""


@pytest.fixture(scope="module", params=list(OPTIONS))
def platform(request: pytest.FixtureRequest) -> Iterator[Platform]:
    name = request.param.split("-")[0]
    opened = open_platform(name, load_catalog("local"), **OPTIONS[request.param])
    yield opened
    opened.close()
