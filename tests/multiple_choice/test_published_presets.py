"""The published-settings presets (conf/model/mc_<family>_<benchmark>.yaml): each composes into the transformers
backend with the family it is named for, and every setting it gives names its source beside it (a comment on the
same line), as docs/multiple_choice.md's table of them says."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from conftest import CONF, compose_config

PRESETS = {"mc_qwen2_5_vl_egoschema": ("qwen2_5_vl", "egoschema"), "mc_qwen3_vl_egoschema": ("qwen3_vl", "egoschema"),
           "mc_llava_onevision_egoschema": ("llava_onevision", "egoschema"),
           "mc_gemma3_egoschema": ("gemma3", "egoschema"), "mc_qwen2_5_vl_egocross": ("qwen2_5_vl", "egocross"),
           "mc_qwen2_5_vl_spacewalk18": ("qwen2_5_vl", "spacewalk18_step_questions")}


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_a_preset_composes_with_its_family_and_sources_every_value(preset):
    family, data = PRESETS[preset]
    cfg = compose_config("evaluate", f"data={data}", f"model={preset}")
    assert cfg.model._target_.endswith("TransformersVLMBackend") and cfg.model.family == family
    lines = (CONF / "model" / f"{preset}.yaml").read_text().splitlines()
    own = OmegaConf.load(CONF / "model" / f"{preset}.yaml")
    for key in own:
        if key in ("defaults", "family", "model"):
            continue
        line = next(line for line in lines if line.startswith(f"{key}:"))
        assert "#" in line.split(":", 1)[1], f"{preset}: {key} has no source beside it"
    assert "docs/multiple_choice.md" in lines[0] + "".join(lines[1:4])
