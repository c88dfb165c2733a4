"""All-layer fine-tuning speed: frames/s through the all-layer DataModule against raw decord decoding of the
same frames, and training samples/s and peak memory of the video and text towers.

    python measurements/all_layer_speed.py [--batches 20] [--runs 3] [--h264 1280x720] [--text-root R]

decode   the train loader of `model=all_layer modalities=video encoder=tiny_clip` on the synthetic Spacewalk-18
         (its default: 64x64 videos at 2 fps, k = 8 frames per window, w = 5 min), with each backend (decord,
         PyAV: `datamodule.video_backend`) and 0 and 2 workers, against one decord reader per recording fetching
         the same frames (`get_batch` of each window's sorted indices, samples in the loader's order),
         sequentially in this process, and our PyAV reader doing the same. The loader's time includes the
         encoder's transform (random resized crop to 32x32, normalise) and the collate; readers are opened
         before the raw timing and inside the workers for the loader (each run is a fresh pass).
--h264   the two readers alone on windows of 8 sparse frames of a larger H.264 video written for the run
         (e.g. 1280x720, 29.97 fps, a keyframe every 60 and every 250 frames at most): does the backend that
         wins on the tiny synthetic videos also win on footage-sized frames?
train    optimiser steps of batch 16 (forward, backward, AdamW): the tiny video tower on the synthetic videos,
         and the MiniLM text tower on the real transcripts (w = 5 min, at most 16 sentences per window), if
         --text-root is given (a Spacewalk-18 release whose MiniLM feature bank exists: the bank is built
         otherwise). Peak memory is the process's maximum resident set size after the steps.
Medians over runs (each run times the readers and then every loader, in turn); ratios are of medians.
"""

from __future__ import annotations

import argparse
import gc
import os
import resource
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).parent))  # decode_speed's synthetic footage
BACKENDS = ("decord", "pyav")


def _datamodule(root: Path, bank_dir: Path, modalities: str, real: bool, workers: int):
    from datamodules.all_layer import AllLayerDataModule
    from spacewalk import encoders
    from spacewalk.benchmarks.spacewalk18.open import open_spacewalk18
    from spacewalk.core.modalities import Modalities

    dataset = open_spacewalk18(root) if real else open_spacewalk18(synthetic_root=root)
    text = encoders.minilm_text_encoder(device="cpu")
    video = None
    if Modalities.parse(modalities).video:
        video = encoders.open_clip_video_encoder(
            "ViT-B-32", random_init=True, init_seed=0, device="cpu", batch_size=256, num_frames=8,
            model_cfg={"embed_dim": 32, "vision_cfg": {"image_size": 32, "layers": 2, "width": 64, "head_width": 32,
                                                       "patch_size": 8},
                       "text_cfg": {"context_length": 16, "vocab_size": 49408, "width": 16, "heads": 2, "layers": 1}})
    dm = AllLayerDataModule(dataset, bank_dir, text_encoder=text, video_encoder=video, context_seconds=300.0,
                            modalities=modalities, batch_size=16, num_workers=workers, max_sentences=16)
    dm.setup()
    return dm


def raw_decode(reader, timestamps) -> None:
    """One window's frames without the DataModule: decord's own get_batch for decord (the baseline, not our reader
    around it), our reader for PyAV (its seeking is ours)."""
    indices = np.unique(reader.frame_indices(timestamps))
    if reader.backend == "decord":
        reader._reader.get_batch(indices.tolist()).asnumpy()
    else:
        reader.frames(indices)


def decode(dm, batches: int, runs: int) -> list[str]:
    from spacewalk.media.video import open_video, sparse_timestamps

    rows = []
    loader = dm._loader("train", shuffle=True)
    order = [it.index for b, batch in zip(range(batches), loader.batch_sampler) for it in batch]
    ix, w = dm.splits["train"], dm.windows["train"]
    frames = len(order) * dm.num_frames
    loaders = [(backend, workers) for backend in BACKENDS for workers in (0, 2)]
    # the runs interleave raw and loaders, so that a change in the machine's load between them hits all alike
    times: dict[object, list[float]] = {key: [] for key in [*BACKENDS, *loaders]}
    for _ in range(runs):
        for backend in BACKENDS:  # the readers alone, in this process
            readers = {v: open_video(dm.dataset.recordings[v].video_path, backend) for v in dm.video_ids["train"]}
            start = time.perf_counter()
            for i in order:
                reader = readers[dm.video_ids["train"][ix.recording[i]]]
                raw_decode(reader, sparse_timestamps(w.start[i], w.end[i], dm.num_frames))
            times[backend].append(time.perf_counter() - start)
            for reader in readers.values():
                reader.close()
            del readers
            gc.collect()  # no decoder of this process alive when the loaders fork their workers
        for backend, workers in loaders:
            dm.num_workers = workers
            dm.inputs.video_backend = backend
            loader = dm._loader("train", shuffle=True)
            start = time.perf_counter()
            for _ in zip(range(batches), loader):
                pass
            times[backend, workers].append(time.perf_counter() - start)
            del loader
            gc.collect()
    raw = frames / statistics.median(times["decord"])
    rows.append(f"raw decord (get_batch)            {raw:6.0f} frames/s")
    pyav = frames / statistics.median(times["pyav"])
    rows.append(f"our PyAV reader alone             {pyav:6.0f} frames/s  ({pyav / raw:.0%} of raw decord)")
    for backend, workers in loaders:
        fps = frames / statistics.median(times[backend, workers])
        alone = "" if backend == "decord" else f", {fps / pyav:.0%} of the PyAV reader alone"
        rows.append(f"DataModule, {backend:6s} {workers} workers     {fps:6.0f} frames/s  "
                    f"({fps / raw:.0%} of raw decord{alone})")
    return rows


def sparse_seeks(width: int, height: int, keyframe_every: int, seconds: float, window: float, k: int,
                 windows: int, runs: int) -> list[str]:
    """Decord's get_batch against our PyAV reader on windows of k sparse frames (every frame a seek once the
    frames lie further apart than the keyframe interval), on an H.264 video of this size written for the run
    (measurements/decode_speed.py's synthetic footage)."""
    import tempfile

    from decode_speed import FPS, write_synthetic

    from spacewalk.media.video import open_video, sparse_timestamps

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        path = write_synthetic(Path(tmp) / "video.mp4", width, height, seconds, keyframe_every)
        rng = np.random.default_rng(0)
        times: dict[str, list[float]] = {b: [] for b in BACKENDS}
        for _ in range(runs):
            starts = rng.uniform(0, seconds - window, windows)
            for backend in BACKENDS:
                with open_video(path, backend) as reader:
                    start = time.perf_counter()
                    for a in starts:
                        raw_decode(reader, sparse_timestamps(a, a + window, k))
                    times[backend].append(time.perf_counter() - start)
        fps = {b: windows * k / statistics.median(t) for b, t in times.items()}
        rows.append(f"{width}x{height} at {float(FPS):.2f} fps, a keyframe every {keyframe_every} frames at most: "
                    f"{windows} windows of {window:g} s x {k} frames, median of {runs}")
        rows.append(f"  raw decord (get_batch) {fps['decord']:7.1f} frames/s")
        ratio = fps["pyav"] / fps["decord"]
        rows.append(f"  our PyAV reader        {fps['pyav']:7.1f} frames/s  ({ratio:.2f}x decord)")
    return rows


def train_speed(dm, modalities: str, steps: int, runs: int, precision: str = "fp32") -> str:
    """`precision`: fp32, or bf16-mixed (the forward under CPU autocast to bfloat16, as Lightning's bf16-mixed)."""
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
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16-mixed"):
                loss, _ = module.step_loss(module(batch), batch["label"])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        times.append(time.perf_counter() - start)
    samples = sum(len(b["label"]) for b in batches)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    speed = samples / statistics.median(times)
    return (f"train {modalities:5s} tower, batch 16, {precision:10s} {speed:8.2f} samples/s   "
            f"peak RSS {peak:7.0f} MB (data loading excluded)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--text-root", type=Path, default=None)
    parser.add_argument("--text-only", action="store_true", help="only the text tower (needs --text-root)")
    parser.add_argument("--precision", nargs="+", default=["fp32"], choices=["fp32", "bf16-mixed"],
                        help="the text tower's training precision(s): bf16-mixed pays only on a CPU with bf16 units "
                        "(avx512_bf16, amx_bf16)")
    parser.add_argument("--h264", default=None, help="also time sparse seeks on an H.264 video of this size, "
                        "e.g. 1280x720 (written for the run, --h264-seconds long)")
    parser.add_argument("--h264-seconds", type=float, default=120.0)
    parser.add_argument("--keyframe-every", type=int, nargs="+", default=[60, 250],
                        help="keyframe intervals (frames) of the --h264 videos")
    parser.add_argument("--window", type=float, default=60.0, help="window of the --h264 sparse seeks, seconds")
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
    if args.h264:
        width, height = (int(x) for x in args.h264.lower().split("x"))
        for gop in args.keyframe_every:
            for row in sparse_seeks(width, height, gop, args.h264_seconds, args.window, 8, 16, args.runs):
                print(row)
    if args.text_root is not None:
        from spacewalk.training.trainer import cpu_bf16_units

        dm = _datamodule(args.text_root, data / "feature_banks" / "spacewalk18" / "minilm", "text", True, 0)
        units = cpu_bf16_units()  # what train.py's warning reads
        print(f"CPU bf16 units: {'unknown' if units is None else ', '.join(units) or 'none'}")
        for precision in args.precision:
            print(train_speed(dm, "text", max(2, args.batches // 4), args.runs, precision))


if __name__ == "__main__":
    main()
