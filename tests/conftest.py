"""The fixtures the test areas share (helpers/ holds the shared modules). Tests that need the real annotations find
them through SPACEWALK_SHARED_DATA (the folder holding spacewalk18/, hirest/, ...), which `make test` sets to
../shared/data. Without them (or without Java) such tests skip, saying why; under CI (CI=true, which `.ci/run` sets)
the run fails instead, naming what is missing."""

from __future__ import annotations

import dataclasses
import os
import shutil
import sys
from pathlib import Path

import pytest

from helpers.commands import compose_evaluate, compose_train
from helpers.parsed_yaml import keep_parsed_yaml
from helpers.scheduling import heaviest_modules_first
from helpers.shared_cache import shared_cache
from helpers.shared_data import ci_requirements, shared_data_dir, unavailable, under_ci
from helpers.synthetic_presets import EGOCROSS, EGOSCHEMA
from helpers.tiny_root import write_tiny_root


def pytest_configure(config) -> None:
    """Under pytest-xdist (`make test` runs `-n 2`), each worker and every command it runs gets its share of the
    cores as threads (torch, OpenMP, BLAS and the tokenizers read these when they start), so that the workers do
    not oversubscribe the machine; a value the caller set is kept. Each process parses a config file's text once
    (helpers/parsed_yaml.py)."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0") or 0)
    if workers:
        threads = str(max(1, len(os.sched_getaffinity(0)) // workers))
        for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
            os.environ.setdefault(name, threads)
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        if "torch" in sys.modules:  # imported before this hook ran: its thread pool is already sized
            sys.modules["torch"].set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    keep_parsed_yaml()  # each config file's text parsed once per process (helpers/parsed_yaml.py)
    if getattr(config.option, "dist", None) == "loadscope":
        # the modules go out in the order the workers collected them, heaviest first (helpers/scheduling.py), not
        # by their number of tests
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(config, items) -> None:
    if os.environ.get("PYTEST_XDIST_WORKER"):  # each worker sorts alike: they agree on the collection
        heaviest_modules_first(items)


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


@pytest.fixture
def tiny_root(tmp_path) -> Path:
    return write_tiny_root(tmp_path / "tiny")


# ------------------------------------------------------------------------------------------------ encoders

@pytest.fixture(scope="session")
def minilm():
    """The real all-MiniLM-L6-v2 (shipped in a PyPI package), offline, encoding in batches of 4 (so that a few
    sentences already span batches); loaded once per session."""
    from spacewalk import encoders

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.setenv("TRANSFORMERS_OFFLINE", "1")
        return encoders.minilm_text_encoder(device="cpu", batch_size=4)


# ------------------------------------------------------------------------------------------------ synthetic data
# One synthetic root per benchmark and set of options, generated once per run (generation is deterministic from the
# options and the seed) in a folder every xdist worker of the run shares, under a file lock, so that modules and
# workers asking for the same set share it. The options are compared by value (the generator's dataclass: a list
# and a tuple of the same minutes are one set). Tests that change the files take a copy first.

@pytest.fixture(scope="session")
def synthetic_spacewalk18(tmp_path_factory):
    """make(seed=0, **options) -> the root of a synthetic Spacewalk-18 (spacewalk/benchmarks/spacewalk18/synthetic/
    Options; helpers.synthetic_presets names the sets the tests use)."""
    from spacewalk.benchmarks.spacewalk18.synthetic.generate import ensure_dataset
    from spacewalk.benchmarks.spacewalk18.synthetic.options import Options

    def build(folder: Path, key) -> Path:
        seed, options = key
        return ensure_dataset(folder / "sw18", seed=seed, progress=False, **dataclasses.asdict(options))

    cached = shared_cache(tmp_path_factory, "spacewalk18", build)

    def make(seed: int = 0, **options) -> Path:
        options.pop("progress", None)  # does not change the data
        return cached((seed, Options(**options)))

    return make


@pytest.fixture(scope="session")
def spacewalk18_run_data(synthetic_spacewalk18):
    """run_data(preset, seed=0) -> a command's overrides for a run on that synthetic Spacewalk-18: its root, the
    generator's options (what the run would generate it from, checked against the root's record), and a data
    folder beside the root (`paths.data_dir`), whose feature banks the first run that needs one builds and the
    others read (the bank's own lock makes concurrent runs wait for it)."""
    from helpers.synthetic_presets import overrides

    def run_data(preset, seed: int = 0) -> list[str]:
        root = synthetic_spacewalk18(seed=seed, **preset)
        return [f"data.synthetic_root={root}", f"paths.data_dir={root.parent / 'data'}", *overrides(preset),
                *([f"data.seed={seed}"] if seed else [])]

    return run_data


def synthetic_set(tmp_path_factory, kind: str, folder_name: str, generate, as_options):
    """make(options) -> the root <folder_name> that `generate(root, options)` writes for `as_options(options)` (the
    generator's frozen options, compared by value), in this run's shared folder (helpers/shared_cache.py)."""
    def build(folder: Path, options) -> Path:
        root = folder / folder_name
        return root if root.is_dir() else generate(root, options)

    cached = shared_cache(tmp_path_factory, kind, build)
    return lambda options=None: cached(as_options(options))


@pytest.fixture(scope="session")
def synthetic_hirest(tmp_path_factory):
    """make(options) -> the root of a synthetic HiREST (spacewalk/benchmarks/hirest/synthetic/options.py
    HiRESTOptions, or a mapping of its fields)."""
    from spacewalk.benchmarks.hirest.synthetic.generate import generate_hirest
    from spacewalk.benchmarks.hirest.synthetic.options import as_options

    return synthetic_set(tmp_path_factory, "hirest", "hirest",
                         lambda root, options: generate_hirest(root, options, progress=False), as_options)


@pytest.fixture(scope="session")
def synthetic_egoschema(tmp_path_factory):
    """make(options) -> the root of a synthetic EgoSchema (spacewalk/benchmarks/egoschema/synthetic.py Options
    fields)."""
    from spacewalk.benchmarks.egoschema.synthetic import Options, generate_egoschema

    return synthetic_set(tmp_path_factory, "egoschema", "synthetic", generate_egoschema,
                         lambda options: Options(**options))


@pytest.fixture(scope="session")
def synthetic_egocross(tmp_path_factory):
    """make(options) -> the root of a synthetic EgoCross (spacewalk/benchmarks/egocross/synthetic.py Options
    fields)."""
    from spacewalk.benchmarks.egocross.synthetic import Options, generate_egocross

    return synthetic_set(tmp_path_factory, "egocross", "synthetic", generate_egocross,
                         lambda options: Options(**options))


@pytest.fixture(scope="session")
def synthetic_egoschema_root(synthetic_egoschema) -> Path:
    return synthetic_egoschema(EGOSCHEMA)


@pytest.fixture(scope="session")
def synthetic_egocross_root(synthetic_egocross) -> Path:
    return synthetic_egocross(EGOCROSS)


@pytest.fixture(scope="session")
def tiny_vlm_checkpoints(tmp_path_factory) -> Path:
    """Every family's tiny random checkpoint (spacewalk/multiple_choice/tiny_models.py), written once per run by the
    command a user runs, <folder>/<family>/."""
    from spacewalk.multiple_choice import tiny_models

    def build(folder: Path, _) -> Path:
        out = folder / "tiny_vlms"
        if not out.is_dir():
            assert tiny_models.main(["--out", str(out)]) == 0
        return out

    return shared_cache(tmp_path_factory, "tiny_vlms", build)("all families")


# ------------------------------------------------------------------------------------------------ configs

@pytest.fixture
def cfg_train():
    """train.py's default config, composed (lightning-hydra-template's cfg_train)."""
    return compose_train()


@pytest.fixture
def cfg_evaluate():
    """evaluate.py's default config, composed."""
    return compose_evaluate()
