"""Every Python and shell block of the README and docs/ runs as written, and every link between
the pages points at a file that exists.

A fenced block is run unless the line just before its fence is ``<!-- not run: REASON -->``
(a reason is required). Python blocks (```python) run in a subprocess in a temporary folder
that holds a link to the repository's ``examples/``. Shell blocks run the lines that start
with ``$ `` (the rest of such a block is the output shown; a command whose output shown starts
with ``error:`` must exit 2), else the lines that start with ``faasml`` or
``.venv/bin/faasml``; other blocks (YAML, output, usage lines) are not commands and are not
run. ``faasml`` is the command of the interpreter running the tests, on this checkout's code.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SKIP = re.compile(r"<!--\s*not run:?\s*(.*?)\s*-->")
FAASML = re.compile(r"^(?:\.venv/bin/)?faasml(?=\s|$)")
TIMEOUT_S = 240


@dataclass(frozen=True)
class Block:
    """One fenced block of a page: where it starts, its language tag, its text, and the reason
    given for not running it (None: it runs)."""

    page: Path
    line: int
    language: str
    text: str
    skip: str | None

    @property
    def name(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    """The fenced blocks of ``page`` in order (a fence inside a list may be indented)."""
    found: list[Block] = []
    lines = page.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        fence = re.match(r"^(\s*)```(\S*)\s*$", lines[i])
        if not fence:
            i += 1
            continue
        indent, language = fence.group(1), fence.group(2)
        before = next((lines[k].strip() for k in range(i - 1, -1, -1) if lines[k].strip()), "")
        mark = SKIP.fullmatch(before)
        body: list[str] = []
        j = i + 1
        while j < len(lines) and lines[j].strip() != "```":
            body.append(lines[j][len(indent) :] if lines[j].startswith(indent) else lines[j])
            j += 1
        skip = mark.group(1) if mark else None
        found.append(Block(page, i + 1, language, "\n".join(body) + "\n", skip))
        i = j + 1
    return found


def commands(block: Block) -> list[tuple[str, int]]:
    """The shell commands a block shows, each with the exit status its output implies."""
    if block.language not in ("", "sh", "bash", "shell", "console"):
        return []
    lines = joined(block.text.splitlines())
    if any(line.startswith("$ ") for line in lines):
        out: list[tuple[str, int]] = []
        for k, line in enumerate(lines):
            if line.startswith("$ "):
                shown = lines[k + 1] if k + 1 < len(lines) else ""
                out.append((line[2:], 2 if shown.startswith("error:") else 0))
        return out
    return [(line, 0) for line in lines if FAASML.match(line)]


def joined(lines: list[str]) -> list[str]:
    """Lines with their ``\\`` continuations joined."""
    out: list[str] = []
    for line in lines:
        if out and out[-1].endswith("\\"):
            out[-1] = out[-1][:-1].rstrip() + " " + line.strip()
        else:
            out.append(line)
    return out


ALL = [b for page in PAGES for b in blocks(page)]
PYTHON = [
    b
    for k, b in enumerate(ALL)
    if b.language == "python" and b.skip is None and b.text not in {a.text for a in ALL[:k]}
]


def unique_commands(found: list[Block]) -> list[Block]:
    """The blocks that show a command no block before them shows (each command runs once)."""
    seen: set[str] = set()
    out = []
    for block in found:
        new = [FAASML.sub("faasml", line) for line, _ in commands(block)]
        if block.skip is None and any(line not in seen for line in new):
            out.append(block)
        seen.update(new)
    return out


SHELL = unique_commands(ALL)


def environment() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    env.setdefault("FAASML_PROFILE_RECHECK", "0")
    env["MPLBACKEND"] = "Agg"
    return env


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A scratch folder where ``examples/...`` paths resolve as in the repository."""
    (tmp_path / "examples").symlink_to(ROOT / "examples", target_is_directory=True)
    return tmp_path


def run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, cwd=cwd, env=environment(), capture_output=True, text=True, timeout=TIMEOUT_S
    )


def test_every_skipped_block_says_why() -> None:
    text = "\n".join(p.read_text(encoding="utf-8") for p in PAGES)
    marks = re.findall(r"<!--\s*not run\b(.*?)-->", text, re.DOTALL)
    assert marks, "the docs mark no block as not run"
    assert [m for m in marks if not m.strip(" :\n")] == []
    assert all(b.skip for b in ALL if b.skip is not None)


def test_the_docs_have_blocks_to_run() -> None:
    assert len(PYTHON) >= 5 and len(SHELL) >= 5


@pytest.mark.slow
@pytest.mark.parametrize("block", PYTHON, ids=lambda b: b.name)
def test_python_block_runs(block: Block, folder: Path) -> None:
    script = folder / "block.py"
    script.write_text(block.text, encoding="utf-8")
    done = run([sys.executable, str(script)], folder)
    assert done.returncode == 0, f"{block.name}\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"


@pytest.mark.slow
@pytest.mark.parametrize("block", SHELL, ids=lambda b: b.name)
def test_shell_block_runs(block: Block, folder: Path) -> None:
    faasml = shutil.which("faasml", path=str(Path(sys.executable).parent)) or "faasml"
    for line, status in commands(block):
        command = FAASML.sub(shlex.quote(faasml), line)
        done = run(["bash", "-c", command], folder)
        assert done.returncode == status, (
            f"{block.name}: {line}\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
        )
        if status == 2:
            assert done.stderr.startswith("error: ") and "Traceback" not in done.stderr


LINK = re.compile(r"\]\(([^)\s]+)\)")


def pages_with_links() -> list[Path]:
    return [*PAGES, *sorted((ROOT / "benchmarks" / "results").glob("*.md"))]


@pytest.mark.parametrize("page", pages_with_links(), ids=lambda p: str(p.relative_to(ROOT)))
def test_links_point_at_files_and_headings_that_exist(page: Path) -> None:
    broken = []
    for target in LINK.findall(page.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+://|mailto:", target):
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        missing = anchor and file.suffix == ".md" and file.exists() and anchor not in anchors(file)
        if not file.exists() or missing:
            broken.append(target)
    assert broken == []


def anchors(page: Path) -> set[str]:
    """GitHub's anchors of a page's headings."""
    out = set()
    for heading in re.findall(r"^#+ (.*)$", page.read_text(encoding="utf-8"), re.MULTILINE):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        out.add(slug)
    return out
