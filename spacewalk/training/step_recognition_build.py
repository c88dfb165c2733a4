"""How a step-recognition run's DataModule and LightningModule are built from its config.

Its own module because two recipes build them: `spacewalk.training.step_recognition` (train, evaluate) and
`spacewalk.training.decoding` (the other finished runs of an ensemble); each importing the other was an
import circle.
"""

from __future__ import annotations

import hydra
from omegaconf import DictConfig, open_dict


def head_reads_cells(cfg: DictConfig) -> bool:
    """Whether the configured recipe's head reads the window cells, asked of its class before anything is
    built (the DataModule is built before the model, which needs its feature dim)."""
    from models.heads import head_reads_cells as reads

    target = (cfg.model.get("head") or {}).get("_target_")
    return reads(hydra.utils.get_class(target)) if target else True


def build_datamodule(cfg: DictConfig):
    dataset = hydra.utils.instantiate(cfg.data)
    text = hydra.utils.instantiate(cfg.encoder.text) if cfg.encoder.get("text") and "text" in cfg.modalities else None
    video = (hydra.utils.instantiate(cfg.encoder.video)
             if cfg.encoder.get("video") and "video" in cfg.modalities else None)
    # datamodule.cells: null (the default) = what the head reads
    cells = cfg.datamodule.get("cells")
    return hydra.utils.instantiate(cfg.datamodule, dataset=dataset, text_encoder=text, video_encoder=video,
                                   cells=head_reads_cells(cfg) if cells is None else cells,
                                   _recursive_=False, _convert_="all")


def build_model(cfg: DictConfig, feature_dim: int, output_dir: str | None):
    model_cfg = cfg.model.copy()
    with open_dict(model_cfg):
        model_cfg.head.dim = feature_dim  # known from the DataModule's encoders
    model = hydra.utils.instantiate(model_cfg)
    model.output_dir = output_dir
    return model
