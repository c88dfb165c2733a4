"""A sweep (`python train.py -m ...`, `python evaluate.py -m ...`) with jobs that fail: the other jobs run to their
end, the sweep's summary lists them all (spacewalk/training/sweep_summary.py), and then each failed job is named
with its overrides and its error, one `error:` line each, and the command exits non-zero (2 when every failure was
the user's: a bad value, file or argument; 1 when one was a bug or a job that died).

Without this, Hydra's own launcher stops the sweep at the first job that fails (our commands end a user error with
SystemExit, which it does not catch), and submitit's launchers raise the first failed job's UncompletedJobError
after the others, before any summary is written.

Two parts, for any launcher:
- `recorded_when_swept()`, around the task function (train.py, evaluate.py): in a multirun job, an error ends
  that job alone: it is logged (with its traceback where it is a bug) and recorded in
  `<sweep dir>/failed_jobs/<job number>.json` (its overrides, its message, whether it was the user's), and the job
  returns None (an Optuna sweep counts the trial failed). Outside a multirun it does nothing.
- `SweepFailures`, a Hydra callback (conf/hydra/default.yaml). When the multirun starts: refuses a launcher that
  cannot run here (spacewalk/training/slurm.py), clears the records of a sweep directory used again, and, for the
  submitit launchers (hydra/launcher=local, slurm), has the launcher wait for every job: a job that died without a
  result (killed, out of time or memory) is recorded the same way instead of ending the sweep. Hydra takes a
  launcher class only from its plugin package, so the plugin's launcher stays and its executor's `map_array` is
  wrapped in this process for the multirun's duration. When the multirun ends (after the summary: Hydra calls the
  callbacks in reverse order then, so this one is listed before it): names the failed jobs and exits.
"""

from __future__ import annotations

import json
import logging
import shutil
import sys
import traceback
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.core.utils import JobReturn, JobStatus
from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig

from spacewalk.core.command_errors import EXIT_USER_ERROR, user_error_in, user_errors_reported
from spacewalk.core.io import write_json

log = logging.getLogger(__name__)

FAILED_JOBS = "failed_jobs"
EXIT_FAILED_JOB = 1  # a job that failed on a bug, or died


def failure_file(sweep_dir: str | Path, job_num: int) -> Path:
    return Path(sweep_dir) / FAILED_JOBS / f"{job_num}.json"


def record_failure(sweep_dir: str | Path, job_num: int, overrides: Sequence[str], error: str, users: bool) -> Path:
    """Write a failed job's record (atomically: the launching process reads it at the end)."""
    return write_json(failure_file(sweep_dir, job_num), {"job": job_num, "overrides": list(overrides),
                                                         "error": error, "user_error": users})


def read_failures(sweep_dir: str | Path) -> list[dict[str, Any]]:
    """The sweep's failed jobs, in job order."""
    folder = Path(sweep_dir) / FAILED_JOBS
    records = [json.loads(p.read_text(encoding="utf-8")) for p in folder.glob("*.json")] if folder.is_dir() else []
    return sorted(records, key=lambda r: r["job"])


@contextmanager
def recorded_when_swept() -> Iterator[None]:
    """In a multirun job, an error ends this job alone, recorded for the end of the sweep; elsewhere, nothing."""
    if not HydraConfig.initialized() or HydraConfig.get().mode != RunMode.MULTIRUN:
        yield
        return
    hydra = HydraConfig.get()
    job_num, sweep_dir = int(hydra.job.num), hydra.sweep.dir
    overrides = [str(o) for o in hydra.overrides.task]
    failure_file(sweep_dir, job_num).unlink(missing_ok=True)  # a job run again in the same sweep directory
    try:
        yield
    except (Exception, SystemExit) as error:  # noqa: BLE001 -- recorded, and the sweep goes on
        if isinstance(error, SystemExit) and error.code in (0, None):
            raise
        cause = user_error_in(error)
        if cause is not None:
            message = str(cause)
            log.error("job %d failed: %s", job_num, message)
        else:
            message = "".join(traceback.format_exception_only(type(error), error)).strip().splitlines()[-1]
            log.error("job %d failed on a bug:\n%s", job_num, "".join(traceback.format_exception(error)))
        record_failure(sweep_dir, job_num, overrides, message, cause is not None)


def _job_ended_without_result(sweep_dir: Path, job_num: int, overrides: Sequence[str], error: Exception,
                              logs: Path | None) -> JobReturn:
    """A submitit job that died (killed, out of time or memory, an interpreter crash): recorded as failed, and
    given to Hydra as a job that returned nothing, so that the sweep waits for the others and ends with its
    summary and the failures."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    state = next((line for line in lines if "state:" in line), lines[0] if lines else type(error).__name__)
    record_failure(sweep_dir, job_num, overrides, f"the job ended without a result ({state})"
                   + (f"; its output: {logs}" if logs is not None else ""), users=False)
    ret = JobReturn()
    ret.overrides, ret.status, ret.return_value = list(overrides), JobStatus.COMPLETED, None
    return ret


class _Waited:
    """A submitted job whose `results()` never raises (the launcher asks each job in turn, and the first to raise
    would end the sweep while the others run on)."""

    def __init__(self, job, sweep_dir: Path, job_num: int, overrides: Sequence[str]):
        from submitit.local.local import LocalJob

        self.job, self.sweep_dir, self.job_num, self.overrides = job, sweep_dir, job_num, overrides
        if isinstance(job, LocalJob):
            # submitit waits up to 15 s for an ended job's result file to appear, for a cluster's shared file system;
            # a job on this machine wrote it before its process ended, or never will (a killed job). The wait is
            # submitit's private `_results_timeout_s` (1.5): without it the wait is back, nothing else changes
            job._results_timeout_s = 0

    def results(self) -> list[Any]:
        from submitit.core.utils import FailedJobError, UncompletedJobError

        try:
            return self.job.results()
        except (UncompletedJobError, FailedJobError) as error:
            paths = getattr(self.job, "paths", None)
            logs = paths.stderr.parent if paths is not None else None
            return [_job_ended_without_result(self.sweep_dir, self.job_num, self.overrides, error, logs)]


_submit = None  # submitit's own map_array while every_job_waited_for holds it (module state: the callback is pickled)


def every_job_waited_for(sweep_dir: Path) -> None:
    """Have submitit's `map_array` give _Waited jobs, until `submitit_restored()`. The plugin's launcher submits with
    it and then asks each job for its result in turn, with the arguments (overrides, sweep key, job number, ...)
    of each job in order: its own code, untouched, then waits for every job."""
    global _submit
    import submitit

    submitit_restored()
    submit = _submit = submitit.AutoExecutor.map_array

    def map_array(executor, fn, *arguments):
        jobs = submit(executor, fn, *arguments)
        overrides, numbers = arguments[0], arguments[2]
        return [_Waited(job, sweep_dir, int(num), list(job_overrides))
                for job, job_overrides, num in zip(jobs, overrides, numbers)]

    submitit.AutoExecutor.map_array = map_array


def submitit_restored() -> None:
    global _submit
    if _submit is not None:
        import submitit

        submitit.AutoExecutor.map_array, _submit = _submit, None


def launches_with_submitit(launcher: DictConfig) -> bool:
    """Whether the multirun's launcher is one of submitit's (the plugin's own configs or ours over them): decided by
    the class the launcher config instantiates, so a launcher of any name that subclasses them counts."""
    target = launcher.get("_target_")
    if not target:
        return False
    try:
        from hydra.utils import get_class
        from hydra_plugins.hydra_submitit_launcher.submitit_launcher import BaseSubmititLauncher

        return issubclass(get_class(str(target)), BaseSubmititLauncher)
    except ImportError:  # the plugin is not installed (extra `cluster`): no launcher of it can be running
        return False


def swept_keys(command_overrides: Sequence[str]) -> set[str]:
    """The keys the command sweeps (`context=5min,7x`: context), which tell a sweep's jobs apart: a failed job is
    named by its values of these (its whole list is in its record)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    overrides = OverridesParser.create().parse_overrides([str(o) for o in command_overrides])
    return {o.key_or_group for o in overrides if o.is_sweep_override()}


def _key(override: str) -> str:
    return override.split("=", 1)[0].lstrip("+~")


class SweepFailures(Callback):
    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        from spacewalk.training.slurm import check_launcher

        with user_errors_reported():  # one line, exit code 2, before any job or folder
            check_launcher(config)
        sweep_dir = Path(config.hydra.sweep.dir)
        shutil.rmtree(sweep_dir / FAILED_JOBS, ignore_errors=True)
        if launches_with_submitit(config.hydra.launcher):
            every_job_waited_for(sweep_dir)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        submitit_restored()
        failures = read_failures(config.hydra.sweep.dir)
        if not failures:
            return
        sweep_dir = Path(config.hydra.sweep.dir)
        log.error("%d job(s) of the sweep failed (their records: %s); the summary lists them with no numbers",
                  len(failures), sweep_dir / FAILED_JOBS)
        swept = swept_keys(config.hydra.overrides.task)
        for failure in failures:
            own = [o for o in failure["overrides"] if _key(o) in swept] or failure["overrides"]
            print(f"error: job {failure['job']} ({' '.join(own)}) failed: {failure['error']}", file=sys.stderr)
        raise SystemExit(EXIT_USER_ERROR if all(f["user_error"] for f in failures) else EXIT_FAILED_JOB)
