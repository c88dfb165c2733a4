"""The benchmark registry (spacewalk.benchmarks.registry): the pinned releases, the sha256 check, and a fifth benchmark
picked up by the score and download commands from its package alone (never the network)."""

from __future__ import annotations

import json
import re
import sys
import textwrap

import pytest

import spacewalk.benchmarks
from spacewalk import download, score
from spacewalk.benchmarks.registry import check_sha256, discover, sha256_of
from spacewalk.core.errors import DataError

FOUR = ("egocross", "egoschema", "hirest", "spacewalk18")
COMMIT_URL = re.compile(r"^https://\S+/[0-9a-f]{40}/")  # a repository's files at one commit


def test_every_release_file_is_pinned_to_a_commit_with_its_hash():
    unhashed = []
    for name, benchmark in discover().items():  # a fifth benchmark is held to the same
        files = benchmark.release.files
        assert len({f.path for f in files}) == len(files), name
        for f in files:
            assert COMMIT_URL.match(f.url) and f.url.endswith("/" + f.path), f.url
            if f.sha256 is None:
                unhashed.append(f"{name}/{f.path}")
            else:
                assert re.fullmatch(r"[0-9a-f]{64}", f.sha256), f
    # the four's one file that no copy was at hand to hash (spacewalk/benchmarks/egoschema/benchmark.py says so)
    assert [f for f in unhashed if f.split("/")[0] in FOUR] == ["egoschema/questions.json"]


@pytest.mark.parametrize("name, fixture", [("spacewalk18", "real_spacewalk18_root"), ("hirest", "real_hirest_root"),
                                           ("egoschema", "real_egoschema_dir"), ("egocross", "real_egocross_root")])
def test_the_pinned_hashes_are_those_of_the_real_annotations(name, fixture, request):
    root = request.getfixturevalue(fixture)
    hashed = [f for f in discover()[name].release.files if f.sha256 is not None]
    assert hashed and {f.path: sha256_of(root / f.path) for f in hashed} == {f.path: f.sha256 for f in hashed}


def test_check_sha256_names_the_file_that_differs(tmp_path):
    path = tmp_path / "a.json"
    path.write_text("[1, 2]\n")
    good = sha256_of(path)
    check_sha256(path, good, "data/a.json")
    check_sha256(path, None, "data/a.json")  # an unhashed file passes as it is
    path.write_text("[1, 3]\n")
    with pytest.raises(DataError) as e:
        check_sha256(path, good, "data/a.json")
    assert str(e.value).startswith("data/a.json: ") and good in str(e.value) and sha256_of(path) in str(e.value)


# ---------------------------------------------------------------------------------------------------- a fifth

TOY_REGISTRATION = '''
"""A toy benchmark: answers.json under the root, predictions a list of the same length."""
import argparse
import json
from pathlib import Path

from spacewalk.benchmarks.registry import Benchmark, Release, ScoreCommand, pinned

FILES = pinned("https://raw.githubusercontent.com/someone/toybench/{commit}", {{"answers.json": "{sha}"}})


def validate(root: Path):
    return json.loads((root / "answers.json").read_text())


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--root", type=Path, required=True)


def score(args: argparse.Namespace) -> dict:
    answers = validate(args.root)
    predictions = json.loads(args.predictions.read_text())
    return {{"accuracy": 100 * sum(p == a for p, a in zip(predictions, answers)) / len(answers)}}


BENCHMARK = Benchmark(name="{name}", release=Release(files=FILES, validate=validate, no_videos="toy: no videos"),
                      scores=(ScoreCommand("{name}", "a toy", arguments, score),))
'''


@pytest.fixture
def extra_package_dir(tmp_path, monkeypatch):
    """A folder added to the `spacewalk.benchmarks` package's path: a package written there is a subpackage of it,
    as if it were spacewalk/benchmarks/<name>/, without touching the source tree."""
    folder = tmp_path / "extra"
    folder.mkdir()
    monkeypatch.setattr(spacewalk.benchmarks, "__path__", [*spacewalk.benchmarks.__path__, str(folder)])
    discover.cache_clear()
    yield folder
    discover.cache_clear()  # the next caller finds the four again
    for name in [m for m in sys.modules if m.startswith("spacewalk.benchmarks.")
                 and (folder / m.split(".")[2]).is_dir()]:
        del sys.modules[name]


def write_package(folder, name, registration):
    (folder / name).mkdir()
    (folder / name / "__init__.py").write_text("")
    (folder / name / "benchmark.py").write_text(textwrap.dedent(registration))


def test_a_fifth_benchmark_is_found_scored_and_downloaded(extra_package_dir, tmp_path, capsys):
    before = set(discover())
    discover.cache_clear()
    source = tmp_path / "release"
    source.mkdir()
    (source / "answers.json").write_text("[0, 1, 2, 3]")
    write_package(extra_package_dir, "toybench", TOY_REGISTRATION.format(
        name="toybench", commit="0" * 40, sha=sha256_of(source / "answers.json")))

    assert set(discover()) == before | {"toybench"}
    root = tmp_path / "root"
    assert download.main(["toybench", "--root", str(root), "--source", str(source)]) == 0
    assert "toybench ready" in capsys.readouterr().out
    assert (root / "answers.json").read_text() == "[0, 1, 2, 3]"
    assert download.main(["toybench", "--root", str(root), "--videos"]) == 2
    assert "toy: no videos" in capsys.readouterr().err

    predictions = tmp_path / "pred.json"
    predictions.write_text("[0, 1, 0, 0]")
    assert score.main(["toybench", "--root", str(root), "--predictions", str(predictions)]) == 0
    assert json.loads(capsys.readouterr().out) == {"accuracy": 50.0}
    # the default form still means Spacewalk-18
    assert score.with_subcommand(["--root", "R", "--predictions", "P"])[0] == "spacewalk18"


def test_a_registration_that_is_not_one_names_its_file(extra_package_dir):
    write_package(extra_package_dir, "toybench", TOY_REGISTRATION.format(name="elsewhere", commit="0" * 40,
                                                                         sha="0" * 64))
    with pytest.raises(ValueError, match=r"toybench/benchmark\.py: BENCHMARK\.name is 'elsewhere'"):
        discover()
    discover.cache_clear()
    (extra_package_dir / "toybench/benchmark.py").write_text("BENCH = None\n")
    sys.modules.pop("spacewalk.benchmarks.toybench.benchmark", None)
    with pytest.raises(TypeError, match=r"toybench/benchmark\.py: a registration module defines BENCHMARK"):
        discover()


def test_a_package_without_a_registration_is_no_benchmark(extra_package_dir):
    before = set(discover())
    discover.cache_clear()
    (extra_package_dir / "helpers").mkdir()
    (extra_package_dir / "helpers/__init__.py").write_text("raise ImportError('never imported by discovery')\n")
    assert set(discover()) == before
