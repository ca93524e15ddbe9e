"""The CLI's parsers build without importing scipy or torch: each takes a second or more to
import, and `faasml --help` (or a typo in an option) should not wait for them."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("scipy", "torch")

# Builds faasml's parser, formats the help of every command and sub-command (what
# `faasml ... --help` prints), then names the heavy packages that got imported.
WALK_PARSERS = """
import argparse, sys
from faasml.cli.main import build_parser

def walk(parser, path):
    parser.format_help()
    yield path
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from walk(sub, path + [name])

paths = list(walk(build_parser(), ["faasml"]))
print(len(paths))
print(",".join(sorted({m.split(".")[0] for m in sys.modules} & set(sys.argv[1:]))))
"""


def run_python(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, check=False, timeout=120
    )


def test_every_parser_builds_without_scipy_or_torch() -> None:
    result = run_python("-c", WALK_PARSERS, *HEAVY)
    assert result.returncode == 0, result.stderr
    count, imported = result.stdout.splitlines()
    assert int(count) > 10  # the walk reached the sub-commands, not only the top level
    assert imported == "", f"building the CLI's parsers imported {imported}"


def test_top_level_help_imports_neither() -> None:
    code = (
        "import sys\n"
        "from faasml.cli.main import main\n"
        "try:\n"
        "    main(['--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(','.join(sorted({m.split('.')[0] for m in sys.modules} & {'scipy', 'torch'})))\n"
    )
    result = run_python("-c", code)
    assert result.returncode == 0, result.stderr
    assert "usage: faasml" in result.stdout
    assert result.stdout.splitlines()[-1] == ""
