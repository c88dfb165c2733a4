"""Spacewalk-18 video QA answered by reading a decoded step timeline of the clip (`model=mc_plan`).

The clip's transcript, on the feature bank's 12 s grid, is scored against step texts by a calibrated zero-shot
recipe fitted on the train recordings (`ClipEmissions`: each cell's transcript, pooled over `pool_cells` cells
either side inside the clip, against the step's caption (and narration), weights and Irrelevant's level fitted
by maximum likelihood of the train recordings' cell labels). A continuous-time chain over the clip's cells
(spacewalk/algorithms/hmm.py forward-backward) turns the scores into a posterior timeline, and each question type is
answered from it by a written rule, every option's score kept:
- "task before/after task": each option's posterior mass on the right side of the named task's decoded time
  (`side_rule` "mass"), or that minus its mass on the wrong side ("signed": an in-clip distractor lies on the
  wrong side, an outside one nowhere);
- "when task": the named task's decoded seconds in each third; "does not happen" scores `absent_seconds`;
- "task order": the sum over the option's three ordered pairs of P(first before second), from the tasks'
  posterior distributions over time;
- "task before/at/after location": the clip's transcript sentences naming the place (its words, "P6" also as
  "P 6") give where the astronaut is; each option's mass before the first mention, near a mention (one minute),
  or after the last (no val question has a location, so this rule is fixed, not chosen); no mention: the
  contrastive score below. `location_rule` "order_and_association" reads it otherwise: "before"/"after" as the
  option that comes first / last among the options on the timeline (`order_scores`: the one option done before
  the astronaut arrives must precede the others, which are done there or later, or not in the clip), "while at"
  by what the train recordings say is done at the place (questions/place_knowledge.py) plus, where the clip
  names the place, the option's share of its mass near the mentions (`at_scores`);
- the hand-written questions: contrastive text similarity (the option against the mean of the clip's sentence
  vectors, as `mc_contrastive_text`).

Two modes, never mixed (`steps`):
- "options": the chain knows only the tasks the question names (the named task and the options; an order
  option's three tasks): each is a state scored by its caption alone, with one "something else" state
  (Irrelevant or an unnamed step) and switches uniform among them: what the question itself gives;
- "recording": the chain is the recording's whole step list (captions and narrations) with the plan decoder's
  chain (decoding/plan_decoder.py PlanModel: step-list offsets and durations from the train
  annotations), the tasks read off it by caption: more than the QA protocol gives, reported apart.
Both read only the clip's own transcript.

`emission_scores` (recording mode only): instead of the zero-shot recipe, the chain observes the calibrated
step log-probabilities of trained step-recognition runs (spacewalk/training/cell_log_probs.py: each cell's
window scored by the run, calibrated on the val recordings' cells, several runs averaged); `pool` and `lexical`
then change nothing unless `trained_weight` < 1 mixes the recipe back in (log-linearly: a weighted sum of the
two log-probabilities), `irrelevant_offset` and `emission_weight` act as with the recipe. A run's window around a
cell near the clip's edge reaches up to half its context outside the clip: one more thing this mode reads
beyond the QA protocol. Everything else learned comes from train (the emission weights, the chain; the runs'
calibration from val's cells); the settings are chosen on generated val questions
(spacewalk/benchmarks/spacewalk18/questions/question_generator.py).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.linalg import expm
from scipy.optimize import minimize
from scipy.special import log_softmax

from spacewalk.algorithms.hmm import forward_backward
from spacewalk.benchmarks.spacewalk18.data.dataset import NOT_ANNOTATED, Spacewalk18
from spacewalk.benchmarks.spacewalk18.decoding.plan_decoder import PlanModel, cell_labels
from spacewalk.benchmarks.spacewalk18.features import lexical
from spacewalk.benchmarks.spacewalk18.features.bank import FeatureBank
from spacewalk.benchmarks.spacewalk18.features.load import RecordingBank
from spacewalk.benchmarks.spacewalk18.questions.place_knowledge import PlaceKnowledge
from spacewalk.benchmarks.spacewalk18.questions.question_generator import ABSENT, BEFORE_AFTER, ORDER, THIRDS, WHEN
from spacewalk.core.errors import ConfigError, DataError
from spacewalk.core.settings import from_mapping
from spacewalk.multiple_choice.backends.option_scores import OptionScoresBackend
from spacewalk.multiple_choice.items import MultipleChoiceItem

LOCATION = "task before/at/after location"
MODES = ("options", "recording")
SIDE_RULES = ("mass", "signed")
PLACE_SPELLINGS = ("words", "variants")
LOCATION_RULES = ("mentions", "order_and_association")
BEFORE_AFTER_RE = re.compile(r"Which of the following tasks happens (before|after) (.*)\?\s*$", re.S)
WHEN_RE = re.compile(r"In which part of the video does the task that (.*) happen\?\s*$", re.S)
ORDER_OPTION_RE = re.compile(r"\(\d\) (.*?)\.(?=\(\d\) |\s*$)", re.S)
LOCATION_RE = re.compile(r"Which of the following tasks happens (before the astronaut arrives at|while the astronaut "
                         r"is at|after the astronaut leaves from) (.*?)\s*\?\s*$", re.S)
NEAR_SECONDS = 60.0  # a mention of the place counts for the minute either side (fixed: no val question has one)


def _norm(text: str) -> str:
    return " ".join(text.split()).casefold()


def _tasks(texts: Sequence[str]) -> list[str]:
    """The distinct tasks a question names, as normalised texts (the encoder is uncased; a caption's trailing
    space or case does not make another task)."""
    return list(dict.fromkeys(_norm(t) for t in texts))


def _unit(x: np.ndarray) -> np.ndarray:
    norm = np.linalg.norm(x, axis=-1, keepdims=True)
    return np.divide(x, norm, out=np.zeros_like(x), where=norm > 0)


def pooled_cells(cell_text: np.ndarray, pool: int) -> np.ndarray:
    """Each cell's transcript vector summed with its `pool` neighbours on each side (within the rows given: the
    clip's), unit length; a silent stretch stays zero."""
    x = np.asarray(cell_text, dtype=np.float64)
    if pool <= 0:
        return _unit(x)
    c = np.concatenate([np.zeros((1, x.shape[1])), np.cumsum(x, axis=0)])
    idx = np.arange(len(x))
    lo, hi = np.maximum(idx - pool, 0), np.minimum(idx + pool + 1, len(x))
    return _unit(c[hi] - c[lo])


# --------------------------------------------------------------------------------------------------
# the step-recognition recipe of the clip's cells


@dataclass(frozen=True)
class ClipEmissions:
    """logit_k = caption_weight * <cell, caption_k> + narration_weight * <cell, narration_k>
    + lexical_weight * words(cell, caption_k) for steps k >= 1, logit_0 = irrelevant_level; fitted on the train
    recordings' cells (centre labels; not-annotated left out). `words` is the rarity-weighted word match of
    features/lexical.py (the cell's and its pooled neighbours' transcript words against the caption's);
    lexical_weight stays 0 unless `lexical`."""

    caption_weight: float
    narration_weight: float
    irrelevant_level: float
    pool: int
    lexical_weight: float = 0.0

    def logits(self, cells: np.ndarray, captions: np.ndarray, narrations: np.ndarray | None,
               words: np.ndarray | None = None) -> np.ndarray:
        """cells [T, D] (pooled, unit), captions/narrations [n, D] (unit), words [T, n] (the word matches):
        [T, 1 + n]."""
        steps = self.caption_weight * cells @ captions.T
        if narrations is not None and self.narration_weight:
            steps = steps + self.narration_weight * cells @ narrations.T
        if words is not None and self.lexical_weight:
            steps = steps + self.lexical_weight * words
        return np.concatenate([np.full((len(cells), 1), self.irrelevant_level), steps], axis=1)

    @classmethod
    def fit(cls, banks: Sequence[RecordingBank], labels: Sequence[np.ndarray], pool: int,
            narration: bool, words: Sequence[np.ndarray] | None = None) -> ClipEmissions:
        """`words`: per recording, the word matches [num_cells, K] of its cells against its step captions (the
        lexical channel; None: without it)."""
        rows = []
        for i, (bank, label) in enumerate(zip(banks, labels)):
            keep = label != NOT_ANNOTATED
            cells = pooled_cells(bank.cell_text, pool)[keep]
            cap = _unit(np.asarray(bank.step_caption[1:], dtype=np.float64))
            nar = _unit(np.asarray(bank.step_narration[1:], dtype=np.float64))
            lex = words[i][keep] if words is not None else np.zeros((len(cells), len(cap)))
            rows.append((cells @ cap.T, cells @ nar.T, lex, label[keep]))
        if not any(len(r[3]) for r in rows):
            raise DataError("no annotated cell in the train recordings to fit the QA emissions on")
        lexical = words is not None

        def nll(params):
            wc, wn, b, wl = params[0], params[1] if narration else 0.0, params[2], params[3] if lexical else 0.0
            total = 0.0
            for cap, nar, lex, y in rows:
                z = np.concatenate([np.full((len(y), 1), b), wc * cap + wn * nar + wl * lex], axis=1)
                total -= log_softmax(z, axis=1)[np.arange(len(y)), y].sum()
            return total

        start = np.array([10.0, 10.0 if narration else 0.0, 3.0, 5.0 if lexical else 0.0])
        best = minimize(nll, start, method="L-BFGS-B")
        wn = float(best.x[1]) if narration else 0.0
        wl = float(best.x[3]) if lexical else 0.0
        return cls(float(best.x[0]), wn, float(best.x[2]), pool, wl)


# --------------------------------------------------------------------------------------------------
# the settings and the chains


@dataclass(frozen=True)
class ReadingSettings:
    """What is chosen on val: `pool` (cells either side pooled into a cell's transcript), `emission_weight`
    (< 1: neighbouring pooled cells share their words), `rate_scale` (< 1: stickier states), `irrelevant_offset`
    (added to the fitted Irrelevant level: with only the named tasks, "something else" is more often right),
    `side_rule` and `absent_seconds` (the rules above), `lexical` (the word-match channel of ClipEmissions
    beside the sentence vectors), `place_spelling` (how a location question's place is found in the transcript:
    `PlanReading.mentions`; no val question has a place, so it is fixed, not chosen), `location_rule` (how a
    location question is answered: "mentions" or "order_and_association", the module's docstring; fixed a
    priori for the same reason), `trained_weight` (with
    `emission_scores`: the trained runs' share of the emissions, the zero-shot recipe's the rest; 1: theirs
    alone)."""

    pool: int = 2
    emission_weight: float = 1.0
    rate_scale: float = 1.0
    irrelevant_offset: float = 0.0
    side_rule: str = "signed"
    absent_seconds: float = 0.0
    lexical: bool = False
    place_spelling: str = "words"
    location_rule: str = "mentions"
    trained_weight: float = 1.0

    def __post_init__(self):
        if self.side_rule not in SIDE_RULES:
            raise ConfigError(f"side_rule must be one of {SIDE_RULES}, got {self.side_rule!r}")
        if self.place_spelling not in PLACE_SPELLINGS:
            raise ConfigError(f"place_spelling must be one of {PLACE_SPELLINGS}, got {self.place_spelling!r}")
        if self.location_rule not in LOCATION_RULES:
            raise ConfigError(f"location_rule must be one of {LOCATION_RULES}, got {self.location_rule!r}")
        if not 0.0 <= self.trained_weight <= 1.0:
            raise ConfigError(f"trained_weight must lie in [0, 1], got {self.trained_weight}")
        if self.pool < 0 or self.emission_weight <= 0 or self.rate_scale <= 0:
            raise ConfigError(f"pool must be >= 0 and emission_weight, rate_scale > 0: {self}")


def options_chain(n: int, plan: PlanModel, rate_scale: float, seconds: float) -> tuple[np.ndarray, np.ndarray]:
    """The transition over `seconds` and the start of a chain over n named tasks and one "something else"
    (last): a task ends at the plan's step rate and goes to something else with the plan's share, else to
    another named task; something else ends at the step rate too, into a named task, uniformly."""
    q = np.zeros((n + 1, n + 1))
    leave = rate_scale / plan.step_seconds
    to_other = plan.to_irrelevant if n > 1 else 1.0
    for i in range(n):
        q[i, n] = leave * to_other
        for j in range(n):
            if j != i:
                q[i, j] = leave * (1 - to_other) / (n - 1)
    q[n, :n] = leave / n
    np.fill_diagonal(q, -q.sum(axis=1))
    m = np.clip(expm(q * seconds), 0.0, None)
    return m / m.sum(axis=1, keepdims=True), np.full(n + 1, 1.0 / (n + 1))


def decode(log_probs: np.ndarray, matrix: np.ndarray, initial: np.ndarray) -> np.ndarray:
    """Posterior state probabilities [T, S] of one chain with one transition matrix."""
    index = np.zeros(max(0, len(log_probs) - 1), dtype=np.int64)
    posterior, _ = forward_backward(log_probs, matrix[None], index, initial)
    return posterior[0]


# --------------------------------------------------------------------------------------------------
# the rules: task posteriors P [T, n] (cell rows, time in order), times [T] relative to the clip in [0, 1)


def _distribution(p: np.ndarray) -> np.ndarray:
    total = p.sum()
    return p / total if total > 0 else np.full_like(p, 1.0 / len(p))


def _later(q: np.ndarray) -> np.ndarray:
    """P(the task, distributed by q over the cells, lies after each cell) (half of the cell's own)."""
    return q[::-1].cumsum()[::-1] - 0.5 * q


def side_scores(p: np.ndarray, named: int, options: Sequence[int], relation: str, rule: str) -> np.ndarray:
    q = _distribution(p[:, named])
    right = _later(q) if relation == "before" else 1.0 - _later(q)
    out = []
    for o in options:
        mass = p[:, o]
        score = mass @ right
        if rule == "signed":
            score -= mass @ (1.0 - right)
        out.append(score)
    return np.array(out)


def precedes(p: np.ndarray, a: int, b: int) -> float:
    """P(a lies before b) for independent times drawn from their posterior distributions."""
    return float(_distribution(p[:, a]) @ _later(_distribution(p[:, b])))


def third_seconds(p: np.ndarray, times: np.ndarray, named: int, cell_seconds: float) -> np.ndarray:
    third = np.minimum((times * 3).astype(int), 2)
    return np.array([p[third == i, named].sum() * cell_seconds for i in range(3)])


def clip_seconds(clip: _Clip, item: MultipleChoiceItem) -> np.ndarray:
    """[T]: the clip's cells as seconds of the recording (`clip.times` are fractions of the clip)."""
    return clip.times * (item.visual.end - item.visual.start) + item.visual.start


def near_mentions(seconds: np.ndarray, mentions: np.ndarray) -> np.ndarray:
    """[T] bool: the cells within NEAR_SECONDS of a mention of the place (`mentions`: at least one time)."""
    return np.abs(seconds[:, None] - mentions[None, :]).min(axis=1) <= NEAR_SECONDS


def order_scores(p: np.ndarray, options: Sequence[int], relation: str) -> np.ndarray:
    """"before" (the place): each option's mean P(it lies before another option), over the options naming
    another task; "after": P(it lies after). An option repeating another's task is compared with the rest."""
    if relation not in ("before", "after"):
        raise ValueError(f"relation must be 'before' or 'after', got {relation!r}")
    out = []
    for o in options:
        others = [x for x in dict.fromkeys(options) if x != o]
        if not others:
            out.append(0.0)
            continue
        first = [precedes(p, o, x) if relation == "before" else precedes(p, x, o) for x in others]
        out.append(float(np.mean(first)))
    return np.array(out)


def at_scores(p: np.ndarray, options: Sequence[int], near: np.ndarray | None, affinity: np.ndarray) -> np.ndarray:
    """"while at" the place: each option's `affinity` (place_knowledge.PlaceKnowledge: train association, 1 more
    when its caption names the place) plus, where the clip names the place (`near` [T]: the cells within a
    minute of a mention), its own mass near the mentions minus away from them, as a share of its mass (in
    [-1, 1]; 0 for an option the chain puts nowhere)."""
    if len(affinity) != len(options):
        raise ValueError(f"{len(options)} options but {len(affinity)} affinities")
    scores = np.asarray(affinity, dtype=np.float64).copy()
    if near is not None:
        for i, o in enumerate(options):
            total = p[:, o].sum()
            if total > 0:
                scores[i] += (p[near, o].sum() - p[~near, o].sum()) / total
    return scores


# --------------------------------------------------------------------------------------------------
# the backend


@dataclass
class _Clip:
    bank: RecordingBank
    cells: np.ndarray  # the clip's cell indices
    times: np.ndarray  # cell centres, relative to the clip
    pooled: np.ndarray  # [T, D]
    transcript: Sequence  # the clip's sentences (dataset.Sentence)


class PlanReading:
    """Spacewalk-18 QA read off the clip's decoded step timeline: every option's score (`scores`), for the
    option-scoring backend of `model=mc_plan` (`plan_reading_backend`). `root`, `synthetic_root`,
    `seed`, `synthetic`: the data config's (the recordings, their train annotations and transcripts);
    `bank_dir`: the text feature bank (built for the recordings it lacks; default
    <bank_root>/<spacewalk18 | synthetic>/<bank_folder>, step recognition's); `steps`: "options" or
    "recording" (the module's docstring); the rest: `ReadingSettings`."""

    name = "plan_reading"

    def __init__(self, text_encoder, root: str | Path | None = None, synthetic_root: str | Path | None = None,
                 seed: int = 0, synthetic: dict | None = None, bank_dir: str | Path | None = None,
                 bank_root: str | Path = "data/feature_banks", bank_folder: str = "minilm", steps: str = "options",
                 progress: bool = False, emission_scores: Sequence[str | Path] | None = None, **settings: Any):
        from spacewalk.benchmarks.spacewalk18.open import open_spacewalk18

        if steps not in MODES:
            raise ConfigError(f"steps must be one of {MODES}, got {steps!r}")
        if emission_scores and steps != "recording":
            raise ConfigError("emission_scores are log-probabilities over the recording's whole step list: they "
                              "need steps=recording (the options mode knows only the question's tasks)")
        self.steps = steps
        self.settings = from_mapping(ReadingSettings, settings, "model")
        self.name = f"plan_reading_{steps}"
        self.encoder = text_encoder
        self.dataset: Spacewalk18 = open_spacewalk18(root, synthetic_root, seed, synthetic)
        if bank_dir is None:  # the bank step recognition builds for the same data (data=spacewalk18 or synthetic)
            bank_dir = Path(bank_root) / ("synthetic" if root is None else "spacewalk18") / bank_folder
        self.bank = FeatureBank(bank_dir, self.dataset, text_encoder)
        self.progress = progress
        train = self.dataset.split("train")
        self.plan = PlanModel.fit(train)
        self._text_cache: dict[str, np.ndarray] = {}
        self._banks: dict[str, RecordingBank] = {}
        self._emissions: dict[tuple[int, bool, bool], ClipEmissions] = {}
        self._cell_words: dict[str, sp.csr_matrix] = {}
        self._rarity: lexical.Rarity | None = None
        # what the train recordings say is done at each place, built when a location question first needs it; a
        # caller may set its own (location_check.py: one leaving a train recording out)
        self.place_knowledge: PlaceKnowledge | None = None
        self.cell_log_probs = read_cell_log_probs(emission_scores) if emission_scores else None

    # ---- pieces -----------------------------------------------------------------------------------

    def _load(self, video_id: str) -> RecordingBank:
        if video_id not in self._banks:
            self.bank.build([video_id], progress=self.progress)
            self._banks[video_id] = self.bank.load(video_id)
        return self._banks[video_id]

    def cell_words(self, video_id: str) -> sp.csr_matrix:
        """The recording's word counts per grid cell (features/lexical.py)."""
        if video_id not in self._cell_words:
            bank = self._load(video_id)
            self._cell_words[video_id] = lexical.cell_counts(self.dataset.recordings[video_id].transcript,
                                                              bank.num_cells, bank.segment_seconds)
        return self._cell_words[video_id]

    @property
    def rarity(self) -> lexical.Rarity:
        """The words' rarity over the train recordings' cells."""
        if self._rarity is None:
            self._rarity = lexical.Rarity.fit([self.cell_words(r.video_id) for r in self.dataset.split("train")])
        return self._rarity

    @property
    def places(self) -> PlaceKnowledge:
        """What the train recordings say is done at each place (questions/place_knowledge.py)."""
        if self.place_knowledge is None:
            self.place_knowledge = PlaceKnowledge(self.dataset.split("train"), self.rarity)
        return self.place_knowledge

    def word_match(self, video_id: str, cells: np.ndarray, pool: int, texts: Sequence[str]) -> np.ndarray:
        """[len(cells), len(texts)]: the cells' pooled transcript words (pooled within `cells`) against each
        text's."""
        return self.rarity.similarity(lexical.pooled(self.cell_words(video_id)[cells], pool), lexical.counts(texts))

    def emissions(self, pool: int, use_words: bool = False) -> ClipEmissions:
        narration = self.steps == "recording"
        key = (pool, narration, use_words)
        if key not in self._emissions:
            recs = self.dataset.split("train")
            banks = [self._load(r.video_id) for r in recs]
            labels = [cell_labels(r, b.num_cells, b.segment_seconds) for r, b in zip(recs, banks)]
            words = None
            if use_words:
                words = [self.word_match(r.video_id, np.arange(b.num_cells), pool, [s.caption for s in r.steps[1:]])
                         for r, b in zip(recs, banks)]
            self._emissions[key] = ClipEmissions.fit(banks, labels, pool, narration, words)
        return self._emissions[key]

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        new = [t for t in dict.fromkeys(texts) if t not in self._text_cache]
        if new:
            for t, v in zip(new, self.encoder.encode(new)):
                self._text_cache[t] = np.asarray(v, dtype=np.float64)
        return _unit(np.stack([self._text_cache[t] for t in texts]))

    def clip(self, item: MultipleChoiceItem, pool: int) -> _Clip:
        video_id = item.meta.get("video_id")
        if video_id not in self.dataset.recordings:
            raise DataError(f"item {item.id}: video {video_id!r} is not a recording of {self.dataset.root}")
        if item.visual is None or item.visual.start is None or item.visual.end is None:
            raise DataError(f"item {item.id}: no clip bounds (visual start and end) to read the plan in")
        bank = self._load(video_id)
        start, end = item.visual.start, item.visual.end
        cells = bank.cells_in(start, min(end, bank.duration))
        centres = np.clip((cells + 0.5) * bank.segment_seconds, start, end)
        times = (centres - start) / (end - start)
        rec = self.dataset.recordings[video_id]
        sentences = [s for s in rec.transcript if s.start < end and s.end > start]
        return _Clip(bank, cells, times, pooled_cells(bank.cell_text[cells], pool), sentences)

    def task_posteriors(self, item: MultipleChoiceItem, tasks: Sequence[str], settings: ReadingSettings,
                        clip: _Clip) -> np.ndarray:
        """P [T, len(tasks)]: each named task's posterior over the clip's cells."""
        trained = self.cell_log_probs is not None and self.steps == "recording"
        model = self.emissions(settings.pool, settings.lexical) if not trained or settings.trained_weight < 1 else None
        seconds = clip.bank.segment_seconds
        video_id = item.meta["video_id"]
        if self.steps == "options":
            words = self.word_match(video_id, clip.cells, settings.pool, tasks) if settings.lexical else None
            logits = model.logits(clip.pooled, self.encode(list(tasks)), None, words)
            logits[:, 0] += settings.irrelevant_offset
            lp = log_softmax(logits, axis=1) * settings.emission_weight
            # states: the tasks, then something else (class 0)
            emissions = np.concatenate([lp[:, 1:], lp[:, :1]], axis=1)
            matrix, initial = options_chain(len(tasks), self.plan, settings.rate_scale, seconds)
            return decode(emissions, matrix, initial)[:, :len(tasks)]
        rec = self.dataset.recordings[item.meta["video_id"]]
        logits = 0.0
        if model is not None:  # the zero-shot recipe
            captions = _unit(np.asarray(clip.bank.step_caption[1:], dtype=np.float64))
            narrations = _unit(np.asarray(clip.bank.step_narration[1:], dtype=np.float64))
            words = (self.word_match(video_id, clip.cells, settings.pool, [s.caption for s in rec.steps[1:]])
                     if settings.lexical else None)
            logits = model.logits(clip.pooled, captions, narrations, words)
        if trained:  # log-linear mixture: the trained runs' calibrated log-probabilities weigh trained_weight
            recipe = log_softmax(logits, axis=1) if model is not None else 0.0
            logits = (settings.trained_weight * self.trained_log_probs(video_id, clip, rec.num_classes)
                      + (1.0 - settings.trained_weight) * recipe)
        logits[:, 0] += settings.irrelevant_offset
        lp = log_softmax(logits, axis=1) * settings.emission_weight
        k = rec.num_classes - 1
        classes = PlanModel.state_classes(k)
        m = np.clip(expm(self.plan.rate_matrix(k, settings.rate_scale) * seconds), 0.0, None)
        m /= m.sum(axis=1, keepdims=True)
        initial = np.where(classes > 0, 1.0, 1.0 / (k + 1)) / (k + 1)
        posterior = decode(lp[:, classes], m, initial)
        per_class = np.zeros((len(posterior), k + 1))
        np.add.at(per_class.T, classes, posterior.T)
        out = np.zeros((len(posterior), len(tasks)))
        by_caption: dict[str, list[int]] = {}
        for step in rec.steps[1:]:
            by_caption.setdefault(_norm(step.caption), []).append(step.index)
        for i, task in enumerate(tasks):
            # a text that names no step of the list (a typo in a question) stays at zero: it is nowhere
            out[:, i] = per_class[:, by_caption.get(_norm(task), [])].sum(axis=1)
        return out

    def trained_log_probs(self, video_id: str, clip: _Clip, num_classes: int) -> np.ndarray:
        """The clip's cells' rows of the trained runs' calibrated log-probabilities [T, K+1] (a copy)."""
        if video_id not in self.cell_log_probs:
            raise DataError(f"emission_scores hold no scores of recording {video_id} (they cover the val and test "
                            f"recordings of the runs' data: {sorted(self.cell_log_probs)})")
        rows = self.cell_log_probs[video_id]
        if rows.shape != (clip.bank.num_cells, num_classes):
            raise DataError(f"emission_scores of recording {video_id}: shape {rows.shape}, expected "
                            f"{(clip.bank.num_cells, num_classes)} (its cells, its K + 1 classes): made on other data")
        return np.array(rows[clip.cells], dtype=np.float64)

    def contrastive(self, item: MultipleChoiceItem, clip: _Clip) -> np.ndarray:
        """Each option against the mean of the clip's sentence vectors (mc_contrastive_text's mean pool)."""
        bank = clip.bank
        inside = (bank.sentence_start < item.visual.end) & (bank.sentence_end > item.visual.start)
        if not inside.any():
            return np.zeros(len(item.options))
        clip_vector = _unit(np.asarray(bank.sentence_text[inside], dtype=np.float64).mean(axis=0))
        question = item.question.strip().rstrip("?.").rstrip() + "?"
        return self.encode([f"Question: {question} Is it {o}" for o in item.options]) @ clip_vector

    # ---- one question -----------------------------------------------------------------------------

    def scores(self, item: MultipleChoiceItem, settings: ReadingSettings | None = None) -> tuple[np.ndarray, str]:
        """Every option's score and the rule that gave it."""
        s = settings or self.settings
        qtype = item.meta.get("type")
        clip = self.clip(item, s.pool)
        if qtype == BEFORE_AFTER and (m := BEFORE_AFTER_RE.match(item.question)):
            relation, named = m.groups()
            tasks = _tasks([named, *item.options])
            p = self.task_posteriors(item, tasks, s, clip)
            return side_scores(p, 0, [tasks.index(_norm(o)) for o in item.options], relation, s.side_rule), "side"
        if qtype == WHEN and (m := WHEN_RE.match(item.question)):
            p = self.task_posteriors(item, _tasks([m.group(1)]), s, clip)
            seconds = third_seconds(p, clip.times, 0, clip.bank.segment_seconds)
            by_text = {_norm(t): v for t, v in zip(THIRDS, seconds)} | {_norm(ABSENT): s.absent_seconds}
            return np.array([by_text.get(_norm(o), -np.inf) for o in item.options]), "thirds"
        if qtype == ORDER:
            orders = [ORDER_OPTION_RE.findall(o) for o in item.options]
            if all(len(o) >= 2 for o in orders):
                tasks = _tasks([t for o in orders for t in o])
                p = self.task_posteriors(item, tasks, s, clip)
                return np.array([sum(precedes(p, tasks.index(_norm(a)), tasks.index(_norm(b)))
                                     for i, a in enumerate(o) for b in o[i + 1:]) for o in orders]), "order"
        if qtype == LOCATION and (m := LOCATION_RE.match(item.question)):
            if s.location_rule == "order_and_association":
                return self.order_and_association(item, m.group(1), m.group(2), clip, s), "order_association"
            mentions = self.mentions(m.group(2), clip, s.place_spelling)
            if len(mentions):
                tasks = _tasks(item.options)
                p = self.task_posteriors(item, tasks, s, clip)
                return self.location_scores(p, [tasks.index(_norm(o)) for o in item.options], m.group(1), clip,
                                            mentions, item), "location"
        return self.contrastive(item, clip), "contrastive"

    @staticmethod
    def mentions(place: str, clip: _Clip, spelling: str = "words") -> np.ndarray:
        """The start times of the clip's sentences naming the place. `spelling` "words": its words (leading "the"
        dropped), a letter-digit name ("P6", "S0") also with a space or hyphen inside; "variants": the words
        read as the transcript spells them (features/lexical.py place_variants: "p six" is P6, "four bravo" 4B,
        "IEA" the Integrated Electronics Assembly), run together in the sentence."""
        if spelling == "variants":
            variants = lexical.place_variants(place)
            return np.array([s.start for s in clip.transcript if variants and lexical.names_place(s.text, variants)])
        words = [w for w in re.findall(r"[a-z0-9]+", place.casefold()) if w != "the"]
        if not words:
            return np.zeros(0)
        patterns = [re.compile(r"\b" + re.sub(r"^([a-z]+)(\d+)$", r"\1[\\s-]?\2", w) + r"\b") for w in words]
        return np.array([s.start for s in clip.transcript if all(p.search(s.text.casefold()) for p in patterns)])

    def order_and_association(self, item: MultipleChoiceItem, relation: str, place: str, clip: _Clip,
                              settings: ReadingSettings) -> np.ndarray:
        """A location question by `location_rule` "order_and_association" (the module's docstring)."""
        tasks = _tasks(item.options)
        options = [tasks.index(_norm(o)) for o in item.options]
        p = self.task_posteriors(item, tasks, settings, clip)
        if relation.startswith("before"):
            return order_scores(p, options, "before")
        if relation.startswith("after"):
            return order_scores(p, options, "after")
        mentions = self.mentions(place, clip, settings.place_spelling)
        near = near_mentions(clip_seconds(clip, item), mentions) if len(mentions) else None
        return at_scores(p, options, near, self.places.affinity(place, item.options))

    @staticmethod
    def location_scores(p: np.ndarray, options: Sequence[int], relation: str, clip: _Clip, mentions: np.ndarray,
                        item: MultipleChoiceItem) -> np.ndarray:
        seconds = clip_seconds(clip, item)
        if relation.startswith("before"):
            where = seconds < mentions.min()
        elif relation.startswith("after"):
            where = seconds > mentions.max()
        else:
            where = near_mentions(seconds, mentions)
        return np.array([(p[where, o].sum() - p[~where, o].sum()) for o in options])


def read_cell_log_probs(files: Sequence[str | Path]) -> dict[str, np.ndarray]:
    """The mean of several cell_log_probs files ({video: [C, K+1]}, spacewalk/training/cell_log_probs.py)."""
    tables = []
    for file in files:
        path = Path(file)
        if not path.is_file():
            raise ConfigError(f"emission_scores: {path} is not a file (python -m spacewalk.training.cell_log_probs "
                              "writes one)")
        try:
            with np.load(path) as data:
                tables.append({v: np.asarray(data[v], dtype=np.float64) for v in data.files})
        except (OSError, ValueError) as error:
            raise DataError(f"not a cell_log_probs .npz file: {error}", file=path) from None
    if any(set(t) != set(tables[0]) or any(t[v].shape != tables[0][v].shape for v in t) for t in tables):
        raise DataError(f"emission_scores {list(map(str, files))} cover different recordings or shapes")
    return {v: np.mean([t[v] for t in tables], axis=0) for v in tables[0]}


def plan_reading_backend(text_encoder, **options: Any) -> OptionScoresBackend:
    """The `model=mc_plan` backend (conf/model/mc_plan.yaml): the multiple-choice harness's option-scoring backend
    (spacewalk/multiple_choice/backends/option_scores.py) over a `PlanReading` of the data config's recordings;
    `options`: PlanReading's."""
    reader = PlanReading(text_encoder, **options)
    return OptionScoresBackend(reader, meta={"steps": reader.steps})


# --------------------------------------------------------------------------------------------------
# choosing the settings on (generated) val questions


def choose_settings(reader: PlanReading, items: Sequence[MultipleChoiceItem],
                    candidates: Sequence[ReadingSettings], log=None) -> tuple[ReadingSettings, list[dict]]:
    """The candidate with the best accuracy on `items` (ties: the earlier candidate), and every candidate's
    accuracy overall and per type."""
    table, best, best_accuracy = [], None, -1.0
    for settings in candidates:
        correct: dict[str, list[bool]] = {}
        for item in items:
            scores, _ = reader.scores(item, settings)
            choice = int(np.argmax(np.nan_to_num(scores, neginf=-1e9)))
            correct.setdefault(item.meta["type"], []).append(choice == item.answer)
        every = [c for cs in correct.values() for c in cs]
        row = {**asdict(settings), "Accuracy": 100 * float(np.mean(every)),
               "per_type": {t: 100 * float(np.mean(cs)) for t, cs in correct.items()}}
        table.append(row)
        if log is not None:
            log(row)
        if row["Accuracy"] > best_accuracy:
            best, best_accuracy = settings, row["Accuracy"]
    return best, table


def main(argv: list[str] | None = None) -> int:
    """python -m spacewalk.benchmarks.spacewalk18.questions.plan_reading --root R --questions VAL.json --steps
    options|recording --grid '{"pool": [1, 2], ...}' [--bank-dir DIR] [--out table.json]: every candidate's accuracy
    on the (generated val) questions, and the chosen settings (the best; ties: the earlier candidate)."""
    import argparse
    import itertools
    import json

    from spacewalk.benchmarks.spacewalk18.questions.question_answering import QuestionAnswering
    from spacewalk.core.arguments import existing_file, output_file
    from spacewalk.core.command_errors import user_errors_reported
    from spacewalk.core.io import write_json
    from spacewalk.encoders.sentence import minilm_text_encoder

    parser = argparse.ArgumentParser(prog="python -m spacewalk.benchmarks.spacewalk18.questions.plan_reading",
                                     description="Choose mc_plan's settings on generated val questions.")
    parser.add_argument("--root", required=True, type=Path, help="the Spacewalk-18 release")
    parser.add_argument("--questions", required=True, type=existing_file,
                        help="a question file (val: question_generator)")
    parser.add_argument("--steps", choices=MODES, default="options")
    parser.add_argument("--grid", default="{}", help="JSON: ReadingSettings field -> list of values")
    parser.add_argument("--bank-dir", type=Path, default=Path("data/feature_banks/spacewalk18/minilm"))
    parser.add_argument("--out", type=output_file, default=None, help="JSON file for the table and the choice")
    parser.add_argument("--emission-scores", nargs="+", type=existing_file, default=None,
                        help="cell_log_probs .npz files of trained runs, averaged (steps=recording)")
    args = parser.parse_args(argv)
    with user_errors_reported():
        try:
            grid = json.loads(args.grid)
        except json.JSONDecodeError as error:
            raise ConfigError(f"--grid is not JSON: {error}") from None
        if not isinstance(grid, dict) or not all(isinstance(v, list) and v for v in grid.values()):
            raise ConfigError(f"--grid must map settings to non-empty lists, got {args.grid!r}")
        candidates = [from_mapping(ReadingSettings, dict(zip(grid, combo)), "--grid")
                      for combo in itertools.product(*grid.values())]
        reader = PlanReading(minilm_text_encoder(device="cpu"), root=args.root, bank_dir=args.bank_dir,
                             steps=args.steps, emission_scores=args.emission_scores)
        items = QuestionAnswering(reader.dataset, questions=args.questions).items()
        chosen, table = choose_settings(reader, items, candidates,
                                        log=lambda row: print(json.dumps(row), flush=True))
        print(json.dumps({"chosen": asdict(chosen)}))
        if args.out is not None:
            write_json(args.out, {"questions": str(args.questions), "steps": args.steps, "grid": grid,
                                  "emission_scores": [str(f) for f in args.emission_scores or []],
                                  "chosen": asdict(chosen), "candidates": table})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
