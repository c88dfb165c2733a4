"""The fixtures the test areas share (helpers/ holds the shared modules). Tests that need the real annotations find
them through SPACEWALK_SHARED_DATA (the folder holding spacewalk18/, hirest/, ...), which `make test` sets to
../shared/data. Without them (or without Java) such tests skip, saying why; under CI (CI=true, which `.ci/run` sets)
the run fails instead, naming what is missing."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from helpers.commands import compose_evaluate, compose_train
from helpers.shared_data import ci_requirements, shared_data_dir, unavailable, under_ci
from helpers.tiny_root import write_tiny_root


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


@pytest.fixture
def cfg_train():
    """train.py's default config, composed (lightning-hydra-template's cfg_train)."""
    return compose_train()


@pytest.fixture
def cfg_evaluate():
    """evaluate.py's default config, composed."""
    return compose_evaluate()
