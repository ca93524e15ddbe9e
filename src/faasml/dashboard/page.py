"""The dashboard's page: live (its script and styles served beside it, its data polled from
the JSON endpoint) or static (``faasml report --html``: one file, data, script and styles
inlined, for a run that has ended or for sending to someone)."""

from __future__ import annotations

import dataclasses
import json
import math
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any

from faasml._files import write_atomic
from faasml.dashboard.runs import find_runs
from faasml.dashboard.view import RunView, run_view
from faasml.runtime.record.records import RunRecord

STYLES = ("uPlot.min.css", "dashboard.css")
SCRIPTS = ("uPlot.iife.min.js", "dashboard.js")
HTML_NAME = "report.html"
"""The static page's name in the run directory."""

_PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>faasml dashboard</title>
{styles}
</head>
<body>
<header class="top"><a href="{home}">faasml dashboard</a><span id="live"></span></header>
<main id="app"><p class="muted">Loading…</p></main>
{data}
{scripts}
</body>
</html>
"""


def static_text(name: str) -> str:
    """A file the package ships in ``dashboard/static``."""
    return (resources.files("faasml.dashboard") / "static" / name).read_text(encoding="utf-8")


def plain(value: Any) -> Any:
    """``value`` (dataclasses, tuples, numbers) as JSON's types; a non-finite float as null
    (JSON has none; the view gives such a value's text beside it)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, list | tuple):
        return [plain(x) for x in value]
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def json_text(value: Any) -> str:
    """``value`` as JSON that is safe inside a ``<script>`` element too: ``<``, ``>`` and
    ``&`` escaped, so no text of the record can close the element."""
    text = json.dumps(plain(value), allow_nan=False, ensure_ascii=False, separators=(",", ":"))
    for raw, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026")):
        text = text.replace(raw, escaped)
    return text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def _data(element: str, value: Any) -> str:
    return f'<script id="{element}" type="application/json">{json_text(value)}</script>'


def live_page(roots: list[str]) -> str:
    """The page the server serves at ``/``: it opens the only run when there is one."""
    runs = find_runs(roots)
    config = {"mode": "live", "api": "api/", "only": runs[0] if len(runs) == 1 else None}
    return _PAGE.format(
        styles="\n".join(f'<link rel="stylesheet" href="static/{n}">' for n in STYLES),
        home="?list",
        data=_data("faasml-config", config),
        scripts="\n".join(f'<script src="static/{n}"></script>' for n in SCRIPTS),
    )


def _inline_script(name: str) -> str:
    # "</script" inside the code would end the element early; "<\/" means the same to JS.
    return "<script>" + static_text(name).replace("</script", "<\\/script") + "</script>"


def static_page(view: RunView) -> str:
    """One self-contained HTML file showing ``view``: nothing fetched when it is opened."""
    written = datetime.now(tz=UTC).strftime("%Y-%m-%d %H:%M UTC")
    config = {"mode": "static", "written": written}
    return _PAGE.format(
        styles="\n".join(f"<style>{static_text(n)}</style>" for n in STYLES),
        home="#",
        data=_data("faasml-config", config) + "\n" + _data("faasml-data", view),
        scripts="\n".join(_inline_script(n) for n in SCRIPTS),
    )


def write_html(record: RunRecord, folder: Path) -> Path:
    """Write the run's static page into its directory; returns its path."""
    path = folder / HTML_NAME
    write_atomic(path, static_page(run_view(record, str(folder))))
    return path
