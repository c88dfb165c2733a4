"""`mc_qwen2_5_vl` and `mc_llava_onevision` give the same replies, records and model inputs as before the transformers
backend became one backend over the auto classes with per-family settings as data (spacewalk/multiple_choice/
backends/transformers_vlm.py, vlm_families.yaml). golden/transformers_presets.json was written by the OLD backend (the
one with a hard-coded table and `if family == ...` branches, commit 352a455) with `python
tests/multiple_choice/test_transformers_presets_golden.py WRITE`, on the tiny random checkpoints of
spacewalk/multiple_choice/tiny_models.py; this test runs the same scenarios through the current backend.

What must be equal is compared exactly: replies, records, and every integer tensor handed to `generate` (token ids,
masks, grids), by a hash of its bytes. A float tensor (pixels, frame times) cannot be: the synthetic video is
rendered, encoded and decoded on the machine running the test, and numpy's transcendental functions, the
RGB-to-YUV conversion and image resizing round differently from one instruction set to another, so the same
scenario gives pixels one or two levels apart on an AMD EPYC and on an Intel Xeon. A float tensor is kept as
its shape, dtype and a fingerprint of BLOCKS contiguous blocks of its values: each block's mean, and its values
dotted with a fixed random +-1 vector over sqrt(its size). Rounding noise moves both by a hundredth (one level of
a 0-255 pixel is 0.015 after the processors' normalisation); a frame shifted by one pixel moves the dotted values
by 0.3 to 0.6 (both measured by the tests below), so FLOAT_TOLERANCE sits between them. Do not rewrite the
golden file to make the test pass: a difference is a change in what the presets' models are shown."""

from __future__ import annotations

import hashlib
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
    from spacewalk.benchmarks.spacewalk18.open import open_spacewalk18
    from spacewalk.benchmarks.spacewalk18.questions.question_answering import QuestionAnswering

    qa = QuestionAnswering(open_spacewalk18(synthetic_root=folder / "synthetic", synthetic=SMALL), limit=2)
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


BLOCKS = 16
FLOAT_TOLERANCE = {"mean": 0.02, "dotted": 0.1}


def fingerprint(tensor) -> list | dict:
    """An integer tensor as [shape, a hash of its bytes]; a float tensor as its shape, dtype and each block's mean
    and dotted value (module docstring)."""
    t = tensor.detach().cpu().contiguous()
    if not t.is_floating_point():
        return [list(t.shape), hashlib.sha256(t.numpy().tobytes()).hexdigest()[:16]]
    blocks = np.array_split(t.double().flatten().numpy(), min(BLOCKS, t.numel()))
    signs = [np.random.default_rng(len(b)).choice([-1.0, 1.0], len(b)) for b in blocks]
    return {"shape": list(t.shape), "dtype": str(t.dtype),
            "mean": [round(float(b.mean()), 6) for b in blocks],
            "dotted": [round(float(s @ b) / np.sqrt(len(b)), 6) for s, b in zip(signs, blocks)]}


def differences(actual, golden, where: str = "") -> list[str]:
    """Where `actual` differs from `golden`: exactly, except float tensors' fingerprints within FLOAT_TOLERANCE."""
    if isinstance(golden, dict) and "dotted" in golden:
        if not isinstance(actual, dict) or (actual["shape"], actual["dtype"]) != (golden["shape"], golden["dtype"]):
            return [f"{where}: {actual} where the golden file has a float tensor of shape {golden['shape']}"]
        off = {k: float(np.abs(np.subtract(actual[k], golden[k])).max()) for k in FLOAT_TOLERANCE}
        return [f"{where}: block {k}s off by up to {v:.4g} (tolerance {FLOAT_TOLERANCE[k]})"
                for k, v in off.items() if v > FLOAT_TOLERANCE[k]]
    if isinstance(golden, dict) and isinstance(actual, dict) and actual.keys() == golden.keys():
        return [d for k in golden for d in differences(actual[k], golden[k], f"{where}/{k}")]
    if isinstance(golden, list) and isinstance(actual, list) and len(actual) == len(golden):
        return [d for i, (a, g) in enumerate(zip(actual, golden)) for d in differences(a, g, f"{where}[{i}]")]
    return [] if actual == golden else [f"{where}: {actual!r} where the golden file has {golden!r}"]


def watched(model, inputs: list):
    """The model, its generate() remembering a fingerprint of every tensor it is given (what the model saw)."""
    generate = model.generate

    def spy(**kwargs):
        inputs.append({k: fingerprint(v) for k, v in sorted(kwargs.items()) if hasattr(v, "shape")})
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
    assert differences(replies(tmp_path), json.loads(GOLDEN.read_text())) == []


def qa_inputs(folder: Path, change=None) -> dict[str, list]:
    """Each family's model inputs for the Spacewalk-18 QA rows (frames decoded from the synthetic video, the case
    whose pixels differ between machines), each clip's frames passed through `change` first."""
    items, prompts = scenarios(folder)
    out = {}
    for family in SETTINGS:
        model, processor = build(family)
        seen: list = []
        backend = TransformersVLMBackend(family, model_object=watched(model, seen), processor=processor,
                                         dtype="float32", device="cpu", max_new_tokens=1, families=AS_BEFORE,
                                         num_frames=4)
        backend.answer(items[4:], prompts[4:])
        out[family] = seen
    return out


@pytest.fixture
def changed_frames(monkeypatch):
    """Sets how every sampled clip's uint8 frames are changed before the processor sees them."""
    from spacewalk.multiple_choice.backends import transformers_vlm

    sample = transformers_vlm.sample_frames

    def use(change):
        def changed(part, rule):
            frames, times = sample(part, rule)
            return change(frames), times

        monkeypatch.setattr(transformers_vlm, "sample_frames", changed)
    return use


def pixel_differences(changed: dict, unchanged: dict) -> dict[str, list[str]]:
    return {family: [d for d in differences(changed[family], unchanged[family]) if "pixel_values" in d]
            for family in unchanged}


@pytest.mark.slow
def test_a_frame_shifted_by_one_pixel_is_caught(tmp_path, changed_frames):
    unchanged = qa_inputs(tmp_path)
    changed_frames(lambda frames: np.roll(frames, 1, axis=2))
    found = pixel_differences(qa_inputs(tmp_path), unchanged)
    assert all(found.values()), found  # both families' pixel tensors flagged


@pytest.mark.slow
def test_rounding_noise_between_machines_passes(tmp_path, changed_frames):
    """One level up or down on 30 % of the pixels, and one level up on 30 % (a biased rounding): more than the AMD
    and Intel machines differ by, and not flagged."""
    unchanged = qa_inputs(tmp_path)
    rng = np.random.default_rng(0)
    for noise in (lambda shape: rng.choice([-1, 0, 1], shape, p=[0.15, 0.7, 0.15]),
                  lambda shape: (rng.random(shape) < 0.3).astype(int)):
        changed_frames(lambda frames, noise=noise: np.clip(frames.astype(int) + noise(frames.shape), 0, 255)
                       .astype(np.uint8))
        assert pixel_differences(qa_inputs(tmp_path), unchanged) == {family: [] for family in SETTINGS}


if __name__ == "__main__" and sys.argv[1:] == ["WRITE"]:
    import tempfile

    with tempfile.TemporaryDirectory() as scratch:
        GOLDEN.write_text(json.dumps(replies(Path(scratch))) + "\n")
