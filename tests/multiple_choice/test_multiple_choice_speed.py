"""measurements/multiple_choice_speed.py's count of what a clip costs Qwen2.5-VL (the figures behind
docs/speed.md's one-hour item): its visual tokens against transformers' own count, and the one-hour clip's
figures at the settings compared there."""

from __future__ import annotations

import importlib.util

import pytest
from transformers.models.qwen2_vl.video_processing_qwen2_vl import Qwen2VLVideoProcessor

from helpers.commands import REPO


def load_script():
    spec = importlib.util.spec_from_file_location("multiple_choice_speed",
                                                  REPO / "measurements/multiple_choice_speed.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


speed = load_script()


@pytest.mark.parametrize("frames, height, width, bounds", [
    (768, 720, 1280, speed.QWEN_7B_BOUNDS),  # a one-hour clip at the 7B's own bounds
    (33, 720, 1280, (256 * 28 * 28, 235200)),  # lmms-eval's
    (7, 480, 640, (128 * 28 * 28, 768 * 28 * 28)),  # an odd count: padded to a pair
    (4, 64, 64, (100352, 602112)),  # enlarged to min_pixels
])
def test_visual_tokens_are_the_processors_count(frames, height, width, bounds):
    processor = Qwen2VLVideoProcessor(min_pixels=bounds[0], max_pixels=bounds[1])
    patches = processor.get_num_of_video_patches(frames, height, width, {})  # 14x14 patches; 2x2 make a token
    assert speed.qwen_video_cost(frames, height, width, bounds)["visual_tokens"] == patches // 4


def test_qwen_vl_utils_cap_is_the_clips_share_of_its_total():
    assert speed.qwen_vl_utils_max_pixels(16) == 768 * 28 * 28  # a short clip: the per-frame cap
    assert speed.qwen_vl_utils_max_pixels(768) == 128000 * 28 * 28 * 0.9 * 2 / 768  # 235200
    assert speed.qwen_vl_utils_max_pixels(4000) == int(128 * 28 * 28 * 1.05)  # never below 1.05 x min_pixels


def test_one_hour_figures():
    costs = dict(speed.one_hour_costs(768, 720, 1280))
    unbounded = costs["no budget: the 7B processor's bounds"]
    assert unbounded["size"] == [1288, 728] and unbounded["visual_tokens"] == 384 * 26 * 46 == 459264
    assert unbounded["visual_tokens"] > 3 * speed.QWEN_7B_POSITIONS  # over three times the 7B's context
    assert unbounded["kv_cache_bytes"] == 459264 * 57344 and unbounded["pixel_values_bytes"] == 768 * 728 * 1288 * 12
    # transformers' video processor class bounds (a checkpoint with its own video processor config), no total
    assert costs["no budget: transformers' video bounds"]["visual_tokens"] == 384 * 20 * 36 == 276480
    reference = costs["qwen-vl-utils 0.0.10 defaults"]
    assert reference["size"] == [644, 336] and reference["visual_tokens"] == 384 * 12 * 23
    assert reference["visual_tokens"] <= 0.9 * speed.QWEN_7B_POSITIONS
    # the config's budget (conf/model/mc_qwen2_5_vl.yaml: qwen-vl-utils' video defaults) under the 7B's context: all 768
    # frames, shrunk to the largest common size that fits, a row of tokens larger than qwen-vl-utils' own rounding
    (config,) = [cost for name, cost in costs.items() if name.startswith("mc_qwen2_5_vl.yaml")]
    assert config["frames"] == 768 and config["size"] == [644, 364] and config["visual_tokens"] == 384 * 13 * 23
    assert config["frames"] * 644 * 364 <= 2 * speed.VIDEO_TOTAL_PIXELS
    assert config["visual_tokens"] <= 0.9 * speed.QWEN_7B_POSITIONS
    lmms = costs["lmms-eval qwen2_5_vl defaults"]
    assert lmms["frames"] == 33 and lmms["size"] == [644, 336] and lmms["visual_tokens"] == 17 * 12 * 23
