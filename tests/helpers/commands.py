"""The repository's paths, its configs composed as a command line would compose them, `run_command`, the one way a
test runs one of the project's commands, and `python_for`, the interpreter a test starts a Python program of its own
with (a server, the tasks srun would start) so that the program too is forked from the launcher."""

from __future__ import annotations

import atexit
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from helpers.forked_commands import PREIMPORTED, Launcher, read_at_run_time, steady

REPO = Path(__file__).resolve().parents[2]
CONF = REPO / "conf"


def compose_config(config_name: str, *overrides: str):
    """conf/<config_name>.yaml composed with `overrides` as the command line would (Hydra's compose API, the
    resolvers registered), without running anything."""
    from hydra import compose, initialize_config_dir

    import spacewalk.training  # noqa: F401  (registers the config resolvers)

    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose(config_name=config_name, overrides=list(overrides), return_hydra_config=True)


def compose_train(*overrides: str):
    return compose_config("train", *overrides)


def compose_evaluate(*overrides: str):
    return compose_config("evaluate", *overrides)


# offline (no hub, W&B offline): no test reaches the network
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "WANDB_MODE": "offline", "WANDB_SILENT": "true"}


def run_command(*args, env: dict | None = None, check: bool = True, timeout: float | None = None
                ) -> subprocess.CompletedProcess:
    """`python ARGS` in the repository, as a user runs the project's commands (train.py, evaluate.py, -m
    spacewalk.score, ...): offline, with tests/ importable (backends a test names by _target_); with `check`, a
    non-zero exit fails the test showing the end of stderr. The command runs as a child of this process's launcher,
    which has imported torch and Lightning once (helpers/forked_commands.py says what that changes), or in a fresh
    interpreter for `python -c`, for a command given in `env` a variable the launcher's libraries might read when
    imported (any but RUN_TIME_VARIABLES), and everywhere under SPACEWALK_TEST_FRESH_INTERPRETERS=1."""
    common = command_environment()
    environment = common | (env or {})
    args = [str(a) for a in args]
    # a value that every command gets anyway (the offline settings, the test process's own) is not one of its own
    own = any(common.get(k) != v and not read_at_run_time(k) for k, v in (env or {}).items())
    launcher = None if own or args[0] == "-c" or not forking() else _launcher_for(environment)
    if launcher is None:
        result = subprocess.run([sys.executable, *args], cwd=REPO, capture_output=True, text=True, env=environment,
                                timeout=timeout)
    else:
        with tempfile.TemporaryDirectory(prefix="command-") as folder:
            stdout, stderr = Path(folder) / "stdout", Path(folder) / "stderr"
            returncode = launcher.run(args, environment, stdout, stderr, timeout)
            # decoded as subprocess.run(text=True) decodes: the locale's encoding, universal newlines
            result = subprocess.CompletedProcess([sys.executable, *args], returncode, stdout.read_text(),
                                                 stderr.read_text())
    if check:
        assert result.returncode == 0, result.stderr[-4000:]
    return result


def command_environment() -> dict:
    """What run_command gives every command: the test process's variables, offline, the repository and tests/ on
    PYTHONPATH."""
    path = os.pathsep.join([str(REPO), str(REPO / "tests"), *filter(None, [os.environ.get("PYTHONPATH")])])
    return os.environ | OFFLINE | {"PYTHONPATH": path}


def python_for(environment: dict) -> str:
    """The interpreter a test starts a Python program of its own with (`[python_for(environment), SCRIPT | -m
    MODULE, ...]`, run with env=environment): the interpreter script of this process's launcher, which has the
    program forked from the launcher (helpers/forked_commands.py, SUB_LAUNCH_SCRIPT), where `environment` differs
    from command_environment() only in RUN_TIME_VARIABLES; else sys.executable, as run_command starts a fresh
    interpreter for a command given a variable of its own rather than a launcher for it. With the script, the
    process the test holds stands for the program: it passes its signals on (SIGTERM, SIGINT, ...), ends with
    the program's status, and killing it kills the program."""
    if forking():
        common = command_environment()
        if steady(environment) == steady(common):
            return _launcher_for(common).interpreter() or sys.executable
    return sys.executable


@contextmanager
def stopped_at_exit(processes: list[subprocess.Popen]) -> Iterator[list[subprocess.Popen]]:
    """`processes`, each killed if still running when the block ends (a failed assertion, a timeout): the other task
    of a failed pair would otherwise wait on its rendezvous for ever, and keep its launcher alive."""
    try:
        yield processes
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
            process.communicate()  # its pipes read to their end and closed


def forking() -> bool:
    return os.environ.get("SPACEWALK_TEST_FRESH_INTERPRETERS") != "1"


# what the launchers of run_command and python_for import before their first command: every test's commands get the
# full set; the launcher's own tests (tests/library/test_forked_commands.py) set a smaller one for those they start
LAUNCHER_PREIMPORTS: tuple[str, ...] = PREIMPORTED
_launcher: Launcher | None = None  # this process's; replaced when the test process's variables change
_replaced: list[Launcher] = []  # ending once the programs forked for their interpreter scripts end


def _launcher_for(environment: dict) -> Launcher:
    """This process's launcher for `environment`: the running one if it was started with the same variables (but for
    RUN_TIME_VARIABLES) and importing LAUNCHER_PREIMPORTS, else a new one in its place. A test that changes a
    variable for good (Lightning's seed_everything sets PL_GLOBAL_SEED) costs one start of the launcher, and a
    library that reads a variable when it is imported reads the command's value. The launcher replaced is not
    waited for: a program started with its interpreter script (python_for: a session's server) may still be
    running."""
    global _launcher
    if (_launcher is not None and _launcher.alive() and steady(environment) == steady(_launcher.environment)
            and _launcher.preimport == tuple(LAUNCHER_PREIMPORTS)):
        return _launcher
    if _launcher is not None:
        retire(_launcher)
    _launcher = Launcher(environment, REPO, LAUNCHER_PREIMPORTS)
    return _launcher


def retire(launcher: Launcher) -> None:
    """No new command for `launcher`: it ends once the programs started with its interpreter script end, and is
    waited for at exit (the replaced launchers that have ended are let go)."""
    _replaced[:] = [replaced for replaced in _replaced if replaced.alive()]
    launcher.close(wait=False)
    _replaced.append(launcher)


@atexit.register
def _close_launchers() -> None:
    """Each launcher ends once what it runs has ended (a fixture's teardown has stopped its server by now); those that
    have not within 30 s, together, are killed."""
    launchers = [*_replaced, *([_launcher] if _launcher is not None else [])]
    for launcher in launchers:
        launcher.close(wait=False)
    deadline = time.monotonic() + 30
    for launcher in launchers:
        try:
            launcher.process.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            launcher.process.kill()
            launcher.process.wait()
