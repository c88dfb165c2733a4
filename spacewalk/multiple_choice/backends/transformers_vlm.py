"""Video LLMs from transformers, through each family's processor and chat template: Qwen2.5-VL
(`Qwen2_5_VLForConditionalGeneration`) and LLaVA-OneVision (`LlavaOnevisionForConditionalGeneration`).

Weights come from a local folder or a hub tag already in the local Hugging Face cache (`local_files_only`
by default: nothing is downloaded at run time; `allow_download=true` lifts it). The prompt's parts become
one user turn of the chat template, in order: texts, the clip's frames (FrameRule) as one video where the
prompt's visual marker is, and each context visual where the prompt puts it (a slice, such as the mission's
animated preview, as a further video sampled by the same rule; a still, such as a step's middle frame, as
an image). The processor receives the turn's videos and images each in prompt order (over the batch, row
by row), which is the order in which it fills the template's video and image tokens; decoding is greedy
(`do_sample=False`) with `max_new_tokens` (None: the task's answer limit, which the runner applies:
spacewalk/multiple_choice/generation.py); the runner's chunk is one batch (left padding). Frames: the family's
default when neither `num_frames` nor `fps` is given: Qwen2.5-VL's own rule (qwen-vl-utils: 2 fps, at most 768
frames), LLaVA-OneVision 32 frames uniformly (lmms-eval's setting).
The frames are decoded by us (decord) and handed to the processor with `do_sample_frames=False`, so the
processor never re-samples them. `dtype` bfloat16 / float16 / float32 / auto (bfloat16 on a GPU that has it,
else float32); `device` or `device_map` (e.g. "auto" to spread a large model over GPUs).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from spacewalk.encoders import resolve_device
from spacewalk.errors import ConfigError
from spacewalk.multiple_choice.frames import FrameRule, sample_frames
from spacewalk.multiple_choice.generation import TokenLimited
from spacewalk.multiple_choice.items import MultipleChoiceItem, Visual
from spacewalk.multiple_choice.task import Prompt, Reply

FAMILIES: dict[str, dict[str, Any]] = {
    "qwen2_5_vl": {"model_class": "Qwen2_5_VLForConditionalGeneration",
                   "frames": {"num_frames": None, "fps": 2.0, "max_frames": 768}},
    "llava_onevision": {"model_class": "LlavaOnevisionForConditionalGeneration",
                        "frames": {"num_frames": 32, "fps": None, "max_frames": None}},
}


def resolve_dtype(dtype: str, device: torch.device) -> torch.dtype:
    if dtype == "auto":
        return torch.bfloat16 if device.type == "cuda" and torch.cuda.is_bf16_supported() else torch.float32
    if dtype not in ("bfloat16", "float16", "float32"):
        raise ConfigError(f"dtype must be auto, bfloat16, float16 or float32, got {dtype!r}")
    return getattr(torch, dtype)


def conversation(prompt: Prompt, item: MultipleChoiceItem | None, with_visuals: bool = True) -> list[dict]:
    """The prompt as one user turn (and a system turn): texts in order, a video entry for each clip (the item's
    at the first visual marker, context slices where they are), an image entry for each still; no visual
    entries at all when `with_visuals` is false (text only)."""
    content: list[dict[str, Any]] = []
    for part in prompt.visual_parts(item, with_visuals):
        if isinstance(part, Visual):
            content.append({"type": "image" if part.is_still else "video"})
        else:
            content.append({"type": "text", "text": part})
    turns = [{"role": "system", "content": [{"type": "text", "text": prompt.system}]}] if prompt.system else []
    return turns + [{"role": "user", "content": content}]


class TransformersVLMBackend(TokenLimited):
    LIMIT_FIELD, LIMITS_SIDE = "max_new_tokens", "local"

    def __init__(self, family: str, model: str | None = None, num_frames: int | None = None, fps: float | None = None,
                 max_frames: int | None = None, dtype: str = "auto", device: str = "auto", device_map: Any = None,
                 max_new_tokens: int | None = None, attn_implementation: str | None = None, text_only: bool = False,
                 allow_download: bool = False, video_backend: str = "decord", model_object=None, processor=None):
        if family not in FAMILIES:
            raise ConfigError(f"unknown family {family!r}; choose from {sorted(FAMILIES)}")
        if (model is None) == (model_object is None):
            raise ConfigError("give model (a local folder or a hub tag in the local cache) or model_object")
        self.family = family
        self.device = resolve_device(device)
        self.dtype = resolve_dtype(dtype, self.device)
        if model_object is None:
            import transformers

            model_class = getattr(transformers, FAMILIES[family]["model_class"])
            load = {"local_files_only": not allow_download}
            processor = transformers.AutoProcessor.from_pretrained(model, **load)
            model_object = model_class.from_pretrained(
                model, dtype=self.dtype, device_map=device_map,
                **({"attn_implementation": attn_implementation} if attn_implementation else {}), **load)
            self.name = f"{family}:{model}"
        else:
            model_object = model_object.to(self.dtype)
            self.name = f"{family}:{type(model_object).__name__}"
        if device_map is None:
            model_object = model_object.to(self.device)
        self.model = model_object.eval()
        self.processor = processor
        self.processor.tokenizer.padding_side = "left"  # batched generation continues every row at its end
        if num_frames is None and fps is None:
            num_frames, fps, max_frames = (FAMILIES[family]["frames"][k] for k in ("num_frames", "fps", "max_frames"))
        self.rule = None if text_only else FrameRule(num_frames, fps, max_frames, video_backend)
        self._set_limit(max_new_tokens)

    def _visuals(self, prompt: Prompt, item: MultipleChoiceItem | None) -> tuple[list, list]:
        """The prompt's videos (frame lists) and stills, in prompt order."""
        videos, images = [], []
        for part in prompt.visual_parts(item):
            if isinstance(part, Visual):
                frames = sample_frames(part, self.rule)[0]
                (images.append(frames[0]) if part.is_still else videos.append(frames))
        return videos, images

    def _generate(self, prompts: Sequence[Prompt], items: Sequence[MultipleChoiceItem | None],
                  visuals: Sequence[tuple[list, list]] | None = None) -> list[str]:
        """`visuals`: each row's (videos, stills) when already decoded."""
        with_visuals = self.rule is not None
        if visuals is None:
            visuals = [self._visuals(p, item) if with_visuals else ([], []) for p, item in zip(prompts, items)]
        counts = [tuple(len(v) for v in videos) for videos, _ in visuals]
        groups: dict[tuple, list[int]] = {}
        for i, count in enumerate(counts):
            groups.setdefault(count, []).append(i)
        if self.family == "llava_onevision" and len({n for c in counts for n in c}) > 1 and len(groups) > 1:
            # its video processor stacks a call's videos into one tensor: rows whose clips differ in frame count
            # (frame lists and fps rules give clips of different lengths) go in separate calls; greedy, so the
            # replies are the same
            out: list[str] = [""] * len(prompts)
            for rows in groups.values():
                replies = self._generate([prompts[i] for i in rows], [items[i] for i in rows],
                                         [visuals[i] for i in rows])
                for i, text in zip(rows, replies):
                    out[i] = text
            return out
        texts = [self.processor.apply_chat_template(conversation(p, item, with_visuals), add_generation_prompt=True,
                                                    tokenize=False) for p, item in zip(prompts, items)]
        videos = [v for vs, _ in visuals for v in vs]
        images = [i for _, ims in visuals for i in ims]
        kwargs: dict[str, Any] = {}
        if videos:
            kwargs |= {"videos": videos, "do_sample_frames": False}
        if images:
            kwargs["images"] = images
        return self._decode(self.processor(text=texts, padding=True, return_tensors="pt", **kwargs))

    def _decode(self, inputs) -> list[str]:
        device = self.model.device
        inputs = {k: (v.to(device, self.dtype) if v.is_floating_point() else v.to(device)) if torch.is_tensor(v) else v
                  for k, v in inputs.items()}
        if self.max_new_tokens is None:
            raise ValueError(f"{self.name}: max_new_tokens is not set; the runner gives it the task's answer limit "
                             "(spacewalk/multiple_choice/generation.py), or pass max_new_tokens=N to use the "
                             "backend on its own")
        with torch.inference_mode():
            out = self.model.generate(**inputs, do_sample=False, max_new_tokens=self.max_new_tokens)
        new = out[:, inputs["input_ids"].shape[1]:]
        return [t.strip() for t in self.processor.batch_decode(new, skip_special_tokens=True)]

    def answer(self, items: Sequence[MultipleChoiceItem], prompts: Sequence[Prompt]) -> list[Reply]:
        if self.rule is not None:
            missing = [item.id for item in items if item.visual is None]
            if missing:
                raise ConfigError(f"items {missing[:3]} have no visual; use text_only=true for text-only items")
        return [Reply(text=t) for t in self._generate(prompts, items)]

    def generate(self, prompts: Sequence[Prompt]) -> list[str]:
        """Free text; the prompts' context visuals are shown (no item: no clip)."""
        return self._generate(prompts, [None] * len(prompts))

    def caption_images(self, images: Sequence, prompt: str, batch_size: int = 8) -> list[str]:
        """One reply per image to `prompt` (the captioner of the caption-enhanced LLM), greedy, batched."""
        out: list[str] = []
        for start in range(0, len(images), batch_size):
            batch = list(images[start:start + batch_size])
            turn = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": prompt}]}]
            texts = [self.processor.apply_chat_template(turn, add_generation_prompt=True, tokenize=False)] * len(batch)
            inputs = self.processor(text=texts, images=batch, padding=True, return_tensors="pt")
            out += self._decode(inputs)
        return out
