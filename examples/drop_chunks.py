"""Drop chunk files into a folder as a data pipeline would, for examples/train-online-watch.yaml.

    python examples/drop_chunks.py examples/incoming --files 3 --every 5 --samples 5000

Each chunk is more Higgs-like data of the job's problem (the same ``problem_seed``, new
samples) in faasml's npz format (``faasml.workloads.data.write_npz``), written under a
temporary name and renamed into the folder (atomic: the run never reads half a file). Real
data works the same way: any file the job's ``watch.format`` reads.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from faasml.workloads.data import write_npz
from faasml.workloads.synthetic import higgs_like


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--files", type=int, default=3)
    parser.add_argument("--every", type=float, default=5.0, help="seconds between files")
    parser.add_argument("--samples", type=int, default=5000, help="samples per file")
    parser.add_argument("--problem-seed", type=int, default=7, help="the job's problem_seed")
    args = parser.parse_args()
    args.folder.mkdir(parents=True, exist_ok=True)
    for index in range(1, args.files + 1):
        time.sleep(args.every)
        name = f"chunk-{time.strftime('%Y%m%d-%H%M%S')}-{index:03d}.npz"
        part = args.folder / f"{name}.part"
        write_npz(part, higgs_like(args.samples, seed=1000 + index, problem_seed=args.problem_seed))
        part.rename(args.folder / name)
        print(f"landed {name} ({args.samples:,} samples)", flush=True)


if __name__ == "__main__":
    main()
