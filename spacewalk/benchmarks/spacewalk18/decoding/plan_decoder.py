"""Decoding that follows a recording's plan: per-sample step scores turned into a coherent segmentation.

A spacewalk is its step list carried out mostly in order: steps advance by one, are resumed after an
Irrelevant interlude (the most common change in the training annotations), and go back or skip a little.
`PlanModel` is a continuous-time Markov chain over 2K + 1 states, estimated from the training recordings'
annotations:
- S_k, "in step k" (k = 1..K), emitting class k;
- I_j, "Irrelevant, the last step was j" (j = 0..K, j = 0 before any step), emitting class 0, so that an
  interlude remembers where the plan was.
A step segment ends at rate 1 / (mean step segment length), an interlude at 1 / (mean interlude length);
where it goes is the training annotations' distribution of step-list offsets (from S_k to S_{k+d}, to I_k;
from I_j to S_{j+d}), renormalised over the offsets that exist in a recording of K steps. Between two
observations dt seconds apart the transition matrix is expm(Q dt) (samples are not evenly spaced).

Emissions are a recipe's scores calibrated on val: log softmax((s + b e_0) / T), T and b fitted by maximum
likelihood of the val labels (`Calibration`); for a threshold recipe s_0 is tau, as in the prediction file.
The official samples are balanced over classes, so the class prior is uniform and the calibrated
posterior is the emission up to a constant. Optionally the plan prior (spacewalk18/plan_prior.py: where in
relative time each relative step position happens) multiplies in with a weight. The decoding settings
(emission weight, prior weight, rate scale) are chosen on val (`choose_settings`).

Viterbi gives the labels; forward-backward the per-class posteriors reported as scores (so mAP is defined).
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.linalg import expm
from scipy.optimize import minimize
from scipy.special import log_softmax

from spacewalk.algorithms.hmm import forward_backward, viterbi
from spacewalk.benchmarks.spacewalk18.data.dataset import FPS, NOT_ANNOTATED, Recording, StepSample, frame_of
from spacewalk.core.errors import ConfigError, DataError
from spacewalk.core.settings import from_mapping
from spacewalk.media import grid as cell_grid  # the module; `grid` names the decoder's grid samples here


def _distribution(counts: Counter, support: Iterable[int], smoothing: float) -> dict[int, float]:
    support = list(support)
    total = sum(counts[d] for d in support) + smoothing * len(support)
    return {d: (counts[d] + smoothing) / total for d in support}


@dataclass(frozen=True)
class PlanModel:
    step_seconds: float
    irrelevant_seconds: float
    to_irrelevant: float  # P(a step segment is followed by an interlude)
    step_offsets: Mapping[int, float]  # from S_k: P(the next step is k + d | a step follows), d != 0
    resume_offsets: Mapping[int, float]  # from I_j: P(the next step is j + d); j = 0 before any step
    start_irrelevant: float  # P(a recording's annotated part starts with Irrelevant)

    @classmethod
    def fit(cls, recordings: Iterable[Recording], max_offset: int = 8, smoothing: float = 0.5) -> PlanModel:
        """From annotations: consecutive annotated segments (not-annotated ones are skipped, the chain goes on
        through them), offsets beyond +-max_offset pooled at the edge, add-`smoothing` counts."""
        step_len, irr_len, step_next, resume_next = [], [], Counter(), Counter()
        followed_by_irrelevant = starts_irrelevant = n = 0
        for rec in recordings:
            segments = [s for s in rec.segments if s.label != NOT_ANNOTATED]
            if not segments:
                continue
            n += 1
            starts_irrelevant += segments[0].label == 0
            last_step = 0
            for i, seg in enumerate(segments):
                (step_len if seg.label > 0 else irr_len).append(seg.end - seg.start)
                if i + 1 == len(segments):
                    break
                nxt = segments[i + 1].label
                if seg.label > 0:
                    last_step = seg.label
                    if nxt == 0:
                        followed_by_irrelevant += 1
                    else:
                        step_next[int(np.clip(nxt - seg.label, -max_offset, max_offset))] += 1
                elif nxt > 0:
                    resume_next[int(np.clip(nxt - last_step, -max_offset, max_offset))] += 1
        if n == 0 or not step_len:
            raise DataError("no annotated step segment to fit the plan model on")
        steps_followed = followed_by_irrelevant + sum(step_next.values())
        offsets = range(-max_offset, max_offset + 1)
        return cls(
            step_seconds=float(np.mean(step_len)),
            irrelevant_seconds=float(np.mean(irr_len)) if irr_len else 1.0,
            to_irrelevant=(followed_by_irrelevant + smoothing) / (steps_followed + 2 * smoothing),
            step_offsets=_distribution(step_next, [d for d in offsets if d != 0], smoothing),
            resume_offsets=_distribution(resume_next, offsets, smoothing),
            start_irrelevant=(starts_irrelevant + smoothing) / (n + 2 * smoothing),
        )

    # ---------------------------------------------------------------------------------------------

    @staticmethod
    def state_classes(num_steps: int) -> np.ndarray:
        """The class each state emits: S_1..S_K, then I_0..I_K."""
        return np.concatenate([np.arange(1, num_steps + 1), np.zeros(num_steps + 1, dtype=np.int64)])

    def _to_steps(self, origin: int, offsets: Mapping[int, float], num_steps: int, skip_zero: bool) -> np.ndarray:
        """P(next step = k) for k = 1..K from step-list position `origin`, over the offsets that exist."""
        p = np.zeros(num_steps)
        for k in range(1, num_steps + 1):
            d = k - origin
            if skip_zero and d == 0:
                continue
            edge = max(abs(x) for x in offsets)
            p[k - 1] = offsets.get(int(np.clip(d, -edge, edge)), 0.0)
        return p / p.sum() if p.sum() > 0 else p

    def rate_matrix(self, num_steps: int, rate_scale: float = 1.0) -> np.ndarray:
        """The generator Q [2K+1, 2K+1] (rows sum to 0); `rate_scale` < 1 makes every state stickier."""
        k_ = num_steps
        q = np.zeros((2 * k_ + 1, 2 * k_ + 1))
        leave_step, leave_irrelevant = rate_scale / self.step_seconds, rate_scale / self.irrelevant_seconds
        for k in range(1, k_ + 1):
            to_steps = self._to_steps(k, self.step_offsets, k_, skip_zero=True)
            p_irrelevant = self.to_irrelevant if to_steps.sum() > 0 else 1.0
            q[k - 1, :k_] = leave_step * (1 - p_irrelevant) * to_steps
            q[k - 1, k_ + k] = leave_step * p_irrelevant
        for j in range(0, k_ + 1):
            q[k_ + j, :k_] = leave_irrelevant * self._to_steps(j, self.resume_offsets, k_, skip_zero=False)
        np.fill_diagonal(q, 0.0)
        np.fill_diagonal(q, -q.sum(axis=1))
        return q

    def initial(self, num_steps: int) -> np.ndarray:
        p = np.zeros(2 * num_steps + 1)
        p[:num_steps] = (1 - self.start_irrelevant) * self._to_steps(0, self.resume_offsets, num_steps, False)
        p[num_steps] = self.start_irrelevant
        return p / p.sum()


def transitions(q: np.ndarray, seconds: np.ndarray, resolution: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """expm(Q dt) for the gaps between consecutive times, gaps rounded to `resolution` seconds (a state lasts
    tens of seconds on average, so a second is far below what changes a transition): (matrices [M, S, S],
    index [T - 1])."""
    gaps = np.round(np.diff(np.asarray(seconds, dtype=np.float64)) / resolution).astype(np.int64)
    if (gaps < 0).any():
        raise ValueError("observation times must not decrease")
    unique, index = np.unique(gaps, return_inverse=True)
    matrices = np.stack([expm(q * g * resolution) for g in unique]) if len(unique) else np.zeros((1,) + q.shape)
    # expm's float noise can leave tiny negatives; rows are distributions
    matrices = np.clip(matrices, 0.0, None)
    matrices /= matrices.sum(axis=2, keepdims=True)
    return matrices, index.reshape(-1)


# --------------------------------------------------------------------------------------------------
# emissions


@dataclass(frozen=True)
class Calibration:
    """log p(class | sample) = log softmax((s + irrelevant_bias e_0) / temperature)."""

    temperature: float = 1.0
    irrelevant_bias: float = 0.0

    def log_probs(self, scores: np.ndarray) -> np.ndarray:
        s = np.asarray(scores, dtype=np.float64).copy()
        s[..., 0] += self.irrelevant_bias
        return log_softmax(s / self.temperature, axis=-1)

    @classmethod
    def fit(cls, scores: Mapping[str, np.ndarray], labels: Mapping[str, np.ndarray]) -> Calibration:
        """Maximum likelihood of the labels (val) over temperature and Irrelevant's bias."""
        videos = list(scores)

        def nll(params):
            c = cls(math.exp(params[0]), params[1])
            return -sum(c.log_probs(scores[v])[np.arange(len(labels[v])), labels[v]].sum() for v in videos)

        start = np.array([math.log(max(1e-3, float(np.std(np.concatenate([scores[v][:, 1:].ravel()
                                                                          for v in videos]))))), 0.0])
        best = minimize(nll, start, method="Nelder-Mead", options={"xatol": 1e-4, "fatol": 1e-6, "maxiter": 2000})
        return cls(float(math.exp(best.x[0])), float(best.x[1]))


# --------------------------------------------------------------------------------------------------
# decoding


LABEL_RULES = ("viterbi", "posterior", "balanced")


@dataclass(frozen=True)
class DecodeSettings:
    """What is chosen on val: emission_weight (< 1 when neighbouring observations share most of their window,
    so they are not independent evidence), prior_weight (the plan prior's, whole recording only), rate_scale
    (< 1: stickier states), cell_weight (within the window: the cells' own scores), labels (whole recording):
    - "viterbi": the most likely path's classes;
    - "posterior": each sample's most likely class (forward-backward);
    - "balanced": the posterior divided by each class's decoded share of the recording's time. The chain's
      posterior is over time, but the official samples are balanced over classes (about 2000 / (K + 1) each,
      whatever a class lasts), so a sample is a priori as likely to be a 2-minute step as a 40-minute one; the
      recipes were trained on such samples too. Dividing by the time share is the Bayes decision under that
      sampling; it reads no label, only the decoded recording."""

    emission_weight: float = 1.0
    prior_weight: float = 0.0
    rate_scale: float = 1.0
    cell_weight: float = 0.0
    labels: str = "viterbi"

    def __post_init__(self):
        if self.labels not in LABEL_RULES:
            raise ConfigError(f"labels must be one of {LABEL_RULES}, got {self.labels!r}")

    @staticmethod
    def grid(**values: Sequence[float]) -> list[DecodeSettings]:
        names = list(values)
        return [from_mapping(DecodeSettings, dict(zip(names, combo)), "decoding.grid")
                for combo in itertools.product(*values.values())]


@dataclass
class Decoded:
    labels: np.ndarray  # [n] the Viterbi path's classes
    posteriors: np.ndarray  # [n, K+1] per-class posteriors (forward-backward), reported as scores


def _per_class(posterior: np.ndarray, classes: np.ndarray, num_classes: int) -> np.ndarray:
    out = np.zeros(posterior.shape[:-1] + (num_classes,))
    for state, c in enumerate(classes):
        out[..., c] += posterior[..., state]
    return out


def grid_samples(recording: Recording, seconds: float) -> list[StepSample]:
    """Points every `seconds` over the whole recording (the centres of the feature bank's cells), labels
    unknown: where the whole-recording decoder observes, so that where the official samples lie (which
    depends on the labels: the sampler balances classes) tells it nothing."""
    centres = (np.arange(cell_grid.num_cells(recording.duration, seconds)) + 0.5) * seconds
    times = np.minimum(centres, recording.duration)
    return [StepSample(id=i, timestamp=float(t), frame_index=int(round(t * FPS)), label=0)
            for i, t in enumerate(times)]


def cell_labels(recording: Recording, num_cells: int, seconds: float) -> np.ndarray:
    """The annotated class at the centre of each of the recording's grid cells [j s, (j + 1) s) (the last
    centre kept inside the recording): what a cell scored on its own is calibrated against on val."""
    centres = np.minimum((np.arange(num_cells) + 0.5) * seconds, recording.duration - 1e-6)
    return np.array([recording.label_at_frame(min(frame_of(t), recording.num_frames - 1)) for t in centres])


def grid_cell(samples: Sequence[StepSample], seconds: float, num_cells: int) -> np.ndarray:
    """The grid cell [j s, (j + 1) s) that holds each sample (spacewalk.media.grid.cell_of)."""
    return cell_grid.cell_of(np.array([s.timestamp for s in samples], dtype=np.float64), seconds, num_cells)


@dataclass
class WholeRecordingDecoder:
    """Decodes a recording on a regular grid of the recipe's scores, jointly (transductive: every part of the
    recording informs every other, like an annotator who watched it all); each sample takes its grid cell."""

    plan: PlanModel
    prior: object | None = None  # a fitted PlanPriorBaseline, for prior_weight > 0

    def decode(self, recording: Recording, grid: Sequence[StepSample], grid_log_probs: np.ndarray,
               samples: Sequence[StepSample], settings: DecodeSettings, grid_seconds: float) -> Decoded:
        """grid_log_probs [G, K+1]: calibrated log-probabilities of the classes at the grid points."""
        num_steps = recording.num_classes - 1
        classes = PlanModel.state_classes(num_steps)
        log_probs = grid_log_probs * settings.emission_weight
        if settings.prior_weight:
            if self.prior is None:
                raise ValueError("prior_weight > 0 needs a fitted plan prior")
            log_probs = log_probs + settings.prior_weight * np.log(self.prior.score(recording, grid))
        emissions = log_probs[:, classes]
        matrices, index = transitions(self.plan.rate_matrix(num_steps, settings.rate_scale),
                                      np.array([s.timestamp for s in grid]))
        initial = self.plan.initial(num_steps)
        posterior, _ = forward_backward(emissions, matrices, index, initial)
        per_class = _per_class(posterior[0], classes, recording.num_classes)
        cell = grid_cell(samples, grid_seconds, len(grid))
        if settings.labels == "viterbi":
            return Decoded(classes[viterbi(emissions, matrices, index, initial)[0]][cell], per_class[cell])
        if settings.labels == "balanced":
            per_class = per_class / (per_class.mean(axis=0) + 1e-3)  # the floor keeps an unseen class finite
            per_class /= per_class.sum(axis=1, keepdims=True)
        return Decoded(per_class[cell].argmax(axis=1), per_class[cell])


@dataclass
class WithinWindowDecoder:
    """Decodes each sample from what its window holds (the benchmark's protocol): the window's cells, each
    scored on its own (`cell_calibration` of e.g. zero-shot cell scores), and the recipe's score of the sample,
    observed at the sample's cell. A chain over the window's cells, from a uniform start over the classes (the
    window does not know where in the recording it is); the label is the Viterbi path at the sample's cell or
    its most likely class there (`labels`).
    The cell scores and the recipe's come calibrated (`Calibration`), each fitted on val."""

    plan: PlanModel
    cell_seconds: float

    def decode(self, recording: Recording, cell_log_probs: np.ndarray, sample_log_probs: np.ndarray,
               first_cell: np.ndarray, num_cells: np.ndarray, query_pos: np.ndarray,
               settings: DecodeSettings) -> Decoded:
        """cell_log_probs [C, K+1]: each cell's calibrated class log-probabilities from the cell alone, or
        [n, M, K+1]: each window's cells already laid out (left-aligned; e.g. calibrated against the window,
        emissions.window_normalized); sample_log_probs [n, K+1]: the recipe's, of each sample; first_cell,
        num_cells, query_pos [n]: the sample's window in cells and its own cell within it."""
        num_steps = recording.num_classes - 1
        classes = PlanModel.state_classes(num_steps)
        n, m = len(first_cell), int(num_cells.max())
        offsets = np.arange(m)
        inside = offsets[None, :] < num_cells[:, None]
        if cell_log_probs.ndim == 3:
            cells = cell_log_probs[:, :m][..., classes] * settings.cell_weight
            emissions = np.where(inside[..., None], cells, 0.0)
        else:
            cells = cell_log_probs[:, classes] * settings.cell_weight
            rows = np.minimum(first_cell[:, None] + offsets[None, :], len(cells) - 1)
            emissions = np.where(inside[..., None], cells[rows], 0.0)  # left-aligned; past the window: no evidence
        recipe = sample_log_probs[:, classes] * settings.emission_weight
        emissions[np.arange(n), query_pos] += recipe
        q = self.plan.rate_matrix(num_steps, settings.rate_scale)
        matrices = expm(q * self.cell_seconds)[None]
        matrices = np.clip(matrices, 0.0, None)
        matrices /= matrices.sum(axis=2, keepdims=True)
        index = np.zeros(m - 1, dtype=np.int64)
        # uniform over the K + 1 classes; Irrelevant's share spread over its K + 1 memory states
        initial = np.where(classes > 0, 1.0, 1.0 / (num_steps + 1)) / (num_steps + 1)
        posterior, _ = forward_backward(emissions, matrices, index, initial)
        at_query = np.arange(n), query_pos
        per_class = _per_class(posterior[at_query], classes, recording.num_classes)
        if settings.labels == "balanced":
            raise ConfigError("labels=balanced needs the whole recording (each class's share of it)")
        if settings.labels == "posterior":
            return Decoded(per_class.argmax(axis=1), per_class)
        return Decoded(classes[viterbi(emissions, matrices, index, initial)[at_query]], per_class)


def choose_settings(candidates: Sequence[DecodeSettings], decode_split) -> tuple[DecodeSettings, list[dict]]:
    """The candidate with the best val Accuracy (then IoU), and every candidate's val metrics.
    `decode_split(settings)` decodes the val split and returns its official metrics."""
    table, best, best_key = [], None, None
    for settings in candidates:
        metrics = decode_split(settings)
        table.append({**settings.__dict__, "Accuracy": metrics["Accuracy"], "mAP": metrics["mAP"],
                      "IoU": metrics["IoU"]})
        key = (metrics["Accuracy"], metrics["IoU"])
        if best_key is None or key > best_key:
            best, best_key = settings, key
    return best, table
