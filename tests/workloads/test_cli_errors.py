"""Errors reach the user as one plain line: rich markup in a message is printed as written."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

from faasml.cli.main import main
from faasml.sync.stores import open_store

EXAMPLE = Path(__file__).parents[2] / "examples" / "train-logreg.yaml"


def _one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize(
    ("module", "url"),
    [("redis", "redis://127.0.0.1:9/0"), ("pymemcache", "memcached://127.0.0.1:9")],
)
def test_a_missing_store_client_names_the_extra_that_brings_it(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    module: str,
    url: str,
) -> None:
    for name in list(sys.modules):
        if name == module or name.startswith(f"{module}."):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, module, None)  # as if it were not installed
    with pytest.raises(ImportError, match=rf"'{module}' is needed .* pip install 'faasml\[aws\]'"):
        open_store(url)
    data = yaml.safe_load(EXAMPLE.read_text())
    data.update(store=url, dataset={**data["dataset"], "samples": 600})
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump(data))
    run = ["train", str(job), "--budget", "1", "--run-dir", str(tmp_path / "run")]
    assert main(run) == 2
    assert "pip install 'faasml[aws]'" in capsys.readouterr().err


def test_markup_in_a_value_is_printed_as_written(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump({**yaml.safe_load(EXAMPLE.read_text()), "model": "[/x]"}))
    assert main(["job", "check", str(job)]) == 2
    assert "model.name is '[/x]'" in _one_line(capsys.readouterr().err)
    job.write_text(yaml.safe_dump({**yaml.safe_load(EXAMPLE.read_text()), "name": "[bold]x"}))
    assert main(["job", "check", str(job)]) == 0
    assert "[bold]x is valid" in capsys.readouterr().out
