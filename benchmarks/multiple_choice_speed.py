"""Items per second of the OpenAI-compatible backend (spacewalk/multiple_choice/backends/openai_chat.py) at 1
and 8 requests in flight (`concurrency`), through the runner as evaluate.py runs it (prompts, frame decoding,
JPEG encoding, records written as replies arrive, metrics and files at the end), on Spacewalk-18 QA over the
synthetic data (8 frames per clip, as images):

- against a stub chat-completions server on 127.0.0.1 that answers every request after a fixed delay (what a
  server that is never the bottleneck looks like: the harness's own overhead and its requests in flight);
- with --transformers-serve, against a real local server: `transformers serve` (the installed transformers'
  serving extra) running the tiny randomly initialised Qwen2.5-VL of spacewalk/multiple_choice/tiny_models.py
  on CPU (no download), replies limited to --max-tokens new tokens.

    python benchmarks/multiple_choice_speed.py [--items 32] [--delay 0.25] [--transformers-serve]

Each configuration answers the same items into a fresh run directory, once; the table gives items per second
(items / wall time of runner.run) and the speed-up over one request in flight.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
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


def items_per_second(task, base_url: str, model: str, concurrency: int, run_dir: Path, max_tokens: int) -> float:
    os.environ["SPACEWALK_BENCH_URL"] = base_url
    backend = OpenAIChatBackend(model, base_url_env="SPACEWALK_BENCH_URL", api_key_env="SPACEWALK_BENCH_NO_KEY",
                                num_frames=8, requests_per_minute=None, max_tokens=max_tokens,
                                concurrency=concurrency)
    start = time.perf_counter()
    metrics = runner.run(task, backend, run_dir, progress=False)
    seconds = time.perf_counter() - start
    assert metrics["count"] == len(task.items())
    return len(task.items()) / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=32, help="questions (8 per synthetic test recording)")
    parser.add_argument("--delay", type=float, default=0.25, help="the stub's reply delay in seconds")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--transformers-serve", action="store_true",
                        help="also against `transformers serve` with the tiny Qwen2.5-VL on CPU")
    parser.add_argument("--max-tokens", type=int, default=8, help="the served model's reply limit")
    parser.add_argument("--scratch", type=Path, help="default: a temporary folder")
    args = parser.parse_args()

    from spacewalk.spacewalk18.question_answering import question_answering_task

    with tempfile.TemporaryDirectory() as tmp:
        scratch = args.scratch or Path(tmp)
        n_test = -(-args.items // 8)
        synthetic = dict(n_train=1, n_val=1, n_test=n_test, minutes=[4, 5], steps_per_video=[3, 5],
                         samples_per_video=40, retrieval_samples_per_video=4, questions_per_video=8)
        task = question_answering_task(None, scratch / "synthetic", 0, synthetic, max_items=args.items)
        print(f"Spacewalk-18 QA, synthetic: {len(task.items())} items, 8 frames each as JPEG images")
        servers = []
        stub = DelayStub(args.delay)
        servers.append((f"stub, {args.delay:g} s a reply", stub.url, "stub"))
        process = None
        if args.transformers_serve:
            process, url, model = transformers_serve(scratch)
            servers.append((f"transformers serve, tiny Qwen2.5-VL, CPU, {args.max_tokens} tokens", url, model))
        try:
            print(f"{'server':<52} {'in flight':>9} {'items/s':>8} {'x one':>6}")
            for name, url, model in servers:
                first = None
                for concurrency in args.concurrency:
                    run_dir = scratch / "runs" / f"{model.replace('/', '_')}-{concurrency}"
                    speed = items_per_second(task, url, model, concurrency, run_dir, args.max_tokens)
                    first = first or speed
                    print(f"{name:<52} {concurrency:>9} {speed:>8.2f} {speed / first:>6.1f}", flush=True)
        finally:
            stub.close()
            if process is not None:
                process.terminate()
                process.wait(timeout=30)


if __name__ == "__main__":
    main()
