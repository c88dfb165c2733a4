"""The command's output folder (`hydra.run.dir`, or `hydra.sweep.dir` of a multirun) checked before Hydra makes
it: a file where it, or one of the folders above it, must be is refused on one `error:` line, exit code 2 (Hydra's
own mkdir would end in a FileExistsError traceback). A Hydra callback, conf/hydra/default.yaml."""

from __future__ import annotations

from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from spacewalk.core.command_errors import user_errors_reported
from spacewalk.core.errors import ConfigError
from spacewalk.core.io import file_in_the_way


def check_output_folder(folder: str, setting: str) -> None:
    blocker = file_in_the_way(folder)
    if blocker is not None:
        where = "" if str(blocker) == str(folder) else f" (above {folder})"
        raise ConfigError(f"{setting}={folder}: {blocker} is a file{where}, where the run's folder must be; give "
                          f"another {setting}")


class OutputFolders(Callback):
    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        with user_errors_reported():
            check_output_folder(str(config.hydra.run.dir), "hydra.run.dir")

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        with user_errors_reported():
            check_output_folder(str(config.hydra.sweep.dir), "hydra.sweep.dir")
