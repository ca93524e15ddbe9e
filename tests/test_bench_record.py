"""benchmarks/record.py: a benchmark's output appended to its results file with the command,
the date and the machine; a failed benchmark leaves the file as it was."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECORD = ROOT / "benchmarks" / "record.py"


def record(tmp_path: Path, body: str, out: Path) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "bench_fake.py"
    script.write_text(body, encoding="utf-8")
    argv = [sys.executable, str(RECORD), "--out", str(out), "--machine", "a test machine"]
    return subprocess.run(
        [*argv, "--", str(script), "--rows", "2"], capture_output=True, text=True, check=False
    )


def test_output_is_appended_with_command_date_and_machine(tmp_path: Path) -> None:
    out = tmp_path / "fake.md"
    out.write_text("# Earlier results\n\nkept as they were\n", encoding="utf-8")
    body = "import sys\nprint('policy  time')\nprint('fifo    1.5', sys.argv[1:])\n"
    done = record(tmp_path, body, out)
    assert done.returncode == 0, done.stderr
    assert "fifo    1.5" in done.stdout  # shown as it runs
    text = out.read_text(encoding="utf-8")
    assert text.startswith("# Earlier results\n\nkept as they were\n")
    assert "bench_fake.py --rows 2`" in text
    assert "Machine: a test machine." in text
    assert "policy  time\nfifo    1.5 ['--rows', '2']\n```" in text
    assert " UTC: `" in text


def test_a_failed_benchmark_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "fake.md"
    out.write_text("# Earlier results\n", encoding="utf-8")
    done = record(tmp_path, "print('half a table')\nraise SystemExit(3)\n", out)
    assert done.returncode == 1
    assert "unchanged" in done.stderr
    assert out.read_text(encoding="utf-8") == "# Earlier results\n"
