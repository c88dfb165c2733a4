"""The documentation as a newcomer meets it: README.md short, with its table of contents and one section per
goal; every `python train.py` / `python evaluate.py` command in README.md and docs/ composes with the configs as
they are (Hydra's compose API, the task's defaults added as the programs add them) and fits its task; every
`python -m` module of README.md and docs/commands.md exists; `--help` says what each program does; and no file
cites notes outside the repository, a machine's path or an issue number."""

from __future__ import annotations

import importlib.util
import re
import shlex
import subprocess

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.override_parser.overrides_parser import OverridesParser

import spacewalk.training  # noqa: F401  (the config resolvers)
from spacewalk.training.tasks import check_model, with_task_defaults

from helpers.commands import CONF, REPO, run_command

README = (REPO / "README.md").read_text()
# docs/results.md and its table specs are the results tools' pages, restructured with them
DOCS = [REPO / "README.md", *sorted(p for p in (REPO / "docs").glob("*.md") if p.name != "results.md")]
GOALS = ["Reproduce a paper row", "Evaluate your video LLM", "Your own features", "A sweep on a cluster",
         "Add a benchmark, model, backend or metric"]
PROGRAM = re.compile(r"(?:^|[`\s])(?:srun |torchrun [^`\n]*?)?python (train|evaluate)\.py((?:[^`\n\\]|\\\n)*)")


def test_readme_is_short_with_contents_and_a_section_per_goal():
    lines = README.splitlines()
    assert len(lines) <= 200
    assert any(line.startswith("Contents:") for line in lines[:20])
    for goal in GOALS:
        assert f"## {goal}" in README and f"(#{goal.lower().replace(',', '').replace(' ', '-')})" in README
    assert "make demo" in README and "make test" in README and "41.95 / 48.16 / 26.93" in README


def documented_commands() -> list[tuple[str, str, list[str]]]:
    """(where, program, overrides) for every train.py / evaluate.py command of README.md and docs/: in code blocks
    (continuation lines joined) and in backticks; placeholders (R, RUN, $VAR, <...>) are plain strings to Hydra."""
    found = []
    for doc in DOCS:
        text = doc.read_text()
        for match in PROGRAM.finditer(text):
            program, rest = match.group(1), match.group(2).replace("\\\n", " ")
            rest = rest.split(" #", 1)[0].split("   (", 1)[0]
            rest = re.sub(r"mc_<[^>]*>", "mc_scripted", rest)  # "model=mc_<backend>": any backend
            rest = re.sub(r"<[^>]*>", "x", rest)
            try:
                tokens = shlex.split(rest)
            except ValueError:
                tokens = rest.split()
            overrides = [t for t in tokens if "=" in t and not t.startswith("-") and not t.endswith("=...")]
            where = f"{doc.name}: python {program}.py{rest[:80]}"
            found.append((where, program, [re.sub(r"\$\{?[A-Z_]+\}?", "x", o) for o in overrides]))
    return found


# commands a page shows on purpose though they do not run here: what the page itself adds (a fifth benchmark, the
# guide's backend: tests/multiple_choice/test_backend_guide.py composes that one), or a refusal it describes
NOT_HERE = {"data=toyqa": "the benchmark docs/adding_a_benchmark.md adds",
            "model=mc_keywords": "the backend docs/writing_a_backend.md writes"}
REFUSED = {("train", ("task=intra_video_retrieval", "model=lfb_cat")): "does not fit task=intra_video_retrieval"}
COMMANDS = [c for c in documented_commands() if not any(o in NOT_HERE for o in c[2])]


def test_the_documents_have_commands_to_check():
    assert len(COMMANDS) > 100
    assert any("model=lfb_cat" in o for _, _, overrides in COMMANDS for o in overrides)


def first_of_each_sweep(overrides: list[str]) -> list[str]:
    parsed = OverridesParser.create().parse_overrides(overrides)
    return [f"{o.get_key_element()}={next(iter(o.sweep_string_iterator()))}" if o.is_sweep_override()
            else o.input_line for o in parsed]


@pytest.mark.parametrize("where, program, overrides", COMMANDS, ids=[c[0][:100] for c in COMMANDS])
def test_every_documented_command_composes_and_fits_its_task(where, program, overrides):
    argv = with_task_defaults([f"{program}.py", *first_of_each_sweep(overrides)], CONF, program)
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(config_name=program, overrides=argv[1:], return_hydra_config=True)
    if cfg.get("ckpt_path"):  # a re-test reads its run's own config
        return
    refusal = REFUSED.get((program, tuple(overrides)))
    if refusal is not None:
        with pytest.raises(ValueError, match=refusal):
            check_model(cfg)
    else:
        check_model(cfg)


def test_every_module_run_in_the_readme_and_the_command_catalogue_exists():
    modules = set()
    for doc in (REPO / "README.md", REPO / "docs" / "commands.md"):
        modules |= {m.rstrip(".") for m in re.findall(r"python -m ([a-z0-9_.]+)", doc.read_text())}
    assert "spacewalk.score" in modules and len(modules) > 5
    assert [m for m in sorted(modules) if importlib.util.find_spec(m) is None] == []


@pytest.mark.parametrize("program, says", [("train", "train.py: train a model"),
                                           ("evaluate", "evaluate.py: score a model that needs no training")])
def test_help_says_what_the_program_does_and_the_groups_that_matter(program, says):
    result = run_command(f"{program}.py", "--help", timeout=120)
    lines = result.stdout.splitlines()
    assert lines[0].startswith(says) and len(lines) < 80
    assert "The groups that matter" in result.stdout
    assert all(re.search(rf"^\s+{group}\s", result.stdout, re.M) for group in ("data", "model", "context"))


# what no tracked file may cite: notes outside the repository, a developer's machine, the issue tracker
FORBIDDEN = re.compile(r"BENCHMARKS\.md|DESIGN\.md|/work/|/home/\w|/Users/\w|\b[Ii]ssue \d+")


def test_nothing_cites_a_file_outside_the_repository_a_machine_path_or_an_issue():
    files = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    this = "tests/test_documented_commands.py"
    offending = [f"{f}:{n}" for f in files
                 if f != this
                 and f.endswith((".py", ".md", ".yaml", ".toml", ".cfg", "Makefile"))
                 for n, line in enumerate((REPO / f).read_text(errors="replace").splitlines(), 1)
                 if FORBIDDEN.search(line)]
    assert offending == []
