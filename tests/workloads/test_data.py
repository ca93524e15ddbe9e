"""Data: loaders round-trip files the tests write; partitions, minibatch order, npz bytes."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from faasml.exceptions import WorkloadError
from faasml.workloads.data import (
    Dataset,
    dataset_from_bytes,
    dataset_to_bytes,
    generate_dataset,
    higgs_like,
    images,
    iterate_minibatches,
    load_dataset,
    num_batches,
    partition,
    read_cifar10_bin,
    read_higgs_csv,
    read_libsvm,
    sequences,
    write_cifar10_bin,
    write_higgs_csv,
    write_libsvm,
)


def test_libsvm_round_trip_and_label_mapping(tmp_path: Path) -> None:
    data = higgs_like(40, features=6, seed=3)
    sparse = Dataset(np.where(np.abs(data.features) < 0.5, 0, data.features), data.labels, 2)
    write_libsvm(tmp_path / "a.svm", sparse)
    assert (tmp_path / "a.svm").read_text().splitlines()[0].split()[0] in {"+1", "-1"}
    back = read_libsvm(tmp_path / "a.svm", num_features=6)
    np.testing.assert_array_equal(back.features, sparse.features)
    np.testing.assert_array_equal(back.labels, sparse.labels)

    (tmp_path / "multi.svm").write_text("# comment\n3 1:0.5 4:2\n1 2:1\n\n2 3:-1 # tail\n")
    multi = read_libsvm(tmp_path / "multi.svm")
    assert multi.num_classes == 3 and multi.labels.tolist() == [2, 0, 1]
    assert multi.features.tolist() == [[0.5, 0, 0, 2], [0, 1, 0, 0], [0, 0, -1, 0]]
    assert len(read_libsvm(tmp_path / "multi.svm", limit=2)) == 2


def test_higgs_csv_round_trip_plain_and_gzip(tmp_path: Path) -> None:
    data = higgs_like(30, seed=4)
    write_higgs_csv(tmp_path / "h.csv", data)
    first = (tmp_path / "h.csv").read_text().splitlines()[0].split(",")
    assert len(first) == 29 and float(first[0]) in (0.0, 1.0)
    back = read_higgs_csv(tmp_path / "h.csv")
    np.testing.assert_array_equal(back.features, data.features)
    np.testing.assert_array_equal(back.labels, data.labels)
    with gzip.open(tmp_path / "h.csv.gz", "wb") as handle:
        handle.write((tmp_path / "h.csv").read_bytes())
    assert len(load_dataset("higgs-csv", tmp_path / "h.csv.gz", limit=10)) == 10


def test_cifar10_binary_round_trip_file_and_folder(tmp_path: Path) -> None:
    train, test = images(25, seed=5), images(7, seed=6)
    write_cifar10_bin(tmp_path / "data_batch_1.bin", train.subset(slice(0, 20)))
    write_cifar10_bin(tmp_path / "data_batch_2.bin", train.subset(slice(20, 25)))
    write_cifar10_bin(tmp_path / "test_batch.bin", test)
    assert (tmp_path / "data_batch_2.bin").stat().st_size == 5 * 3073
    back = read_cifar10_bin(tmp_path)
    np.testing.assert_array_equal(back.features, train.features)
    np.testing.assert_array_equal(back.labels, train.labels)
    assert back.input_shape == (3, 32, 32) and back.num_classes == 10
    assert len(read_cifar10_bin(tmp_path, split="test")) == 7
    assert len(read_cifar10_bin(tmp_path / "data_batch_1.bin", limit=3)) == 3
    raw = (tmp_path / "data_batch_1.bin").read_bytes()
    assert raw[0] == train.labels[0]  # one label byte, then red, green, blue planes
    assert raw[1] == round(float(train.features[0, 0, 0, 0]) * 255)
    assert raw[1 + 1024] == round(float(train.features[0, 1, 0, 0]) * 255)


@pytest.mark.parametrize(
    ("name", "content", "reader", "message"),
    [
        ("bad.svm", "1 1:0.5\nx y:z\n", read_libsvm, r"bad.svm:2 is not LIBSVM"),
        ("zero.svm", "1 0:0.5\n-1 1:1\n", read_libsvm, "1-based"),
        ("one.svm", "1 1:0.5\n1 2:1\n", read_libsvm, "single label"),
        ("bad.csv", "1,0.5\n0,abc\n", read_higgs_csv, "not a numeric CSV"),
        ("label.csv", "2,0.5\n0,1\n", read_higgs_csv, "labels must be 0 or 1"),
        ("short.bin", "abc", read_cifar10_bin, "whole records of 3073 bytes"),
    ],
)
def test_malformed_files_name_the_file_and_rule(
    tmp_path: Path, name: str, content: str, reader: object, message: str
) -> None:
    (tmp_path / name).write_text(content)
    with pytest.raises(WorkloadError, match=message):
        reader(tmp_path / name)  # type: ignore[operator]


def test_missing_inputs_and_unknown_names(tmp_path: Path) -> None:
    with pytest.raises(WorkloadError, match=r"cannot read"):
        read_libsvm(tmp_path / "absent.svm")
    with pytest.raises(WorkloadError, match=r"no data_batch"):
        read_cifar10_bin(tmp_path)
    with pytest.raises(WorkloadError, match=r"dataset.format is 'parquet'"):
        load_dataset("parquet", tmp_path)
    with pytest.raises(WorkloadError, match=r"has no option.*colour.*accepts"):
        generate_dataset("images", 4, colour=True)
    with pytest.raises(WorkloadError, match=r"dataset.samples"):
        generate_dataset("higgs-like", 0)


@pytest.mark.parametrize("name", ["higgs-like", "images", "sequences"])
def test_generators_are_seeded(name: str) -> None:
    a, b, c = (generate_dataset(name, 64, seed=s) for s in (1, 1, 2))
    assert a.features.tobytes() == b.features.tobytes() and np.array_equal(a.labels, b.labels)
    assert a.features.tobytes() != c.features.tobytes()
    assert len(np.unique(a.labels)) >= 2


def test_generated_shapes() -> None:
    assert images(3, classes=4, size=8, channels=1).input_shape == (1, 8, 8)
    tokens = sequences(5, length=9, vocab=20)
    assert tokens.features.dtype == np.int64 and tokens.features.max() < 20
    assert higgs_like(5).input_shape == (28,)


@settings(max_examples=60, deadline=None)
@given(samples=st.integers(1, 200), n=st.integers(1, 40))
def test_partitions_cover_the_data_once_and_balance(samples: int, n: int) -> None:
    data = Dataset(np.arange(samples, dtype=np.float32)[:, None], np.arange(samples) % 2, 2)
    if n > samples:
        with pytest.raises(WorkloadError, match=f"at most {samples} workers"):
            partition(data, 0, n)
        return
    parts = [partition(data, w, n) for w in range(n)]
    joined = np.concatenate([p.features[:, 0] for p in parts])
    np.testing.assert_array_equal(joined, data.features[:, 0])
    sizes = [len(p) for p in parts]
    assert max(sizes) - min(sizes) <= 1
    assert all(p.num_classes == 2 for p in parts)


@settings(max_examples=40, deadline=None)
@given(
    samples=st.integers(1, 100),
    batch=st.integers(1, 30),
    seed=st.integers(0, 1000),
    epoch=st.integers(0, 5),
    data=st.data(),
)
def test_minibatches_cover_the_epoch_and_resume_exactly(
    samples: int, batch: int, seed: int, epoch: int, data: st.DataObject
) -> None:
    dataset = Dataset(np.arange(samples, dtype=np.float32)[:, None], np.zeros(samples, int), 2)
    full = list(iterate_minibatches(dataset, batch, seed=seed, epoch=epoch))
    assert len(full) == num_batches(samples, batch)
    seen = np.sort(np.concatenate([x[:, 0] for _, x, _ in full]))
    np.testing.assert_array_equal(seen, np.arange(samples))
    start = data.draw(st.integers(0, len(full)))
    resumed = list(iterate_minibatches(dataset, batch, seed=seed, epoch=epoch, start=start))
    assert [i for i, _, _ in resumed] == list(range(start, len(full)))
    for (_, x, _), (_, y, _) in zip(resumed, full[start:], strict=True):
        np.testing.assert_array_equal(x, y)


def test_bytes_round_trip_and_bad_bytes() -> None:
    for data in (higgs_like(10), images(3), sequences(4)):
        back = dataset_from_bytes(dataset_to_bytes(data))
        assert back.features.dtype == data.features.dtype
        np.testing.assert_array_equal(back.features, data.features)
        np.testing.assert_array_equal(back.labels, data.labels)
        assert back.num_classes == data.num_classes
    with pytest.raises(WorkloadError, match=r"not a faasml dataset partition"):
        dataset_from_bytes(b"garbage")


def test_dataset_rules_and_split() -> None:
    with pytest.raises(WorkloadError, match=r"labels must have shape \(3,\)"):
        Dataset(np.zeros((3, 2)), np.zeros(2, int), 2)
    with pytest.raises(WorkloadError, match=r"labels must lie in \[0, 2\)"):
        Dataset(np.zeros((2, 2)), np.array([0, 5]), 2)
    with pytest.raises(WorkloadError, match=r"at least 2 dimensions"):
        Dataset(np.zeros(3), np.zeros(3, int), 2)
    data = higgs_like(100, seed=0)
    train, test = data.split(0.25, seed=1)
    assert (len(train), len(test)) == (75, 25)
    rows = {r.tobytes() for r in np.concatenate([train.features, test.features])}
    assert rows == {r.tobytes() for r in data.features}
    with pytest.raises(WorkloadError, match=r"test_fraction"):
        data.split(1.0, seed=0)


def test_a_fixed_problem_seed_draws_more_data_of_one_problem() -> None:
    from faasml.workloads.synthetic import higgs_like

    plain = higgs_like(500, seed=3)
    assert (higgs_like(500, seed=3, problem_seed=None).labels == plain.labels).all()
    # The samples come from the seed; the labelling rule from problem_seed.
    a, b = higgs_like(500, seed=3, problem_seed=7), higgs_like(500, seed=3, problem_seed=8)
    assert (a.features == plain.features).all() and (b.features == plain.features).all()
    assert (a.labels != b.labels).any()
    # Without noise the rule alone labels: a point drawn under two seeds gets one label.
    first = higgs_like(400, seed=1, noise=0.0, problem_seed=7)
    second = higgs_like(400, seed=2, noise=0.0, problem_seed=7)
    from sklearn.linear_model import LogisticRegression

    fitted = LogisticRegression(max_iter=2000).fit(first.features, first.labels)
    assert fitted.score(second.features, second.labels) > 0.85  # the same problem
    other = higgs_like(400, seed=2, noise=0.0, problem_seed=8)
    assert fitted.score(other.features, other.labels) < 0.75  # another problem
    with pytest.raises(WorkloadError, match="problem_seed is 'x', but must be a whole number"):
        higgs_like(10, problem_seed="x")  # type: ignore[arg-type]
