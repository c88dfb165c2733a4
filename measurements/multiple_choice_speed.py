"""Items per second of the two kinds of multiple-choice backend, through the runner as evaluate.py runs it
(prompts, frame decoding, records written as replies arrive, metrics and files at the end), on Spacewalk-18 QA
over the synthetic data (8 frames per clip unless said otherwise); and what one item whose clip is one hour
long (a Spacewalk-18 QA item's length) costs the transformers backend at its default visual budget.

The OpenAI-compatible backend (spacewalk/multiple_choice/backends/openai_chat.py), frames sent as JPEG images,
at 1 and 8 requests in flight (`concurrency`):
- against a stub chat-completions server on 127.0.0.1 that answers every request after a fixed delay (what a
  server that is never the bottleneck looks like: the harness's own overhead and its requests in flight);
- with --transformers-serve, against a real local server: `transformers serve` (the installed transformers'
  serving extra) running the tiny randomly initialised Qwen2.5-VL of spacewalk/multiple_choice/tiny_models.py
  on CPU (no download), replies limited to --max-tokens new tokens.

--transformers: the transformers backend (spacewalk/multiple_choice/backends/transformers_vlm.py) built from
conf/model/mc_qwen2_5_vl.yaml as `model=mc_qwen2_5_vl` builds it, on that tiny Qwen2.5-VL on the CPU, at runner
chunks 1 and 8 (`multiple_choice.chunk_size`, the backend's batch), `model.num_frames=8` (--frames) and
`model.max_new_tokens` = --max-tokens, the same items.

--one-hour: in a fresh subprocess, one Spacewalk-18 QA item whose clip is 3600 s (a synthetic 100-minute
recording, 64x64 at 2 fps) through the runner with the same backend at the config's defaults (Qwen's frame rule:
2 fps, at most 768 frames; the visual budget as the config sets it): the process's peak RSS and what reached the
model (frames, frame size, visual tokens). Then the same clip at a real recording's 1280x720 with a real
Qwen2.5-VL-7B-Instruct's processor bounds, counted (not run): visual tokens, host tensors, KV cache
(`qwen_video_cost`), at the config's budget and at the field's settings.

    python measurements/multiple_choice_speed.py [--items 32] [--delay 0.25] [--runs 3] [--transformers-serve]
        [--transformers] [--one-hour]

Each configuration answers the same items into a fresh run directory, --runs times (interleaved); the table
gives the median items per second (items / wall time of runner.run), the speed-up of the medians over the
first setting (1 request in flight, chunk 1) and the runs' range.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from spacewalk.multiple_choice import runner
from spacewalk.multiple_choice.backends.openai_chat import OpenAIChatBackend
from spacewalk.multiple_choice.budget import VisualBudget, fit

REPO = Path(__file__).resolve().parents[1]
MODEL_CONFIG = "mc_qwen2_5_vl"  # conf/model/<name>.yaml: the transformers backend as evaluate.py builds it

# Qwen2.5-VL-7B-Instruct as published (the paper's model): preprocessor_config.json's per-frame bounds, min_pixels
# 3136 (4 tokens) and max_pixels 12845056 (16384 tokens), which transformers also gives the video processor of a
# checkpoint without a video_preprocessor_config.json; config.json's language model: 28 layers, 4 key-value heads
# of 128, MLP width 18944, 128000 positions
QWEN_7B_BOUNDS = (3136, 12845056)
QWEN_7B_KV_BYTES = 2 * 28 * 4 * 128 * 2  # keys and values of 28 layers, 4 heads x 128, bf16: per token
QWEN_7B_MLP_BYTES = 18944 * 2  # one MLP projection's output (gate or up) per token, bf16
QWEN_7B_POSITIONS = 128000
FACTOR, TEMPORAL = 28, 2  # Qwen2.5-VL: 14-pixel patches merged 2x2 (one token per 28x28), frames in pairs

# qwen-vl-utils 0.0.10 (QwenLM/Qwen2.5-VL, qwen-vl-utils/src/qwen_vl_utils/vision_process.py, the reference
# preprocessing of Qwen2.5-VL's release), video defaults: each frame within [VIDEO_MIN_PIXELS, VIDEO_MAX_PIXELS],
# and the clip within VIDEO_TOTAL_PIXELS per pair of frames (90% of a 128000-token context)
VIDEO_MIN_PIXELS, VIDEO_MAX_PIXELS, VIDEO_TOTAL_PIXELS = 128 * 28 * 28, 768 * 28 * 28, int(128000 * 28 * 28 * 0.9)

# a Spacewalk-18 QA item's clip (3600 s, as every item of the release's test.json) in a synthetic recording
HOUR_SYNTHETIC = dict(n_train=0, n_val=0, n_test=1, minutes=[100, 100], steps_per_video=[3, 5], samples_per_video=4,
                      retrieval_samples_per_video=4, questions_per_video=1, qa_window_seconds=3600.0)


class DelayStub:
    """Answers "Answer: A" to every chat completion after `delay` seconds, each request in its own thread."""

    def __init__(self, delay: float):
        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                self.rfile.read(int(self.headers["Content-Length"]))
                time.sleep(delay)
                payload = json.dumps({"choices": [{"message": {"role": "assistant", "content": "Answer: A"}}]})
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(payload.encode())

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def transformers_serve(scratch: Path) -> tuple[subprocess.Popen, str, str]:
    """(process, base URL, model name) of `transformers serve` with the tiny Qwen2.5-VL, once it answers."""
    from spacewalk.multiple_choice import tiny_models

    folder = tiny_models.write(scratch / "tiny", ["qwen2_5_vl"])["qwen2_5_vl"]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = open(scratch / "serve.log", "w")
    process = subprocess.Popen([sys.executable, "-c", "from transformers.cli.transformers import main; main()",
                                "serve", str(folder), "--host", "127.0.0.1", "--port", str(port), "--device", "cpu"],
                               stdout=log, stderr=subprocess.STDOUT, env=os.environ | {"HF_HUB_OFFLINE": "1"})
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and process.poll() is None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2):
                return process, f"http://127.0.0.1:{port}/v1", str(folder)
        except OSError:
            time.sleep(0.5)
    process.kill()
    raise SystemExit(f"transformers serve did not start; see {scratch / 'serve.log'}")


def model_backend(folder: Path, config: str = MODEL_CONFIG, **overrides):
    """The backend evaluate.py builds for `model=<config> model.model=<folder> model.device=cpu` and `overrides`
    (each a `model.<key>=<value>`)."""
    import hydra
    from omegaconf import OmegaConf

    cfg = OmegaConf.merge(OmegaConf.load(REPO / "conf" / "model" / f"{config}.yaml"),
                          {"model": str(folder), "device": "cpu", **overrides})
    return hydra.utils.instantiate(cfg, _convert_="all")


def items_per_second(task, backend, run_dir: Path, chunk_size: int = 8) -> float:
    """Items / wall time of one runner.run of every item into `run_dir` (fresh)."""
    start = time.perf_counter()
    metrics = runner.run(task, backend, run_dir, chunk_size=chunk_size, progress=False)
    seconds = time.perf_counter() - start
    assert metrics["count"] == len(task.items())
    return len(task.items()) / seconds


def served_backend(base_url: str, model: str, concurrency: int, max_tokens: int) -> OpenAIChatBackend:
    os.environ["SPACEWALK_BENCH_URL"] = base_url
    return OpenAIChatBackend(model, base_url_env="SPACEWALK_BENCH_URL", api_key_env="SPACEWALK_BENCH_NO_KEY",
                             num_frames=8, requests_per_minute=None, max_tokens=max_tokens, concurrency=concurrency)


def qwen_video_cost(frames: int, height: int, width: int, bounds: tuple[int, int] = QWEN_7B_BOUNDS,
                    budget: VisualBudget | None = None) -> dict:
    """What a clip of `frames` sampled frames of height x width costs Qwen2.5-VL through the transformers backend:
    the frames and size the budget's rule plans (spacewalk/multiple_choice/budget.py `fit`, smart_resize within the
    budget's bounds, the processor's `bounds` where it has none, as the backend does), its visual tokens (one per
    28x28 area of a pair of frames; an odd count is padded with a copy of the last frame), the host memory of the
    decoded uint8 frames and of the processor's float32 pixel_values_videos, and, on Qwen2.5-VL-7B, the bf16 KV
    cache of those tokens and one MLP projection's output over them (the prefill's largest activation); `budget`
    None: none (null in the config)."""
    from transformers.models.qwen2_vl.image_processing_qwen2_vl import smart_resize

    low, high = bounds

    def resize(h: int, w: int, lo: int | None, hi: int | None) -> tuple[int, int]:
        return smart_resize(h, w, FACTOR, low if lo is None else lo, high if hi is None else hi)

    (plan,) = fit([("clip", frames, height, width)], budget or VisualBudget(), resize)
    steps = -(-plan.frames // TEMPORAL)
    tokens = steps * (plan.height // FACTOR) * (plan.width // FACTOR)
    return {"frames": plan.frames, "size": [plan.width, plan.height], "visual_tokens": tokens,
            "decoded_bytes": frames * height * width * 3,
            "pixel_values_bytes": steps * TEMPORAL * plan.height * plan.width * 3 * 4,
            "kv_cache_bytes": tokens * QWEN_7B_KV_BYTES, "mlp_output_bytes": tokens * QWEN_7B_MLP_BYTES}


def qwen_vl_utils_max_pixels(nframes: int, min_pixels: int = VIDEO_MIN_PIXELS,
                             total_pixels: int = VIDEO_TOTAL_PIXELS) -> int:
    """qwen-vl-utils 0.0.10's per-frame cap for a clip of `nframes` sampled frames: VIDEO_MAX_PIXELS, lowered to
    the clip's share of `total_pixels` (counted per pair of frames), never below 1.05 x `min_pixels`."""
    return max(min(VIDEO_MAX_PIXELS, total_pixels / nframes * TEMPORAL), int(min_pixels * 1.05))


def config_budget(config: str = MODEL_CONFIG) -> VisualBudget:
    from omegaconf import OmegaConf

    cfg = OmegaConf.load(REPO / "conf" / "model" / f"{config}.yaml")
    return VisualBudget(cfg.get("max_pixels"), cfg.get("min_pixels"), cfg.get("max_total_pixels"))


def one_hour_costs(frames: int = 768, height: int = 720, width: int = 1280,
                   config: str = MODEL_CONFIG) -> list[tuple[str, dict]]:
    """A one-hour clip's `frames` (Qwen's rule: 2 fps, at most 768) at height x width on Qwen2.5-VL-7B: at the
    config's budget (max_pixels, min_pixels, max_total_pixels), with no budget (the 7B's processor bounds alone,
    or those of transformers' Qwen2VLVideoProcessor class, for a checkpoint with a video processor config of its
    own), and as qwen-vl-utils and lmms-eval size it."""
    qvu = qwen_vl_utils_max_pixels(frames)
    # lmms-eval's qwen2_5_vl (min_pixels 256*28*28, max_pixels 1605632, max_num_frames 32): qwen-vl-utils sizes the
    # 768 frames (its cap wins over the larger max_pixels asked for), then 32 are kept plus the last one
    lmms_min = 256 * 28 * 28
    lmms_max = min(1605632, qwen_vl_utils_max_pixels(frames, lmms_min))
    budget = config_budget(config)
    return [
        (f"{config}.yaml: {budget.max_pixels}, {budget.min_pixels}, {budget.max_total_pixels}",
         qwen_video_cost(frames, height, width, budget=budget)),
        ("no budget: the 7B processor's bounds", qwen_video_cost(frames, height, width)),
        # Qwen2VLVideoProcessor's class bounds are qwen-vl-utils' per-frame ones, without its total
        ("no budget: transformers' video bounds",
         qwen_video_cost(frames, height, width, (VIDEO_MIN_PIXELS, VIDEO_MAX_PIXELS))),
        ("qwen-vl-utils 0.0.10 defaults", qwen_video_cost(frames, height, width, (VIDEO_MIN_PIXELS, qvu))),
        ("lmms-eval qwen2_5_vl defaults", qwen_video_cost(33, height, width, (lmms_min, lmms_max))),
    ]


def one_hour_child(scratch: Path, config: str, max_tokens: int) -> None:
    """In a fresh process: the one-hour item through the runner (chunk 1) with the backend at the config's
    defaults; prints one JSON line: peak RSS before and after the item, its meta (frames, size, visual tokens)."""
    import av

    from spacewalk.benchmarks.spacewalk18.questions.question_answering import question_answering_task

    task = question_answering_task(None, scratch / "hour", 0, HOUR_SYNTHETIC, limit=1)
    (item,) = task.items()
    backend = model_backend(scratch / "tiny" / "qwen2_5_vl", config, max_new_tokens=max_tokens)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    runner.run(task, backend, scratch / "runs" / "one-hour", chunk_size=1, progress=False)
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    (record,) = runner.read_records(scratch / "runs" / "one-hour" / runner.RECORDS)
    with av.open(str(item.visual.video)) as container:
        stream = container.streams.video[0]
        source = [stream.codec_context.width, stream.codec_context.height]
    print(json.dumps({"clip_seconds": item.visual.end - item.visual.start, "source_size": source,
                      "rss_before_mb": before / 1024, "rss_peak_mb": peak / 1024, "seconds": seconds,
                      "meta": record.meta}))


def one_hour(scratch: Path, config: str, max_tokens: int) -> None:
    from spacewalk.benchmarks.spacewalk18.questions.question_answering import question_answering_task

    question_answering_task(None, scratch / "hour", 0, HOUR_SYNTHETIC, limit=1)  # generated here, not counted
    done = subprocess.run([sys.executable, __file__, "--one-hour-child", "--scratch", str(scratch),
                           "--model-config", config, "--max-tokens", str(max_tokens)],
                          capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"the one-hour item failed:\n{done.stderr[-3000:]}")
    got = json.loads(done.stdout.strip().splitlines()[-1])
    (visual,) = got["meta"]["visuals"]
    w, h = got["source_size"]
    print(f"\none-hour item ({got['clip_seconds']:.0f} s clip of a synthetic {w}x{h} 2 fps recording), tiny "
          f"Qwen2.5-VL on CPU, model={config} at its defaults, fresh process: {visual['frames']} frames of "
          f"{visual['size'][0]}x{visual['size'][1]}, {got['meta']['visual_tokens']} visual tokens, "
          f"{got['seconds']:.1f} s; peak RSS {got['rss_before_mb']:.0f} MB before the item, "
          f"{got['rss_peak_mb']:.0f} MB after")
    print(f"\nthe same clip at 1280x720 ({visual['frames']} frames) on Qwen2.5-VL-7B-Instruct, counted "
          f"(its context: {QWEN_7B_POSITIONS} positions):")
    print(f"{'setting':<44} {'frames':>6} {'size':>9} {'visual tokens':>13} {'x context':>9} {'decoded GB':>10} "
          f"{'pixels GB':>9} {'KV GB':>6} {'MLP out GB':>10}")
    for name, cost in one_hour_costs(visual["frames"], config=config):
        print(f"{name:<44} {cost['frames']:>6} {'x'.join(map(str, cost['size'])):>9} {cost['visual_tokens']:>13} "
              f"{cost['visual_tokens'] / QWEN_7B_POSITIONS:>9.2f} {cost['decoded_bytes'] / 1e9:>10.2f} "
              f"{cost['pixel_values_bytes'] / 1e9:>9.2f} {cost['kv_cache_bytes'] / 1e9:>6.1f} "
              f"{cost['mlp_output_bytes'] / 1e9:>10.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=32, help="questions (8 per synthetic test recording)")
    parser.add_argument("--delay", type=float, default=0.25, help="the stub's reply delay in seconds")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--runs", type=int, default=3, help="runs of each setting (interleaved); the median is shown")
    parser.add_argument("--no-stub", action="store_true", help="leave out the stub server")
    parser.add_argument("--transformers-serve", action="store_true",
                        help="also against `transformers serve` with the tiny Qwen2.5-VL on CPU")
    parser.add_argument("--transformers", action="store_true",
                        help="also the transformers backend (model=mc_qwen2_5_vl) with the tiny Qwen2.5-VL on CPU")
    parser.add_argument("--chunks", type=int, nargs="+", default=[1, 8], help="the runner's chunks (the batch)")
    parser.add_argument("--frames", type=int, default=8, help="model.num_frames of the transformers backend")
    parser.add_argument("--one-hour", action="store_true",
                        help="also one item with a one-hour clip at the config's defaults: peak RSS and tensors")
    parser.add_argument("--one-hour-child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--model-config", default=MODEL_CONFIG, help="conf/model/<name>.yaml of --transformers")
    parser.add_argument("--max-tokens", type=int, default=8, help="the models' reply limit")
    parser.add_argument("--scratch", type=Path, help="default: a temporary folder")
    args = parser.parse_args()
    if args.one_hour_child:
        one_hour_child(args.scratch, args.model_config, args.max_tokens)
        return

    from spacewalk.benchmarks.spacewalk18.questions.question_answering import question_answering_task
    from spacewalk.multiple_choice import tiny_models

    with tempfile.TemporaryDirectory() as tmp:
        scratch = args.scratch or Path(tmp)
        n_test = -(-args.items // 8)
        synthetic = dict(n_train=1, n_val=1, n_test=n_test, minutes=[4, 5], steps_per_video=[3, 5],
                         samples_per_video=40, retrieval_samples_per_video=4, questions_per_video=8)
        task = question_answering_task(None, scratch / "synthetic", 0, synthetic, limit=args.items)
        if args.transformers or args.one_hour:
            tiny_models.write(scratch / "tiny", ["qwen2_5_vl"])
        print(f"Spacewalk-18 QA, synthetic: {len(task.items())} items; median of {args.runs} runs; load average "
              f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
        # (group, setting, label, answer every item into a fresh run directory -> items per second)
        settings = []
        stub = process = None
        servers = []
        if not args.no_stub:
            stub = DelayStub(args.delay)
            servers.append((f"stub, {args.delay:g} s a reply", stub.url, "stub"))
        if args.transformers_serve:
            process, url, model = transformers_serve(scratch)
            servers.append((f"transformers serve, tiny Qwen2.5-VL, CPU, {args.max_tokens} tokens", url, model))
        try:
            for name, url, model in servers:
                for concurrency in args.concurrency:
                    backend = served_backend(url, model, concurrency, args.max_tokens)
                    settings.append((name, f"{concurrency} in flight",
                                     lambda d, b=backend: items_per_second(task, b, d)))
            if args.transformers:
                import torch

                backend = model_backend(scratch / "tiny" / "qwen2_5_vl", args.model_config,
                                        num_frames=args.frames, max_new_tokens=args.max_tokens)
                name = (f"{args.model_config}, tiny Qwen2.5-VL, CPU, {torch.get_num_threads()} torch thread(s), "
                        f"{args.frames} frames, {args.max_tokens} tokens")
                for chunk in args.chunks:
                    settings.append((name, f"chunk {chunk}",
                                     lambda d, c=chunk, b=backend: items_per_second(task, b, d, chunk_size=c)))
            speeds: dict[int, list[float]] = {i: [] for i in range(len(settings))}
            for run in range(args.runs):
                for i, (_, _, measure) in enumerate(settings):
                    speeds[i].append(measure(scratch / "runs" / f"setting{i}-run{run}"))
            print(f"{'backend':<72} {'setting':>11} {'items/s':>8} {'x first':>7} {'runs, items/s':>14}")
            first: dict[str, float] = {}
            for i, (name, setting, _) in enumerate(settings):
                median = statistics.median(speeds[i])
                first.setdefault(name, median)
                spread = f"{min(speeds[i]):.2f}-{max(speeds[i]):.2f}"
                print(f"{name:<72} {setting:>11} {median:>8.2f} {median / first[name]:>7.2f} {spread:>14}", flush=True)
        finally:
            if stub is not None:
                stub.close()
            if process is not None:
                process.terminate()
                process.wait(timeout=30)
        if args.one_hour:
            one_hour(scratch, args.model_config, args.max_tokens)
        print(f"load average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
