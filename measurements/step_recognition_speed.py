"""Prints the speed figures of the step-recognition recipes (no assertions: numbers to read and compare).

    python measurements/step_recognition_speed.py [--root R] [--steps 20] [--video] [--precision bf16-mixed]
        [--recipes last_layer,lfb_cat] [--contexts 5min] [--heads-only]

1. bank build time per recording: text (MiniLM) on the real transcripts when --root is a Spacewalk-18
   release, else on the synthetic data; with --video also the video side on a synthetic recording
   (open_clip ViT-B-32 with random weights: the cost, not the quality).
2. head training throughput (samples/s) of every recipe at w = 5 and 20 min, and each one's peak
   memory (each measured in its own process: peak RSS on CPU, max allocated on CUDA) and the size of
   one training batch (cells only for heads that read them, as train.py builds it). `--precision
   bf16-mixed` runs the head and the loss under autocast as `+trainer.precision=bf16-mixed` does.
3. the naive route, which encodes each sample's window transcript from scratch instead of slicing the
   bank, measured in the same run, and the ratio.
Medians over repeated timings; the machine is shared, so compare figures from one run only.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

RECIPES = ("last_layer", "lfb_avg", "lfb_cat", "lfb_nl", "lfb_tf")
CONTEXTS = {"5min": 300.0, "20min": 1200.0}
SYNTHETIC = dict(n_train=2, n_val=1, n_test=1, progress=False)


def dataset_for(root: str | None, scratch: Path):
    from spacewalk.benchmarks.spacewalk18.data.dataset import Spacewalk18
    from spacewalk.benchmarks.spacewalk18.synthetic.generate import ensure_dataset

    return Spacewalk18(root) if root else Spacewalk18(ensure_dataset(scratch / "synthetic", seed=0, **SYNTHETIC))


def bank_build_times(dataset, scratch: Path, video: bool) -> None:
    from spacewalk.benchmarks.spacewalk18.features.bank import FeatureBank
    from spacewalk.benchmarks.spacewalk18.features.config import BankConfig
    from spacewalk.encoders import minilm_text_encoder, open_clip_video_encoder

    text = minilm_text_encoder()
    rec = dataset.split("train")[0]
    bank = FeatureBank(scratch / "bank-build-timing", dataset, text)
    start = time.perf_counter()
    bank.build([rec.video_id], progress=False)
    seconds = time.perf_counter() - start
    print(f"bank build, text (MiniLM), {rec.video_id} ({rec.duration / 3600:.2f} h, {len(rec.transcript)} sentences): "
          f"{seconds:.1f} s")
    if video:
        from spacewalk.benchmarks.spacewalk18.data.dataset import Spacewalk18
        from spacewalk.benchmarks.spacewalk18.synthetic.generate import ensure_dataset

        synthetic = Spacewalk18(ensure_dataset(scratch / "synthetic-video", seed=0, **SYNTHETIC))
        rec = synthetic.split("train")[0]
        encoder = open_clip_video_encoder("ViT-B-32", random_init=True, batch_size=64)
        bank = FeatureBank(scratch / "bank-video", synthetic, text, encoder, BankConfig(video_backend="pyav"))
        start = time.perf_counter()
        bank.build([rec.video_id], progress=False)
        seconds = time.perf_counter() - start
        print(f"bank build, video (ViT-B-32 at 224, 1 fps) + text, synthetic {rec.video_id} "
              f"({rec.duration / 60:.1f} min): {seconds:.1f} s = {seconds / (rec.duration / 3600):.0f} s per hour")


def one_recipe(root: str | None, scratch: Path, recipe: str, context: float, steps: int, precision: str) -> dict:
    """Training throughput of one recipe, in this process (run as a subprocess for a clean peak memory)."""
    import hydra
    import torch
    from omegaconf import OmegaConf

    from datamodules.step_recognition import StepRecognitionDataModule
    from models.heads import head_reads_cells
    from spacewalk.encoders import minilm_text_encoder

    dataset = dataset_for(root, scratch)
    cfg = OmegaConf.load(REPO / f"conf/model/{recipe}.yaml")
    dm = StepRecognitionDataModule(dataset, scratch / "bank-text", text_encoder=minilm_text_encoder(),
                                   context_seconds=context, modalities="text", batch_size=cfg.batch_size,
                                   cells=head_reads_cells(hydra.utils.get_class(cfg.head._target_)))
    dm.setup()
    cfg.head.dim = dm.feature_dim
    model = hydra.utils.instantiate(cfg)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model.to(device).train()
    optimizer = model.optimizer_factory(params=[p for p in model.parameters() if p.requires_grad])
    loader = iter(dm.train_dataloader())
    times = []
    for step in range(steps + 2):
        try:
            batch = next(loader)
        except StopIteration:
            loader = iter(dm.train_dataloader())
            batch = next(loader)
        if device == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        batch = {k: v.to(device) for k, v in batch.items()}
        # what Lightning's bf16-mixed does: forward and loss under autocast, backward and step outside
        with torch.autocast(device_type=device, dtype=torch.bfloat16, enabled=precision == "bf16-mixed"):
            loss, _ = model.step_loss(model(batch), batch["label"])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if device == "cuda":
            torch.cuda.synchronize()
        if step >= 2:  # warm-up excluded
            times.append((time.perf_counter() - start) / len(batch["label"]))
    # the collate (bank slicing) is part of the cost: time it separately over the same number of batches
    collate = []
    for _ in range(5):
        idx = list(range(min(dm.batch_size, len(dm.splits["train"].label))))
        start = time.perf_counter()
        one = dm.collate("train", idx)
        collate.append((time.perf_counter() - start) / len(idx))
    batch_mib = sum(v.nbytes for v in one.values()) / 2**20
    per_sample = statistics.median(times) + statistics.median(collate)
    peak = (torch.cuda.max_memory_allocated() / 2**20 if device == "cuda"
            else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    return {"samples_per_s": 1 / per_sample, "peak_mib": peak, "batch_mib": batch_mib, "device": device,
            "mean_cells": float(dm.splits["train"].num_cells.mean())}


def naive_route(root: str | None, scratch: Path, context: float, n: int = 64) -> float:
    """Samples/s when every sample's window transcript is encoded from scratch (no bank)."""
    from spacewalk.benchmarks.spacewalk18.data.windows import TranscriptIndex, context_window
    from spacewalk.encoders import minilm_text_encoder

    dataset = dataset_for(root, scratch)
    encoder = minilm_text_encoder()
    rec = dataset.split("train")[0]
    samples = dataset.step_samples("train")[rec.video_id]
    index = TranscriptIndex(rec.transcript)
    chosen = samples[:: max(1, len(samples) // n)][:n]
    times = []
    for _ in range(3):
        start = time.perf_counter()
        # the window text, then the sentence-level features of the window (what the bank stores once)
        for s in chosen:
            window = context_window(s.timestamp, context, rec.duration)
            encoder.encode([index.sentences[i].text for i in index.indices_in(window)] or [""])
        times.append((time.perf_counter() - start) / len(chosen))
    return 1 / statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", help="a Spacewalk-18 release (real transcripts); default: synthetic data")
    parser.add_argument("--steps", type=int, default=20, help="timed training steps per recipe")
    parser.add_argument("--video", action="store_true", help="also time a video bank build (slow on CPU)")
    parser.add_argument("--scratch", help="working folder (kept; default: a temporary one); a text bank already in "
                                          "SCRATCH/bank-text (e.g. a copy of data/feature_banks/<data>/minilm) is "
                                          "reused")
    parser.add_argument("--precision", choices=("fp32", "bf16-mixed"), default="fp32",
                        help="head training precision (bf16-mixed: autocast, as +trainer.precision=bf16-mixed)")
    parser.add_argument("--recipes", default=",".join(RECIPES), help="comma-separated recipes to time")
    parser.add_argument("--contexts", default=",".join(CONTEXTS), help=f"comma-separated, of {list(CONTEXTS)}")
    parser.add_argument("--heads-only", action="store_true",
                        help="only the head throughput (no bank build timing, no naive route)")
    parser.add_argument("--one", nargs=2, metavar=("RECIPE", "SECONDS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    scratch = Path(args.scratch or tempfile.mkdtemp(prefix="spacewalk-bench-"))
    if args.one:
        print(json.dumps(one_recipe(args.root, scratch, args.one[0], float(args.one[1]), args.steps,
                                    args.precision)))
        return
    recipes, contexts = args.recipes.split(","), args.contexts.split(",")
    unknown = [r for r in recipes if r not in RECIPES] + [c for c in contexts if c not in CONTEXTS]
    if unknown:
        parser.error(f"unknown recipes or contexts {unknown}: recipes are {RECIPES}, contexts {list(CONTEXTS)}")

    dataset = dataset_for(args.root, scratch)
    print(f"data: {args.root or 'synthetic'}; scratch: {scratch}; precision: {args.precision}")
    if not args.heads_only:
        bank_build_times(dataset, scratch, args.video)
    # the bank of every training recording, once, before the per-recipe processes reuse it
    from spacewalk.benchmarks.spacewalk18.features.bank import FeatureBank
    from spacewalk.encoders import minilm_text_encoder

    FeatureBank(scratch / "bank-text", dataset, minilm_text_encoder()).build(dataset.splits["train"], progress=False)

    print(f"\n{'recipe':<11} {'w':>6} {'cells':>6} {'samples/s':>10} {'peak MiB':>9} {'batch MiB':>10}"
          "  (text only, MiniLM 2 x 384-d)")
    bank_rate = {}
    for context_name in contexts:
        seconds = CONTEXTS[context_name]
        for recipe in recipes:
            cmd = ([sys.executable, __file__, "--one", recipe, str(seconds), "--steps", str(args.steps),
                    "--precision", args.precision, "--scratch", str(scratch)]
                   + (["--root", args.root] if args.root else []))
            out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
            r = json.loads(out)
            bank_rate[(recipe, context_name)] = r["samples_per_s"]
            print(f"{recipe:<11} {context_name:>6} {r['mean_cells']:>6.1f} {r['samples_per_s']:>10.0f} "
                  f"{r['peak_mib']:>9.0f} {r['batch_mib']:>10.1f}  ({r['device']})")
    if args.heads_only:
        return
    print("\nnaive route (encode each window's transcript per sample, then the same head):")
    for context_name in contexts:
        rate = naive_route(args.root, scratch, CONTEXTS[context_name])
        slowest = min(bank_rate[(r, context_name)] for r in recipes)
        fastest = max(bank_rate[(r, context_name)] for r in recipes)
        print(f"  w = {context_name}: {rate:.1f} samples/s (encoding alone); bank recipes are {slowest / rate:.0f}x "
              f"(slowest) to {fastest / rate:.0f}x (fastest) faster")


if __name__ == "__main__":
    main()
