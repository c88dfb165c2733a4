"""The contrastive adaptation of a multiple-choice question (the paper's zero-shot contrastive models asked a
question): each option becomes the text "Question: <question> Is it <option>", encoded by a text encoder and
compared with the clip; the best-scoring option is the choice and every option's score is kept (so
step recognition gets mAP too).

- `ContrastiveTextBackend` reads the clip's transcript (item.transcript) with a sentence encoder (MiniLM by
  default). MiniLM truncates at 256 word pieces (about 1.5 min of speech), so the transcript is split into
  sentences, each encoded once (cached by text: overlapping windows share most of them), and pooled: the
  normalised mean of the sentence vectors (`pool: mean`, the project's window transcript feature), or
  each option's best sentence (`pool: max`). An item with no speech scores every option 0 (the first
  option wins the tie).
- `ContrastiveVideoBackend` embeds the clip's frames with a video-text model (open_clip: frame embeddings
  averaged) and the option texts with the same model's text tower.

Context (Table 4's summaries): both compare the options with the clip alone and read no prompt, so a
context text (the step oracle's captions) is not used, and a prompt with context visuals (the mission's
preview, the oracle's middle frames) is refused with an error rather than answered as if it had none: a
number labelled with a summary must have used it. (Folding the context into the clip feature would be a
new model, not the paper's contrastive adaptation.)
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from spacewalk.core.errors import ConfigError
from spacewalk.multiple_choice.frames import FrameRule, sample_frames
from spacewalk.multiple_choice.items import MultipleChoiceItem
from spacewalk.multiple_choice.task import Prompt, Reply

QUERY = "Question: {question} Is it {option}"
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def option_queries(item: MultipleChoiceItem, template: str = QUERY) -> list[str]:
    """The option texts: the benchmark's own when its task wrote them (`meta["contrastive_texts"]`, EgoSchema),
    else the template, with the question's final '.' or '?' made one '?' ("... in the video." ends in
    "video? Is it", not "video.? Is it")."""
    own = item.meta.get("contrastive_texts")
    if own is not None and template == QUERY:
        if len(own) != len(item.options):
            raise ValueError(f"item {item.id}: {len(own)} contrastive texts for {len(item.options)} options")
        return list(own)
    question = item.question.strip().rstrip("?.").rstrip() + "?"
    return [template.format(question=question, option=option) for option in item.options]


def refuse_context_visuals(backend: str, items: Sequence[MultipleChoiceItem], prompts: Sequence[Prompt]) -> None:
    for item, prompt in zip(items, prompts):
        if prompt.context_visuals:
            raise ConfigError(f"item {item.id}: the prompt shows context visuals "
                              f"({', '.join(v.describe() for v in prompt.context_visuals[:2])}, ...), which "
                              f"{backend} scoring cannot use (it compares the options with the clip alone); "
                              "run it without a visual summary (data.summary=none or step_oracle_captions)")


def split_sentences(text: str | None) -> list[str]:
    return [s for s in (p.strip() for p in _SENTENCE_END.split(text or "")) if s]


class _CachedText:
    """Text -> unit vector, each distinct text encoded once."""

    def __init__(self, encoder):
        self.encoder = encoder
        self.cache: dict[str, np.ndarray] = {}

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        new = list(dict.fromkeys(t for t in texts if t not in self.cache))
        if new:
            for text, vector in zip(new, self.encoder.encode(new)):
                self.cache[text] = vector
        if not texts:
            return np.zeros((0, self.encoder.dim), dtype=np.float32)
        return np.stack([self.cache[t] for t in texts])


def _unit(x: np.ndarray) -> np.ndarray:
    norm = np.linalg.norm(x)
    return x / norm if norm > 0 else x


class ContrastiveTextBackend:
    name = "contrastive_text"

    def __init__(self, text_encoder, pool: str = "mean", template: str = QUERY):
        if pool not in ("mean", "max"):
            raise ConfigError(f"pool must be 'mean' or 'max', got {pool!r}")
        self.encode = _CachedText(text_encoder)
        self.pool, self.template = pool, template

    def _scores(self, item: MultipleChoiceItem) -> np.ndarray:
        options = self.encode(option_queries(item, self.template))
        sentences = self.encode(split_sentences(item.transcript))
        if len(sentences) == 0:
            return np.zeros(len(item.options))
        if self.pool == "mean":
            return options @ _unit(sentences.mean(0))
        return (options @ sentences.T).max(1)

    def answer(self, items: Sequence[MultipleChoiceItem], prompts: Sequence[Prompt]) -> list[Reply]:
        refuse_context_visuals(self.name, items, prompts)
        # encode the chunk's new texts in one call, then score each item from the cache
        self.encode([q for item in items for q in option_queries(item, self.template)]
                    + [s for item in items for s in split_sentences(item.transcript)])
        replies = []
        for item in items:
            scores = self._scores(item)
            replies.append(Reply(choice=int(np.argmax(scores)), scores=tuple(float(s) for s in scores)))
        return replies

    def generate(self, prompts: Sequence[Prompt]) -> list[str]:
        raise NotImplementedError("contrastive scoring chooses among options; it cannot generate text")


class ContrastiveVideoBackend:
    name = "contrastive_video"

    def __init__(self, video_encoder, num_frames: int | None = None, fps: float | None = None,
                 max_frames: int | None = None, template: str = QUERY, video_backend: str = "decord"):
        if video_encoder.text_encoder() is None:
            raise ConfigError("this video encoder has no text tower to score options with")
        self.video_encoder = video_encoder
        if num_frames is None and fps is None:
            num_frames = getattr(video_encoder, "num_frames", 8)
        self.rule = FrameRule(num_frames, fps, max_frames, video_backend)
        self.encode = _CachedText(video_encoder.text_encoder())
        self.template = template

    def answer(self, items: Sequence[MultipleChoiceItem], prompts: Sequence[Prompt]) -> list[Reply]:
        refuse_context_visuals(self.name, items, prompts)
        replies = []
        for item in items:
            if item.visual is None:
                raise ConfigError(f"item {item.id} has no visual for a video backend")
            frames, _ = sample_frames(item.visual, self.rule)
            clip = self.video_encoder.encode([frames])[0]
            scores = self.encode(option_queries(item, self.template)) @ clip
            replies.append(Reply(choice=int(np.argmax(scores)), scores=tuple(float(s) for s in scores)))
        return replies

    def generate(self, prompts: Sequence[Prompt]) -> list[str]:
        raise NotImplementedError("contrastive scoring chooses among options; it cannot generate text")
