"""Feature-bank build speed: decode alone, encode alone, and the builder that decodes ahead of the encoder
(spacewalk/media/frame_prefetch.py), in frames per second at the bank's 1 fps, one run each.

    python measurements/bank_build_speed.py [--seconds 240] [--backend decord] [--decoders 1 [4 ...]] [--prefetch 2]
        [--device cpu|cuda] [--autocast none|bf16|fp16] [--video PATH] [--serial] [--frames-per-batch N]
        [--alone-frames N]

The video: a 1280x720 29.97 fps H.264 file written for the run (measurements/decode_speed.py
write_720p: x264 veryfast, a keyframe every 250 frames at most), `--seconds` long; `--video` reads one of
yours instead (or keeps the written one there for the next run). The encoder: open_clip ViT-B-32, randomly
initialised (seed 0, no weights downloaded), frames resized at decode to a 224 short side as the bank does
(224 x 398), each frame encoded alone (the bank's open_clip path: per-frame features, cells derived).

- decode: the bank's reader (`--backend`) on every 1 s frame, in the bank's batches of 384 frames, in this
  thread, pinned to one core;
- encode: the same frames (decoded beforehand) through the encoder, one torch thread, pinned to one core
  (`--device cuda`: on the GPU, its host side on that core);
- builder: the bank's loop (batches of 384 frames, decoded by `DecodeAhead`, each frame encoded) with the
  encoder pinned to core 0 and N decoder threads on the next N cores, for each N of `--decoders`; printed with
  its ratio to min(N x decode, encode): the goal is 0.90 or more;
- decode alone unpinned, on all the process's cores, with whatever threads the library starts (printed where
  the process has more than one core);
- `--serial`: also today's serial builder (`--prefetch 0`: decode a batch, then encode it, in turn), unpinned
  on all the process's cores as it runs today.

The builder loop is RecordingBuilder.video_arrays' video part (features/build.py) without the text encoder and the
.npy writes (a few ms per batch): the same `frame_batches`, `DecodeAhead` and `encode` calls. Memory: the decoded
frames are kept for the encode-alone run (0.27 MB a frame: 240 s = 64 MB).

Third-party packages it imports: numpy, torch, open_clip_torch (and through it torchvision, pillow, ftfy,
regex, timm, huggingface_hub, safetensors), av (PyAV: writing the video, and `--backend pyav`), tqdm (through
spacewalk), decord only with `--backend decord`.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.decode_speed import frame_size, write_720p  # noqa: E402

from spacewalk.benchmarks.spacewalk18.features.build import frame_batches  # noqa: E402
from spacewalk.encoders.openclip import open_clip_video_encoder  # noqa: E402
from spacewalk.media.frame_prefetch import DecodeAhead  # noqa: E402
from spacewalk.media.video import dense_timestamps, open_video  # noqa: E402

FRAMES_PER_BATCH = 384  # FeatureBank's default
SIZE = (224, 398)  # a 720p frame at the bank's 224 short side
CELL_SECONDS = 12.0


def pin(cores: set[int]) -> None:
    """This thread (and the threads it starts from now on) onto `cores`."""
    os.sched_setaffinity(0, cores)


def requests_of(duration: float, frames_per_batch: int) -> list[np.ndarray]:
    """The bank's batches of cell frames: 1 fps from 0, 12 s cells, at most `frames_per_batch` a batch."""
    cells = [dense_timestamps(j * CELL_SECONDS, min((j + 1) * CELL_SECONDS, duration))
             for j in range(int(np.ceil(duration / CELL_SECONDS)))]
    cells = [c for c in cells if len(c)]
    return [np.minimum(np.concatenate(cells[a:b]), duration) for a, b in frame_batches([len(c) for c in cells],
                                                                                    frames_per_batch)]


def encode(encoder, frames: np.ndarray, amp) -> np.ndarray:
    with amp():
        out = encoder.encode([f[None] for f in frames])  # the bank's open_clip path: each frame alone
    if encoder.device.type == "cuda":
        torch.cuda.synchronize()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=240.0, help="length of the written video")
    parser.add_argument("--video", type=Path, help="read this video (written there first if missing)")
    parser.add_argument("--backend", default="decord", choices=("decord", "pyav"))
    parser.add_argument("--decode-device", default="cpu",
                        help="cuda: decord decodes on the GPU (decord built with CUDA only)")
    parser.add_argument("--decoders", type=int, nargs="+", default=[1], help="builder runs, one per count")
    parser.add_argument("--prefetch", type=int, default=2, help="batches each decoder decodes ahead")
    parser.add_argument("--device", default="cpu", help="the encoder's device: cpu or cuda")
    parser.add_argument("--autocast", default="none", choices=("none", "bf16", "fp16"),
                        help="encoder under autocast (cuda)")
    parser.add_argument("--batch-size", type=int, default=None,
                        help="frames per encoder forward (default: 64 on cpu, 256 on cuda)")
    parser.add_argument("--frames-per-batch", type=int, default=None,
                        help="frames a batch (default: the bank's 384, less on a video shorter than 20 batches)")
    parser.add_argument("--alone-frames", type=int, default=None,
                        help="decode and encode alone on the first batches holding this many frames (default: all)")
    parser.add_argument("--serial", action="store_true", help="also time the serial builder (prefetch 0)")
    args = parser.parse_args()

    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 1 + max(args.decoders):
        sys.exit(f"--decoders {max(args.decoders)} needs {1 + max(args.decoders)} cores, this process has {len(cores)}")
    encoder_core = {cores[0]}
    torch.set_num_threads(1)
    dtype = {"none": None, "bf16": torch.bfloat16, "fp16": torch.float16}[args.autocast]
    device = torch.device(args.device)

    def amp():
        return torch.autocast(device.type, dtype=dtype) if dtype else contextlib.nullcontext()

    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = args.video or Path(tmp) / "bench720p.mp4"
        if not path.is_file():
            start = time.perf_counter()
            write_720p(path, args.seconds)
            print(f"wrote {path} in {time.perf_counter() - start:.0f} s")
        with open_video(path, args.backend, SIZE, device=args.decode_device) as reader:
            duration = reader.duration
        # The first batch's decode and the last one's encode cannot overlap: a short video gets smaller batches
        # (at least 20) so that, as on an 8-hour recording (75 batches of 384), the ends weigh little.
        per_batch = args.frames_per_batch or max(CELL_SECONDS, min(FRAMES_PER_BATCH, duration // 20))
        requests = requests_of(duration, int(per_batch))
        n = sum(len(r) for r in requests)
        batch = args.batch_size or (256 if device.type == "cuda" else 64)
        encoder = open_clip_video_encoder("ViT-B-32", random_init=True, init_seed=0, device=args.device,
                                          batch_size=batch)
        mbps = path.stat().st_size * 8 / 1e6 / duration
        print(f"{path.name}: {duration:.0f} s of {frame_size(path)} at 29.97 fps, {mbps:.1f} Mbit/s -> {n} frames "
              f"at 1 fps, {SIZE[1]}x{SIZE[0]}; "
              f"backend {args.backend}; encoder ViT-B-32 (random) on {device}, autocast {args.autocast}, "
              f"{batch} frames a forward, {len(requests)} batches of <= {int(per_batch)} frames; "
              f"torch threads {torch.get_num_threads()}; cores {cores}; "
              f"load average {os.getloadavg()[0]:.1f}")

        alone = requests  # the first batches: enough for a rate, where a long video makes the builders' runs long
        if args.alone_frames:
            ends = np.cumsum([len(r) for r in requests])
            alone = requests[:int(np.searchsorted(ends, args.alone_frames)) + 1]
        n_alone = sum(len(r) for r in alone)
        if n_alone < n:
            print(f"decode and encode alone: the first {n_alone} frames")
        # decode alone, one core
        pin(encoder_core)
        start = time.perf_counter()
        with open_video(path, args.backend, SIZE, device=args.decode_device) as reader:
            frames = np.concatenate([reader.frames_at(r) for r in alone])
        decode_fps = n_alone / (time.perf_counter() - start)
        print(f"decode alone ({args.backend}, 1 core)            {decode_fps:8.1f} frames/s")
        if len(cores) > 1:  # today's builder runs unpinned: whatever threads the library starts count
            pin(set(cores))
            start = time.perf_counter()
            with open_video(path, args.backend, SIZE, device=args.decode_device) as reader:
                for r in alone:
                    reader.frames_at(r)
            print(f"decode alone ({args.backend}, its own threads on {len(cores)} cores) "
                  f"{n_alone / (time.perf_counter() - start):8.1f} frames/s")
            pin(encoder_core)

        # encode alone, one torch thread
        encode(encoder, frames[:8], amp)  # warm-up: first-call allocations, cuDNN/cuBLAS setup
        start = time.perf_counter()
        for r in range(0, n_alone, int(per_batch)):
            encode(encoder, frames[r:r + int(per_batch)], amp)
        encode_fps = n_alone / (time.perf_counter() - start)
        print(f"encode alone (1 torch thread, {device.type})           {encode_fps:8.1f} frames/s")
        del frames

        def open_reader():
            return open_video(path, args.backend, SIZE, device=args.decode_device)

        def builder(prefetch: int, decoders: int) -> float:
            # the decoders start on their cores (the serial builder, as today, runs unpinned on all of them) ...
            pin(set(cores[1:1 + decoders]) if prefetch else set(cores))
            start = time.perf_counter()
            with open_reader() as reader, \
                    DecodeAhead(requests, open_reader, path=path, decoders=decoders, ahead=prefetch,
                                reader=reader) as decoded:
                if prefetch:
                    pin(encoder_core)  # ... and the encoder stays on its own
                for frames in decoded:
                    encode(encoder, frames, amp)
            return n / (time.perf_counter() - start)

        slower = min(decode_fps, encode_fps)
        if args.serial:
            fps = builder(0, 1)
            print(f"serial builder (today's: decode, then encode, on all {len(cores)} cores) {fps:8.1f} frames/s  "
                  f"({fps / slower:.2f} of min(decode, encode); 1 / (1/decode + 1/encode) = "
                  f"{1 / (1 / decode_fps + 1 / encode_fps):.1f})")
        for decoders in args.decoders:
            fps = builder(args.prefetch, decoders)
            slower = min(decoders * decode_fps, encode_fps)
            print(f"builder ({decoders} decoder(s), prefetch {args.prefetch}) beside the encoder "
                  f"{fps:8.1f} frames/s  ({fps / slower:.2f} of min({decoders} x decode, encode) = {slower:.1f}; "
                  "goal 0.90)")


if __name__ == "__main__":
    main()
