"""Video LLMs from transformers, through each family's processor and chat template: Qwen2.5-VL
(`Qwen2_5_VLForConditionalGeneration`) and LLaVA-OneVision (`LlavaOnevisionForConditionalGeneration`).

Weights come from a local folder or a hub tag already in the local Hugging Face cache (`local_files_only`
by default: nothing is downloaded at run time; `allow_download=true` lifts it). The prompt's parts become
one user turn of the chat template, the clip's frames (FrameRule) as one video where the prompt's visual
marker is; decoding is greedy (`do_sample=False`) with `max_new_tokens`; the runner's chunk is one batch
(left padding). Frames: the family's default when neither `num_frames` nor `fps` is given: Qwen2.5-VL's own
rule (qwen-vl-utils: 2 fps, at most 768 frames), LLaVA-OneVision 32 frames uniformly (lmms-eval's setting).
The frames are decoded by us (decord) and handed to the processor with `do_sample_frames=False`, so the
processor never re-samples them. `dtype` bfloat16 / float16 / float32 / auto (bfloat16 on a GPU that has it,
else float32); `device` or `device_map` (e.g. "auto" to spread a large model over GPUs).
"""

from __future__ import annotations

from typing import Any, Sequence

import torch

from spacewalk.encoders import resolve_device
from spacewalk.multiple_choice.frames import FrameRule, sample_frames
from spacewalk.multiple_choice.items import MultipleChoiceItem
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
        raise ValueError(f"dtype must be auto, bfloat16, float16 or float32, got {dtype!r}")
    return getattr(torch, dtype)


def conversation(prompt: Prompt, with_video: bool) -> list[dict]:
    """The prompt as one user turn (and a system turn): texts in order, the video at the first visual marker."""
    content: list[dict[str, Any]] = []
    placed = False
    for part in prompt.parts:
        if part == Prompt.VISUAL:
            if with_video and not placed:
                content.append({"type": "video"})
            placed = True
        else:
            content.append({"type": "text", "text": part})
    turns = [{"role": "system", "content": [{"type": "text", "text": prompt.system}]}] if prompt.system else []
    return turns + [{"role": "user", "content": content}]


class TransformersVLMBackend:
    def __init__(self, family: str, model: str | None = None, num_frames: int | None = None, fps: float | None = None,
                 max_frames: int | None = None, dtype: str = "auto", device: str = "auto", device_map: Any = None,
                 max_new_tokens: int = 16, attn_implementation: str | None = None, text_only: bool = False,
                 allow_download: bool = False, video_backend: str = "decord", model_object=None, processor=None):
        if family not in FAMILIES:
            raise ValueError(f"unknown family {family!r}; choose from {sorted(FAMILIES)}")
        if (model is None) == (model_object is None):
            raise ValueError("give model (a local folder or a hub tag in the local cache) or model_object")
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
        self.max_new_tokens = int(max_new_tokens)

    def _generate(self, prompts: Sequence[Prompt], videos: Sequence | None) -> list[str]:
        if videos is not None and self.family == "llava_onevision" and len({len(v) for v in videos}) > 1:
            # its video processor stacks a batch's videos into one tensor: batch equal frame counts only
            # (frame lists and fps rules give clips of different lengths); greedy, so the replies are the same
            out: list[str] = [""] * len(prompts)
            groups: dict[int, list[int]] = {}
            for i, video in enumerate(videos):
                groups.setdefault(len(video), []).append(i)
            for rows in groups.values():
                for i, text in zip(rows, self._generate([prompts[i] for i in rows], [videos[i] for i in rows])):
                    out[i] = text
            return out
        texts = [self.processor.apply_chat_template(conversation(p, videos is not None), add_generation_prompt=True,
                                                    tokenize=False) for p in prompts]
        kwargs = {"videos": list(videos), "do_sample_frames": False} if videos is not None else {}
        return self._decode(self.processor(text=texts, padding=True, return_tensors="pt", **kwargs))

    def _decode(self, inputs) -> list[str]:
        device = self.model.device
        inputs = {k: (v.to(device, self.dtype) if v.is_floating_point() else v.to(device)) if torch.is_tensor(v) else v
                  for k, v in inputs.items()}
        with torch.inference_mode():
            out = self.model.generate(**inputs, do_sample=False, max_new_tokens=self.max_new_tokens)
        new = out[:, inputs["input_ids"].shape[1]:]
        return [t.strip() for t in self.processor.batch_decode(new, skip_special_tokens=True)]

    def answer(self, items: Sequence[MultipleChoiceItem], prompts: Sequence[Prompt]) -> list[Reply]:
        videos = None
        if self.rule is not None:
            missing = [item.id for item in items if item.visual is None]
            if missing:
                raise ValueError(f"items {missing[:3]} have no visual; use text_only=true for text-only items")
            videos = [sample_frames(item.visual, self.rule)[0] for item in items]
        return [Reply(text=t) for t in self._generate(prompts, videos)]

    def generate(self, prompts: Sequence[Prompt]) -> list[str]:
        return self._generate(prompts, None)

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
