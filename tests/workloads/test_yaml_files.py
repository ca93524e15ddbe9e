"""Every YAML file faasml reads (jobs, catalogs, profiles) fails in one line, never a traceback."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from faasml.catalog import load_catalog
from faasml.exceptions import CatalogError, ConfigError, WorkloadError
from faasml.job import load_job, parse_assignments
from faasml.workload import load_workload

EXAMPLE = Path(__file__).parents[2] / "examples" / "tune-logreg.yaml"

LOADERS: list[tuple[Callable[[Path], Any], type[ConfigError]]] = [
    (lambda path: load_job(path, environ={}), ConfigError),
    (load_catalog, CatalogError),
    (load_workload, WorkloadError),
]


def _refused(path: Path, match: str) -> None:
    for load, error in LOADERS:
        with pytest.raises(error, match=match) as info:
            load(path)
        assert "\n" not in str(info.value), str(info.value)
        assert str(path) in str(info.value)


def test_binary_file_is_refused_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_bytes(bytes(range(256)) * 4)
    _refused(path, r"is not UTF-8 text: byte 0x80 at offset 128")


def test_utf16_without_byte_order_mark_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_bytes(EXAMPLE.read_text(encoding="utf-8").encode("utf-16-le"))
    _refused(path, r"is not|not valid YAML")


def test_utf16_with_byte_order_mark_reads_as_yaml_allows(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_bytes(EXAMPLE.read_text(encoding="utf-8").encode("utf-16"))
    assert load_job(path, environ={}).name == load_job(EXAMPLE, environ={}).name


@pytest.mark.parametrize(
    "text",
    [
        "a: " + "[" * 5000 + "]" * 5000,
        "a:\n" + "".join("  " * i + "- \n" for i in range(1, 400)),
        "a: " + "{b: " * 3000 + "1" + "}" * 3000,
    ],
)
def test_deep_nesting_is_refused(tmp_path: Path, text: str) -> None:
    path = tmp_path / "deep.yaml"
    path.write_text(text)
    _refused(path, r"nests deeper than 32 levels")


def test_aliases_that_expand_exponentially_are_refused(tmp_path: Path) -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    path = tmp_path / "laughs.yaml"
    path.write_text("\n".join(lines) + "\nname: *a8\n")
    _refused(path, r"more than 100,000 values with aliases expanded")


def test_an_alias_inside_itself_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "loop.yaml"
    path.write_text("name: &a [1, *a]\n")
    _refused(path, r"alias inside the value it names")


def test_malformed_yaml_is_one_line_with_its_position(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("name: x\nmodel: [1, 2\nseed: 0\n")
    _refused(path, r"not valid YAML: .*\(line \d+, column \d+\)")


def test_control_characters_and_too_large_files_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "nul.yaml"
    path.write_bytes(b"name: a\x00b\n")
    _refused(path, r"not valid YAML: .*#x0000")
    path.write_bytes(b"# " + b"x" * (4 * 1024 * 1024) + b"\n")
    _refused(path, r"larger than 4,194,304 bytes")


def test_a_folder_is_not_a_file(tmp_path: Path) -> None:
    _refused(tmp_path, r"cannot read")


@pytest.mark.parametrize("key", ["1", "null", "true", "3.5"])
def test_a_field_name_yaml_reads_as_a_number_or_null_is_refused(tmp_path: Path, key: str) -> None:
    text = EXAMPLE.read_text(encoding="utf-8").replace("  features: 28", f"  {key}: 28")
    path = tmp_path / "job.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=r"dataset has a field named .*; field names are text"):
        load_job(path, environ={})


@pytest.mark.parametrize(
    "text", ["[" * 3000, "[" * 3000 + "]" * 3000, "1" * 5000, "&a [*a]", "{a: !!python/x 1}"]
)
def test_set_and_environment_values_that_are_not_readable_yaml_stay_text(
    tmp_path: Path, text: str
) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(EXAMPLE.read_text(encoding="utf-8"))
    with pytest.raises(
        ConfigError, match=r"^the value of seed is '.*', but must be a whole number$"
    ):
        load_job(path, parse_assignments([f"seed={text}"]), environ={})
    with pytest.raises(
        ConfigError, match=r"^the value of seed is '.*', but must be a whole number$"
    ):
        load_job(path, environ={"FAASML_SEED": text})
