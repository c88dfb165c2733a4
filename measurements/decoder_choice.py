"""Which decoder: decord, PyAV (our readers, spacewalk/media/video.py) and torchcodec on the feature bank's access
pattern and on all-layer's, frames per second, one run, one core.

    python measurements/decoder_choice.py [--seconds 120] [--video PATH] [--decoders decord pyav torchcodec]

- bank: every 1 s frame of the whole video (dense 1 fps), in batches of 384 frames (FeatureBank's), front to
  back, each batch one call;
- all-layer: 16 windows of 60 s at random places, 8 frames spread over each (datamodules/all_layer.py's
  sparse sampling: every frame a seek), one call per window, windows in random order.

Every decoder resizes at decode to the bank's 224 short side (1280x720 -> 398x224), bilinear; one reader is
opened per pattern and its open time (decord and torchcodec's exact mode index the file) is printed apart.
The video is decode_speed.py write_720p's 1280x720 29.97 fps H.264 (x264 veryfast, a keyframe every 250 frames at
most), written for the run, or `--video`. The process is pinned to one core, and torchcodec gets one FFmpeg
thread (its default); decord and PyAV use their own defaults, which on one core is one thread.

torchcodec needs FFmpeg's shared libraries from the system (it ships none): on Debian 12
`apt-get install libavcodec59 libavformat59 libavutil57 libswscale6 libswresample4 libavdevice59
libavfilter8` (FFmpeg 5.1) was enough; without them its import fails to load libtorchcodec_core*.so.

Third-party packages it imports: numpy, av (PyAV), decord, torchcodec (and torch through it), each only when
its decoder is asked for (av also to write the video).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.decode_speed import frame_size, write_720p  # noqa: E402

from spacewalk.media.video import dense_timestamps, open_video, sparse_timestamps  # noqa: E402

FPS = 30000 / 1001
SIZE = (224, 398)  # a 720p frame at the bank's 224 short side


class TorchCodecReader:
    """torchcodec's VideoDecoder behind our readers' frames_at (frame = round(t * fps), sorted, unique)."""

    def __init__(self, path: Path, size: tuple[int, int], device: str = "cpu"):
        from torchcodec.decoders import VideoDecoder
        from torchcodec.transforms import Resize

        self._decoder = VideoDecoder(str(path), dimension_order="NHWC", transforms=[Resize(size)], device=device)
        meta = self._decoder.metadata
        self.fps, self.num_frames = meta.average_fps, meta.num_frames

    def frames_at(self, timestamps) -> np.ndarray:
        index = np.clip(np.rint(np.asarray(timestamps) * self.fps).astype(np.int64), 0, self.num_frames - 1)
        unique, inverse = np.unique(index, return_inverse=True)
        return self._decoder.get_frames_at(unique.tolist()).data.cpu().numpy()[inverse]

    def close(self) -> None:
        self._decoder = None


def open_reader(name: str, path: Path):
    return TorchCodecReader(path, SIZE) if name == "torchcodec" else open_video(path, name, SIZE)


def bank_requests(duration: float) -> list[np.ndarray]:
    t = dense_timestamps(0.0, duration - 1 / FPS)
    return [t[i:i + 384] for i in range(0, len(t), 384)]


def all_layer_requests(duration: float, rng: np.random.Generator) -> list[np.ndarray]:
    window = min(60.0, duration / 4)  # 60 s, shorter only on a short test video
    starts = rng.uniform(0, duration - window, 16)
    return [sparse_timestamps(s, s + window, 8) for s in starts]


def measure(name: str, path: Path, requests: list[np.ndarray]) -> tuple[float, float]:
    start = time.perf_counter()
    reader = open_reader(name, path)
    opened = time.perf_counter()
    n = 0
    for r in requests:
        n += len(reader.frames_at(r))
    done = time.perf_counter()
    reader.close()
    return opened - start, n / (done - opened)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--video", type=Path, help="read this video (written there first if missing)")
    parser.add_argument("--decoders", nargs="+", default=["decord", "pyav", "torchcodec"],
                        choices=("decord", "pyav", "torchcodec"))
    args = parser.parse_args()
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    with tempfile.TemporaryDirectory() as tmp:
        path = args.video or Path(tmp) / "bench720p.mp4"
        if not path.is_file():
            write_720p(path, args.seconds)
        with open_video(path, "pyav") as reader:
            duration = reader.duration
        mbps = path.stat().st_size * 8 / 1e6 / duration
        print(f"{path.name}: {duration:.0f} s of {frame_size(path)} at 29.97 fps, {mbps:.1f} Mbit/s; decoded to "
              f"{SIZE[1]}x{SIZE[0]}; 1 core; load average {os.getloadavg()[0]:.1f}; one run\n")
        print(f"{'decoder':11} {'pattern':10} {'open s':>7} {'frames/s':>9}")
        for name in args.decoders:
            open_reader(name, path).close()  # untimed: the library's first load (torchcodec imports torch)
            for pattern, requests in (("bank", bank_requests(duration)),
                                      ("all-layer", all_layer_requests(duration, np.random.default_rng(0)))):
                opened, fps = measure(name, path, requests)
                print(f"{name:11} {pattern:10} {opened:7.2f} {fps:9.1f}")


if __name__ == "__main__":
    main()
