"""Caption scoring as HiREST's official evaluate.py does it (docs/hirest.md, Official scoring rules), on pycocoevalcap.

The authors call `language_evaluation.CocoEvaluator().run_evaluation(candidates, references)`, a thin
wrapper over the MS-COCO caption code (coco-caption): each caption becomes its own "image" with one
reference, both sides go through the Stanford PTB tokenizer (lower-cased, punctuation tokens dropped),
then BLEU-1..4 (`closest` reference length, corpus level), METEOR 1.5 (corpus statistics, computed by
the jar), ROUGE-L (beta 1.2, mean over captions), CIDEr-D (n = 4, sigma = 6, document frequencies over
the evaluated references, so the IDF depends on the set scored together) and SPICE. This module runs
the same pycocoevalcap scorers on the same inputs; a group (the whole split, or one category) is one
such evaluation. Scores are x100, as the authors report them.

Never downloads anything: SPICE needs Stanford CoreNLP 3.6.0 jars that pycocoevalcap fetches at first
use, BERTScore needs roberta-large, CLIPScore needs CLIP ViT-B/32 weights and frames, the entailment
rate needs the authors' AllenNLP model (which needs torch < 1.13). Each is computed when it is already
on disk and otherwise reported under `skipped` with the reason.

Deviation, only where the official output is garbage: the tokenizer works line by line and Java also
breaks lines at \\r, \\v, \\f, U+2028 and U+2029, which would shift every later caption onto the wrong
reference; these characters become spaces here, as the official code does for \\n.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

COCO_METRICS = ("Bleu_1", "Bleu_2", "Bleu_3", "Bleu_4", "METEOR", "ROUGE_L", "CIDEr", "SPICE")
BERTSCORE_MODEL = "roberta-large"  # bert_score's default for lang="en" (layer 17, no IDF, no rescaling)
CLIP_FRAMES_PER_STEP = 4
_LINE_BREAKS = re.compile("[\n\r\x0b\x0c\u2028\u2029]")


class ScorerUnavailable(RuntimeError):
    """The machine lacks what a required scorer needs (Java, pycocoevalcap): not bad input."""


def java_missing() -> str | None:
    """Why the Java-based scorers cannot run, or None."""
    return None if shutil.which("java") else "java is not on PATH (PTB tokenizer, METEOR and SPICE are Java)"


def _pycocoevalcap_dir() -> Path:
    try:
        from pycocoevalcap.tokenizer import ptbtokenizer
    except ImportError as e:
        raise ScorerUnavailable("pycocoevalcap is not installed (pip install pycocoevalcap)") from e
    # a namespace package (no __init__.py): locate it through a module file
    return Path(ptbtokenizer.__file__).parent.parent


def spice_missing() -> str | None:
    """Why SPICE cannot run without a download, or None. pycocoevalcap's Spice() fetches Stanford CoreNLP
    3.6.0 on first use; we only run it when both jars are already in place."""
    if reason := java_missing():
        return reason
    lib = _pycocoevalcap_dir() / "spice" / "lib"
    missing = [name for name in ("stanford-corenlp-3.6.0.jar", "stanford-corenlp-3.6.0-models.jar")
               if not (lib / name).is_file()]
    if missing:
        return (f"Stanford CoreNLP 3.6.0 ({', '.join(missing)}) is not in {lib}; pycocoevalcap would download it "
                "at first use and this project never downloads at run time (put the two jars there to enable SPICE)")
    return None


def _hf_cached(repo: str, names: Sequence[str]) -> bool:
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return False
    return any(isinstance(try_to_load_from_cache(repo, name), str) for name in names)


def bertscore_missing() -> str | None:
    """Why BERTScore cannot run offline, or None."""
    if importlib.util.find_spec("bert_score") is None:
        return "bert_score is not installed (optional: pip install -e '.[bertscore]')"
    if not (_hf_cached(BERTSCORE_MODEL, ["config.json"])
            and _hf_cached(BERTSCORE_MODEL, ["model.safetensors", "pytorch_model.bin"])):
        return f"{BERTSCORE_MODEL} is not in the local Hugging Face cache (it is never downloaded at run time)"
    return None


ENTAILMENT_SKIPPED = ("the authors' entailment model (AllenNLP decomposable attention + ELMo) is not available: "
                      "allennlp needs torch < 1.13")


@contextmanager
def _hf_offline() -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    os.environ.update({k: "1" for k in saved})
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


# --------------------------------------------------------------------------------------------------
# PTB tokenization


def ptb_tokenize(sentences: Sequence[str]) -> list[str]:
    """coco-caption's PTBTokenizer: the Stanford CoreNLP 3.4.1 jar that pycocoevalcap ships, run with
    `-preserveLines -lowerCase` on one line per sentence, then its punctuation tokens dropped.

    The same command and post-processing as pycocoevalcap's `PTBTokenizer.tokenize`, run here so that its
    temporary file goes to a private folder (not into site-packages) and Java's progress line stays off
    the console. Note "-lrb-"/"-rrb-" survive: coco-caption's punctuation list has them upper-case only.
    """
    if reason := java_missing():
        raise ScorerUnavailable(reason)
    from pycocoevalcap.tokenizer.ptbtokenizer import PUNCTUATIONS, STANFORD_CORENLP_3_4_1_JAR

    if not sentences:
        return []
    jar = _pycocoevalcap_dir() / "tokenizer" / STANFORD_CORENLP_3_4_1_JAR
    text = "\n".join(_LINE_BREAKS.sub(" ", s) for s in sentences)
    with tempfile.TemporaryDirectory(prefix="ptb-") as tmp:
        path = Path(tmp) / "sentences.txt"
        path.write_bytes(text.encode())
        done = subprocess.run(["java", "-cp", str(jar), "edu.stanford.nlp.process.PTBTokenizer",
                               "-preserveLines", "-lowerCase", str(path)],
                              capture_output=True, check=False)
    if done.returncode != 0:
        raise ScorerUnavailable(f"the PTB tokenizer failed: {done.stderr.decode(errors='replace')[-500:]}")
    lines = done.stdout.decode().split("\n")
    if len(lines) < len(sentences):
        raise ScorerUnavailable(f"the PTB tokenizer returned {len(lines)} lines for {len(sentences)} sentences")
    drop = set(PUNCTUATIONS)
    return [" ".join(w for w in line.rstrip().split(" ") if w not in drop) for line in lines[:len(sentences)]]


# --------------------------------------------------------------------------------------------------
# scoring session


@dataclass
class GroupScores:
    """Metrics per group name (x100 for the COCO metrics) and the metrics left out, with the reason."""

    metrics: dict[str, dict[str, float]]
    skipped: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ClipInput:
    """What CLIPScore needs for one caption: the video's frames (1 fps, in time order) and the step's
    [start, end] in seconds, used as frame indices as the authors do."""

    frames: Sequence[Path]
    start: float
    end: float


class CaptionScorer:
    """The COCO caption scorers with one METEOR process kept open, so several groups (a split and each
    of its categories) cost one Java start-up. Use as a context manager or call `close()`.

    spice / bertscore: compute them when available (default), or never. clip: per-caption `ClipInput`s
    plus `clip_weights` (a local CLIP ViT-B/32 OpenAI checkpoint, or None to look in open_clip's cache).
    """

    def __init__(self, spice: bool = True, bertscore: bool = True, clip_weights: str | Path | None = None,
                 device: str = "cpu"):
        if reason := java_missing():
            raise ScorerUnavailable(reason)
        _pycocoevalcap_dir()
        self.want_spice, self.want_bertscore = spice, bertscore
        self.clip_weights, self.device = clip_weights, device
        self._meteor = None

    def __enter__(self) -> CaptionScorer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        meteor, self._meteor = self._meteor, None
        if meteor is not None:
            with meteor.lock:
                meteor.meteor_p.stdin.close()
                meteor.meteor_p.kill()
                meteor.meteor_p.wait()

    def _meteor_scorer(self):
        if self._meteor is None:
            from pycocoevalcap.meteor.meteor import Meteor

            self._meteor = Meteor()
        return self._meteor

    def coco_scores(self, candidates: Sequence[str], references: Sequence[str], spice: bool) -> dict[str, float]:
        """One `CocoEvaluator.run_evaluation` on PTB-tokenized captions, as fractions (CIDEr up to 10)."""
        from pycocoevalcap.bleu.bleu import Bleu
        from pycocoevalcap.cider.cider import Cider
        from pycocoevalcap.rouge.rouge import Rouge

        if len(candidates) != len(references) or not candidates:
            raise ValueError(f"need as many candidates as references, and some: {len(candidates)}, {len(references)}")
        # each caption is its own image with one reference, keyed 0..n-1 in order, as the authors' wrapper does
        res = {i: [c] for i, c in enumerate(candidates)}
        gts = {i: [r] for i, r in enumerate(references)}
        bleu, _ = Bleu(4).compute_score(gts, res, verbose=0)
        scores = {f"Bleu_{n + 1}": float(b) for n, b in enumerate(bleu)}
        scores["METEOR"] = float(self._meteor_scorer().compute_score(gts, res)[0])
        scores["ROUGE_L"] = float(Rouge().compute_score(gts, res)[0])
        scores["CIDEr"] = float(Cider().compute_score(gts, res)[0])
        if spice:
            from pycocoevalcap.spice.spice import Spice

            scores["SPICE"] = float(Spice().compute_score(gts, res)[0])
        return scores

    def score_groups(self, candidates: Sequence[str], references: Sequence[str],
                     groups: Mapping[str, Sequence[int]] | None = None,
                     clip_inputs: Sequence[ClipInput | None] | None = None) -> GroupScores:
        """Score caption i against reference i, each group (name -> caption indices) on its own.

        Tokenization is per line, so both sides are tokenized once and shared by the groups.
        """
        if len(candidates) != len(references):
            raise ValueError(f"{len(candidates)} candidates for {len(references)} references")
        groups = groups if groups is not None else {"all": range(len(candidates))}
        skipped: dict[str, str] = {}
        spice = self._wanted(skipped, "SPICE", self.want_spice, spice_missing)
        cand_tokens, ref_tokens = ptb_tokenize(candidates), ptb_tokenize(references)
        metrics: dict[str, dict[str, float]] = {}
        for name, indices in groups.items():
            coco = self.coco_scores([cand_tokens[i] for i in indices], [ref_tokens[i] for i in indices], spice)
            metrics[name] = {k: v * 100 for k, v in coco.items()}
        if self._wanted(skipped, "BERTScore_F1", self.want_bertscore, bertscore_missing):
            f1 = _bertscore_f1(candidates, references, self.device)
            for name, indices in groups.items():
                metrics[name]["BERTScore_F1"] = float(f1[list(indices)].mean().item())
        self._clip_scores(candidates, clip_inputs, groups, metrics, skipped)
        skipped["Entailment"] = ENTAILMENT_SKIPPED
        return GroupScores(metrics, skipped)

    def score(self, candidates: Sequence[str], references: Sequence[str]) -> GroupScores:
        return self.score_groups(candidates, references)

    @staticmethod
    def _note(skipped: dict[str, str], metric: str, reason: str | None) -> bool:
        if reason:
            skipped[metric] = reason
        return reason is not None

    def _wanted(self, skipped: dict[str, str], metric: str, wanted: bool, missing: Callable[[], str | None]) -> bool:
        """Whether to compute an optional metric; if not, why goes into `skipped`."""
        return not self._note(skipped, metric, missing() if wanted else "not requested")

    def _clip_scores(self, candidates: Sequence[str], clip_inputs: Sequence[ClipInput | None] | None,
                     groups: Mapping[str, Sequence[int]], metrics: dict[str, dict[str, float]],
                     skipped: dict[str, str]) -> None:
        if clip_inputs is None:
            skipped["CLIPScore"] = "no frames given (the authors compute it only with --frame_dir and a GPU)"
            return
        weights = self.clip_weights or _cached_clip_weights()
        if weights is None or not Path(weights).is_file():
            skipped["CLIPScore"] = ("no local CLIP ViT-B/32 (OpenAI) weights: give a checkpoint file, or have "
                                    "open_clip's 'openai' ViT-B-32 in the Hugging Face cache")
            return
        per_caption = clip_scores(candidates, clip_inputs, Path(weights), self.device)
        for name, indices in groups.items():
            values = [per_caption[i] for i in indices if per_caption[i] is not None]
            # the authors: np.average over scored steps, 0 when none was scored
            metrics[name]["CLIPScore"] = float(sum(values) / len(values)) if values else 0.0


def _bertscore_f1(candidates: Sequence[str], references: Sequence[str], device: str):
    """Per-pair BERTScore F1 as a float32 tensor: bert_score's defaults for lang="en", offline."""
    from bert_score import BERTScorer

    with _hf_offline():
        scorer = BERTScorer(lang="en", device=device)
        _, _, f1 = scorer.score(list(candidates), list(references))
    return f1


# --------------------------------------------------------------------------------------------------
# CLIPScore


def frame_sort_key(path: Path) -> int:
    """The authors sort a video's frames by the integer after the last '_' of the file name."""
    return int(str(path).split("_")[-1].replace(".jpg", ""))


def clip_frame_indices(start: float, end: float, n_frames: int) -> list[int] | None:
    """The authors' 4 frames of a step: linspace(start, min(end, n) - 1, 4) truncated to int; None (the
    step is not scored) when start or end is not a frame index (>= n)."""
    import numpy as np

    if start >= n_frames or end >= n_frames:
        return None
    return np.linspace(start, min(end, n_frames) - 1, CLIP_FRAMES_PER_STEP).astype(int).tolist()


def _cached_clip_weights() -> Path | None:
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return None
    for name in ("open_clip_model.safetensors", "open_clip_pytorch_model.bin"):
        path = try_to_load_from_cache("timm/vit_base_patch32_clip_224.openai", name)
        if isinstance(path, str):
            return Path(path)
    return None


def clip_scores(candidates: Sequence[str], clip_inputs: Sequence[ClipInput | None], weights: Path,
                device: str = "cpu") -> list[float | None]:
    """Mean cosine between each caption and its step's 4 frames under CLIP ViT-B/32 (None: not scored).

    open_clip with OpenAI's weights and preprocessing stands in for the authors' `clip` package (the same
    model; their GPU run is fp16, so values agree to about 1e-3, not to the last digit).
    """
    import open_clip
    import torch
    from PIL import Image

    model, _, preprocess = open_clip.create_model_and_transforms("ViT-B-32", pretrained=str(weights),
                                                                 force_quick_gelu=True, device=device)
    model.eval()
    tokenizer = open_clip.get_tokenizer("ViT-B-32")
    scores: list[float | None] = []
    for caption, item in zip(candidates, clip_inputs):
        indices = None if item is None else clip_frame_indices(item.start, item.end, len(item.frames))
        if indices is None:
            scores.append(None)
            continue
        images = torch.stack([preprocess(Image.open(item.frames[i])) for i in indices]).to(device)
        with torch.no_grad():
            image = model.encode_image(images)
            text = model.encode_text(tokenizer([caption]).to(device))
        image = image / image.norm(dim=-1, keepdim=True)
        text = text / text.norm(dim=-1, keepdim=True)
        scores.append(float((image @ text.T).mean()))
    return scores
