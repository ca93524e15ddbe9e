"""A job file is safe to read and to check: what it cannot say, it is refused for in one line
when read (through ``load_job``, ``faasml job check`` and ``faasml tune``), and checking it
runs none of its code."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from faasml.cli.main import main
from faasml.exceptions import ConfigError
from faasml.job import load_job
from faasml.sync.stores import open_store

EXAMPLE = Path(__file__).parents[2] / "examples" / "tune-logreg.yaml"


def _job(tmp_path: Path, **changes: Any) -> Path:
    data = {**yaml.safe_load(EXAMPLE.read_text()), **changes}
    data["dataset"] = {**data["dataset"], "samples": 1000}
    del data["profile"]
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err, err
    return err


def test_a_key_given_twice_is_refused_naming_the_key_and_its_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _job(tmp_path)
    lines = path.read_text().splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("optimizer:")) + 1
    path.write_text("\n".join([*lines, "optimizer:", "  name: adam", "  lr: 0.5"]) + "\n")
    rule = rf"has the key 'optimizer' twice \(lines {first} and {len(lines) + 1}\)"
    with pytest.raises(ConfigError, match=rule):
        load_job(path, environ={})
    assert main(["job", "check", str(path)]) == 2
    assert "twice" in _error(capsys)
    flow = tmp_path / "flow.yaml"
    flow.write_text("\n".join(lines).replace("seed: 0", "seed: {a: 1, a: 2}"))
    with pytest.raises(ConfigError, match=r"has the key 'a' twice"):
        load_job(flow, environ={})


def test_a_merge_key_may_still_be_overridden(tmp_path: Path) -> None:
    text = _job(tmp_path).read_text()
    text = text.replace(
        "optimizer:\n", "base: &base {name: sgd, lr: 0.2}\noptimizer:\n  <<: *base\n"
    )
    path = tmp_path / "merge.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=r"unknown field\(s\): base"):  # merged, not a duplicate
        load_job(path, environ={})


def test_a_file_of_too_many_values_is_refused_while_it_is_read(tmp_path: Path) -> None:
    """Within the byte limit, a million one-line values: refused once the count passes the
    limit, at the line where reading stopped, not after the whole file is built."""
    path = tmp_path / "many.yaml"
    path.write_text("name: many\nvalues:\n" + "- 0\n" * 1_000_000)
    assert path.stat().st_size < 4 * 1024 * 1024
    with pytest.raises(
        ConfigError, match=r"more than 100,000 values \(stopped at line (\d+)\)"
    ) as e:
        load_job(path, environ={})
    stopped = int(str(e.value).rsplit("line ", 1)[1].rstrip(")"))
    assert stopped <= 100_003


@pytest.mark.parametrize("name", ["../../x", "a/b", "..", ".hidden", "a\\b", "tab\there"])
def test_a_name_must_be_one_folder_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    path = _job(work, name=name)
    with pytest.raises(ConfigError, match=r"the value of name is .*, but must be one folder name"):
        load_job(path, environ={})
    assert main(["tune", str(path), "--budget", "0.01"]) == 2
    assert "must be one folder name" in _error(capsys)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["work"]  # nothing written beside it
    assert not (work / "runs").exists()


def test_a_redis_url_with_a_password_is_refused_by_job_check_as_by_tune(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    url = "redis://app:s3cret@127.0.0.1:6379/0"
    with pytest.raises(ConfigError, match="REDISCLI_AUTH") as opened:
        open_store(url)  # the rule tune applies when it opens the store
    monkeypatch.setenv("FAASML_STORE", url)
    path = _job(tmp_path)
    assert main(["job", "check", str(path)]) == 2
    err = _error(capsys)
    assert str(opened.value) in err and "s3cret" not in err
    monkeypatch.delenv("FAASML_STORE")
    monkeypatch.setenv("FAASML_STORES__REDIS", url)
    with pytest.raises(ConfigError, match="must not carry credentials"):
        load_job(path)


def test_checking_a_job_runs_none_of_its_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    ran = tmp_path / "ran"
    path = _job(tmp_path, model={"name": "subprocess:getoutput", "cmd": f"touch {ran}"})
    assert main(["job", "check", str(path)]) == 0
    assert "built when the job runs" in capsys.readouterr().out
    assert not ran.exists()
    (tmp_path / "usermodels.py").write_text(f"open({str(ran)!r}, 'w').close()\ndef make(): ...\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    path = _job(tmp_path, model="usermodels:make", search_space={"model.x": {"choice": [1, 2]}})
    assert main(["job", "check", str(path), "--json"]) == 0
    assert not ran.exists()  # found on the path, not imported
    path = _job(tmp_path, model="nosuchmodule.sub:make")
    assert main(["job", "check", str(path)]) == 2
    assert "names module 'nosuchmodule.sub', which is not found on the Python path" in _error(
        capsys
    )
