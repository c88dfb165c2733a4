"""Text encoding speed: our sentence encoder and the feature bank's text step against sentence-transformers'
own `encode` on the same texts and threads (the reference), in sentences (texts) per second.

    python measurements/text_encoder_speed.py --root R [--encoders minilm mpnet] [--threads 1 2]
        [--sentences 256] [--repeats 3] [--cache-dir data/models] [--bf16]

The texts are the ones a bank build encodes, from the release's real transcripts at R (each recording's
12 s cell texts, transcript sentences, step narrations and captions, distinct within the recording):
`--sentences` of them drawn at random (seed 0) from all 18 recordings for the encoder rows, and as many
drawn from one recording, in its order, for the builder rows. Rows, for each encoder and torch thread
count, each timed `--repeats` times in turn with the others (so a change of the machine's load falls on
every row alike) and reported as the median:

- reference: `SentenceTransformer.encode(texts, batch_size=64, normalize_embeddings=True)`, one call (the
  library orders the texts by characters and pads each batch to its longest);
- ours: `SentenceTextEncoder.encode(texts)` (spacewalk/encoders/sentence.py: batches of one token count);
- builder: `RecordingBuilder.encode_texts` on one recording's texts, the bank build's text step (distinct texts,
  longest first, calls of 256, float16 rows), against the reference on the same texts; the goal is 0.90
  of the reference or more;
- file order: the same texts through our encoder in calls of 256 in the recording's order, without the
  builder's length order (what the order is worth);
- `--bf16`: ours with precision="bfloat16" (an explicit setting: the vectors change, the smallest cosine
  to the float32 vector is printed).

The thread count is torch's (`torch.set_num_threads`). On a machine other jobs load, libgomp's default
wait policy makes torch's threads spin on the cores the other jobs need: OMP_WAIT_POLICY (read when
torch loads, so set it on the command line) is printed; docs/speed.md has both.

Third-party packages it imports: numpy, torch, sentence-transformers (and transformers through it), tqdm,
filelock (through spacewalk); mpnet needs the `mpnet` extra.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

BATCH = 64  # the text_encoder configs' batch_size and the reference's


def bank_texts(bank, video_id: str) -> list[str]:
    """The distinct non-empty texts a bank build of one recording encodes, in the recording's order (cells,
    sentences, narrations, captions)."""
    groups, _ = bank.builder.text_groups(bank.dataset.recordings[video_id])
    return list(dict.fromkeys(t for texts in groups.values() for t in texts if t))


def make_encoder(name: str, cache_dir: str, precision: str):
    from spacewalk.encoders.sentence import minilm_text_encoder, mpnet_text_encoder

    if name == "minilm":
        return minilm_text_encoder(device="cpu", batch_size=BATCH, precision=precision)
    return mpnet_text_encoder(cache_dir=cache_dir, device="cpu", batch_size=BATCH, precision=precision)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", required=True, help="a Spacewalk-18 release (its real transcripts)")
    parser.add_argument("--encoders", nargs="+", default=["minilm", "mpnet"], choices=("minilm", "mpnet"))
    parser.add_argument("--threads", type=int, nargs="+", default=[os.cpu_count() or 1],
                        help="torch thread counts, each measured in turn (default: the CPU count)")
    parser.add_argument("--sentences", type=int, default=256, help="texts per row")
    parser.add_argument("--recording", help="the builder rows' recording (default: the release's first)")
    parser.add_argument("--repeats", type=int, default=3, help="timings per row (median)")
    parser.add_argument("--cache-dir", default="data/models", help="where mpnet is assembled on first use")
    parser.add_argument("--bf16", action="store_true", help="also ours under bfloat16 autocast (opt-in precision)")
    args = parser.parse_args()

    import torch

    from spacewalk.benchmarks.spacewalk18.data.dataset import Spacewalk18
    from spacewalk.benchmarks.spacewalk18.features.bank import FeatureBank

    dataset = Spacewalk18(args.root)
    texts_of = FeatureBank(Path(tempfile.gettempdir()) / "unused", dataset, None)
    rng = np.random.default_rng(0)
    everything = [t for v in dataset.recordings for t in bank_texts(texts_of, v)]
    sample = [everything[i] for i in rng.choice(len(everything), args.sentences, replace=False)]
    video_id = args.recording or next(iter(dataset.recordings))
    own = bank_texts(texts_of, video_id)
    chosen = set(rng.choice(len(own), min(args.sentences, len(own)), replace=False).tolist())
    recording = [t for i, t in enumerate(own) if i in chosen]  # the recording's order
    print(f"texts: {len(sample)} of the {len(everything)} distinct texts a bank build of {len(dataset.recordings)} "
          f"recordings encodes (seed 0); builder rows: {len(recording)} of {video_id}'s {len(own)}")
    print(f"torch {torch.__version__}, OMP_WAIT_POLICY {os.environ.get('OMP_WAIT_POLICY', 'unset')}, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; median of {args.repeats}")

    for name in args.encoders:
        measure(name, args, dataset, sample, recording, video_id)


def measure(name: str, args, dataset, sample: list[str], recording: list[str], video_id: str) -> None:
    """Every row of one encoder, at each thread count."""
    import torch

    from spacewalk.benchmarks.spacewalk18.features.bank import FeatureBank

    encoder = make_encoder(name, args.cache_dir, "float32")
    half = make_encoder(name, args.cache_dir, "bfloat16") if args.bf16 else None
    bank = FeatureBank(Path(tempfile.gettempdir()) / "unused", dataset, encoder)
    model = encoder.model

    def reference(texts):
        return model.encode(texts, batch_size=BATCH, normalize_embeddings=True, convert_to_numpy=True,
                            show_progress_bar=False)

    def file_order(texts):
        return [encoder.encode(texts[i:i + 256]) for i in range(0, len(texts), 256)]

    rows = {"reference": lambda: reference(sample), "ours": lambda: encoder.encode(sample),
            "builder reference": lambda: reference(recording),
            "builder": lambda: bank.builder.encode_texts(recording, video_id, progress=False),
            "file order": lambda: file_order(recording)}
    if half is not None:
        rows["ours, bfloat16"] = lambda: half.encode(sample)
    print(f"\n{name} ({encoder.identity})")
    for threads in args.threads:
        torch.set_num_threads(threads)
        encoder.encode(sample[:8])  # warm-up: first-call allocations
        times: dict[str, list[float]] = {row: [] for row in rows}
        for _ in range(args.repeats):
            for row, run in rows.items():
                start = time.perf_counter()
                run()
                times[row].append(time.perf_counter() - start)
        rate = {row: len(recording if row.startswith(("builder", "file")) else sample) / statistics.median(t)
                for row, t in times.items()}
        print(f"  {threads} torch thread(s), load average {os.getloadavg()[0]:.1f}")
        print(f"    sentence-transformers encode (reference) {rate['reference']:8.1f} sentences/s")
        print(f"    ours                                     {rate['ours']:8.1f} sentences/s  "
              f"({rate['ours'] / rate['reference']:.2f} of the reference)")
        print(f"    bank builder, {video_id}                {rate['builder']:8.1f} sentences/s  "
              f"({rate['builder'] / rate['builder reference']:.2f} of the reference on its texts, "
              f"{rate['builder reference']:.1f}; goal 0.90)")
        print(f"    file order, calls of 256 (no length order) {rate['file order']:6.1f} sentences/s  "
              f"({rate['file order'] / rate['builder reference']:.2f} of the reference on its texts)")
        if half is not None:
            cosine = np.sum(half.encode(sample) * encoder.encode(sample), axis=1).min()
            print(f"    ours, bfloat16 (opt-in)                  {rate['ours, bfloat16']:8.1f} sentences/s  "
                  f"({rate['ours, bfloat16'] / rate['ours']:.2f} of float32; smallest cosine to the float32 "
                  f"vector {cosine:.4f})")
    # ours against the reference, row by row: the batching is not in the vectors
    gap = np.abs(encoder.encode(sample) - reference(sample)).max()
    print(f"  largest |ours - reference| over the texts: {gap:.1e}")


if __name__ == "__main__":
    main()
