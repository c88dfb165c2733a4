"""spacewalk.core.command_errors: which exceptions are the user's (the message alone) and which are bugs (the
traceback), through the wrappers of Hydra and OmegaConf."""

from __future__ import annotations

import hydra
import pytest
from hydra.errors import InstantiationException
from omegaconf import OmegaConf
from omegaconf.errors import InterpolationResolutionError

from spacewalk.core.command_errors import user_error_in
from spacewalk.core.errors import ConfigError, DataError

from conftest import run_command


def refuse(value):
    raise ConfigError(f"value={value}: refused")


def test_a_user_error_is_found_inside_the_wrappers_of_omegaconf_and_hydra():
    OmegaConf.register_new_resolver("test_refuse", refuse, replace=True)
    cfg = OmegaConf.create({"a": "${test_refuse:7x}", "b": {"c": "${a}"}})
    with pytest.raises(InterpolationResolutionError) as resolved:
        OmegaConf.to_container(cfg, resolve=True)
    assert str(user_error_in(resolved.value)) == "value=7x: refused"

    with pytest.raises(InstantiationException) as instantiated:
        hydra.utils.instantiate({"_target_": "spacewalk.core.io.load_json", "path": "/nonexistent/x.json"})
    assert isinstance(user_error_in(instantiated.value), DataError)


def test_an_error_of_ours_is_a_bug_even_while_a_user_error_is_handled():
    try:
        try:
            raise DataError("bad", file="f.json")
        except DataError:
            raise KeyError("a bug in the handler")  # noqa: B904 -- the implicit context is the point
    except KeyError as bug:
        assert user_error_in(bug) is None
    wrapped = RuntimeError("while reading")
    wrapped.__cause__ = DataError("bad", file="f.json")
    assert isinstance(user_error_in(wrapped), DataError)  # `raise ... from e`: the cause is the user's


BODY = "from spacewalk.core.command_errors import user_errors_reported\nwith user_errors_reported():\n    raise {}\n"


def test_a_bug_keeps_its_traceback_and_a_user_error_shows_one_only_on_request():
    bug = run_command("-c", BODY.format("KeyError('a bug')"), check=False)
    assert bug.returncode == 1 and "Traceback" in bug.stderr and "KeyError: 'a bug'" in bug.stderr

    user = "__import__('spacewalk.core.errors').core.errors.DataError('not JSON', file='x.json')"
    quiet = run_command("-c", BODY.format(user), check=False)
    assert quiet.returncode == 2 and quiet.stderr == "error: x.json: not JSON\n"
    shown = run_command("-c", BODY.format(user), check=False, env={"SPACEWALK_TRACEBACK": "1"})
    assert shown.returncode == 1 and "Traceback" in shown.stderr and "DataError: x.json: not JSON" in shown.stderr


class Takes:
    def __init__(self, rate: float):
        if rate < 0:
            raise TypeError("a bug inside the target")  # not a binding error: raised by the target's own code
        self.rate = rate


def test_a_config_key_its_target_does_not_take_is_the_users():
    cfg = OmegaConf.create({"model": {"_target_": "test_command_errors.Takes", "rate": 1.0, "rtae": 2.0}})
    with pytest.raises(InstantiationException) as misspelt:
        hydra.utils.instantiate(cfg.model)
    message = str(user_error_in(misspelt.value))
    assert message.startswith("model: Takes.__init__() got an unexpected keyword argument 'rtae' "
                              "(test_command_errors.Takes does not take a key of this config"), message
    cfg = OmegaConf.create({"model": {"_target_": "test_command_errors.Takes"}})
    with pytest.raises(InstantiationException) as lacking:
        hydra.utils.instantiate(cfg.model)
    assert "missing 1 required positional argument: 'rate'" in str(user_error_in(lacking.value))
    cfg = OmegaConf.create({"model": {"_target_": "test_command_errors.Takes", "rate": -1.0}})
    with pytest.raises(InstantiationException) as bug:
        hydra.utils.instantiate(cfg.model)
    assert user_error_in(bug.value) is None  # a TypeError from inside the target keeps its traceback
