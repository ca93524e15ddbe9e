"""Run a benchmark script and append what it printed to its results file, dated.

    .venv/bin/python benchmarks/record.py --out benchmarks/results/pareto.md -- \\
        benchmarks/bench_pareto.py [its options]

The benchmark's output goes to the terminal as it runs and, when it exits 0, into a new
section at the end of ``--out``: the command, the date (UTC), the machine and the code's
commit, then the output verbatim. The docs cite those files, so a figure always comes with the
command, date and machine that produced it. A failed run writes nothing.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def machine() -> str:
    """The machine in a line: CPU model, cores, memory and load average when it started."""
    cpu = platform.processor() or platform.machine()
    info = Path("/proc/cpuinfo")
    if info.exists():
        for line in info.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    parts = [cpu, f"{os.cpu_count()} cores"]
    if hasattr(os, "sysconf") and "SC_PHYS_PAGES" in os.sysconf_names:
        gib = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / 2**30
        parts.append(f"{gib:.0f} GiB")
    if hasattr(os, "getloadavg"):
        one, five, fifteen = os.getloadavg()
        parts.append(f"load average {one:.1f} {five:.1f} {fifteen:.1f} at the start")
    return ", ".join(parts)


def commit() -> str:
    done = subprocess.run(
        ["git", "-C", str(ROOT), "describe", "--always", "--dirty"],
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout.strip() or "unknown"


def section(command: str, output: str, when: str, where: str, code: str) -> str:
    fence = "~~~~" if "```" in output else "```"
    return (
        f"\n## {when}: `{command}`\n\n"
        f"Machine: {where}. Code: {code}.\n\n"
        f"{fence}\n{output.rstrip()}\n{fence}\n"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, type=Path, help="the results file to append to")
    parser.add_argument("--machine", help="describe the machine (default: read from it)")
    parser.add_argument("script", nargs=argparse.REMAINDER, help="-- SCRIPT [ITS OPTIONS]")
    args = parser.parse_args(argv)
    script = args.script[1:] if args.script[:1] == ["--"] else args.script
    if not script:
        parser.error("name the benchmark script after --")
    when = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    where = args.machine or machine()
    run = subprocess.Popen(
        [sys.executable, *script], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    assert run.stdout is not None
    lines = []
    for line in run.stdout:
        sys.stdout.write(line)
        lines.append(line)
    if run.wait() != 0:
        print(f"error: {script[0]} exited {run.returncode}; {args.out} unchanged", file=sys.stderr)
        return 1
    command = shlex.join([".venv/bin/python", *script])
    if not args.out.exists():
        args.out.write_text(f"# `{Path(script[0]).name}`\n", encoding="utf-8")
    with args.out.open("a", encoding="utf-8") as out:
        out.write(section(command, "".join(lines), when, where, commit()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
