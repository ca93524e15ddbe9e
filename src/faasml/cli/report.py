"""`faasml report RUN_DIR`: write a run's report, loss curves and plots again from its record.

A run writes them when it ends; this rebuilds them from the record alone, whatever the run's
status (running, interrupted, finished), e.g. after a run killed as it ended, or after the
files were removed. The record is only read.
"""

from __future__ import annotations

import argparse
from typing import Any

from rich.markup import escape

from faasml.cli._common import console
from faasml.exceptions import ConfigError
from faasml.reports.run_outputs import write_outputs
from faasml.runtime.record.run_dir import RunDir


def register(commands: Any) -> None:
    text = "write a run's report, loss curves and plots again from its record"
    report = commands.add_parser("report", help=text, description=text[0].upper() + text[1:])
    report.add_argument("run_dir", help="the run directory (it holds record.json)")
    report.add_argument(
        "--html",
        action="store_true",
        help="also write report.html: the dashboard's page of the run as one static file",
    )
    report.set_defaults(func=run_report)


def run_report(args: argparse.Namespace) -> int:
    folder = RunDir(args.run_dir)
    record = folder.read_record()
    try:
        written = write_outputs(folder, record)
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        raise ConfigError(
            f"{folder.record_path} holds a run whose report cannot be written: "
            f"{type(err).__name__}: {err}"
        ) from None
    if args.html:
        from faasml.dashboard import write_html

        written.append(write_html(record, folder.path))
    out = console()
    out.print(
        escape(
            f"Wrote {len(written)} file(s) from the {record.kind} run's record ({record.status}):"
        )
    )
    for path in written:
        out.print(escape(f"  {path}"), soft_wrap=True)
    return 0
