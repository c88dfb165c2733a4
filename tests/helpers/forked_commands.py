"""Commands run as children forked from a process that has already imported torch and Lightning.

A fresh `python train.py ...` spends about 7 s of CPU importing torch and pytorch_lightning (which imports
torchmetrics, torchvision and scipy) before it reads its first override, and the suite runs about 150 commands, 100
of them train.py or evaluate.py. Each test process therefore starts one launcher (`python -m
helpers.forked_commands`, taking requests and giving replies on two pipes of its own) that imports those libraries
once (PREIMPORTED; a Launcher told a smaller set imports that: the launcher's own tests observe no more than torch
and Lightning); each command is a fork of it which takes the command's environment, standard streams, argv and
sys.path[0], and runs the script or module as `python` would (runpy, as `__main__`; its SystemExit and uncaught
exception turned into the interpreter's status and traceback; its threads joined, its atexit handlers run and its
standard streams flushed at the end). The command is still its own process with its own exit status, and its
traceback, when it has one, shows the launcher's frames above the script's; otherwise what differs from a fresh
interpreter is that those third-party modules are already imported, with the launcher's environment, and that the
end skips the teardown of every module and object (`_exit_without_teardown` says why).

A library may read a variable when it is imported (OpenMP reads OMP_NUM_THREADS, huggingface_hub HF_HUB_OFFLINE),
so a launcher serves only commands with its own environment (helpers/commands.py): when the test process's
variables change, a new launcher takes its place, and `python -c` (tests that block imports before anything runs)
and a command given a variable of its own that one of those libraries might read start a fresh interpreter.
SPACEWALK_TEST_FRESH_INTERPRETERS=1 runs every command in a fresh interpreter, as a user's shell does.

What a command starts as `python SCRIPT` or `python -m MODULE` (a DDP run's second rank, a local sweep's jobs) is
forked from the launcher too (SUB_LAUNCH_SCRIPT says how), and so is what a test starts itself with the interpreter
script that Launcher.interpreter names (helpers/commands.py's python_for: `transformers serve`, srun's tasks). Such a
program differs from a child the command started itself in that its parent is the launcher (its starter sees the
pid of the small script that stands for it, and its CPU time is not in the starter's RUSAGE_CHILDREN), it leads a
process group of its own, and only `-u` and `-B` among the interpreter's options are served (any other, `-c`
included, gets the real interpreter). A launcher the test process is done with (its variables changed) takes no new
program but serves those still running to their end: a server a session fixture started outlives that change.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import io
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import weakref

# what every train.py / evaluate.py run imports, and what makes up most of its start-up time: torch and Lightning
# (about 7 s of CPU), then sentence-transformers (the MiniLM text encoder of nearly every Spacewalk-18 run, with
# transformers' model code and scikit-learn: 1.3 s), open_clip (with timm: 1 s) and wandb (0.7 s)
PREIMPORTED = ("torch", "pytorch_lightning", "hydra", "omegaconf", "transformers", "sentence_transformers",
               "open_clip", "wandb")

# Variables that no library the launcher imports (PREIMPORTED) reads when it is imported: pytest's name of the running
# test, the project's own settings (spacewalk imports after the fork) and those of the libraries it reads them for
# when a command runs (the OpenAI-compatible client, Lightning's SLURM environment); what a test process sets for good
# while it runs: Lightning's seed_everything (PL_GLOBAL_SEED, PL_SEED_WORKERS), its ddp_spawn rendezvous
# (MASTER_ADDR, MASTER_PORT: torch.distributed reads them when a process group starts), W&B's service address
# (WANDB_SERVICE: read by wandb.init) and the stub servers' addresses that the tests name TEST_* (read by the
# OpenAI-compatible client); and what a command sets for the processes it starts: a DDP rank's place (Lightning's
# LOCAL_RANK, NODE_RANK, WORLD_SIZE; torch.distributed's RANK, GROUP_RANK, LOCAL_WORLD_SIZE, ...: read when the
# process group starts, and by Lightning when imported for its rank-zero-only functions, which a fork reads again:
# _run_as_main), submitit's description of a job (SUBMITIT_*, read by the job's own code) and the GPUs it may see
# (CUDA_VISIBLE_DEVICES: read when CUDA is initialized, which torch does on first use, never on import). A command
# may have its own values of these, or the test process change them, and the command is still forked from the
# running launcher: each change would otherwise start a new launcher (about 7 s of CPU) or a fresh interpreter.
RUN_TIME_VARIABLES = ("PYTEST_CURRENT_TEST", "SPACEWALK_*", "OPENAI_*", "SLURM_*", "PL_GLOBAL_SEED", "PL_SEED_WORKERS",
                      "MASTER_ADDR", "MASTER_PORT", "WANDB_SERVICE", "TEST_*", "LOCAL_RANK", "NODE_RANK", "WORLD_SIZE",
                      "RANK", "GROUP_RANK", "LOCAL_WORLD_SIZE", "GROUP_WORLD_SIZE", "ROLE_RANK", "ROLE_WORLD_SIZE",
                      "TORCHELASTIC_*", "SUBMITIT_*", "CUDA_VISIBLE_DEVICES")


def read_at_run_time(name: str) -> bool:
    return any(name == v or (v.endswith("*") and name.startswith(v[:-1])) for v in RUN_TIME_VARIABLES)


def steady(variables) -> dict:
    """The variables a library the launcher imports might read when imported: a launcher serves only commands whose
    steady variables equal its own."""
    return {k: v for k, v in variables.items() if not read_at_run_time(k)}


class Launcher:
    """The test-process side: one launcher process started with `environment`, which imports the modules named in
    `preimport` (PREIMPORTED for the suite's commands) before it takes any, asked to run one command at a time."""

    def __init__(self, environment: dict, cwd, preimport: tuple[str, ...] = PREIMPORTED) -> None:
        self.environment = dict(environment)
        self.preimport = tuple(preimport)
        request_read, request_write = os.pipe()
        reply_read, reply_write = os.pipe()
        # requests and replies on their own pipes: the launcher's standard streams are the ones its children take
        self.process = subprocess.Popen([sys.executable, "-m", "helpers.forked_commands", str(request_read),
                                         str(reply_write), *self.preimport], cwd=cwd, env=self.environment,
                                        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                        pass_fds=(request_read, reply_write))
        os.close(request_read)
        os.close(reply_write)
        self.requests = os.fdopen(request_write, "w", buffering=1)
        # the replies' bytes read so far: lines are split here, never in a buffered reader, whose buffer select()
        # cannot see (two replies read at once would leave the second waiting for a third)
        self.replies, self._received = reply_read, b""
        self._greeting: dict | None = None  # the launcher's first reply, once it has imported `preimport`

    def interpreter(self) -> str | None:
        """The interpreter script that its commands see as sys.executable (SUB_LAUNCH_SCRIPT): a program started as
        `INTERPRETER [-u] [-B] SCRIPT | -m MODULE ...` in the launcher's environment (but for RUN_TIME_VARIABLES) is
        forked from the launcher; None where the launcher has none (its folder's socket path too long). Waits for
        the launcher's imports."""
        return self._greeted()["interpreter"]

    def _greeted(self) -> dict:
        if self._greeting is None:
            self._greeting = json.loads(self._reply(None))
        return self._greeting

    def alive(self) -> bool:
        return self.process.poll() is None

    def run(self, args: list[str], environment: dict, stdout_path, stderr_path, timeout: float | None) -> int:
        """The command's exit status (negative: the signal that ended it, as subprocess reports it); past `timeout`
        its process group is killed and subprocess.TimeoutExpired raised."""
        self._greeted()
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
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self._received:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([self.replies], [], [], left)
            if not ready:
                raise subprocess.TimeoutExpired(self.process.args, timeout)
            data = os.read(self.replies, 1 << 16)
            if not data:
                raise RuntimeError(f"the command launcher exited (status {self.process.wait()})")
            self._received += data
        line, self._received = self._received.split(b"\n", 1)
        return line.decode()

    def close(self, wait: bool = True) -> None:
        """No more commands: the launcher ends once the programs forked for its interpreter script have ended (at
        once where none runs); `wait` for that."""
        if self.replies is None:
            return
        self.requests.close()
        os.close(self.replies)
        self.replies = None
        if wait:
            self.process.wait(timeout=30)


def _run_as_main(args: list[str], environment: dict, stdout_path: str | None, stderr_path: str | None,
                 unbuffered: bool = False) -> None:
    """In the forked child: become `python ARGS` with its streams in the two files (None: the standard streams it
    already has; `unbuffered`: as `python -u`); never returns."""
    import runpy

    os.setpgid(0, 0)  # a timeout kills the command and whatever it started
    # the launcher's exit-time finalizers stay the launcher's: a temporary folder a library made when the launcher
    # imported it serves the next command too, so the command's exit must not remove it (weakref.finalize keeps its
    # finalizers in a private registry; _keep_import_time_folders takes care of the atexit handlers)
    for finalizer in list(weakref.finalize._registry):
        finalizer.atexit = False
    os.environ.clear()
    os.environ.update(environment)
    rank_zero = sys.modules.get("lightning_fabric.utilities.rank_zero")
    if rank_zero is not None:  # Lightning reads the process's rank from RANK / LOCAL_RANK / SLURM_PROCID on import
        rank_zero.rank_zero_only.rank = rank_zero._get_rank() or 0
    # the launcher's sys.stdout and sys.stderr (opened on /dev/null: buffered as on a file) now write to the files
    if stdout_path is not None:
        os.dup2(os.open(stdout_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), 1)
    if stderr_path is not None:
        os.dup2(os.open(stderr_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), 2)
    if unbuffered:  # what -u makes of the two streams: text written through to an unbuffered file
        sys.stdout, sys.stderr = (io.TextIOWrapper(io.FileIO(fd, "w", closefd=False), encoding=stream.encoding,
                                                   errors=stream.errors, write_through=True)
                                  for fd, stream in ((1, sys.stdout), (2, sys.stderr)))
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
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
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


# The interpreter a command sees as sys.executable: a small script (run by the real interpreter with -IS, which
# starts in about 20 ms) that asks the launcher to fork `python [-u] [-B] SCRIPT|-m MODULE ARGS` with its own
# standard streams, environment and folder, forwards the signals it gets to that process, and ends with its status.
# Anything else (`-c`, other options), a launcher that cannot be reached, or one that declines (the environment
# differs in a variable a preimported library reads when imported, or the program takes its own process id for the
# one its starter sees: OWN_PID_PROGRAMS) becomes the real interpreter (exec, which keeps the process id). So the
# second rank of a DDP run (Lightning starts `sys.executable train.py ...`) and a sweep's jobs (submitit's
# `sys.executable -u -m submitit.core._submit`) are forks too, as is what a test starts with it (Launcher.interpreter).
# When the script's process ends (killed too: Lightning kills the other ranks' when one fails), the launcher kills the
# process group of what it forked for it.
SUB_LAUNCH_SCRIPT = """\
import json, os, signal, socket, sys

REAL, SOCKET = {real!r}, {socket!r}
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)
pid, pending = None, []


def forward(number, frame):
    if pid is None:
        pending.append(number)
    else:
        try:
            os.kill(pid, number)
        except ProcessLookupError:  # it has just ended
            pass


def real():  # the signals that came meanwhile reach the real interpreter as they would have reached it
    for number in FORWARDED:
        signal.signal(number, signal.SIG_DFL)
    for number in pending:
        os.kill(os.getpid(), number)
    os.execv(REAL, [REAL, *sys.argv[1:]])


args = sys.argv[1:]
flags = []
while args and args[0] in ("-u", "-B"):
    flags.append(args.pop(0))
if not args or (args[0].startswith("-") and args[0] != "-m") or (args[0] == "-m" and len(args) < 2):
    real()
for number in FORWARDED:
    signal.signal(number, forward)
try:
    launcher = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    launcher.connect(SOCKET)
except OSError:  # no launcher: nothing has started
    real()
request = json.dumps({{"args": args, "flags": flags, "environment": dict(os.environ), "cwd": os.getcwd()}})
replies = launcher.makefile("r")
try:
    socket.send_fds(launcher, [request.encode() + b"\\n"], [0, 1, 2])
    line = replies.readline()
except OSError:
    line = ""
if not line:  # the launcher went away after the request: whether the program started is unknown
    print(f"{{sys.argv[0]}}: the command launcher ended before it answered", file=sys.stderr)
    os._exit(1)
reply = json.loads(line)
if "pid" not in reply:  # declined
    real()
pid = reply["pid"]
for number in pending:
    forward(number, None)
line = replies.readline()  # the status when the fork ends (a signal handler's run does not cut the wait short)
status = json.loads(line)["returncode"] if line else -signal.SIGKILL
for number in FORWARDED:
    signal.signal(number, signal.SIG_DFL)
if status < 0:  # ended by a signal: end by the same one (SIGKILL and SIGSTOP keep their default action anyway)
    if -status not in (signal.SIGKILL, signal.SIGSTOP):
        signal.signal(-status, signal.SIG_DFL)
    os.kill(os.getpid(), -status)
os._exit(status & 0xFF)
"""


# submitit's local controller names the job's folder by its own process id, which its starter (the sweep's launcher)
# reads as the id of the process it started: a fork would have another
OWN_PID_PROGRAMS = (["-m", "submitit.local._local"],)


def _sub_launcher(folder: str) -> tuple[socket.socket | None, str | None]:
    """The listening socket and the interpreter script of SUB_LAUNCH_SCRIPT, in `folder`; (None, None) where a Unix
    socket cannot be made there (its path too long)."""
    path = os.path.join(folder, "socket")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(path)
    except OSError:
        listener.close()
        return None, None
    listener.listen(16)
    script = os.path.join(folder, "python")
    with open(script, "w", encoding="utf-8") as f:
        f.write(f"#!{sys.executable} -IS\n" + SUB_LAUNCH_SCRIPT.format(real=sys.executable, socket=path))
    os.chmod(script, 0o755)
    return listener, script


def _received(connection: socket.socket) -> tuple[dict, list[int]]:
    """A sub-launch request: its JSON line and the three standard streams passed with it."""
    data, fds, _, _ = socket.recv_fds(connection, 1 << 16, 3)
    while data and not data.endswith(b"\n"):
        more = connection.recv(1 << 16)
        if not more:
            break
        data += more
    return (json.loads(data) if data.endswith(b"\n") else {}), fds


def _serve(request_fd: int, reply_fd: int, preimport: list[str]) -> None:
    import importlib

    started = dict(os.environ)
    for name in preimport:
        importlib.import_module(name)
    # what those imports set for themselves (scikit-learn's KMP_*, Lightning's PYTORCH_NVML_BASED_CUDA_CHECK): a
    # command has their effect whether or not its environment holds them (with fewer imports fewer of them: a program
    # whose starter set one itself, having imported that library, differs from the launcher and gets the real
    # interpreter)
    set_by_imports = {k for k, v in os.environ.items() if started.get(k) != v}

    def read_on_import(environment) -> dict:
        return {k: v for k, v in steady(environment).items() if k not in set_by_imports}

    own = read_on_import(started)

    _keep_import_time_folders()
    launcher, folder = os.getpid(), tempfile.mkdtemp(prefix="spacewalk-launcher-")
    listener, interpreter = _sub_launcher(folder)
    # a child's end wakes the loop below (select on the wake-up pipe) as promptly as a request does
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_read, False)
    os.set_blocking(wake_write, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wake_write, warn_on_full_buffer=False)
    # what the launcher has made is never garbage-collected in a command: a command's full collection would otherwise
    # walk the launcher's 600,000 objects and copy their pages (0.7 s of CPU for two collections in a fork against
    # 0.02 s frozen), as Python's gc.freeze documentation advises for processes that fork without exec
    gc.freeze()
    requests, replies = os.fdopen(request_fd, "r"), os.fdopen(reply_fd, "w", buffering=1)
    replies.write(json.dumps({"interpreter": interpreter}) + "\n")  # ready: Launcher.interpreter
    # False once the test process is done with the launcher (its end of the requests closed): no new program, but
    # those its interpreter script stands for (a test's server) run on, and their scripts still get their status
    taking = True
    # running children: their script's connection, None for the test process's command, False once the script is gone
    launched: dict[int, socket.socket | None | bool] = {}
    connections: dict[socket.socket, int] = {}

    def fork(args, environment, stdout, stderr, flags=(), streams=(), cwd=None, connection=None) -> int:
        pid = os.fork()
        if pid == 0:
            try:
                signal.set_wakeup_fd(-1)
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                for resource in (requests, replies, listener, connection, *connections):
                    if resource is not None:
                        resource.close()
                for fd in (wake_read, wake_write):
                    os.close(fd)
                for target, fd in enumerate(streams):
                    os.dup2(fd, target)
                    os.close(fd)
                if cwd is not None:
                    os.chdir(cwd)
                if interpreter is not None:
                    sys.executable = interpreter
                if "-B" in flags:  # otherwise as the environment says (PYTHONDONTWRITEBYTECODE), as for the launcher
                    sys.dont_write_bytecode = True
            except BaseException:  # noqa: BLE001 -- never back into the launcher's loop (nor its clean-up) in a child
                import traceback

                traceback.print_exc()
                os._exit(1)
            _run_as_main(args, environment, stdout, stderr, "-u" in flags)
        try:
            os.setpgid(pid, pid)  # also here: the test may kill the group before the child has run its setpgid
        except (PermissionError, ProcessLookupError):  # the child has already exec'd a program or exited
            pass
        return pid

    try:
        while taking or launched:
            waiting = [wake_read, *((requests,) if taking else ()), *((listener,) if listener is not None else ()),
                       *connections]
            ready, _, _ = select.select(waiting, [], [])
            if wake_read in ready:
                with contextlib.suppress(BlockingIOError):
                    os.read(wake_read, 4096)
            while launched:  # the children that have ended, each answered
                pid, status = os.waitpid(-1, os.WNOHANG)
                if pid == 0:
                    break
                connection = launched.pop(pid, False)  # (never another process: the launcher starts no other)
                message = json.dumps({"returncode": os.waitstatus_to_exitcode(status)}) + "\n"
                if connection is None:
                    if taking:  # (otherwise no one reads the replies)
                        replies.write(message)
                elif connection is not False:
                    with contextlib.suppress(OSError):  # the script may be ending too
                        connection.sendall(message.encode())
                    connection.close()
                    connections.pop(connection, None)
            if requests in ready:  # the test process asks for a command
                line = requests.readline()
                if not line:  # a script that asks from now on is declined: the real interpreter
                    taking = False
                    continue
                request = json.loads(line)
                pid = fork(request["args"], request["environment"], request["stdout"], request["stderr"])
                launched[pid] = None
                replies.write(json.dumps({"pid": pid}) + "\n")
            if listener is not None and listener in ready:
                connection, _ = listener.accept()
                try:
                    request, streams = _received(connection)
                except OSError:  # the script ended before it asked
                    request, streams = {}, []
                if (not taking or len(streams) != 3 or read_on_import(request.get("environment", {})) != own
                        or any(request.get("args", [])[:len(p)] == p for p in OWN_PID_PROGRAMS)):
                    _decline(connection, streams)
                    continue
                pid = fork(request["args"], request["environment"], None, None, request["flags"], streams,
                           request["cwd"], connection)
                for fd in streams:
                    os.close(fd)
                launched[pid] = connection
                connections[connection] = pid
                with contextlib.suppress(OSError):  # a script gone already: seen as its end below
                    connection.sendall((json.dumps({"pid": pid}) + "\n").encode())
            for connection in [c for c in connections if c in ready]:  # a script's process ended first: its fork too
                try:
                    ended = connection.recv(1) == b""
                except OSError:
                    ended = True
                if ended:
                    pid = connections.pop(connection)
                    connection.close()
                    launched[pid] = False
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.killpg(pid, signal.SIGKILL)
    finally:
        if os.getpid() == launcher:  # a fork's own failure ends in os._exit, never here; this is for certainty
            if listener is not None:  # a script that has connected but not been heard is declined, not cut off
                # (the socket's name gone first: a script that comes after finds no launcher, the real interpreter)
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(folder, "socket"))
                listener.setblocking(False)
                with contextlib.suppress(OSError):
                    while True:
                        connection = listener.accept()[0]
                        connection.settimeout(5)  # its script sends its request as soon as it has connected
                        try:
                            streams = _received(connection)[1]
                        except OSError:
                            streams = []
                        _decline(connection, streams)
                listener.close()
            shutil.rmtree(folder, ignore_errors=True)


def _decline(connection: socket.socket, streams: list[int]) -> None:
    """The script becomes the real interpreter (the standard streams it passed are closed here)."""
    for fd in streams:
        os.close(fd)
    with contextlib.suppress(OSError):
        connection.sendall(b"{}\n")
    connection.close()


if __name__ == "__main__":
    # python -m helpers.forked_commands REQUEST_FD REPLY_FD MODULE...: the modules to import before the first request
    _serve(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:])
