from __future__ import annotations

from pathlib import Path

import pytest

from faasml.cluster import AppModel, default_traces_dir, load_applications


@pytest.fixture(scope="session")
def traces_dir() -> Path:
    base = default_traces_dir()
    if not (base / "pollux" / "traces").is_dir():
        pytest.skip(f"the Pollux traces are not at {base} (set FAASML_TRACES)")
    return base


@pytest.fixture(scope="session")
def models(traces_dir: Path) -> dict[str, AppModel]:
    return {name: AppModel(t) for name, t in load_applications(traces_dir).items()}
