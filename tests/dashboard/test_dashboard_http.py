"""The dashboard's server over plain HTTP (its JSON endpoints, errors, static files) and the
`faasml dashboard` command: its URL, its one-line errors, the missing extra."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx

from faasml.cli.main import main
from faasml.dashboard.server import bind
from faasml.runtime.record.run_dir import RunDir
from faasml.units import format_money

from .browser import parse


def test_the_run_endpoint_gives_the_records_figures(finished_run: Path, serve: Any) -> None:
    record = RunDir(finished_run).read_record()
    served = serve([str(finished_run.parent)])
    runs = httpx.get(served.url + "api/runs").json()["runs"]
    assert [(r["path"], r["status"], r["bill"]) for r in runs] == [
        (str(finished_run), "finished", format_money(record.bill_usd()))
    ]
    view = httpx.get(served.url + "api/run", params={"path": str(finished_run)}).json()
    assert view["status"] == "finished"
    assert view["spend"]["total_usd"] == record.bill_usd()
    assert [t["trial"] for t in view["trials"]] == [t.trial_id for t in record.trials]
    by_kind = {k["kind"]: k["usd"] for k in view["spend"]["by_kind"]}
    assert by_kind == {kind: record.usd_of(kind) for kind in {c.kind for c in record.charges}}
    assert view["spend"]["spent"]["ys"][0][-1] == record.bill_usd()


def test_an_unknown_run_a_missing_name_and_a_wrong_url_say_so_in_a_line(
    finished_run: Path, serve: Any, tmp_path: Path
) -> None:
    served = serve([str(finished_run.parent)])
    answer = httpx.get(served.url + "api/run", params={"path": str(tmp_path / "nowhere")})
    assert answer.status_code == 404
    error = answer.json()["error"]
    assert str(tmp_path / "nowhere") in error and str(finished_run) in error
    assert "\n" not in error
    missing = httpx.get(served.url + "api/run")
    assert missing.status_code == 400
    assert missing.json() == {"error": "name the run: /api/run?path=RUN_DIR (see /api/runs)"}
    wrong = httpx.get(served.url + "api/nothing")
    assert wrong.status_code == 404
    assert wrong.text == (
        "not found: /api/nothing (the dashboard serves /, /api/runs and /api/run?path=RUN_DIR)"
    )


def test_a_damaged_record_is_named_with_what_is_wrong(
    finished_run: Path, serve: Any, tmp_path: Path
) -> None:
    run_dir = tmp_path / "run"
    shutil.copytree(finished_run, run_dir)
    (run_dir / "record.json").write_text('{"kind": "tune"')
    served = serve([str(run_dir)])
    answer = httpx.get(served.url + "api/run", params={"path": str(run_dir)})
    assert answer.status_code == 422
    assert answer.json()["error"].startswith(f"{run_dir / 'record.json'} is not valid JSON")
    (entry,) = httpx.get(served.url + "api/runs").json()["runs"]
    assert entry["status"] == "unreadable" and "is not valid JSON" in entry["error"]


def test_the_page_loads_its_script_from_the_package_not_a_cdn(
    finished_run: Path, serve: Any
) -> None:
    served = serve([str(finished_run)])
    page = httpx.get(served.url).text
    assert "http://" not in page and "https://" not in page
    for name in ("uPlot.iife.min.js", "uPlot.min.css", "dashboard.js", "dashboard.css"):
        assert f'"static/{name}"' in page
        assert httpx.get(served.url + "static/" + name).status_code == 200


def test_report_html_writes_one_self_contained_page(finished_run: Path, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    shutil.copytree(finished_run, run_dir)
    assert main(["report", str(run_dir), "--html"]) == 0
    html = (run_dir / "report.html").read_text()
    assert '<script id="faasml-data" type="application/json">' in html
    dom = parse(html)
    assert not [s for s in dom.all("script") if "src" in s.attrs] and not dom.all("link")
    assert len(dom.all("script")) == 4 and len(dom.all("style")) == 2  # data, config, code


def test_a_folder_that_is_not_there_is_one_line(tmp_path: Path, capsys: Any) -> None:
    assert main(["dashboard", str(tmp_path / "nowhere"), "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"error: {tmp_path / 'nowhere'} does not exist; name a run directory (it holds "
        "record.json) or a folder of them\n"
    )


def test_a_port_in_use_is_one_line(tmp_path: Path, capsys: Any) -> None:
    taken = bind("127.0.0.1", 0)
    port = taken.getsockname()[1]
    try:
        assert main(["dashboard", str(tmp_path), "--port", str(port)]) == 2
    finally:
        taken.close()
    err = capsys.readouterr().err
    assert err == (
        f"error: port {port} on 127.0.0.1 is in use (another dashboard?); pass --port with "
        "another, or --port 0 for any free one\n"
    )


def test_the_command_serves_until_interrupted(finished_run: Path) -> None:
    """`faasml dashboard RUN_DIR --port 0`: its first line names the URL, which serves the
    run; Ctrl-C stops it cleanly."""
    process = subprocess.Popen(
        [sys.executable, "-m", "faasml.cli.main", "dashboard", str(finished_run), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("faasml dashboard on http://127.0.0.1:"), line
        assert line.rstrip().endswith("(1 run(s)); Ctrl-C to stop")
        url = line.split(" on ")[1].split(" ")[0]
        runs = httpx.get(url + "api/runs").json()["runs"]
        assert [r["path"] for r in runs] == [str(finished_run)]
    finally:
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    assert "Traceback" not in err


def test_without_the_extra_the_command_names_it(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "sys.modules['starlette'] = None  # as if not installed\n"
        "from faasml.cli.main import main\n"
        f"sys.exit(main(['dashboard', {str(tmp_path)!r}]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 2
    assert done.stderr == (
        "error: 'starlette' is needed for this feature but is not installed; install it "
        "with: pip install 'faasml[dashboard]'\n"
    )
