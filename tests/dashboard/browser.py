"""Headless Chromium (Debian's ``chromium``) for the dashboard's tests: the DOM a page ends
with after its scripts ran, a screenshot, and a small reader of that DOM (stdlib only)."""

from __future__ import annotations

import shutil
import struct
import subprocess
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium")
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None,
    reason="headless Chromium is not installed (Debian: apt-get install chromium); "
    "the dashboard's browser tests need it",
)
BUDGET_MS = 5000
"""Virtual time the page runs for: two of its polls (virtual time waits for a fetch)."""


def _chromium(*args: str) -> str:
    assert CHROMIUM is not None
    done = subprocess.run(
        [
            CHROMIUM,
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            f"--virtual-time-budget={BUDGET_MS}",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def dump_dom(url: str) -> Node:
    """The page's DOM once its scripts ran (``--dump-dom``), parsed."""
    return parse(_chromium("--dump-dom", url))


def screenshot(url: str, path: Path, size: tuple[int, int] = (1280, 900)) -> tuple[int, int]:
    """A PNG of the page at ``size``; returns the width and height the file holds."""
    _chromium(f"--screenshot={path}", f"--window-size={size[0]},{size[1]}", url)
    header = path.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    width, height = struct.unpack(">II", header[16:24])
    return width, height


@dataclass
class Node:
    tag: str
    attrs: dict[str, str]
    children: list[Node | str] = field(default_factory=list)

    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def all(self, tag: str | None = None, **attrs: str) -> list[Node]:
        """Every element under this one of ``tag`` (any: None) with the attributes given
        (``data_trial="3"`` is ``data-trial``, ``class_`` is ``class``; a value of ``""``
        only checks that the attribute is there)."""
        wanted = {k.rstrip("_").replace("_", "-"): v for k, v in attrs.items()}
        found = []
        for child in self.children:
            if isinstance(child, str):
                continue
            ok = tag is None or child.tag == tag
            for name, value in wanted.items():
                ok = ok and name in child.attrs and (value == "" or child.attrs[name] == value)
            if ok:
                found.append(child)
            found.extend(child.all(tag, **attrs))
        return found

    def by_id(self, element: str) -> Node:
        found = self.all(id=element)
        assert len(found) == 1, f"{len(found)} elements with id {element!r}"
        return found[0]


_VOID = {
    "area",
    "base",
    "br",
    "col",
    "embed",
    "hr",
    "img",
    "input",
    "link",
    "meta",
    "source",
    "track",
    "wbr",
}


class _Builder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Node("#document", {})
        self.stack = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, {k: v or "" for k, v in attrs})
        self.stack[-1].children.append(node)
        if tag not in _VOID:
            self.stack.append(node)

    def handle_endtag(self, tag: str) -> None:
        for depth in range(len(self.stack) - 1, 0, -1):
            if self.stack[depth].tag == tag:
                del self.stack[depth:]
                return

    def handle_data(self, data: str) -> None:
        self.stack[-1].children.append(data)


def parse(html: str) -> Node:
    builder = _Builder()
    builder.feed(html)
    builder.close()
    return builder.root
