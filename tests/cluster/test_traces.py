from __future__ import annotations

import fnmatch
import shutil
import tomllib
from pathlib import Path

import pytest

import faasml
from faasml.cluster import load_workload, resolve_workload
from faasml.cluster.traces import (
    TRACES_ENV,
    TraceError,
    default_traces_dir,
    load_application,
    load_applications,
)
from faasml.exceptions import ConfigError


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "w.csv"
    path.write_text(text)
    return path


def test_pollux_workloads_load(traces_dir: Path) -> None:
    jobs = load_workload(resolve_workload("workload-6", traces_dir))
    assert len(jobs) == 160
    assert [j.arrival_s for j in jobs] == sorted(j.arrival_s for j in jobs)
    assert {j.application for j in jobs} <= {
        "bert",
        "cifar10",
        "deepspeech2",
        "imagenet",
        "ncf",
        "yolov3",
    }
    half = load_workload(resolve_workload("workloads-0.5/workload-6.csv", traces_dir))
    assert len(half) == 80


def test_applications_load(traces_dir: Path) -> None:
    apps = load_applications(traces_dir)
    assert set(apps) == {"bert", "cifar10", "deepspeech2", "imagenet", "ncf", "yolov3"}
    assert apps["cifar10"].max_epochs == 100 and apps["yolov3"].max_local_bsz == 8
    assert apps["bert"].batch_sizes[0] == 12


def test_our_format_adds_optional_columns(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "name,time,application,num_replicas,batch_size,max_gpus,epochs,deadline\n"
        "b,10,bert,2,24,8,1,3600\n"
        "a,5,cifar10,4,512,,,\n",
    )
    a, b = load_workload(path)
    assert (a.name, a.max_gpus, a.epochs, a.deadline_s) == ("a", None, None, None)
    assert (b.max_gpus, b.epochs, b.deadline_s) == (8, 1, 3610.0)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("name,time,application,num_replicas\n", "lacks the column(s) batch_size"),
        ("name,time,application,num_replicas,batch_size,colour\n", "unknown column(s) colour"),
        ("name,time,application,num_replicas,batch_size\nj,x,bert,1,12\n", "time is 'x'"),
        ("name,time,application,num_replicas,batch_size\nj,1,bert,1.5,12\n", "an integer"),
        ("name,time,application,num_replicas,batch_size\nj,1,bert,0,12\n", "must be >= 1"),
        (
            "name,time,application,num_replicas,batch_size\nj,1,bert,1,12\nj,2,bert,1,12\n",
            "appears twice",
        ),
        (
            "name,time,application,num_replicas,batch_size,deadline\nj,1,bert,1,12,-5\n",
            "must be after its arrival",
        ),
        ("name,time,application,num_replicas,batch_size\n", "has no jobs"),
        ("name,time,application,num_replicas,batch_size\n\n \n", "has no jobs"),
        ("", "is empty"),
        ("name,time,application,num_replicas,batch_size\nj,nan,bert,1,12\n", "must be finite"),
        ("name,time,application,num_replicas,batch_size\nj,inf,bert,1,12\n", "must be finite"),
        ("name,time,application,num_replicas,batch_size\nj,-1,bert,1,12\n", "must be >= 0"),
        (
            "name,time,application,num_replicas,batch_size\nj,1e12,bert,1,12\n",
            "at most 1e.11 seconds",
        ),
        ("name,time,application,num_replicas,batch_size\nj,1,bert,inf,12\n", "must be finite"),
        ("name,time,application,num_replicas,batch_size\nj,1,bert,2,1e10\n", "at most 2147483647"),
        ("name,time,application,num_replicas,batch_size\nj,1,bert,-2,12\n", "must be >= 1"),
        ("name,time,application,num_replicas,batch_size\nj,1,bert,,12\n", "num_replicas is empty"),
        ("name,time,application,num_replicas,batch_size\nj,1,,1,12\n", "application is empty"),
        ("name,time,application,num_replicas,batch_size\nj,1,bert,1\n", "has 4 cells"),
        ("name,time,application,num_replicas,batch_size\nj,1,bert,1,12,9\n", "has 6 cells"),
        ("name,time,time,application,num_replicas,batch_size\n", "time twice"),
        (
            'name,time,application,num_replicas,batch_size,"a\nb"\nj,1,bert,1,12,2\n',
            "unknown column(s) 'a.nb'",
        ),
        ("name,time,application,num_replicas,batch_size\nj,1,bert,1,12\x00\n", "NUL"),
        ('name,time,application,num_replicas,batch_size\n"j,1,bert,1,12\n', "no jobs|cells"),
        (
            "name,time,application,num_replicas,batch_size,epochs\nj,1,bert,1,12,0.5\n",
            "epochs is '0.5', but must be an integer",
        ),
        (
            "name,time,application,num_replicas,batch_size,deadline\nj,1,bert,1,12,nan\n",
            "deadline is 'nan', but must be finite",
        ),
    ],
)
def test_bad_workloads_name_the_value_and_rule(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(TraceError, match=message.replace("(", r"\(").replace(")", r"\)")) as err:
        load_workload(path)
    assert str(path) in str(err.value) and "\n" not in str(err.value)


def test_non_utf8_workload_is_refused_naming_the_file_and_rule(tmp_path: Path) -> None:
    path = tmp_path / "latin1.csv"
    path.write_bytes(
        "name,time,application,num_replicas,batch_size\nj\xe9,1,bert,1,12\n".encode("latin-1")
    )
    with pytest.raises(TraceError, match=r"is not UTF-8 text \(byte 0xe9 at offset 47\)"):
        load_workload(path)


def test_a_utf8_byte_order_mark_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "bom.csv"
    text = "name,time,application,num_replicas,batch_size\nj\u00e9,1,bert,1,12\n"
    path.write_bytes(text.encode("utf-8-sig"))
    (job,) = load_workload(path)
    assert (job.name, job.arrival_s, job.gpus) == ("j\u00e9", 1.0, 1)


def test_header_names_and_cells_may_carry_spaces_and_crlf(tmp_path: Path) -> None:
    path = tmp_path / "crlf.csv"
    path.write_bytes(b"name, time ,application,num_replicas,batch_size\r\n a ,5, bert ,2,24\r\n")
    (job,) = load_workload(path)
    assert (job.name, job.application, job.arrival_s) == ("a", "bert", 5.0)


def test_bad_application_trace_names_the_file(tmp_path: Path, traces_dir: Path) -> None:
    app = tmp_path / "bert"
    shutil.copytree(traces_dir / "pollux" / "traces" / "bert", app)
    (app / "validation-12.csv").write_bytes(b"progress,grad_sqr,grad_var\n\xff,1,1\n")
    with pytest.raises(TraceError, match=r"validation-12\.csv is not UTF-8"):
        load_application(app)
    (app / "validation-12.csv").write_text("progress,grad_sqr,grad_var\n1,inf,1\n")
    with pytest.raises(TraceError, match="grad_sqr holds a value that is not finite"):
        load_application(app)


def test_traces_directory_comes_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TRACES_ENV, str(tmp_path))
    assert default_traces_dir() == tmp_path
    with pytest.raises(ConfigError, match="neither a file nor a trace"):
        resolve_workload("workload-6")
    with pytest.raises(ConfigError, match="no application traces"):
        load_applications()


def test_traces_ship_with_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without $FAASML_TRACES the Pollux workloads and application traces come from the
    package itself, with their licence beside them."""
    monkeypatch.delenv(TRACES_ENV, raising=False)
    base = default_traces_dir()
    assert base.is_relative_to(Path(faasml.__file__).resolve().parent)
    assert "Apache" in (base / "pollux" / "LICENSE-Apache-2.0").read_text()
    for name in ("workload-6", "workloads-0.5/workload-1.csv", "workloads-1.5/workload-8.csv"):
        assert load_workload(resolve_workload(name))
    assert set(load_applications()) == {
        "bert",
        "cifar10",
        "deepspeech2",
        "imagenet",
        "ncf",
        "yolov3",
    }


def test_package_data_lists_every_shipped_trace_file() -> None:
    """Every file under the package's trace data matches a package-data pattern of
    pyproject.toml, so an installed faasml has the traces too."""
    root = Path(__file__).resolve().parents[2]
    package = root / "src" / "faasml"
    patterns = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-data"
    ]["faasml"]
    files = [p for p in (package / "cluster" / "data").rglob("*") if p.is_file()]
    assert len(files) > 70
    unlisted = [
        p
        for p in files
        if not any(fnmatch.fnmatch(str(p.relative_to(package)), g) for g in patterns)
    ]
    assert unlisted == []
