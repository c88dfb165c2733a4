"""`mc_qwen2_5_vl` and `mc_llava_onevision` give the same replies and records as before the transformers backend
became one backend over the auto classes with per-family settings as data (spacewalk/multiple_choice/backends/
transformers_vlm.py, vlm_families.yaml). golden/transformers_presets.json was written by the OLD backend (the
one with a hard-coded table and `if family == ...` branches, commit 1a7c6da) with `python
tests/multiple_choice/test_transformers_presets_golden.py WRITE`, on the tiny random checkpoints of
spacewalk/multiple_choice/tiny_models.py; this test runs the same scenarios through the current backend and
compares every reply and record byte for byte. Do not rewrite the file to make the test pass: a difference is a
change in what the presets' models are shown."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from spacewalk.multiple_choice.backends.transformers_vlm import TransformersVLMBackend
from spacewalk.multiple_choice.items import MultipleChoiceItem, Visual
from spacewalk.multiple_choice.task import Prompt
from spacewalk.multiple_choice.tiny_models import build

GOLDEN = Path(__file__).parent / "golden" / "transformers_presets.json"
SMALL = dict(n_train=1, n_val=1, n_test=1, minutes=[4, 5], steps_per_video=[3, 5], samples_per_video=20,
             retrieval_samples_per_video=4, questions_per_video=4)
# (family, backend settings) per scenario (LLaVA-OneVision's processor stacks a call's videos, so it is not given
# the row whose clip and context clip differ in length: it never could take it); the budgets are the ones
# test_visual_budget.py exercises
SETTINGS = {
    "qwen2_5_vl": {"frames4": {"num_frames": 4}, "default": {}, "fps1": {"fps": 1.0, "max_frames": 3},
                   "budget": {"num_frames": 4, "min_pixels": 28 * 28, "max_total_pixels": 4 * 28 * 28},
                   "bounds": {"num_frames": 3, "max_pixels": 60 * 60}},
    "llava_onevision": {"frames4": {"num_frames": 4}, "default": {}, "fps1": {"fps": 1.0, "max_frames": 3},
                        "budget": {"num_frames": 4, "max_total_pixels": 2 * 28 * 28}},
}


def frames_visual(folder: Path, name: str, n: int, size: tuple[int, int], seed: int) -> Visual:
    rng = np.random.default_rng(seed)
    paths = []
    for i in range(n):
        paths.append(folder / f"{name}{i}.png")
        Image.fromarray(rng.integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)).save(paths[-1])
    return Visual(frames=tuple(paths), frame_times=tuple(2.0 * i for i in range(n)))


def scenarios(folder: Path) -> tuple[list[MultipleChoiceItem], list[Prompt]]:
    """Four items of extracted frames (clips of different lengths and sizes, a context clip, a still from a
    synthetic Spacewalk-18 video) with prompts of the kinds the tasks write."""
    from spacewalk.spacewalk18.open import open_spacewalk18
    from spacewalk.spacewalk18.question_answering import QuestionAnswering

    qa = QuestionAnswering(open_spacewalk18(synthetic_root=folder / "synthetic", synthetic=SMALL), max_items=2)
    qa_items = qa.items()
    still = Visual(video=qa_items[0].visual.video, time=1.0)
    clips = [frames_visual(folder, f"c{k}_", n, size, k) for k, (n, size) in
             enumerate([(5, (64, 48)), (3, (40, 40)), (6, (90, 60)), (4, (56, 56))])]
    preview = frames_visual(folder, "p", 2, (48, 48), 9)
    items = [MultipleChoiceItem(id=f"i{k}", question="q?", options=("x", "y", "z"), visual=c)
             for k, c in enumerate(clips)]
    prompts = [Prompt(("Watch the clip.", Prompt.VISUAL, "Which one? A. x B. y C. z"), system="Be brief."),
               Prompt((Prompt.VISUAL, "The preview:", preview, "A step:", still, "Answer with a letter.")),
               Prompt(("The still:", still, Prompt.VISUAL, "Answer.")),
               Prompt((Prompt.VISUAL, "Answer with the option's letter."))]
    return items + qa_items, prompts + [qa.prompt(i) for i in qa_items]


def digest(tensor) -> str:
    import hashlib

    return hashlib.sha256(tensor.detach().cpu().contiguous().numpy().tobytes()).hexdigest()[:16]


def watched(model, inputs: list):
    """The model, its generate() remembering a digest of every tensor it is given (what the model saw)."""
    generate = model.generate

    def spy(**kwargs):
        inputs.append({k: [list(v.shape), digest(v)] for k, v in sorted(kwargs.items()) if hasattr(v, "shape")})
        return generate(**kwargs)

    model.generate = spy
    return model


# the one setting changed on purpose since the golden file: Qwen2.5-VL's frame times now reach its processor
# (vlm_families.yaml); off here, so this test still compares the refactor alone
AS_BEFORE = {"qwen2_5_vl": {"video_metadata": False}}


def replies(folder: Path) -> dict:
    items, prompts = scenarios(folder)
    out: dict = {}
    for family, settings in SETTINGS.items():
        model, processor = build(family)
        seen: list = []
        model = watched(model, seen)
        for name, kwargs in settings.items():
            backend = TransformersVLMBackend(family, model_object=model, processor=processor, dtype="float32",
                                             device="cpu", max_new_tokens=5, families=AS_BEFORE, **kwargs)
            rows = [0, 1, 2] if family == "qwen2_5_vl" else [0, 2, 3]
            batched = [[r.text, r.meta] for r in backend.answer([items[i] for i in rows], [prompts[i] for i in rows])]
            rest = [[r.text, r.meta] for r in backend.answer(items[4:], prompts[4:])]
            out[f"{family}/{name}"] = batched + rest
        backend = TransformersVLMBackend(family, model_object=model, processor=processor, dtype="float32",
                                         device="cpu", max_new_tokens=5, text_only=True, families=AS_BEFORE)
        out[f"{family}/text_only"] = [[r.text, r.meta] for r in backend.answer(items[:2], prompts[:2])]
        out[f"{family}/caption"] = backend.caption_images([np.full((40, 40, 3), 90, np.uint8)], "Describe.")
        out[f"{family}/inputs"] = seen
    return json.loads(json.dumps(out))


@pytest.mark.slow
def test_presets_reply_as_before(tmp_path):
    assert replies(tmp_path) == json.loads(GOLDEN.read_text())


if __name__ == "__main__" and sys.argv[1:] == ["WRITE"]:
    import tempfile

    with tempfile.TemporaryDirectory() as scratch:
        GOLDEN.write_text(json.dumps(replies(Path(scratch))) + "\n")
