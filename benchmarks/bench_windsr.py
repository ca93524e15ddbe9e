"""WindSR on a held-out synthetic test set: diffusion SR with and without terrain, with and
without assimilation, against bicubic and an SR-CNN (dissertation Chapter 6, Tables 6.2–6.3).

    PYTHONPATH=src python benchmarks/bench_windsr.py            # 5-40 min on 2 busy cores
    PYTHONPATH=src python benchmarks/bench_windsr.py --steps 200 --train 256 --test 16  # quick

Trains each network with Adam for ``--steps`` minibatches on ``--train`` generated patches
(``size`` × ``size`` at ``scale``×), then super-resolves ``--test`` held-out patches (another
seed) and prints PSNR / SSIM against the simulated HR field, the error at the observation
sites (MAE / RMSE against the station readings) and the RMSE away from them (farther than the
largest impact radius), time per training epoch and per sampled image. The targets of the
issue are checked and printed as met / missed; nothing is asserted.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np
import torch

from faasml.workloads.windsr import metrics
from faasml.workloads.windsr.diffusion import SRCNN, WindSRNet, count_parameters
from faasml.workloads.windsr.fields import WindPatches, generate_patches
from faasml.workloads.windsr.model import super_resolve

MAX_RADIUS = 6
NEAR = 3


def train(
    net: Any, data: torch.Tensor, steps: int, batch: int, lr: float, seed: int
) -> dict[str, float]:
    """Adam on the network's own loss; returns the first/last-100 mean loss and timings."""
    torch.manual_seed(seed)
    optimizer = torch.optim.Adam(net.parameters(), lr=lr)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, steps)
    losses: list[float] = []
    wall, cpu = time.perf_counter(), time.process_time()
    order = torch.randperm(len(data))
    at = 0
    net.train()
    for _ in range(steps):
        if at + batch > len(data):
            order, at = torch.randperm(len(data)), 0
        loss = net(data[order[at : at + batch]])
        at += batch
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        schedule.step()
        losses.append(float(loss.detach()))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    epochs = steps * batch / len(data)
    window = max(1, min(100, steps // 4))
    return {
        "first_loss": float(np.mean(losses[:window])),
        "last_loss": float(np.mean(losses[-window:])),
        "epoch_wall_s": wall / epochs,
        "epoch_cpu_s": cpu / epochs,
    }


def score(test: WindPatches, sr: np.ndarray) -> dict[str, float]:
    far = metrics.away_from_sites(test.hr, test.rows, test.cols, MAX_RADIUS)
    near = ~metrics.away_from_sites(test.hr, test.rows, test.cols, NEAR)
    mae, rmse = metrics.site_error(sr, test.rows, test.cols, test.readings)
    return {
        "near_truth_rmse": metrics.rmse(test.truth, sr, near),
        "psnr": metrics.psnr(test.hr, sr),
        "ssim": metrics.ssim(test.hr, sr),
        "site_mae": mae,
        "site_rmse": rmse,
        "far_rmse": metrics.rmse(test.hr, sr, far),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--train", type=int, default=1024, help="training patches")
    parser.add_argument("--test", type=int, default=48, help="held-out patches")
    parser.add_argument("--size", type=int, default=32)
    parser.add_argument("--scale", type=int, default=4)
    parser.add_argument("--steps", type=int, default=600, help="training minibatches per model")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--width", type=int, default=16, help="UNet base channels")
    parser.add_argument("--levels", type=int, default=3)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--prediction", default="x0", choices=("eps", "x0", "v"))
    parser.add_argument("--sample-steps", type=int, default=3, help="DDIM steps")
    parser.add_argument("--average", type=int, default=1, help="DDIM samples averaged per image")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    shape = {"size": args.size, "scale": args.scale}
    train_set = generate_patches(args.train, seed=args.seed, **shape)
    test = generate_patches(args.test, seed=args.seed + 10_000, **shape)
    data = torch.from_numpy(train_set.to_dataset().features)
    print(
        f"WindSR benchmark: {args.train} training / {args.test} held-out patches of "
        f"{args.size}×{args.size} at {args.scale}× ({args.size // args.scale}×"
        f"{args.size // args.scale} LR), {test.rows.shape[1]} stations per patch; "
        f"{args.steps} Adam steps of batch {args.batch} per model, {args.threads} thread(s)"
    )
    nets: dict[str, Any] = {
        "SR-CNN": SRCNN(args.scale, width=32),
        "SR-CNN w/ terrain": SRCNN(args.scale, terrain=True, width=32),
        "WindSR w/o terrain": WindSRNet(args.scale, args.width, args.levels, terrain=False),
        "WindSR w/ terrain": WindSRNet(args.scale, args.width, args.levels, terrain=True),
    }
    print(
        f"\n{'model':<20} {'params':>8} {'loss first→last':>18} "
        f"{'epoch wall s':>13} {'epoch cpu s':>12}"
    )
    for name, net in nets.items():
        t = train(net, data, args.steps, args.batch, args.lr, args.seed)
        print(
            f"{name:<20} {count_parameters(net):>8,} "
            f"{t['first_loss']:>8.4f}→{t['last_loss']:<8.4f} {t['epoch_wall_s']:>13.1f} "
            f"{t['epoch_cpu_s']:>12.1f}",
            flush=True,
        )

    rows: dict[str, dict[str, float]] = {}
    timing: dict[str, float] = {}

    def run(
        label: str, net: Any, assimilate: str | int | None = None, inpaint: bool = True
    ) -> None:
        start = time.perf_counter()
        sr = super_resolve(
            net,
            test,
            assimilate=assimilate,
            steps=args.sample_steps,
            average=args.average,
            seed=args.seed,
            inpaint=inpaint,
        )
        timing[label] = (time.perf_counter() - start) / len(test)
        rows[label] = score(test, sr)

    run("bicubic", None)
    run("bicubic + DA (dynamic)", None, "dynamic")
    run("SR-CNN", nets["SR-CNN"])
    run("SR-CNN + DA (dynamic)", nets["SR-CNN"], "dynamic")
    run("SR-CNN w/ terrain", nets["SR-CNN w/ terrain"])
    run("WindSR w/o terrain", nets["WindSR w/o terrain"])
    run("WindSR w/ terrain", nets["WindSR w/ terrain"])
    if args.sample_steps != 10:
        wanted = args.sample_steps
        args.sample_steps = 10
        run("WindSR w/ terrain, 10 st.", nets["WindSR w/ terrain"])
        args.sample_steps = wanted
    for radius in (2, 4, 6):
        run(f"WindSR + DA (r = {radius})", nets["WindSR w/ terrain"], radius)
    run("WindSR + DA (dyn., cond.)", nets["WindSR w/ terrain"], "dynamic", inpaint=False)
    run("WindSR + DA (dynamic)", nets["WindSR w/ terrain"], "dynamic")

    print(
        f"\n{'method':<24} {'PSNR dB':>8} {'SSIM':>7} {'site MAE':>9} {'site RMSE':>10} "
        f"{'far RMSE':>9} {'near truth':>10} {'s/image':>8}"
    )
    for label, r in rows.items():
        print(
            f"{label:<24} {r['psnr']:>8.2f} {r['ssim']:>7.4f} {r['site_mae']:>9.3f} "
            f"{r['site_rmse']:>10.3f} {r['far_rmse']:>9.3f} {r['near_truth_rmse']:>10.3f} "
            f"{timing[label]:>8.4f}"
        )
    print("(site errors in m/s against the station readings; far RMSE in m/s against the HR")
    print(f" field, over cells farther than {MAX_RADIUS} cells from every station; near truth:")
    print(f" RMSE in m/s against the truth field within {NEAR} cells of a station)")

    wind, plain = rows["WindSR w/ terrain"], rows["WindSR w/o terrain"]
    da = rows["WindSR + DA (dynamic)"]
    conditioned = rows["WindSR + DA (dyn., cond.)"]
    checks = [
        (
            "WindSR w/ terrain beats bicubic by >= 2 dB",
            wind["psnr"] - rows["bicubic"]["psnr"],
            wind["psnr"] - rows["bicubic"]["psnr"] >= 2.0,
            "dB",
        ),
        (
            "WindSR w/ terrain beats SR-CNN (PSNR)",
            wind["psnr"] - rows["SR-CNN"]["psnr"],
            wind["psnr"] > rows["SR-CNN"]["psnr"],
            "dB",
        ),
        (
            "WindSR w/ terrain beats SR-CNN w/ terrain (PSNR)",
            wind["psnr"] - rows["SR-CNN w/ terrain"]["psnr"],
            wind["psnr"] > rows["SR-CNN w/ terrain"]["psnr"],
            "dB",
        ),
        ("terrain helps (PSNR)", wind["psnr"] - plain["psnr"], wind["psnr"] > plain["psnr"], "dB"),
        (
            "assimilation cuts site RMSE by >= 50 %",
            100 * (1 - da["site_rmse"] / wind["site_rmse"]),
            da["site_rmse"] <= 0.5 * wind["site_rmse"],
            "%",
        ),
        (
            "... by conditioning alone (no in-painting)",
            100 * (1 - conditioned["site_rmse"] / wind["site_rmse"]),
            conditioned["site_rmse"] <= 0.5 * wind["site_rmse"],
            "%",
        ),
        (
            "assimilation cuts truth RMSE near sites",
            100 * (1 - da["near_truth_rmse"] / wind["near_truth_rmse"]),
            da["near_truth_rmse"] < wind["near_truth_rmse"],
            "%",
        ),
        (
            "... without hurting far RMSE (within 2 %)",
            100 * (da["far_rmse"] / wind["far_rmse"] - 1),
            da["far_rmse"] <= 1.02 * wind["far_rmse"],
            "%",
        ),
    ]
    print("\ntargets")
    for text, value, met, unit in checks:
        print(f"  {text:<48} {value:+7.2f} {unit:<2} {'met' if met else 'MISSED'}")


if __name__ == "__main__":
    main()
