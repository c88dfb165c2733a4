"""Commands run as children forked from a process that has already imported torch and Lightning.

A fresh `python train.py ...` spends about 7 s of CPU importing torch and pytorch_lightning (which imports
torchmetrics, torchvision and scipy) before it reads its first override, and the suite runs about 150 commands,
100 of them train.py or evaluate.py. Each test process therefore starts one launcher (`python -m
helpers.forked_commands`, taking requests and giving replies on two pipes of its own) that imports those libraries
once; each command is a fork of it which takes the command's environment, standard streams, argv and sys.path[0],
and runs the script or module as `python` would (runpy, as `__main__`; its SystemExit and uncaught exception turned
into the interpreter's status and traceback; its threads joined, its atexit handlers run and its standard streams
flushed at the end). The command is still its own process with its own exit status, and its traceback, when it has
one, shows the launcher's frames above the script's; otherwise what differs from a fresh interpreter is that those
third-party modules are already imported, with the launcher's environment, and that the end skips the teardown of
every module and object (`_exit_without_teardown` says why).

A library may read a variable when it is imported (OpenMP reads OMP_NUM_THREADS, huggingface_hub HF_HUB_OFFLINE),
so a launcher serves only commands with its own environment (helpers/commands.py): when the test process's
variables change, a new launcher takes its place, and `python -c` (tests that block imports before anything runs)
and a command given a variable of its own that one of those libraries might read start a fresh interpreter.
SPACEWALK_TEST_FRESH_INTERPRETERS=1 runs every command in a fresh interpreter, as a user's shell does.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import json
import os
import select
import signal
import subprocess
import sys
import weakref

# what every train.py / evaluate.py run imports, and what makes up most of its start-up time: torch and Lightning
# (about 7 s of CPU), then sentence-transformers (the MiniLM text encoder of nearly every Spacewalk-18 run, with
# transformers' model code and scikit-learn: 1.3 s), open_clip (with timm: 1 s) and wandb (0.7 s)
PREIMPORTED = ("torch", "pytorch_lightning", "hydra", "omegaconf", "transformers", "sentence_transformers",
               "open_clip", "wandb")


class Launcher:
    """The test-process side: one launcher process started with `environment`, asked to run one command at a time."""

    def __init__(self, environment: dict, cwd) -> None:
        self.environment = dict(environment)
        request_read, request_write = os.pipe()
        reply_read, reply_write = os.pipe()
        # requests and replies on their own pipes: the launcher's standard streams are the ones its children take
        self.process = subprocess.Popen([sys.executable, "-m", "helpers.forked_commands", str(request_read),
                                         str(reply_write)], cwd=cwd, env=self.environment, stdin=subprocess.DEVNULL,
                                        stdout=subprocess.DEVNULL, pass_fds=(request_read, reply_write))
        os.close(request_read)
        os.close(reply_write)
        self.requests = os.fdopen(request_write, "w", buffering=1)
        self.replies = os.fdopen(reply_read, "r")

    def alive(self) -> bool:
        return self.process.poll() is None

    def run(self, args: list[str], environment: dict, stdout_path, stderr_path, timeout: float | None) -> int:
        """The command's exit status (negative: the signal that ended it, as subprocess reports it); past `timeout`
        its process group is killed and subprocess.TimeoutExpired raised."""
        self.requests.write(json.dumps({"args": args, "environment": environment, "stdout": str(stdout_path),
                                        "stderr": str(stderr_path)}) + "\n")
        pid = json.loads(self._reply(None))["pid"]
        try:
            return json.loads(self._reply(timeout))["returncode"]
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):  # it may have ended in the meantime
                os.killpg(pid, signal.SIGKILL)
            self._reply(None)
            raise

    def _reply(self, timeout: float | None) -> str:
        ready, _, _ = select.select([self.replies], [], [], timeout)
        if not ready:
            raise subprocess.TimeoutExpired(self.process.args, timeout)
        line = self.replies.readline()
        if not line:
            raise RuntimeError(f"the command launcher exited (status {self.process.wait()})")
        return line

    def close(self) -> None:
        self.requests.close()
        self.replies.close()
        self.process.wait(timeout=30)


def _run_as_main(args: list[str], environment: dict, stdout_path: str, stderr_path: str) -> None:
    """In the forked child: become `python ARGS` with its streams in the two files; never returns."""
    import runpy

    os.setpgid(0, 0)  # a timeout kills the command and whatever it started
    # the launcher's exit-time finalizers stay the launcher's: a temporary folder a library made when the launcher
    # imported it serves the next command too, so the command's exit must not remove it (weakref.finalize keeps its
    # finalizers in a private registry; _keep_import_time_folders takes care of the atexit handlers)
    for finalizer in list(weakref.finalize._registry):
        finalizer.atexit = False
    os.environ.clear()
    os.environ.update(environment)
    # the launcher's sys.stdout and sys.stderr (opened on /dev/null: buffered as on a file) now write to the files
    os.dup2(os.open(stdout_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), 1)
    os.dup2(os.open(stderr_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), 2)
    try:
        if args[0] == "-m":
            sys.argv = ["-m", *args[2:]]
            sys.path[0] = os.getcwd()
            runpy.run_module(args[1], run_name="__main__", alter_sys=True)
        else:
            sys.argv = list(args)
            sys.path[0] = os.path.dirname(os.path.abspath(args[0]))
            runpy.run_path(args[0], run_name="__main__")
        code = 0
    except SystemExit as exit_:  # what the interpreter makes of sys.exit(code)
        code = exit_.code
        if code is None:
            code = 0
        elif not isinstance(code, int):
            print(code, file=sys.stderr)
            code = 1
    except KeyboardInterrupt:  # the interpreter's traceback, then the end by SIGINT that it reports
        sys.excepthook(*sys.exc_info())
        _exit_without_teardown(None)
    except BaseException:  # noqa: BLE001 -- an uncaught exception: the interpreter's traceback and status 1
        sys.excepthook(*sys.exc_info())
        code = 1
    _exit_without_teardown(code)


def _exit_without_teardown(code: int | None) -> None:
    """End the command as the interpreter ends a program (wait for its non-daemon threads, run its atexit handlers,
    flush the standard streams) but without tearing down the modules and objects it inherited from the launcher:
    that teardown touches every object torch, Lightning and transformers made, copying the launcher's pages one by
    one, about 2 s of CPU per command (a fork that exits at once: 2.0 s against 0.02 s), a fifth of the suite's
    CPU. multiprocessing's forked children end the same way (os._exit); what a command leaves to be closed only at
    that teardown (a file it never closes, never flushes and still references) would be lost: the tests read what
    the commands write, and a user's interpreter is not forked."""
    import threading

    threading._shutdown()  # joins non-daemon threads and runs threading's own exit hooks (thread pools)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # closed by the command
            pass
    if code is None:  # an uncaught KeyboardInterrupt: ended by SIGINT, as the interpreter ends then
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
        code = 128 + signal.SIGINT
    os._exit(code & 0xFF)


def _keep_import_time_folders() -> None:
    """wandb (imported by timm, which sentence-transformers and open_clip import) makes its media folder when it is
    imported and registers its removal with atexit: the removal is the launcher's, at its own exit (the folder's
    TemporaryDirectory finalizer), not each command's."""
    private = sys.modules.get("wandb.sdk.data_types._private")
    if private is not None:
        atexit.unregister(private.MEDIA_TMP.cleanup)


def _serve(request_fd: int, reply_fd: int) -> None:
    import importlib

    for name in PREIMPORTED:
        importlib.import_module(name)
    _keep_import_time_folders()
    # what the launcher has made is never garbage-collected in a command: a command's full collection would otherwise
    # walk the launcher's 600,000 objects and copy their pages (0.7 s of CPU for two collections in a fork against
    # 0.02 s frozen), as Python's gc.freeze documentation advises for processes that fork without exec
    gc.freeze()
    requests, replies = os.fdopen(request_fd, "r"), os.fdopen(reply_fd, "w", buffering=1)
    for line in requests:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            requests.close()
            replies.close()
            _run_as_main(request["args"], request["environment"], request["stdout"], request["stderr"])
        try:
            os.setpgid(pid, pid)  # also here: the test may kill the group before the child has run its setpgid
        except (PermissionError, ProcessLookupError):  # the child has already exec'd a program or exited
            pass
        replies.write(json.dumps({"pid": pid}) + "\n")
        _, status = os.waitpid(pid, 0)
        replies.write(json.dumps({"returncode": os.waitstatus_to_exitcode(status)}) + "\n")


if __name__ == "__main__":
    _serve(int(sys.argv[1]), int(sys.argv[2]))
