"""What the SLURM configs read from the machine, checked where it is read (docs/cluster.md).

`trainer=slurm` takes its devices and nodes from the job (`${slurm_count:SLURM_NTASKS_PER_NODE}`,
`${slurm_count:SLURM_NNODES}`, conf/trainer/slurm.yaml): a value that is not a count is refused naming the
variable (Lightning would say only that `devices` must be an int > 0); outside a SLURM job the run is one process,
and says so once. `hydra/launcher=slurm` submits with sbatch, so it needs a machine with SLURM's commands:
`check_launcher` refuses it elsewhere before anything is written (submitit's own check is a traceback).
"""

from __future__ import annotations

import logging
import os
import shutil

from omegaconf import DictConfig

from spacewalk.core.errors import ConfigError

log = logging.getLogger(__name__)

_told_outside = False  # the "outside a SLURM job" message, once per process (devices and num_nodes both ask)


def slurm_count(variable: str) -> int:
    """The whole number of at least 1 in the environment variable `variable`; 1, saying so once, where it is not
    set (a run outside a SLURM job)."""
    global _told_outside
    value = os.environ.get(variable)
    if value is None:
        if not _told_outside:
            _told_outside = True
            if "SLURM_JOB_ID" in os.environ:  # a job submitted without the option that sets it
                log.warning("trainer=slurm: %s is not set in SLURM job %s (sbatch without --ntasks-per-node or "
                            "--nodes): 1 is taken for it", variable, os.environ["SLURM_JOB_ID"])
            else:
                log.warning("trainer=slurm outside a SLURM job (%s is not set): one process on this machine. In "
                            "an sbatch script start train.py with srun; for several GPUs of one machine use "
                            "trainer=ddp (docs/cluster.md)", variable)
        return 1
    if not value.strip().isdigit() or int(value) < 1:
        raise ConfigError(f"{variable}={value!r}: trainer=slurm reads the job's {_MEANING.get(variable, 'size')} "
                          "from it, a whole number of at least 1 (sbatch sets it from --ntasks-per-node and "
                          "--nodes; unset it outside a SLURM job)")
    return int(value)


_MEANING = {"SLURM_NTASKS_PER_NODE": "processes per node (the trainer's devices)",
            "SLURM_NNODES": "nodes (the trainer's num_nodes)"}


def check_launcher(config: DictConfig) -> None:
    """Refuse a SLURM launcher (ours, `hydra/launcher=slurm`, or the plugin's `submitit_slurm`) on a machine without
    SLURM: the jobs are submitted from a login node, with sbatch."""
    target = str(config.hydra.launcher.get("_target_", ""))
    if target.endswith("SlurmLauncher") and shutil.which("srun") is None:
        raise ConfigError(f"hydra/launcher={config.hydra.runtime.choices.get('hydra/launcher', 'slurm')} submits "
                          "the sweep's jobs to SLURM, but this machine has no SLURM (srun is not on PATH): run the "
                          "command on the cluster's login node, or use hydra/launcher=local to run the jobs here")
