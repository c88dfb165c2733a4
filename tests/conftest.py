"""Shared fixtures. Tests that need the real annotations find them through SPACEWALK_SHARED_DATA
(the folder holding spacewalk18/, hirest/, ...), which `make test` sets to ../shared/data. Without them
(or without Java) such tests skip, saying why; under CI (CI=true, which `.ci/run` sets) the run fails
instead, naming what is missing."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CONF = REPO / "conf"


def shared_data_dir() -> Path | None:
    value = os.environ.get("SPACEWALK_SHARED_DATA")
    return Path(value) if value and Path(value).is_dir() else None


def under_ci() -> bool:
    return os.environ.get("CI", "").lower() == "true"


def unavailable(reason: str) -> None:
    """Skip a test whose input is absent on a developer's machine, saying why; under CI (CI=true) fail it
    instead, because there a skip would hide a feature that is no longer tested."""
    if under_ci():
        pytest.fail(f"CI=true and {reason}", pytrace=False)
    pytest.skip(reason)


def ci_requirements() -> list[str]:
    """What CI must have for no test to skip: the real annotations and Java (PTB tokenizer, METEOR)."""
    missing = []
    base = shared_data_dir()
    for name in ("spacewalk18", "hirest", "egoschema", "egocross"):
        if base is None or not (base / name).is_dir():
            value = os.environ.get("SPACEWALK_SHARED_DATA")
            missing.append(f"the real {name} annotations (SPACEWALK_SHARED_DATA={value!r}"
                           " must be a folder holding spacewalk18/, hirest/, egoschema/ and egocross/; `make test` "
                           "sets ../shared/data)")
    if shutil.which("java") is None:
        missing.append("java on PATH (HiREST captioning: the PTB tokenizer and METEOR)")
    return missing


def pytest_sessionstart(session) -> None:
    if under_ci() and ci_requirements():
        pytest.exit("CI=true, but the test run lacks:\n- " + "\n- ".join(ci_requirements()), returncode=3)


@pytest.fixture
def java() -> str:
    path = shutil.which("java")
    if path is None:
        unavailable("java is not on PATH: the PTB tokenizer and METEOR are Java programs")
    return path


@pytest.fixture(scope="session")
def real_spacewalk18_root() -> Path:
    base = shared_data_dir()
    if base is None or not (base / "spacewalk18").is_dir():
        unavailable("real Spacewalk-18 annotations not available: set SPACEWALK_SHARED_DATA to the folder "
                    "holding spacewalk18/ (`make test` sets it to ../shared/data)")
    return base / "spacewalk18"


@pytest.fixture(scope="session")
def real_hirest_root() -> Path:
    base = shared_data_dir()
    if base is None or not (base / "hirest/data/splits").is_dir():
        unavailable("real HiREST annotations not available: set SPACEWALK_SHARED_DATA to the folder "
                    "holding hirest/ (`make test` sets it to ../shared/data)")
    return base / "hirest"


@pytest.fixture(scope="session")
def real_egoschema_dir() -> Path:
    """The public EgoSchema files: subset_answers.json, uid_to_ego4d.json, sample/questions_first20.json."""
    base = shared_data_dir()
    if base is None or not (base / "egoschema/subset_answers.json").is_file():
        unavailable("real EgoSchema annotations not available: set SPACEWALK_SHARED_DATA to the folder "
                    "holding egoschema/ (`make test` sets it to ../shared/data)")
    return base / "egoschema"


@pytest.fixture(scope="session")
def real_egocross_root() -> Path:
    """The public EgoCross testbed: datasets/egocross_testbed_imgs.json (no answers, no frames)."""
    base = shared_data_dir()
    if base is None or not (base / "egocross/datasets/egocross_testbed_imgs.json").is_file():
        unavailable("real EgoCross testbed not available: set SPACEWALK_SHARED_DATA to the folder "
                    "holding egocross/ (`make test` sets it to ../shared/data)")
    return base / "egocross"


# ---- tiny encoders: the one factory of every test that needs a video encoder ----
# Randomly initialised configurations of the real classes (32x32 frames, 4 frames per clip, 16-d unless asked
# otherwise), so no test fetches weights; each call gives the same network.

# open_clip's ViT-B-32 architecture, shrunk
TINY_CLIP = dict(embed_dim=16, vision_cfg=dict(image_size=32, layers=2, width=32, head_width=16, patch_size=16),
                 text_cfg=dict(context_length=16, vocab_size=49408, width=16, heads=2, layers=1))


def tiny_clip(num_frames: int = 4, layers: int = 2, batch_size: int = 64, **model_cfg):
    """An open_clip image-text model as a video encoder (its weights from init_seed 0), `num_frames` per clip;
    `model_cfg` overrides TINY_CLIP's keys (embed_dim=8: another network)."""
    from spacewalk.encoders.openclip import open_clip_video_encoder

    cfg = {**TINY_CLIP, "vision_cfg": {**TINY_CLIP["vision_cfg"], "layers": layers}, **model_cfg}
    return open_clip_video_encoder("ViT-B-32", random_init=True, init_seed=0, model_cfg=cfg, num_frames=num_frames,
                                   batch_size=batch_size)


def tiny_clip_tokenizer():
    """A CLIP tokenizer over the lowercase letters (54 tokens): tiny_xclip's text side."""
    from transformers import CLIPTokenizer

    vocab = {"<|startoftext|>": 0, "<|endoftext|>": 1}
    for c in "abcdefghijklmnopqrstuvwxyz":
        vocab[c] = len(vocab)
        vocab[c + "</w>"] = len(vocab)
    return CLIPTokenizer(vocab=vocab, merges=[])


def tiny_xclip(layers: int = 1, projection_dim: int = 16, batch_size: int = 8):
    """X-CLIP (transformers) with `layers` ViT blocks and its text tower (tiny_clip_tokenizer). Drawn from
    torch's global generator seeded 0 here, as these tests always built it."""
    import torch
    from transformers import XCLIPConfig

    from spacewalk.encoders.hf_video import xclip_video_encoder

    torch.manual_seed(0)
    config = XCLIPConfig(
        text_config=dict(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, max_position_embeddings=24),
        vision_config=dict(image_size=32, patch_size=16, hidden_size=16, intermediate_size=32, num_hidden_layers=layers,
                           num_attention_heads=2, num_frames=4, mit_hidden_size=projection_dim,
                           mit_intermediate_size=32, mit_num_hidden_layers=1, mit_num_attention_heads=2),
        projection_dim=projection_dim, prompt_layers=1, prompt_num_attention_heads=2)
    return xclip_video_encoder(config=config, tokenizer=tiny_clip_tokenizer(), batch_size=batch_size)


def tiny_videomae(layers: int = 1, hidden_size: int = 16, batch_size: int = 8):
    """VideoMAE (transformers, video only) with `layers` blocks, 4 frames in tubelets of 2. Drawn from torch's
    global generator seeded 0 here, as these tests always built it."""
    import torch
    from transformers import VideoMAEConfig

    from spacewalk.encoders.hf_video import videomae_video_encoder

    torch.manual_seed(0)
    config = VideoMAEConfig(image_size=32, patch_size=16, num_frames=4, tubelet_size=2, hidden_size=hidden_size,
                            intermediate_size=32, num_hidden_layers=layers, num_attention_heads=2)
    return videomae_video_encoder(config=config, batch_size=batch_size)


def write_tiny_root(root: Path, n_samples: int = 30) -> Path:
    """A hand-made three-recording dataset in the official layout, small enough to reason about."""
    import csv

    from spacewalk.benchmarks.spacewalk18.data.dataset import IRRELEVANT_DESCRIPTION, Segment, frame_of, samples_to_json
    from spacewalk.benchmarks.spacewalk18.data.step_sampler import step_samples
    from spacewalk.core.io import write_json

    bounds = [(0, 10, -1), (10, 40, 1), (40, 50, 0), (50, 80, 2), (80, 90, -1), (90, 100, 1), (100, 120, -1)]
    segments = [Segment(float(s), float(e), frame_of(s), frame_of(e), label) for s, e, label in bounds]
    steps = [{"index": 0, "caption": "Irrelevant", "transcript": IRRELEVANT_DESCRIPTION},
             {"index": 1, "caption": "open the hatch", "transcript": "first we open the hatch",
              "animation_start": 2.0, "animation_end": 5.0},
             {"index": 2, "caption": "install the battery", "transcript": "",
              "animation_start": 5.0, "animation_end": 8.0}]
    ids = {"train": ["01012020"], "val": ["02022020"], "test": ["03032020"]}
    seg_json = [{"video_start": s.start, "video_end": s.end, "frame_start": s.frame_start,
                 "frame_end": s.frame_end, "label": s.label} for s in segments]
    all_ids = [v for vs in ids.values() for v in vs]
    write_json(root / "data/annotation.json", {v: seg_json for v in all_ids})
    write_json(root / "data/steps.json", {v: steps for v in all_ids})
    write_json(root / "tasks/split.json", ids)
    for v in all_ids:
        (root / "data/transcripts").mkdir(parents=True, exist_ok=True)
        with open(root / f"data/transcripts/{v}.csv", "w", encoding="cp1252", newline="") as f:
            w = csv.writer(f)
            w.writerow(["Sentence", "Global start", "Global end"])
            w.writerows([["first we open the hatch", 2.0, 5.0], ["hatch is open, caf\u00e9 time", 12.0, 20.0],
                         ["now the battery", 50.0, 60.0], ["wrapping up", 95.0, 110.0]])
    for split, vs in ids.items():
        write_json(root / f"tasks/step_recognition/{split}.json",
                   samples_to_json({v: step_samples(segments, len(steps), n_samples) for v in vs}))
    return root


@pytest.fixture
def tiny_root(tmp_path) -> Path:
    return write_tiny_root(tmp_path / "tiny")


# ------------------------------------------------------------------------------------------------ synthetic data
# One synthetic root per benchmark, generated once per session for each set of options (generation is
# deterministic from the options and the seed), so modules asking for the same set share it. Tests that change
# the files take a copy first.

@pytest.fixture(scope="session")
def synthetic_spacewalk18(tmp_path_factory):
    """make(**options) -> the root of a synthetic Spacewalk-18 (spacewalk/benchmarks/spacewalk18/synthetic/
    Options)."""
    from spacewalk.benchmarks.spacewalk18.synthetic.generate import ensure_dataset

    roots: dict[str, Path] = {}

    def make(seed: int = 0, **options) -> Path:
        key = repr(sorted({"seed": seed, **options}.items()))
        if key not in roots:
            roots[key] = ensure_dataset(tmp_path_factory.mktemp("synthetic_spacewalk18") / "sw18", seed=seed,
                                        **{"progress": False, **options})
        return roots[key]

    return make


@pytest.fixture(scope="session")
def synthetic_hirest(tmp_path_factory):
    """make(options) -> the root of a synthetic HiREST (spacewalk/benchmarks/hirest/synthetic/options.py
    HiRESTOptions)."""
    from spacewalk.benchmarks.hirest.synthetic.generate import generate_hirest

    roots: dict[str, Path] = {}

    def make(options) -> Path:
        if repr(options) not in roots:
            roots[repr(options)] = generate_hirest(tmp_path_factory.mktemp("synthetic_hirest") / "hirest", options,
                                                   progress=False)
        return roots[repr(options)]

    return make


@pytest.fixture(scope="session")
def synthetic_egoschema_root(tmp_path_factory) -> Path:
    from spacewalk.benchmarks.egoschema.synthetic import Options, generate_egoschema

    return generate_egoschema(tmp_path_factory.mktemp("es") / "synthetic", Options(n_questions=30, n_answered=20))


@pytest.fixture(scope="session")
def synthetic_egocross_root(tmp_path_factory) -> Path:
    from spacewalk.benchmarks.egocross.synthetic import Options, generate_egocross

    return generate_egocross(tmp_path_factory.mktemp("ec") / "synthetic", Options(per_category=3))


# ------------------------------------------------------------------------------------------------ configs and commands

def compose_config(config_name: str, *overrides: str):
    """conf/<config_name>.yaml composed with `overrides` as the command line would (Hydra's compose API, the
    resolvers registered), without running anything."""
    from hydra import compose, initialize_config_dir

    import spacewalk.training  # noqa: F401  (registers the config resolvers)

    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose(config_name=config_name, overrides=list(overrides), return_hydra_config=True)


def compose_train(*overrides: str):
    return compose_config("train", *overrides)


def compose_evaluate(*overrides: str):
    return compose_config("evaluate", *overrides)


@pytest.fixture
def cfg_train():
    """train.py's default config, composed (lightning-hydra-template's cfg_train)."""
    return compose_train()


@pytest.fixture
def cfg_evaluate():
    """evaluate.py's default config, composed."""
    return compose_evaluate()


# offline (no hub, W&B offline): no test reaches the network
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "WANDB_MODE": "offline", "WANDB_SILENT": "true"}


def run_command(*args, env: dict | None = None, check: bool = True, timeout: float | None = None
                ) -> subprocess.CompletedProcess:
    """`python ARGS` in the repository, as a user runs the project's commands (train.py, evaluate.py, -m
    spacewalk.score, ...): offline, with tests/ importable (backends a test names by _target_); with `check`, a
    non-zero exit fails the test showing the end of stderr."""
    path = os.pathsep.join([str(REPO), str(REPO / "tests"), *filter(None, [os.environ.get("PYTHONPATH")])])
    environment = os.environ | OFFLINE | {"PYTHONPATH": path} | (env or {})
    result = subprocess.run([sys.executable, *map(str, args)], cwd=REPO, capture_output=True, text=True,
                            env=environment, timeout=timeout)
    if check:
        assert result.returncode == 0, result.stderr[-4000:]
    return result
