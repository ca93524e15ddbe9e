"""A gzip data or trace file is decompressed as it streams, within bounds: a gzip bomb (a small
file that decompresses to gigabytes) is refused before it fills memory, in one line."""

from __future__ import annotations

import zlib
from pathlib import Path

import pytest

from faasml._gzip import FLOOR_BYTES, MAX_LINE_BYTES
from faasml.cluster.scavenge._records import TraceFileError
from faasml.cluster.scavenge.loaders import load_idle_trace
from faasml.exceptions import WorkloadError
from faasml.workloads.data import load_dataset


def write_gzip(path: Path, head: bytes, block: bytes, total: int) -> Path:
    """``head``, then ``block`` repeated to ``total`` bytes, gzip-compressed chunk by chunk."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    with path.open("wb") as out:
        out.write(packer.compress(head))
        for _ in range(total // len(block) + 1):
            out.write(packer.compress(block))
        out.write(packer.flush())
    return path


def test_an_endless_first_line_is_refused_before_it_is_read_whole(tmp_path: Path) -> None:
    bomb = write_gzip(tmp_path / "h.csv.gz", b"", b"0" * 65536, MAX_LINE_BYTES + 65536)
    assert bomb.stat().st_size < MAX_LINE_BYTES // 100
    for form in ("higgs-csv", "libsvm"):
        with pytest.raises(WorkloadError, match=r"has a line longer than 16,777,216 bytes"):
            load_dataset(form, bomb)


def test_lines_past_the_ratio_are_refused(tmp_path: Path) -> None:
    # Comment lines (both readers skip them) of a megabyte each: each line is within the
    # bound, all of them together are not.
    line = b"#" + b"0" * (1 << 20) + b"\n"
    bomb = write_gzip(tmp_path / "s.csv.gz", b"", line, FLOOR_BYTES + len(line))
    for form in ("higgs-csv", "libsvm"):
        with pytest.raises(WorkloadError, match=r"decompresses to more than 67,108,864 bytes"):
            load_dataset(form, bomb)


def test_a_trace_bomb_is_refused_before_its_header_is_read(tmp_path: Path) -> None:
    bomb = write_gzip(tmp_path / "idle.csv.gz", b"", b"x" * 65536, MAX_LINE_BYTES + 65536)
    with pytest.raises(TraceFileError, match="has a line longer than"):
        load_idle_trace(bomb)
    rows = b"time_s,node,idle\n"
    bomb = write_gzip(tmp_path / "rows.csv.gz", rows, b"1,n0,1\n" * 10_000, FLOOR_BYTES + 70_000)
    with pytest.raises(TraceFileError, match="decompresses to more than"):
        load_idle_trace(bomb)


def test_a_truncated_gzip_file_is_one_line(tmp_path: Path) -> None:
    whole = write_gzip(tmp_path / "w.csv.gz", b"", b"1,0.5\n0,0.25\n", 10_000)
    cut = tmp_path / "cut.csv.gz"
    cut.write_bytes(whole.read_bytes()[:-20])
    with pytest.raises(WorkloadError, match="is not a readable gzip file"):
        load_dataset("higgs-csv", cut)


def test_an_ordinary_gzip_file_reads_as_before(tmp_path: Path) -> None:
    data = write_gzip(tmp_path / "ok.csv.gz", b"", b"1,0.5,2\n0,0.25,1\n", 100_000)
    loaded = load_dataset("higgs-csv", data)
    assert len(loaded) > 10_000 and loaded.num_classes == 2
