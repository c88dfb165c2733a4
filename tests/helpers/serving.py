"""`transformers serve` (the dev extra's) on 127.0.0.1 for the tests of the OpenAI-compatible backend: a free port,
the server started on a checkpoint folder and waited for until its health check answers, stopped at the end. The
server runs in the environment run_command gives the project's commands, so that it is forked from the launcher that
has already imported torch and transformers (helpers/commands.py's python_for) rather than importing them again."""

from __future__ import annotations

import json
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from helpers.commands import command_environment, python_for

START_SECONDS = 300  # importing torch and transformers and loading the model, on a loaded CPU machine
POLL_SECONDS = 0.2  # between health checks while the server starts: a check, not a wait for a guessed time


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def transformers_serve(folder: Path) -> Iterator[str]:
    """The server's base URL (http://127.0.0.1:<port>) while it serves the checkpoint `folder` on CPU; its log is
    <folder>/../serve.log, shown when it fails to start."""
    port = free_port()
    log_path = Path(folder).parent / "serve.log"
    environment = command_environment()  # offline
    # the `transformers` command's own module, run as __main__ (`-c` would always take a fresh interpreter)
    command = [python_for(environment), "-m", "transformers.cli.transformers", "serve", str(folder), "--host",
               "127.0.0.1", "--port", str(port), "--device", "cpu", "--log-level", "info"]
    with open(log_path, "w") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=environment)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_SECONDS
        while True:
            if process.poll() is not None:
                pytest.fail(f"transformers serve exited ({process.returncode}):\n{log_path.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=2) as response:
                    if json.loads(response.read()).get("status") == "ok":
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"transformers serve not up after {START_SECONDS} s:\n{log_path.read_text()[-3000:]}")
            time.sleep(POLL_SECONDS)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
