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

Visual budget (spacewalk/multiple_choice/budget.py: `max_pixels`, `min_pixels` per frame, `max_total_pixels` per
item, and the rule that shrinks, then drops, the frames of an item over it). All null (the default): the frames go
to the processor as decoded, and the family's processor sizes them as it always did (Qwen2.5-VL: its own
`smart_resize` within its processor's bounds; LLaVA-OneVision: every frame to its fixed size). Qwen2.5-VL: a frame
is resized by its processor's `smart_resize` (sides multiples of 28), within the given bounds, the processor's own
where one is null, and the processor is given bounds that leave those sizes as they are. LLaVA-OneVision: its
processor resizes every frame to one fixed size, so `max_pixels` / `min_pixels` would change nothing and are
refused; `max_total_pixels` counts each frame (a still too: an approximation, its anyres crops are not counted) at
that size, and drops frames. Each reply's meta says what the model saw: `visuals` (per visual, in prompt order,
its kind, frame count and [width, height] as the vision tower gets it: the shape of OpenAI-compatible backend's)
and `visual_tokens` (the item's image and video tokens in the model's input). run.json holds the frame rule and
the budget (`visual_settings`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from spacewalk.encoders import resolve_device
from spacewalk.errors import ConfigError
from spacewalk.multiple_choice.budget import Planned, VisualBudget, fit, shown
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
                 allow_download: bool = False, video_backend: str = "decord", model_object=None, processor=None,
                 max_pixels: int | None = None, min_pixels: int | None = None, max_total_pixels: int | None = None):
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
        self.budget = VisualBudget(max_pixels, min_pixels, max_total_pixels)
        if family == "llava_onevision" and (max_pixels is not None or min_pixels is not None):
            size = self.processor.video_processor.size
            raise ConfigError(f"llava_onevision: its processor resizes every frame to {size.width}x{size.height}, so "
                              "max_pixels / min_pixels change nothing; bound the item with max_total_pixels")
        self._set_limit(max_new_tokens)

    # ---- the visual budget (spacewalk/multiple_choice/budget.py) ----

    def _qwen_bounds(self, kind: str) -> tuple[int, int]:
        size = (self.processor.image_processor if kind == "image" else self.processor.video_processor).size
        return size.shortest_edge, size.longest_edge

    def _resize_to(self, kind: str):
        """(height, width, min_pixels, max_pixels) -> the size the vision tower gets, for the budget's rule."""
        if self.family == "qwen2_5_vl":
            from transformers.models.qwen2_vl.image_processing_qwen2_vl import smart_resize

            proc = self.processor.video_processor
            factor = proc.patch_size * proc.merge_size
            low, high = self._qwen_bounds(kind)
            return lambda h, w, lo, hi: smart_resize(h, w, factor, low if lo is None else lo,
                                                     high if hi is None else hi)
        size = self.processor.video_processor.size
        return lambda h, w, lo, hi: (size.height, size.width)

    def visual_settings(self) -> dict[str, Any] | None:
        """run.json's "visual": the frame rule and the budget the run's items were shown with."""
        if self.rule is None:
            return None
        rule = self.rule
        return {"frames": {"num_frames": rule.num_frames, "fps": rule.fps, "max_frames": rule.max_frames},
                **self.budget.as_json(), "rule": "spacewalk/multiple_choice/budget.py"}

    def _visuals(self, prompt: Prompt, item: MultipleChoiceItem | None) -> tuple[list, list, list[Planned]]:
        """The prompt's videos (frame lists) and stills, in prompt order, within the budget; and what each visual
        shows (its kind, frames and the size the vision tower gets)."""
        sampled = [(("image" if part.is_still else "clip"), sample_frames(part, self.rule)[0])
                   for part in prompt.visual_parts(item) if isinstance(part, Visual)]
        resize = {kind: self._resize_to(kind) for kind in ("clip", "image")}
        b = self.budget
        plan = [Planned(kind, len(f), *resize[kind](f.shape[1], f.shape[2], b.min_pixels, b.max_pixels))
                for kind, f in sampled]
        if b.active:
            plan = fit([(kind, len(f), f.shape[1], f.shape[2]) for kind, f in sampled], b, resize,
                       None if item is None else item.id)
            if self.family == "qwen2_5_vl":  # frames resized here to sizes the processor leaves as they are
                sampled = [(kind, shown(f, p)) for (kind, f), p in zip(sampled, plan)]
            else:  # LLaVA-OneVision: frames dropped here, sized by its processor
                sampled = [(kind, shown(f, Planned(kind, p.frames, *f.shape[1:3])))
                           for (kind, f), p in zip(sampled, plan)]
        videos = [f for kind, f in sampled if kind == "clip"]
        images = [f[0] for kind, f in sampled if kind == "image"]
        return videos, images, plan

    def _generate(self, prompts: Sequence[Prompt], items: Sequence[MultipleChoiceItem | None],
                  visuals: Sequence[tuple[list, list, list[Planned]]] | None = None) -> list[tuple[str, dict]]:
        """Each row's reply and what it was shown (its meta); `visuals`: each row's (videos, stills, plan) when
        already decoded."""
        with_visuals = self.rule is not None
        if visuals is None:
            visuals = [self._visuals(p, item) if with_visuals else ([], [], []) for p, item in zip(prompts, items)]
        counts = [tuple(len(v) for v in videos) for videos, _, _ in visuals]
        groups: dict[tuple, list[int]] = {}
        for i, count in enumerate(counts):
            groups.setdefault(count, []).append(i)
        if self.family == "llava_onevision" and len({n for c in counts for n in c}) > 1 and len(groups) > 1:
            # its video processor stacks a call's videos into one tensor: rows whose clips differ in frame count
            # (frame lists and fps rules give clips of different lengths) go in separate calls; greedy, so the
            # replies are the same
            out: list[tuple[str, dict]] = [("", {})] * len(prompts)
            for rows in groups.values():
                replies = self._generate([prompts[i] for i in rows], [items[i] for i in rows],
                                         [visuals[i] for i in rows])
                for i, reply in zip(rows, replies):
                    out[i] = reply
            return out
        texts = [self.processor.apply_chat_template(conversation(p, item, with_visuals), add_generation_prompt=True,
                                                    tokenize=False) for p, item in zip(prompts, items)]
        videos = [v for vs, _, _ in visuals for v in vs]
        images = [i for _, ims, _ in visuals for i in ims]
        kwargs: dict[str, Any] = {}
        if videos:
            kwargs |= {"videos": videos, "do_sample_frames": False}
        if images:
            kwargs["images"] = images
        if self.budget.active and self.family == "qwen2_5_vl":
            # bounds that leave the frames' sizes (multiples of 28, made by the budget's rule) as they are
            for kind, key in (("clip", "videos_kwargs"), ("image", "images_kwargs")):
                areas = [p.height * p.width for _, _, plan in visuals for p in plan if p.kind == kind]
                if areas:
                    low, high = self._qwen_bounds(kind)
                    kwargs[key] = {"size": {"shortest_edge": min(low, *areas), "longest_edge": max(high, *areas)}}
        inputs = self.processor(text=texts, padding=True, return_tensors="pt", **kwargs)
        tokens = self._visual_tokens(inputs["input_ids"]) if with_visuals else [0] * len(texts)
        sizes = self._sizes_made(inputs, [plan for _, _, plan in visuals])
        metas = [{"visuals": [{"kind": p.kind, "frames": p.frames, "size": size} for p, size in zip(plan, row)],
                  "visual_tokens": n} if plan else {} for (_, _, plan), row, n in zip(visuals, sizes, tokens)]
        return list(zip(self._decode(inputs), metas))

    def _sizes_made(self, inputs, plans: Sequence[Sequence[Planned]]) -> list[list[list[int]]]:
        """Each row's visuals' [width, height] as the vision tower got them: Qwen2.5-VL's from the processor's
        grids (videos and images each in prompt order over the batch), LLaVA-OneVision's as planned (its fixed
        size)."""
        if self.family != "qwen2_5_vl":
            return [[[p.width, p.height] for p in plan] for plan in plans]
        patch = self.processor.video_processor.patch_size
        grids = {"clip": iter(inputs.get("video_grid_thw", [])), "image": iter(inputs.get("image_grid_thw", []))}
        out = []
        for plan in plans:
            row = []
            for p in plan:
                _, h, w = (int(v) for v in next(grids[p.kind]))
                row.append([w * patch, h * patch])
            out.append(row)
        return out

    def _visual_tokens(self, input_ids: torch.Tensor) -> list[int]:
        """Each row's image and video tokens (what its visuals cost in the model's input)."""
        ids = [getattr(self.model.config, name, None)
               for name in ("image_token_id", "video_token_id", "image_token_index", "video_token_index")]
        ids = torch.tensor(sorted({i for i in ids if i is not None}))
        return [int(n) for n in torch.isin(input_ids, ids).sum(dim=1)]

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
        return [Reply(text=t, meta=meta) for t, meta in self._generate(prompts, items)]

    def generate(self, prompts: Sequence[Prompt]) -> list[str]:
        """Free text; the prompts' context visuals are shown (no item: no clip)."""
        return [t for t, _ in self._generate(prompts, [None] * len(prompts))]

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
