"""All-layer fine-tuning speed: frames/s through the encoder-inputs DataModule against raw decord decoding of the
same frames, and training samples/s and peak memory of the video and text towers.

    python benchmarks/all_layer_speed.py [--batches 20] [--runs 3] [--text-root R]

decode   the train loader of `model=all_layer modalities=video encoder=tiny_clip` on the synthetic Spacewalk-18
         (its default: 64x64 videos at 2 fps, k = 8 frames per window, w = 5 min), with 0 and 2 workers,
         against one decord reader per recording fetching the same frames (`get_batch` of each window's sorted
         indices, samples in the loader's order), sequentially in this process. The loader's time includes
         the encoder's transform (resize to 32x32, normalise) and the collate; readers are opened before the
         raw timing and inside the workers for the loader (each run is a fresh pass).
train    optimiser steps of batch 16 (forward, backward, AdamW): the tiny video tower on the synthetic videos,
         and the MiniLM text tower on the real transcripts (w = 5 min, at most 16 sentences per window), if
         --text-root is given (a Spacewalk-18 release whose MiniLM feature bank exists: the bank is built
         otherwise). Peak memory is the process's maximum resident set size after the steps.
Medians over runs (each run times raw, 0 and 2 workers in turn); the ratio is loader / raw.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import time
from pathlib import Path

import numpy as np
import torch


def _datamodule(root: Path, bank_dir: Path, modalities: str, real: bool, workers: int):
    from datamodules.encoder_inputs import EncoderInputsDataModule
    from spacewalk import encoders
    from spacewalk.spacewalk18.dataset import Spacewalk18
    from spacewalk.spacewalk18.synthetic import synthetic_spacewalk18

    dataset = Spacewalk18(root) if real else synthetic_spacewalk18(root)
    text = encoders.minilm_text_encoder(device="cpu")
    video = None
    if "video" in modalities:
        video = encoders.open_clip_video_encoder(
            "ViT-B-32", random_init=True, init_seed=0, device="cpu", batch_size=256, num_frames=8,
            model_cfg={"embed_dim": 32, "vision_cfg": {"image_size": 32, "layers": 2, "width": 64, "head_width": 32,
                                                       "patch_size": 8},
                       "text_cfg": {"context_length": 16, "vocab_size": 49408, "width": 16, "heads": 2, "layers": 1}})
    dm = EncoderInputsDataModule(dataset, bank_dir, text_encoder=text, video_encoder=video, context_seconds=300.0,
                                 modalities=modalities, batch_size=16, num_workers=workers, max_sentences=16)
    dm.setup()
    return dm


def decode(dm, batches: int, runs: int) -> list[str]:
    from spacewalk.video import open_video, sparse_timestamps

    rows = []
    loader = dm._loader("train", shuffle=True)
    order = [it.index for b, batch in zip(range(batches), loader.batch_sampler) for it in batch]
    ix, w = dm.splits["train"], dm.windows["train"]
    frames = len(order) * dm.num_frames
    # the runs interleave raw and loaders, so that a change in the machine's load between them hits all three alike
    times: dict[object, list[float]] = {"raw": [], 0: [], 2: []}
    for _ in range(runs):
        readers = {v: open_video(dm.dataset.recordings[v].video_path, "decord") for v in dm.video_ids["train"]}
        start = time.perf_counter()
        for i in order:
            reader = readers[dm.video_ids["train"][ix.recording[i]]]
            indices = np.unique(reader.frame_indices(sparse_timestamps(w.start[i], w.end[i], dm.num_frames)))
            reader._reader.get_batch(indices.tolist()).asnumpy()
        times["raw"].append(time.perf_counter() - start)
        for workers in (0, 2):
            dm.num_workers = workers
            loader = dm._loader("train", shuffle=True)
            start = time.perf_counter()
            for _ in zip(range(batches), loader):
                pass
            times[workers].append(time.perf_counter() - start)
            del loader
    raw = frames / statistics.median(times["raw"])
    rows.append(f"raw decord, sequential        {raw:10.0f} frames/s")
    for workers in (0, 2):
        fps = frames / statistics.median(times[workers])
        rows.append(f"DataModule, {workers} workers          {fps:10.0f} frames/s  ({fps / raw:.0%} of raw)")
    return rows


def train_speed(dm, modalities: str, steps: int, runs: int) -> str:
    from models.all_layer import TrainableTowers
    from models.step_recognition import StepRecognitionModule

    dm.num_workers = 0
    head = TrainableTowers(dm.feature_dim, modalities, video_encoder=dm.video_encoder, text_encoder=dm.text_encoder)
    module = StepRecognitionModule(head)
    optimizer = torch.optim.AdamW(head.parameters(), lr=1e-5, weight_decay=0.2)
    batches = [b for _, b in zip(range(steps), dm._loader("train", shuffle=True))]
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        for batch in batches:
            loss, _ = module.step_loss(module(batch), batch["label"])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        times.append(time.perf_counter() - start)
    samples = sum(len(b["label"]) for b in batches)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return (f"train {modalities:5s} tower, batch 16      {samples / statistics.median(times):8.1f} samples/s   "
            f"peak RSS {peak:7.0f} MB (data loading excluded)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--text-root", type=Path, default=None)
    parser.add_argument("--text-only", action="store_true", help="only the text tower (needs --text-root)")
    args = parser.parse_args()
    data = Path(os.environ.get("SPACEWALK_DATA_DIR", "data"))
    torch.manual_seed(0)
    print(f"torch threads {torch.get_num_threads()}, {os.cpu_count()} CPUs")
    if not args.text_only:
        dm = _datamodule(data / "synthetic_spacewalk18", data / "feature_banks" / "synthetic" / "tiny_clip", "video",
                         False, 0)
        print(f"decode: {args.batches} batches of 16 windows x {dm.num_frames} frames, synthetic 64x64 videos, "
              f"median of {args.runs}")
        for row in decode(dm, args.batches, args.runs):
            print("  " + row)
        print(train_speed(dm, "video", args.batches, args.runs))
    if args.text_root is not None:
        dm = _datamodule(args.text_root, data / "feature_banks" / "spacewalk18" / "minilm", "text", True, 0)
        print(train_speed(dm, "text", max(2, args.batches // 4), args.runs))


if __name__ == "__main__":
    main()
