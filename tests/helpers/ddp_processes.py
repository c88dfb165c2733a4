"""How a test starts the processes of a DDP run itself (Lightning's `ddp_spawn`/`ddp_fork`, torch.multiprocessing):
forked where that is safe, spawned otherwise.

A spawned process is a fresh interpreter that imports torch and Lightning again (about 6.5 s of CPU each, measured
by process accounting); a forked one has them already. Forking is safe only while this process runs torch on one
thread: once a parallel region has run on two or more threads, the OpenMP pool does not survive a fork and the child's
first parallel region waits for threads that are gone (measured: a child's matmul hangs after the parent's ran on two
threads, and returns when the parent is back on one). Under `make test` each worker runs on one thread
(tests/conftest.py), so these tests fork; a run with more threads per process spawns."""

from __future__ import annotations


def start_method() -> str:
    import torch

    return "fork" if torch.get_num_threads() == 1 else "spawn"


def ddp_strategy() -> str:
    """Lightning's strategy name for processes started by this one: `ddp_fork` or `ddp_spawn`."""
    return f"ddp_{start_method()}"
