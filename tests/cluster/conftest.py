from __future__ import annotations

from pathlib import Path

import pytest

from faasml.cluster import AppModel, default_traces_dir, load_applications


@pytest.fixture(scope="session")
def traces_dir() -> Path:
    """The traces the package uses by default: shipped with it unless $FAASML_TRACES is set."""
    return default_traces_dir()


@pytest.fixture(scope="session")
def models(traces_dir: Path) -> dict[str, AppModel]:
    return {name: AppModel(t) for name, t in load_applications(traces_dir).items()}
