"""Intra-video retrieval all-layer speed: training samples/s of `model=ivr_all_layer` (the MiniLM text tower) on a
Spacewalk-18 release, data loading included.

    python measurements/ivr_all_layer_speed.py --root R [--steps 3] [--context 30]   (R: the release)

The recipe's defaults: batch 32 (each sample three windows: query and two candidates), at most 16 sentences
per training window, AdamW; train samples from our sampler (seed 43), as `train.py ... data=spacewalk18` uses.
Prints the set-up time (samples, windows), the seconds per optimiser step (loader + forward + backward + AdamW,
in this process, no workers) and samples/s, and the hours one epoch of the train split would take at that rate.
"""

from __future__ import annotations

import argparse
import resource
import time
from pathlib import Path

import torch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, required=True)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--context", type=float, default=30.0)
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args()

    from datamodules.intra_video_retrieval_all_layer import AllLayerRetrievalDataModule
    from models.all_layer import TrainableTowers
    from models.intra_video_retrieval_all_layer import AllLayerRetrievalModule
    from spacewalk import encoders
    from spacewalk.benchmarks.spacewalk18.data.dataset import Spacewalk18

    torch.manual_seed(0)
    start = time.perf_counter()
    text = encoders.minilm_text_encoder(device="cpu")
    dm = AllLayerRetrievalDataModule(Spacewalk18(args.root), Path("unused-bank"), text_encoder=text,
                                     context_seconds=args.context, modalities="text", batch_size=args.batch_size,
                                     max_sentences=16)
    dm.setup()
    n = len(dm.splits["train"].label)
    print(f"set-up {time.perf_counter() - start:.0f} s: {n} train samples ({dm.sources['train']}), "
          f"{len(dm.splits['val'].label)} val, {len(dm.splits['test'].label)} test; torch threads "
          f"{torch.get_num_threads()}")
    module = AllLayerRetrievalModule(TrainableTowers(dm.feature_dim, "text", text_encoder=text, text_blocks=1))
    optimizer = torch.optim.AdamW(module.head.parameters(), lr=1e-6, weight_decay=0.2)
    dm.trainer = None
    loader = iter(dm._loader("train", shuffle=True))
    times = []
    for step in range(args.steps):
        t0 = time.perf_counter()
        batch = next(loader)
        loss, _ = module._loss(batch)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        times.append(time.perf_counter() - t0)
        print(f"  step {step}: {times[-1]:.1f} s, {batch['text_weight'].shape[1]} distinct sentences, "
              f"loss {loss.item():.3f}")
    per_step = sorted(times)[len(times) // 2]
    rate = args.batch_size / per_step
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"median {per_step:.1f} s per step of {args.batch_size}: {rate:.2f} samples/s; one epoch of {n} samples "
          f"~{n / rate / 3600:.1f} h (val and test not included); peak RSS {peak:.0f} MB")


if __name__ == "__main__":
    main()
