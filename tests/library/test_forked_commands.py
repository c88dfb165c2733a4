"""The launcher the suite runs its commands through (helpers/forked_commands.py) against a fresh interpreter: the
same exit status, streams, argv, sys.path[0], working directory and environment for a script and for `python -m`,
an uncaught exception and a SystemExit with a message reported as Python reports them, a timeout that kills the
command and leaves the launcher serving, the commands that must start a fresh interpreter doing so, and a test's own
program started with python_for forked from the launcher.

The launchers these tests start import less than PREIMPORTED (which costs a launcher about 7 s of CPU to start): what
they observe of the preimports is whether torch is already imported in a fork, a thread count that OpenMP reads when
torch is imported, and (the module's launcher) the rank that Lightning reads when imported. The test that needs more
(the folder wandb makes when imported) runs its commands with run_command on the worker's own launcher, which imports
all of PREIMPORTED."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from helpers import commands
from helpers.commands import REPO, run_command
from helpers.forked_commands import PREIMPORTED, Launcher

# run_command's and python_for's launchers in the tests that start their own (light_launchers): torch alone (1.4 s of
# CPU against 6 to 7 s for PREIMPORTED)
LIGHT = ("torch",)
# the module's launcher: Lightning too (3.5 s more), whose rank its forks must read again from their own environment
# (test_a_commands_own_python_...): imported once here rather than in each fork that asks for the rank
LIGHT_WITH_LIGHTNING = ("torch", "lightning_fabric")

REPORT = """
import json, os, sys
print(json.dumps({"argv": sys.argv, "path0": sys.path[0], "name": __name__, "cwd": os.getcwd(),
                  "marker": os.environ.get("FORKED_MARKER"), "run_time": os.environ.get("SPACEWALK_TEST_MARKER"),
                  "main_file": sys.modules["__main__"].__file__}))
print("to stderr", file=sys.stderr)
sys.exit(int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 0)
"""


@pytest.fixture(scope="module")
def launcher():
    environment = os.environ | {"FORKED_MARKER": "launcher", "PYTHONPATH": os.pathsep.join(
        [str(REPO), str(REPO / "tests")])}
    launcher = Launcher(environment, REPO, preimport=LIGHT_WITH_LIGHTNING)
    yield launcher
    launcher.close()


@pytest.fixture
def light_launchers(monkeypatch):
    """The launchers run_command and python_for start during the test import only LIGHT, and the first of them
    starts anew: the worker's own launcher (all of PREIMPORTED, perhaps serving a session fixture's server) is put
    back afterwards, and the test's last launcher closed (helpers/commands.py reaps it at exit). _launcher_for would
    replace a light launcher for a later test's command anyway: it compares the preimports too."""
    monkeypatch.setattr(commands, "LAUNCHER_PREIMPORTS", LIGHT)
    monkeypatch.setattr(commands, "_launcher", None)
    yield
    if commands._launcher is not None:
        commands.retire(commands._launcher)


def both(launcher, tmp_path, args: list[str], environment: dict | None = None, timeout: float = 120):
    """(returncode, stdout, stderr) from the launcher, then from a fresh interpreter, for the same command."""
    environment = environment or launcher.environment
    out, err = tmp_path / "out", tmp_path / "err"
    forked = (launcher.run(args, environment, out, err, timeout), out.read_text(), err.read_text())
    fresh = subprocess.run([sys.executable, *args], cwd=REPO, env=environment, capture_output=True, text=True,
                           timeout=timeout)
    return forked, (fresh.returncode, fresh.stdout, fresh.stderr)


def test_a_script_sees_what_a_fresh_interpreter_gives_it(launcher, tmp_path):
    script = tmp_path / "report.py"
    script.write_text(REPORT)
    forked, fresh = both(launcher, tmp_path, [str(script), "3", "x=1"])
    assert forked == fresh and forked[0] == 3 and forked[2] == "to stderr\n"
    seen = json.loads(forked[1])
    assert seen["argv"] == [str(script), "3", "x=1"] and seen["path0"] == str(tmp_path)
    assert seen["name"] == "__main__" and seen["cwd"] == str(REPO) and seen["marker"] == "launcher"


def test_a_module_run_with_dash_m_and_the_environment_of_each_command(launcher, tmp_path):
    (tmp_path / "in.json").write_text('{"b": 1, "a": [1, 2]}')
    forked, fresh = both(launcher, tmp_path, ["-m", "json.tool", "--sort-keys", str(tmp_path / "in.json")])
    assert forked == fresh and forked[0] == 0 and json.loads(forked[1]) == {"a": [1, 2], "b": 1}
    # the variables of the command, not the launcher's (pytest changes PYTEST_CURRENT_TEST from test to test)
    script = tmp_path / "report.py"
    script.write_text(REPORT)
    environment = launcher.environment | {"FORKED_MARKER": "this command"}
    forked, fresh = both(launcher, tmp_path, [str(script)], environment)
    assert forked == fresh and json.loads(forked[1])["marker"] == "this command"


def test_an_uncaught_exception_and_a_message_exit_as_python_reports_them(launcher, tmp_path):
    (tmp_path / "raises.py").write_text("raise KeyError('a bug')\n")
    (tmp_path / "says.py").write_text("import sys\nsys.exit('error: a message')\n")
    forked, fresh = both(launcher, tmp_path, [str(tmp_path / "raises.py")])
    assert forked[0] == fresh[0] == 1 and forked[1] == fresh[1] == ""
    for stderr in (forked[2], fresh[2]):
        assert stderr.startswith("Traceback") and stderr.endswith("KeyError: 'a bug'\n")
    forked, fresh = both(launcher, tmp_path, [str(tmp_path / "says.py")])
    assert forked == fresh == (1, "", "error: a message\n")


# what a program leaves to the interpreter's end: a thread still running, an atexit handler, output never flushed
# (buffered: the streams are files), a status
ENDING = """
import atexit, sys, threading, time
atexit.register(lambda: print("atexit, after the thread"))
threading.Thread(target=lambda: (time.sleep(0.3), print("the thread ends"))).start()
print("written, not flushed")
print("to stderr", file=sys.stderr, end="")
sys.exit(int(sys.argv[1]))
"""


@pytest.mark.parametrize("status", [0, 4])
def test_a_command_ends_as_the_interpreter_ends_a_program(launcher, tmp_path, status):
    script = tmp_path / "ends.py"
    script.write_text(ENDING)
    forked, fresh = both(launcher, tmp_path, [str(script), str(status)])
    assert forked == fresh == (status, "written, not flushed\nthe thread ends\natexit, after the thread\n",
                               "to stderr")


def test_an_interrupted_command_ends_by_sigint_as_python_does(launcher, tmp_path):
    (tmp_path / "interrupted.py").write_text("raise KeyboardInterrupt\n")
    forked, fresh = both(launcher, tmp_path, [str(tmp_path / "interrupted.py")])
    assert forked[0] == fresh[0] == -2 and forked[1] == fresh[1] == ""
    assert forked[2].endswith("KeyboardInterrupt\n") and fresh[2].endswith("KeyboardInterrupt\n")


def test_a_timeout_kills_the_command_and_the_launcher_serves_the_next(launcher, tmp_path):
    (tmp_path / "sleeps.py").write_text("import subprocess, sys, time\n"
                                        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
                                        "time.sleep(60)\n")
    with pytest.raises(subprocess.TimeoutExpired):
        launcher.run([str(tmp_path / "sleeps.py")], launcher.environment, tmp_path / "o", tmp_path / "e", 2)
    script = tmp_path / "report.py"
    script.write_text(REPORT)
    forked, fresh = both(launcher, tmp_path, [str(script), "0"])
    assert forked == fresh and forked[0] == 0


def test_run_command_starts_a_fresh_interpreter_where_the_launcher_could_differ(light_launchers, monkeypatch,
                                                                                 tmp_path):
    seen = []
    real_run = subprocess.run
    monkeypatch.setattr(commands.subprocess, "run", lambda *a, **k: seen.append(a[0][1]) or real_run(*a, **k))
    # `python -c` (a test may block imports before anything runs), and a command given variables of its own (a
    # library may read one when it is imported, before the command could set it)
    assert run_command("-c", "print('c')").stdout == "c\n"
    said = run_command("-m", "json.tool", "--help", env={"FORKED_MARKER": "own"})
    assert said.returncode == 0 and seen == ["-c", "-m"]
    if commands.forking():
        script = tmp_path / "report.py"
        script.write_text(REPORT)
        assert json.loads(run_command(script).stdout)["marker"] is None
        # a variable read only when a command runs (RUN_TIME_VARIABLES: the project's own), or one the test process
        # already has with that value, keeps the command on the launcher, which gives it the command's value
        first = commands._launcher
        said = json.loads(run_command(script, env={"SPACEWALK_TEST_MARKER": "own", "PATH": os.environ["PATH"]}).stdout)
        assert said["run_time"] == "own" and seen == ["-c", "-m"] and commands._launcher is first
        # a variable the test process changes for good (as seed_everything sets PL_GLOBAL_SEED): a new launcher
        monkeypatch.setenv("FORKED_MARKER", "changed")
        assert json.loads(run_command(script).stdout)["marker"] == "changed"
        assert seen == ["-c", "-m"] and commands._launcher is not first


def test_a_commands_exit_leaves_the_folders_the_launcher_made_when_it_imported(tmp_path):
    # wandb (imported by timm, under sentence-transformers) makes its media folder when imported and removes it at
    # exit: a command forked from the launcher, ending, must leave it to the next command
    script = tmp_path / "media.py"
    script.write_text("import os\nfrom wandb.sdk.data_types._private import MEDIA_TMP\n"
                      "print(MEDIA_TMP.name, os.path.isdir(MEDIA_TMP.name))\n")
    first, second = (run_command(script).stdout.split() for _ in range(2))
    assert first[1] == second[1] == "True"
    if commands.forking():
        assert first[0] == second[0]  # the launcher's folder, not one of each command's own


IMPORTED = """
import json, sys
print(json.dumps([name for name in sys.argv[1:] if name in sys.modules]))
"""


def test_a_launcher_imports_what_it_is_told_and_run_command_all_of_preimported(launcher, tmp_path):
    script = tmp_path / "imported.py"
    script.write_text(IMPORTED)
    names = [*PREIMPORTED, "lightning_fabric"]
    out, err = tmp_path / "out", tmp_path / "err"
    assert launcher.run([str(script), *names], launcher.environment, out, err, 120) == 0, err.read_text()
    # (lightning_fabric imports transformers' package, not its model code nor sentence-transformers)
    assert set(json.loads(out.read_text())) - {"transformers"} == set(LIGHT_WITH_LIGHTNING)
    if commands.forking():
        assert json.loads(run_command(script, *names).stdout) == names


CHILD = """
import json, os, sys
preimported = "torch" in sys.modules
from lightning_fabric.utilities.rank_zero import rank_zero_only
print(json.dumps({"preimported": preimported, "argv": sys.argv, "cwd": os.getcwd(), "name": __name__,
                  "own": os.environ.get("SPACEWALK_TEST_CHILD"), "write_through": sys.stdout.write_through,
                  "rank": rank_zero_only.rank}))
print("child to stderr", file=sys.stderr)
sys.exit(5)
"""

SLEEPER = """
import os, signal, sys, time
signal.signal(signal.SIGTERM, lambda *_: (open(sys.argv[1] + ".terminated", "w").close(), sys.exit(3)))
open(sys.argv[1] + ".tmp", "w").write(str(os.getpid()))
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
time.sleep(60)
"""

PARENT = """
import json, os, signal, subprocess, sys, time

folder, threads = sys.argv[1], sys.argv[2]
child, sleeper = os.path.join(folder, "child.py"), os.path.join(folder, "sleeper.py")


def run(args, **variables):
    done = subprocess.run([sys.executable, *args], cwd=folder, env=os.environ | variables, capture_output=True,
                          text=True, timeout=60)
    return {"returncode": done.returncode, "stdout": done.stdout, "stderr": done.stderr}


def started(name):
    pid_file = os.path.join(folder, name)
    process = subprocess.Popen([sys.executable, sleeper, pid_file])
    while not os.path.exists(pid_file):
        time.sleep(0.05)
    return process, int(open(pid_file).read())


def gone(pid):
    for _ in range(200):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


report = {"script": run([child, "a"], SPACEWALK_TEST_CHILD="x", LOCAL_RANK="1"),
          "unbuffered_module": run(["-u", "-B", "-m", "child", "b"]),
          "own_variable": run([child], OMP_NUM_THREADS=threads),
          "dash_c": run(["-c", "import sys; print('torch' in sys.modules)"]),
          "self_killed": run([os.path.join(folder, "self_killed.py")])}
process, pid = started("killed.pid")
process.kill()
report["killed"] = {"returncode": process.wait(), "gone": gone(pid)}
process, pid = started("terminated.pid")
process.terminate()
report["terminated"] = {"returncode": process.wait(), "gone": gone(pid),
                        "handled": os.path.exists(os.path.join(folder, "terminated.pid.terminated"))}
print(json.dumps(report))
"""


def test_a_commands_own_python_is_a_fork_of_the_launcher_where_a_fresh_one_would_read_the_same(launcher, tmp_path):
    """What a command starts as `sys.executable SCRIPT` or `-m MODULE` (a DDP rank, a sweep's job) is forked from the
    launcher too: its own argv, folder, environment (the rank Lightning, imported by the launcher, reads from it),
    streams and status (an end by SIGKILL too), -u honoured, the process ended when the one that started it is
    killed and a signal to that one passed on; `-c` and an environment that a preimported library reads differently
    get the real interpreter."""
    (tmp_path / "child.py").write_text(CHILD)
    (tmp_path / "sleeper.py").write_text(SLEEPER)
    (tmp_path / "parent.py").write_text(PARENT)
    (tmp_path / "self_killed.py").write_text("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n")
    # a thread count other than the launcher's: OMP_NUM_THREADS is read when torch is imported
    threads = str(int(launcher.environment.get("OMP_NUM_THREADS", "1")) + 1)
    out, err = tmp_path / "out", tmp_path / "err"
    assert launcher.run([str(tmp_path / "parent.py"), str(tmp_path), threads], launcher.environment, out, err,
                        120) == 0, err.read_text()
    report = json.loads(out.read_text())
    unbuffered = bool(launcher.environment.get("PYTHONUNBUFFERED"))  # as a fresh interpreter's streams would be
    script = report["script"]
    assert script["returncode"] == 5 and script["stderr"] == "child to stderr\n"
    assert json.loads(script["stdout"]) == {"preimported": True, "argv": [str(tmp_path / "child.py"), "a"],
                                            "cwd": str(tmp_path), "name": "__main__", "own": "x",
                                            "write_through": unbuffered, "rank": 1}
    module = report["unbuffered_module"]
    assert module["returncode"] == 5 and json.loads(module["stdout"]) == {
        "preimported": True, "argv": [str(tmp_path / "child.py"), "b"], "cwd": str(tmp_path), "name": "__main__",
        "own": None, "write_through": True, "rank": 0}
    # a fresh interpreter, as everything given -c
    assert json.loads(report["own_variable"]["stdout"])["preimported"] is False
    assert report["dash_c"]["stdout"] == "False\n"
    assert report["killed"] == {"returncode": -9, "gone": True}
    # a program that ends by SIGKILL (its own, or the kernel's out-of-memory killer): its starter sees it so
    assert report["self_killed"] == {"returncode": -9, "stdout": "", "stderr": ""}
    # SIGTERM reaches the process itself, which handles it (its handler exits 3)
    assert report["terminated"] == {"returncode": 3, "gone": True, "handled": True}


SERVER = """
import json, os, signal, sys, time
signal.signal(signal.SIGTERM, lambda *_: sys.exit(3))
print(json.dumps({"preimported": "torch" in sys.modules, "parent": os.getppid(), "argv": sys.argv[1:],
                  "marker": os.environ.get("SPACEWALK_TEST_MARKER")}), flush=True)
time.sleep(120)
"""


def test_a_program_a_test_starts_with_python_for_is_a_fork_that_outlives_a_new_launcher(light_launchers,
                                                                                       monkeypatch, tmp_path):
    """python_for: the launcher's interpreter script for run_command's environment (its own value of a variable read
    only at run time too), the program a fork of the launcher, which a change of the test process's variables
    replaces for new commands but keeps until the program, stopped by SIGTERM, ends; sys.executable for an
    environment with a variable of its own."""
    environment = commands.command_environment()
    assert commands.python_for(environment | {"FORKED_MARKER": "own"}) == sys.executable
    if not commands.forking():
        assert commands.python_for(environment) == sys.executable
        return
    # launchers of this test's own (light_launchers): the worker's may still run a program a session fixture started
    python = commands.python_for(environment | {"SPACEWALK_TEST_MARKER": "run time"})
    first = commands._launcher
    assert python != sys.executable and python == first.interpreter()
    (tmp_path / "server.py").write_text(SERVER)
    server = subprocess.Popen([python, str(tmp_path / "server.py"), "a"], stdout=subprocess.PIPE, text=True,
                              env=environment | {"SPACEWALK_TEST_MARKER": "run time"})
    try:
        assert json.loads(server.stdout.readline()) == {"preimported": True, "parent": first.process.pid,
                                                        "argv": ["a"], "marker": "run time"}
        monkeypatch.setenv("FORKED_MARKER", "changed")
        script = tmp_path / "report.py"
        script.write_text(REPORT)
        assert json.loads(run_command(script).stdout)["marker"] == "changed"
        assert commands._launcher is not first and first.alive() and server.poll() is None
        # a program started with the replaced launcher's script now gets the real interpreter
        (tmp_path / "imported.py").write_text("import sys\nprint('torch' in sys.modules)\n")
        assert subprocess.run([python, str(tmp_path / "imported.py")], env=environment, capture_output=True,
                              text=True, timeout=120).stdout == "False\n"
    finally:
        server.terminate()
        assert server.wait(timeout=30) == 3
        server.stdout.close()
        commands._launcher.close()
    assert first.process.wait(timeout=30) == 0  # its last program ended: the launcher replaced ends
