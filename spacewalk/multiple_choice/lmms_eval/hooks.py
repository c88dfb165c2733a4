"""The functions lmms-eval calls for an exported task (its YAML's `!function utils.<name>`; the folder's utils.py
binds them to the folder's spacewalk_task.json), each a thin reading of the harness task (spacewalk/multiple_choice/
task.py), so lmms-eval asks, parses and scores as `python evaluate.py` does:

- `doc_to_messages(doc)`: the task's official prompt (`Prompt.visual_parts`, what every backend of the harness
  reads) as lmms-eval's chat messages: a text part per run of text, the item's clip as a video part with its start
  and end time (lmms-eval's chat models sample it by their own frame rule), extracted frames (EgoCross) as images
  in order, a still (a summary's middle frame) as an image decoded here;
- `doc_to_text(doc)`: the prompt's texts, visuals left out (what lmms-eval logs as the sample's input, and what a
  simple model reads beside `doc_to_visual`);
- `doc_to_visual(doc, kwargs)`: for lmms-eval's simple (non-chat) models, which take whole files: every visual as
  images, a clip as `num_frames` frames uniformly over its slice (the task YAML's `lmms_eval_specific_kwargs`;
  spacewalk/multiple_choice/frames.py), extracted frames and stills as they are;
- `doc_to_target(doc)`: the answer's option index, as text (lmms-eval logs it; nothing scores it);
- `process_results(doc, results)`: the task's own parse of the reply, one entry per reported metric
  ({item_id, reply, choice, score, ...}: lmms-eval keeps it in its sample log, which `import` reads back);
- `aggregation(metric)(entries)`: the task's own metrics on those records (`task.metrics`, the official scorer:
  per-recording means for step recognition, the authors' accuracy for EgoCross), the number at `metric`.

lmms-eval's `--limit N` answers the first N documents: the aggregation scores them as the task limited to its first
N items (the spec's `limit` argument), which is what the official rules on that subset give. Any other subset
(`--offset`), a reply that is lmms-eval's own request-failure text, or documents that no longer match the data are
not scored: the number is NaN and the log says why (a wrong number would look like a model's).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import threading
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

from spacewalk.core.errors import DataError, UserInputError
from spacewalk.multiple_choice.items import MultipleChoiceItem, Visual
from spacewalk.multiple_choice.lmms_eval.specs import TaskSpec, build_task, read_spec, spec_json
from spacewalk.multiple_choice.task import Record

log = logging.getLogger(__name__)

# what lmms-eval's OpenAI-compatible models put in place of a reply after their last retry failed
REQUEST_FAILED = "[LMMS_EVAL_REQUEST_FAILED"
# frames of a clip for lmms-eval's simple models (a chat model samples the slice itself), unless the task YAML's
# lmms_eval_specific_kwargs says otherwise
DEFAULT_NUM_FRAMES = 32

_lock = threading.RLock()  # item() builds the task while holding it
_tasks: dict[str, Any] = {}


def task_of(spec: TaskSpec):
    """The harness task of `spec`, built once per process (lmms-eval calls the hooks from several threads)."""
    key = spec_json(spec)
    with _lock:
        if key not in _tasks:
            _tasks[key] = build_task(spec.data)
        return _tasks[key]


def item_digest(item: MultipleChoiceItem) -> str:
    """What a document must still match in its item: the question, options, answer and transcript (the runner's
    items_digest, per item)."""
    content = [item.id, item.question, list(item.options), item.answer, item.transcript]
    return hashlib.sha256(json.dumps(content, ensure_ascii=False).encode("utf-8")).hexdigest()[:16]


def document(item: MultipleChoiceItem) -> dict[str, Any]:
    """The row of docs.jsonl for `item`: its id, what a reader of lmms-eval's logs wants to see, and the digest
    that tells a stale row from a current one. The prompt is made at run time by the task itself."""
    visual = item.visual.describe() if item.visual is not None else ""
    return {"item_id": item.id, "question": item.question, "answer": item.answer, "visual": visual,
            "item_digest": item_digest(item)}


class Hooks:
    """The hook functions of one exported task (module docstring)."""

    def __init__(self, spec: TaskSpec, where: str | Path = ""):
        self.spec, self.where = spec, where
        self._by_id: dict[str, MultipleChoiceItem] | None = None
        self._scored: dict[tuple, dict[str, Any]] = {}

    @property
    def task(self):
        return task_of(self.spec)

    def item(self, doc: Mapping[str, Any]) -> MultipleChoiceItem:
        with _lock:
            if self._by_id is None:
                self._by_id = {item.id: item for item in self.task.items()}
        item = self._by_id.get(str(doc.get("item_id")))
        if item is None:
            raise DataError("the task has no such item: the task folder is of other data; export it again",
                            file=self.where, item=str(doc.get("item_id")), field="item_id")
        if doc.get("item_digest") != item_digest(item):
            raise DataError("the item's question, options, answer or transcript changed since the task folder was "
                            "exported; export it again", file=self.where, item=item.id, field="item_digest")
        return item

    # ---- what the model is asked ----

    def doc_to_messages(self, doc: Mapping[str, Any], lmms_eval_specific_kwargs: Mapping | None = None) -> list:
        item = self.item(doc)
        prompt = self.task.prompt(item)
        content = []
        for part in prompt.visual_parts(item):
            if isinstance(part, str):
                content.append({"type": "text", "text": part})
            elif part.frames:
                content += [{"type": "image", "url": str(path)} for path in part.frames]
            elif part.is_still:
                content.append({"type": "image", "url": _still(part)})
            else:
                video: dict[str, Any] = {"type": "video", "url": str(part.video)}
                if part.start is not None:
                    video["start_time"] = float(part.start)
                if part.end is not None:
                    video["end_time"] = float(part.end)
                content.append(video)
        messages = [{"role": "user", "content": content}]
        if prompt.system:
            messages.insert(0, {"role": "system", "content": [{"type": "text", "text": prompt.system}]})
        return messages

    def doc_to_text(self, doc: Mapping[str, Any], lmms_eval_specific_kwargs: Mapping | None = None) -> str:
        item = self.item(doc)
        return self.task.prompt(item).text

    def doc_to_visual(self, doc: Mapping[str, Any], lmms_eval_specific_kwargs: Mapping | None = None) -> list:
        from PIL import Image

        from spacewalk.multiple_choice.frames import FrameRule, sample_frames

        item = self.item(doc)
        num_frames = int((lmms_eval_specific_kwargs or {}).get("num_frames", DEFAULT_NUM_FRAMES))
        images = []
        for part in self.task.prompt(item).visual_parts(item):
            if isinstance(part, str):
                continue
            if part.frames:
                images += [Image.open(path).convert("RGB") for path in part.frames]
            elif part.is_still:
                images.append(_still(part))
            else:
                frames, _ = sample_frames(part, FrameRule(num_frames=num_frames))
                images += [Image.fromarray(frame) for frame in frames]
        return images

    def doc_to_target(self, doc: Mapping[str, Any]) -> str:
        return str(self.item(doc).answer)

    # ---- what the reply scores ----

    def process_results(self, doc: Mapping[str, Any], results: Sequence[Any]) -> dict[str, dict[str, Any]]:
        item = self.item(doc)
        reply = results[0] if results else ""
        reply = "" if reply is None else str(reply)
        choice = self.task.parse(item, reply)
        entry = {"item_id": item.id, "reply": reply, "choice": choice,
                 "score": float(choice == item.answer), "request_failed": reply.startswith(REQUEST_FAILED)}
        if self.spec.cluster is not None:
            entry[self.spec.cluster] = item.meta.get(self.spec.cluster)
        return {metric: entry for metric in self.spec.metrics}

    def scored(self, entries: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
        """The task's metrics of the answered items (module docstring), None when they cannot be scored (logged)."""
        key = tuple((e["item_id"], e["reply"]) for e in entries)
        if key in self._scored:
            return self._scored[key]
        try:
            metrics = score_entries(self.spec, entries)
        except UserInputError as e:  # a subset the task cannot be limited to, a failed request: said, not scored
            log.error("%s: not scored: %s", self.spec.name, e)
            metrics = None
        self._scored[key] = metrics
        return metrics

    def aggregation(self, metric: str):
        def aggregate(entries: Sequence[Mapping[str, Any]]) -> float:
            metrics = self.scored(entries)
            value = None if metrics is None else metrics.get(metric)
            return float(value) if isinstance(value, (int, float)) else math.nan

        aggregate.__name__ = f"spacewalk_{metric}"
        return aggregate


def _still(visual: Visual):
    """A still (one frame of a video) as a PIL image."""
    from PIL import Image

    from spacewalk.multiple_choice.frames import FrameRule, sample_frames

    frames, _ = sample_frames(visual, FrameRule(num_frames=1))
    return Image.fromarray(frames[0])


def answered_spec(spec: TaskSpec, item_ids: Sequence[str]) -> TaskSpec:
    """The spec of the task whose items are exactly `item_ids`: the spec itself when they are all its items, the
    task limited to its first n when they are those (lmms-eval's --limit n); any other subset is refused."""
    items = [item.id for item in task_of(spec).items()]
    answered = set(item_ids)
    if len(answered) != len(item_ids):
        raise DataError(f"an item has more than one reply (e.g. {_repeated(item_ids)}): lmms-eval's --repeats is not "
                        "scored", item=_repeated(item_ids))
    if answered == set(items):
        return spec
    n = len(answered)
    if set(items[:n]) != answered:
        raise DataError(f"the {n} answered items are not the task's first {n} (lmms-eval's --offset, or documents of "
                        "other data): score every item, or the first N with --limit N", item=sorted(answered)[0])
    return spec.limited(n)


def _repeated(ids: Sequence[str]) -> str:
    seen = set()
    for i in ids:
        if i in seen:
            return i
        seen.add(i)
    return ""


def records_of(task, entries: Sequence[Mapping[str, Any]]) -> tuple[list, list[Record]]:
    """The task's items and one `Record` per entry (the reply parsed again by the task: the parse is the task's,
    whatever the entry says), in item order."""
    failed = [e["item_id"] for e in entries if str(e["reply"]).startswith(REQUEST_FAILED)]
    if failed:
        raise DataError(f"{len(failed)} requests failed (lmms-eval put its error text in place of the reply, e.g. "
                        f"item {failed[0]}): re-run them (lmms-eval's --use_cache keeps the others)", item=failed[0])
    items = list(task.items())
    by_id = {str(e["item_id"]): e for e in entries}
    records = []
    for item in items:
        reply = str(by_id[item.id]["reply"])
        choice = task.parse(item, reply)
        records.append(Record(item_id=item.id, prompt="", reply=reply, choice=choice,
                              correct=None if item.answer is None else choice == item.answer))
    return items, records


def score_entries(spec: TaskSpec, entries: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The task's official metrics of lmms-eval's per-document entries."""
    answered = answered_spec(spec, [str(e["item_id"]) for e in entries])
    task = task_of(answered)
    items, records = records_of(task, entries)
    return task.metrics(items, records)


@cache
def hooks_for(settings_file: str | Path) -> Hooks:
    """The hooks of the task folder holding `settings_file` (spacewalk_task.json), one object per folder."""
    return Hooks(read_spec(settings_file), Path(settings_file).parent)
