"""A job profile measured on a busy machine, then runs planned from it on a quieter one, with
and without the re-check of the cached profile (``runtime.profile_check``).

    .venv/bin/python benchmarks/bench_profile_recheck.py [--job examples/tune-digits.yaml]
        [--budget 0.05] [--pairs 2] [--hogs 2]

1. In a fresh profile cache, measures the job (``measure_job``) beside ``--hogs`` busy loops
   (``sh -c 'while :; do :; done'``, started here and killed after), as a profile cached
   beside a CI run would be.
2. Without the loops, runs ``faasml tune JOB --budget B`` ``--pairs`` times with the re-check
   switched off and on (``FAASML_PROFILE_RECHECK=0`` / ``1``), alternately, each from the
   busy profile (written back to the cache before every run: a re-check rescales it there).

Prints one line per run: the load average, the plan's predicted time and bill against the
measured ones (the bill without profiling, as the run summary compares them) and the
re-check's line. Figures are of this machine at this moment: compare within one sitting.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from faasml.workloads.build import build_model, load_data

ROOT = Path(__file__).resolve().parent.parent


def _load() -> str:
    return "/".join(f"{v:.1f}" for v in os.getloadavg())


def _busy_profile(job_path: str, hogs: int, settle_s: float) -> Path:
    """The job's profile measured beside ``hogs`` busy loops; the path of its cache file."""
    from faasml.catalog import load_catalog
    from faasml.job import load_job
    from faasml.runtime.platforms.contract import open_platform
    from faasml.runtime.profile.measure import cache_dir, measure_job, platform_options_for

    job = load_job(job_path)
    catalog = load_catalog(job.catalog)
    train, _ = load_data(job.dataset)
    options = platform_options_for(
        job, build_model(job.model, train.input_shape, train.num_classes), {}
    )
    loops = [subprocess.Popen(["sh", "-c", "while :; do :; done"]) for _ in range(hogs)]
    try:
        time.sleep(settle_s)  # the load average follows the loops over a minute
        with open_platform(job.platform, catalog, **options) as platform:
            profile = measure_job(job, catalog, platform, platform_options=options, refresh=True)
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()
    print(f"busy profile (load {_load()} after, {hogs} busy loops): {profile.summary()}")
    return cache_dir() / f"{profile.key}.json"


def _run(job_path: str, budget: float, recheck: bool, folder: Path) -> dict[str, Any]:
    run_dir = folder / f"run-{int(time.time() * 1000)}"
    env = {**os.environ, "FAASML_PROFILE_RECHECK": "1" if recheck else "0"}
    command = [
        str(Path(sys.executable).with_name("faasml")),
        "tune",
        job_path,
        "--budget",
        str(budget),
        "--run-dir",
        str(run_dir),
    ]
    load = _load()
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode not in (0, 1):
        raise SystemExit(f"faasml tune failed ({done.returncode}): {done.stderr[-2000:]}")
    state = json.loads((run_dir / "record.json").read_text())
    charges = state["charges"]
    profiling = sum(c["usd"] for c in charges if c["kind"] == "profiling")
    check = state["profile"].get("check")
    line = next((e["text"] for e in state["events"] if e["text"].startswith("profile re-")), "")
    return {
        "recheck": recheck,
        "load": load,
        # The run's own prediction (a tuning run keeps the planner's figures in time_s).
        "predicted_s": float(state["plan"].get("predicted_time_s", state["plan"]["time_s"])),
        "predicted_usd": float(state["plan"].get("predicted_cost_usd", state["plan"]["cost_usd"])),
        "measured_s": float(state["elapsed_s"]),
        "measured_usd": sum(c["usd"] for c in charges) - profiling,
        "profiling_usd": profiling,
        "action": check["action"] if check else "-",
        "line": line,
        "stages": ", ".join(
            f"{s['trials']}x{s['allocation']['n']}x{s['allocation']['memory_mb']}MB"
            for s in state["plan"]["stages"]
        ),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--job", default=str(ROOT / "examples" / "tune-digits.yaml"))
    parser.add_argument("--budget", type=float, default=0.05)
    parser.add_argument("--pairs", type=int, default=2)
    parser.add_argument("--hogs", type=int, default=2)
    parser.add_argument("--settle", type=float, default=20.0, help="seconds of loops first")
    parser.add_argument("--keep", help="a folder to keep the runs' directories in")
    args = parser.parse_args(argv)
    folder = Path(tempfile.mkdtemp(prefix="faasml-bench-recheck-"))
    os.environ["FAASML_CACHE"] = str(folder / "cache")
    try:
        cached = _busy_profile(args.job, args.hogs, args.settle)
        busy = cached.read_bytes()
        head = f"{'re-check':8}  {'load':>14}  {'predicted':>18}  {'measured':>18}"
        print(f"{head}  time err  bill err")
        for pair in range(args.pairs):
            order = (False, True) if pair % 2 == 0 else (True, False)
            for recheck in order:
                cached.write_bytes(busy)
                r = _run(args.job, args.budget, recheck, folder)
                t_err = (r["predicted_s"] - r["measured_s"]) / r["measured_s"]
                c_err = (r["predicted_usd"] - r["measured_usd"]) / max(r["measured_usd"], 1e-12)
                print(
                    f"{'on' if recheck else 'off':8}  {r['load']:>14}  "
                    f"{r['predicted_s']:6.1f} s ${r['predicted_usd']:.6f}  "
                    f"{r['measured_s']:6.1f} s ${r['measured_usd']:.6f}  "
                    f"{t_err:+8.0%}  {c_err:+8.0%}"
                )
                print(f"          plan {r['stages']}")
                if r["line"]:
                    print(f"          {r['line']}")
    finally:
        if args.keep:
            shutil.copytree(folder, args.keep, dirs_exist_ok=True)
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
