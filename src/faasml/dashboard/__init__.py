"""The dashboard: a web page of a run, made from its record alone. ``server`` serves it live
(``faasml dashboard``; needs ``faasml[dashboard]``), ``page.write_html`` writes it as one
static file (``faasml report --html``); ``view`` computes what it shows."""

from __future__ import annotations

from faasml.dashboard.page import write_html
from faasml.dashboard.view import RunView, run_view

__all__ = ["RunView", "run_view", "write_html"]
