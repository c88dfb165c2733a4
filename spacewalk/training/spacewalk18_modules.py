"""How a run's DataModule and LightningModule are built from its config: one builder for the Spacewalk-18 tasks
(step recognition, intra-video retrieval) and the plan decoder's ensemble members (spacewalk.training.decoding)."""

from __future__ import annotations

import hydra
from omegaconf import DictConfig, open_dict

from spacewalk.core.modalities import Modalities


def head_reads_cells(cfg: DictConfig) -> bool:
    """Whether the configured recipe's head reads the window cells, asked of its class before anything is
    built (the DataModule is built before the model, which needs its feature dim)."""
    from models.heads import head_reads_cells as reads

    target = (cfg.model.get("head") or {}).get("_target_")
    return reads(hydra.utils.get_class(target)) if target else True


def build_datamodule(cfg: DictConfig, text_always: bool = True):
    """The DataModule of `cfg.datamodule` with the dataset and the encoders it reads. `text_always`: the text
    encoder even when `modalities` has no text (step recognition's bank encodes every recording's text whatever
    the modalities, and its meta names the text encoder); retrieval passes False."""
    modalities = Modalities.parse(cfg.modalities)  # a bad value is refused before any data is read
    dataset = hydra.utils.instantiate(cfg.data)
    text = (hydra.utils.instantiate(cfg.encoder.text)
            if cfg.encoder.get("text") and (text_always or modalities.text) else None)
    video = hydra.utils.instantiate(cfg.encoder.video) if cfg.encoder.get("video") and modalities.video else None
    extra = {}
    if "cells" in cfg.datamodule:
        # a DataModule that builds window cells only for heads that read them: null (the default) = ask the head
        cells = cfg.datamodule.cells
        extra["cells"] = head_reads_cells(cfg) if cells is None else cells
    return hydra.utils.instantiate(cfg.datamodule, dataset=dataset, text_encoder=text, video_encoder=video,
                                   **extra, _recursive_=False, _convert_="all")


def build_model(cfg: DictConfig, feature_dim: int, output_dir: str | None, datamodule=None):
    """The recipe's LightningModule; a head that trains the encoders themselves (`takes_encoders`, all-layer)
    gets trainable copies of the DataModule's encoders."""
    model_cfg = cfg.model.copy()
    with open_dict(model_cfg):
        model_cfg.head.dim = feature_dim  # known from the DataModule's encoders
    head_class = hydra.utils.get_class(model_cfg.head._target_) if model_cfg.get("head") else None
    if getattr(head_class, "takes_encoders", False):
        if datamodule is None:
            raise ValueError(f"{head_class.__name__} trains the encoders: build_model needs the DataModule")
        head = hydra.utils.instantiate(model_cfg.head, video_encoder=datamodule.video_encoder,
                                       text_encoder=datamodule.text_encoder)
        model = hydra.utils.instantiate(model_cfg, head=head)
    else:
        model = hydra.utils.instantiate(model_cfg)
    model.output_dir = output_dir
    return model
