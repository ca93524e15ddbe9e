"""Samples per second of each built-in model's ``loss_and_grad`` on one thread.

Run: ``.venv/bin/python benchmarks/bench_workloads.py [--seconds 0.5] [--models a,b]``.
Prints, per model and batch size, samples/s, milliseconds per iteration and the seconds of
computation per MB of training data on one core (u₁ of the CE-scaling compute model u(m)),
which the profiling step uses as a first estimate.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # one thread, set before numpy and torch load

import argparse  # noqa: E402

from faasml.workloads import create_model  # noqa: E402
from faasml.workloads.data import Dataset, higgs_like, images, sequences  # noqa: E402
from faasml.workloads.throughput import samples_per_second, seconds_per_mb  # noqa: E402


def _cases() -> dict[str, tuple[Dataset, tuple[int, ...]]]:
    tabular, pictures = higgs_like(4096, seed=0), images(512, seed=0)
    return {
        "logistic-regression": (tabular, (64, 256, 1024)),
        "svm": (tabular, (64, 256, 1024)),
        "mlp": (tabular, (64, 256, 1024)),
        "mobilenet-small": (pictures, (16, 64, 128)),
        "resnet-small": (pictures, (16, 64, 128)),
        "transformer-small": (sequences(1024, length=32, vocab=64, seed=0), (16, 64, 256)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=0.5, help="per repeat (default 0.5)")
    parser.add_argument("--models", default="", help="comma-separated subset of the models")
    args = parser.parse_args()
    try:
        import torch

        torch.set_num_threads(1)
    except ImportError:  # the numpy models still run
        pass
    cases = _cases()
    chosen = [m for m in args.models.split(",") if m] or list(cases)
    print(f"loss_and_grad on 1 thread, {args.seconds:g} s x 3 repeats (median)")
    print(f"{'model':<20}{'params':>9}{'batch':>7}{'samples/s':>12}{'ms/iter':>9}{'u1 s/MB':>10}")
    for name in chosen:
        data, batches = cases[name]
        model = create_model(name, data.input_shape, data.num_classes)
        params = model.init_params(0)
        bytes_per_sample = 1e6 * data.size_mb / len(data)
        for batch in batches:
            x, y = data.features[:batch], data.labels[:batch]
            rate = samples_per_second(model, params, x, y, seconds=args.seconds)
            print(
                f"{name:<20}{model.num_params:>9}{batch:>7}{rate:>12.0f}"
                f"{1000 * batch / rate:>9.2f}{seconds_per_mb(rate, bytes_per_sample):>10.3f}"
            )


if __name__ == "__main__":
    main()
