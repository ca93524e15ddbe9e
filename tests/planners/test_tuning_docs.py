from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "tuning.md"


def test_python_api_example_in_the_docs_runs(capsys: pytest.CaptureFixture[str]) -> None:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.DOTALL)
    assert len(blocks) == 1
    exec(compile(blocks[0], str(DOC), "exec"), {})
    out = capsys.readouterr().out
    assert "static takes" in out
    assert "Hyperband: 10 stages" in out


def _without_timings(line: str) -> str:
    """A line with its wall times (ms, and the set-up's seconds) blanked out."""
    line = re.sub(r" +\d+ ms\b", " _ ms", line)
    return re.sub(r"pruning: [\d.]+ s\)", "pruning: _ s)", line).rstrip()


def test_plan_tune_example_output_is_a_real_run(capsys: pytest.CaptureFixture[str]) -> None:
    """The example under "Command line" is what the command prints (wall times aside)."""
    from faasml.cli.main import main

    text = DOC.read_text(encoding="utf-8")
    block = re.search(r"```\n\$ (faasml plan tune [^\n]*)\n(.*?)```", text, re.DOTALL)
    assert block is not None
    argv = block.group(1).split()[1:]
    assert main(argv) == 0
    printed = [_without_timings(line) for line in capsys.readouterr().out.splitlines()]
    shown = [_without_timings(line) for line in block.group(2).splitlines()]
    assert printed == shown
