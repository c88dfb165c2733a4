"""spacewalk.core.settings.from_mapping: a config's mapping made into its dataclass, a misspelt key or a value of
the wrong type refused naming the key as the config spells it; used by every mapping of settings a config gives
(the bank, the synthetic sets, the retrieval sampler, the plan reader, the decoder's grid, the VLM families)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from spacewalk.benchmarks.egocross.synthetic import ensure_egocross
from spacewalk.benchmarks.egoschema.synthetic import ensure_egoschema
from spacewalk.benchmarks.hirest.synthetic.generate import ensure_hirest
from spacewalk.benchmarks.spacewalk18.decoding.plan_decoder import DecodeSettings
from spacewalk.benchmarks.spacewalk18.synthetic.generate import ensure_dataset
from spacewalk.core.errors import ConfigError
from spacewalk.core.settings import from_mapping
from spacewalk.multiple_choice.backends.transformers_vlm import load_families


@dataclass(frozen=True)
class Settings:
    count: int = 1
    rate: float = 1.0
    name: str = "a"
    on: bool = False
    size: int | None = None
    span: tuple[float, float] = (0.0, 1.0)


def test_keys_and_types_are_checked_naming_the_config_key():
    assert from_mapping(Settings, {"count": 2, "rate": 3, "span": [1, 2], "size": None}, "x") == \
        Settings(count=2, rate=3, span=[1, 2])  # an int where a float belongs; a list where a tuple does
    assert from_mapping(Settings, None, "x") == Settings()
    from omegaconf import OmegaConf  # what Hydra passes when it does not convert: a DictConfig of ListConfigs

    assert from_mapping(Settings, OmegaConf.create({"span": [1, 2]}), "x").span == [1, 2]
    for values, message in (({"cuont": 2}, "x.cuont: not a setting (did you mean count?); the settings are count, "
                                           "rate, name, on, size, span"),
                            ({"count": "abc"}, "x.count='abc': expected a whole number"),
                            ({"count": True}, "x.count=True: expected a whole number"),  # a bool is no count
                            ({"rate": "fast"}, "x.rate='fast': expected a number"),
                            ({"on": 1}, "x.on=1: expected true or false"),
                            ({"size": 2.5}, "x.size=2.5: expected a whole number or null"),
                            ({"span": 3}, "x.span=3: expected a list")):
        with pytest.raises(ConfigError) as error:
            from_mapping(Settings, values, "x")
        assert str(error.value) == message


def test_every_settings_mapping_of_the_configs_is_checked(tmp_path):
    for ensure in (ensure_dataset, ensure_egoschema, ensure_egocross, ensure_hirest):
        with pytest.raises(ConfigError, match="data.synthetic.n_tset: not a setting"):
            ensure(tmp_path / ensure.__name__, n_tset=2)
    with pytest.raises(ConfigError, match="data.synthetic.n_test='abc': expected a whole number"):
        ensure_dataset(tmp_path / "sw18", n_test="abc")
    assert not list(tmp_path.iterdir())  # refused before anything was written
    with pytest.raises(ConfigError, match="families.qwen2_5_vl.min_video_frames='abc': expected a whole number"):
        load_families({"qwen2_5_vl": {"min_video_frames": "abc"}})
    with pytest.raises(ConfigError, match=r"decoding.grid.rate_scale='x': expected a number"):
        DecodeSettings.grid(rate_scale=["x"])
