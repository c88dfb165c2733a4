import importlib
import json
import math
import re
from datetime import datetime
from pathlib import Path

import av
import decord
import hydra
import numpy as np
import pytest
from omegaconf import OmegaConf

import spacewalk.benchmarks.spacewalk18.synthetic.generate as generation
from spacewalk.benchmarks.spacewalk18.data.dataset import (
    FPS,
    IRRELEVANT_DESCRIPTION,
    NOT_ANNOTATED,
    SPLITS,
    STEP_RECOGNITION_DIR,
    Spacewalk18,
    frame_of,
    samples_to_json,
)
from spacewalk.benchmarks.spacewalk18.data.step_sampler import step_samples
from spacewalk.benchmarks.spacewalk18.synthetic.__main__ import main as synthetic_main
from spacewalk.benchmarks.spacewalk18.synthetic.generate import ensure_dataset, generate
from spacewalk.benchmarks.spacewalk18.synthetic.options import Options
from spacewalk.benchmarks.spacewalk18.synthetic.plan import plan_pieces
from spacewalk.benchmarks.spacewalk18.synthetic.task_files import THIRDS
from spacewalk.benchmarks.spacewalk18.synthetic.vocabulary import LOCATIONS, OBJECTS, PALETTE, VERB_ING, VOCABULARY

# small enough to generate in well under a second, big enough for every task file to have content
TINY = dict(n_train=2, n_val=1, n_test=1, steps_per_video=(5, 6), minutes=(6.0, 8.0), video_fps=1.0,
            frame_size=32, samples_per_video=300, retrieval_samples_per_video=200, questions_per_video=6)


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    return generate(tmp_path_factory.mktemp("synthetic") / "spacewalk18", seed=3, progress=False, **TINY)


@pytest.fixture(scope="module")
def data(root) -> Spacewalk18:
    return Spacewalk18(root)


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _frames(path: Path) -> np.ndarray:
    with av.open(str(path)) as container:
        return np.stack([f.to_ndarray(format="rgb24") for f in container.decode(video=0)])


def _concept(caption: str) -> int:
    return next(i for i, c in enumerate(VOCABULARY) if c.caption == caption)


def test_layout_loads_and_follows_the_rules(root, data):
    assert {p.name for p in (root / "data").iterdir()} == {"annotation.json", "steps.json", "transcripts", "videos"}
    assert sorted(len(data.splits[s]) for s in SPLITS) == sorted([TINY["n_train"], TINY["n_val"], TINY["n_test"]])
    ids = [v for s in SPLITS for v in data.splits[s]]
    assert len(set(ids)) == len(ids)
    for video_id in ids:
        assert re.fullmatch(r"\d{8}", video_id) and datetime.strptime(video_id, "%m%d%Y")
    for rec in data.recordings.values():
        segments = rec.segments
        assert segments[0].label == segments[-1].label == NOT_ANNOTATED
        assert any(s.label == NOT_ANNOTATED for s in segments[1:-1])  # gaps inside, like the release
        assert {s.label for s in segments} == set(range(-1, rec.num_classes))  # every class occurs
        for s in segments:
            assert (s.frame_start, s.frame_end) == (frame_of(s.start), frame_of(s.end))  # exactly, not +-1
        lo, hi = TINY["steps_per_video"]
        assert lo + 1 <= rec.num_classes <= hi + 1
        assert rec.steps[0].caption == "Irrelevant" and rec.steps[0].transcript == IRRELEVANT_DESCRIPTION
        # the preview plays inside the opening not-annotated margin, one clip after another
        clips = [(st.animation_start, st.animation_end) for st in rec.steps[1:]]
        assert all(a < b <= c for (a, b), (c, _) in zip(clips, clips[1:]))
        assert clips[-1][1] <= segments[0].end
        sentences = rec.transcript
        assert all(a.end <= b.start for a, b in zip(sentences, sentences[1:]))  # sorted, no overlap
        assert all(1.0 <= s.end - s.start <= 10.0 for s in sentences)
        for st in rec.steps[1:]:  # the animation narration is what is said during the clip
            spoken = [s.text for s in sentences if s.start < st.animation_end and s.end > st.animation_start]
            assert st.transcript == " ".join(spoken) and st.transcript
        assert sentences[-1].end <= rec.duration


def test_step_samples_are_the_official_sampler(root, data):
    for split in SPLITS:
        on_disk = json.loads((root / STEP_RECOGNITION_DIR / f"{split}.json").read_text())
        expected = samples_to_json({r.video_id: step_samples(r.segments, r.num_classes, TINY["samples_per_video"])
                                    for r in data.split(split)})
        assert on_disk == expected
        loaded = data.step_samples(split)
        assert all(len(v) == TINY["samples_per_video"] for v in loaded.values())


def test_retrieval_samples_follow_the_construction(data):
    margin, distance = 15 * FPS, 30 * FPS
    total = 0
    for split in SPLITS:
        for video_id, samples in data.retrieval_samples(split).items():
            rec = data.recordings[video_id]
            assert len(samples) in (0, TINY["retrieval_samples_per_video"])
            total += len(samples)
            for s in samples:
                query = rec.segment_at_frame(s.query_frame_index)
                same = rec.segment_at_frame(s.candidate_frame_indices[s.label])
                other = rec.segment_at_frame(s.candidate_frame_indices[1 - s.label])
                assert same == query and other != query and query.label >= 0 and other.label >= 0
                assert {rec.segments.index(query) - rec.segments.index(other)} <= {-1, 1}  # adjacent segments
                d = [abs(s.query_frame_index - c) for c in s.candidate_frame_indices]
                assert d[0] == d[1] >= distance
                for frame, seg in ((s.query_frame_index, query), *zip(s.candidate_frame_indices, (same, other) if
                                                                      s.label == 0 else (other, same))):
                    assert seg.frame_start + margin <= frame <= seg.frame_end - 1 - margin
    assert total > 0


def test_questions_follow_the_templates(data):
    questions = data.questions()
    assert questions and [q.question_id for q in questions] == list(range(len(questions)))
    assert {q.type for q in questions} <= {"task before/after task", "when task"}
    for q in questions:
        rec = data.recordings[q.video_id]
        assert q.video_id in data.splits["test"] and len(set(q.options)) == 4
        captions = [st.caption for st in rec.steps[1:]]
        if q.type == "when task":
            assert set(q.options) == set(THIRDS)
            continue
        target = re.fullmatch(r"Which of the following tasks happens (before|after) (.+)\?", q.question)
        relation, step = target.group(1), captions.index(target.group(2)) + 1
        answer = captions.index(q.options[q.answer]) + 1
        spans = {k: [(s.start, s.end) for s in rec.segments if s.label == k and s.start < q.video_end
                     and s.end > q.video_start] for k in (step, answer)}
        if relation == "before":
            assert max(e for _, e in spans[answer]) <= min(s for s, _ in spans[step])
        else:
            assert min(s for s, _ in spans[answer]) >= max(e for _, e in spans[step])


def test_videos_decode_with_the_recording_length(data):
    fps = TINY["video_fps"]
    for rec in data.recordings.values():
        n = math.floor(rec.duration * fps) + 1
        with av.open(str(rec.video_path)) as container:
            stream = container.streams.video[0]
            assert (stream.width, stream.height) == (TINY["frame_size"],) * 2
            frames = sum(1 for _ in container.decode(video=0))
        assert frames == n
        reader = decord.VideoReader(str(rec.video_path))
        assert len(reader) == n and reader.get_avg_fps() == pytest.approx(fps)
        assert rec.duration <= n / fps < rec.duration + 1 / fps


def test_same_seed_same_dataset(root, tmp_path):
    again = generate(tmp_path / "again", seed=3, progress=False, **TINY)
    first, second = _files(root), _files(again)
    assert first.keys() == second.keys()
    for name in first:
        if name.endswith(".mp4"):
            np.testing.assert_array_equal(_frames(root / name), _frames(again / name))  # both rendered here
        else:
            assert first[name] == second[name], name
    other = generate(tmp_path / "other", seed=4, progress=False, **TINY)
    assert (other / "data/annotation.json").read_bytes() != first["data/annotation.json"]


def test_the_signal_is_there(data):
    """Video: the step's colour dominates its frames. Text: a step is talked about during it."""
    hits = total = 0
    said_in, said_out = [], []
    for rec in data.recordings.values():
        frames = _frames(rec.video_path).astype(np.float32) / 255
        times = np.arange(len(frames)) / TINY["video_fps"]
        for k, step in enumerate(rec.steps[1:], start=1):
            concept = VOCABULARY[_concept(step.caption)]
            inside = np.zeros(len(frames), bool)
            for s in rec.segments:
                if s.label == k:
                    inside |= (times >= s.start) & (times < s.end)
            for frame in frames[inside]:
                saturated = frame.max(-1) - frame.min(-1) > 0.35
                if saturated.sum() >= 20:  # generic views (the suit, the Earth) carry no colour
                    colour = frame[saturated].mean(0)
                    hits += np.abs(PALETTE - colour).sum(1).argmin() == _concept(step.caption) % len(PALETTE)
                    total += 1
            # sentences naming the step's action together with its object (or place, for moves)
            names = OBJECTS[concept.obj] if concept.obj else LOCATIONS[concept.loc]
            verbs = (concept.verb, VERB_ING[concept.verb])
            for s in rec.transcript:
                if s.end <= rec.segments[0].end:
                    continue  # the preview narrates every step
                mentions = any(n in s.text for n in names) and any(v in s.text for v in verbs)
                label = rec.segment_at_frame(min(frame_of(s.start), rec.num_frames - 1)).label
                if label >= 0:
                    (said_in if label == k else said_out).append(mentions)
    assert total > 100 and hits / total > 0.6
    assert np.mean(said_in) > 3 * np.mean(said_out) and np.mean(said_in) > 0.1


def test_ensure_dataset_generates_once(tmp_path, monkeypatch):
    target = tmp_path / "sw18"
    assert ensure_dataset(target, seed=1, progress=False, **TINY) == target.absolute()
    before = _files(target)

    def fail(*args, **kwargs):
        raise AssertionError("regenerated")

    monkeypatch.setattr(generation, "generate", fail)
    assert ensure_dataset(target, seed=1, progress=False, **TINY) == target.absolute()
    assert _files(target) == before
    with pytest.raises(ValueError, match="other settings"):
        ensure_dataset(target, seed=2, **TINY)
    real = tmp_path / "real"  # a root that is not ours (no record file) is used as it is
    real.mkdir()
    assert ensure_dataset(real) == real.absolute()


def test_generation_is_atomic(tmp_path, monkeypatch):
    target = tmp_path / "sw18"
    write_video = generation.write_video
    calls = []

    def interrupted(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return write_video(*args, **kwargs)

    monkeypatch.setattr(generation, "write_video", interrupted)
    with pytest.raises(KeyboardInterrupt):
        generate(target, seed=1, progress=False, **TINY)
    assert list(tmp_path.iterdir()) == []  # no root, no half-built sibling
    monkeypatch.setattr(generation, "write_video", write_video)

    generate(target, seed=1, progress=False, **TINY)
    with pytest.raises(FileExistsError):
        generate(target, seed=2, progress=False, **TINY)
    annotation = (target / "data/annotation.json").read_bytes()
    generate(target, seed=2, overwrite=True, progress=False, **TINY)
    assert (target / "data/annotation.json").read_bytes() != annotation
    assert [p.name for p in tmp_path.iterdir()] == ["sw18"]
    Spacewalk18(target)


def test_cli_refuses_an_existing_root(root, capsys):
    with pytest.raises(SystemExit) as exit_:
        synthetic_main(["--root", str(root)])
    assert exit_.value.code == 2 and "exists" in capsys.readouterr().err


def test_bad_options_are_refused():
    with pytest.raises(ValueError, match="steps_per_video"):
        Options(steps_per_video=(0, 3))
    with pytest.raises(ValueError, match="too short"):
        plan_pieces(np.random.default_rng(0), Options(minutes=(0.5, 0.5)))
    with pytest.raises(TypeError):
        Options(no_such_option=1)


# --------------------------------------------------------------------------------------------------
# "the release at root, else the synthetic one": one rule and the same keys for every benchmark

# every data config that opens a benchmark, with the keys that make it the synthetic set
DATA_CONFIGS = ["synthetic", "spacewalk18", "spacewalk18_qa", "spacewalk18_step_questions", "hirest",
                "hirest_release", "egoschema", "egocross"]


@pytest.mark.parametrize("name", DATA_CONFIGS)
def test_every_data_config_says_release_or_synthetic_with_the_same_keys(name):
    from conftest import compose_evaluate

    data = compose_evaluate(f"data={name}", "data.root=null", "data.synthetic_root=null").data
    assert {"root", "synthetic_root", "seed", "synthetic"} <= set(data), name
    assert OmegaConf.select(data, "options") is None and "n_train" not in data  # the older spellings are gone
    with pytest.raises(Exception, match="data.root .* or data.synthetic_root"):  # neither: named, before any work
        hydra.utils.instantiate(data, _convert_="all")


@pytest.mark.parametrize("opener", ["spacewalk.benchmarks.spacewalk18.open.open_spacewalk18",
                                    "spacewalk.benchmarks.hirest.open.open_hirest",
                                    "spacewalk.benchmarks.egoschema.task.open_egoschema",
                                    "spacewalk.benchmarks.egocross.task.open_egocross"])
def test_the_seed_is_said_once(opener, tmp_path):
    module, _, name = opener.rpartition(".")
    open_ = getattr(importlib.import_module(module), name)
    with pytest.raises(ValueError, match=r"data\.synthetic\.seed=4: .* is data\.seed"):
        open_(synthetic_root=tmp_path / "s", seed=0, synthetic={"seed": 4})
    assert not (tmp_path / "s").exists()  # refused before anything is written


def test_a_release_root_is_opened_as_it_is(root, tmp_path):
    from spacewalk.benchmarks.spacewalk18.open import open_spacewalk18

    # the generator's options say nothing about a release, and no synthetic set is written for it
    data = open_spacewalk18(root, synthetic_root=tmp_path / "unused", synthetic={"n_train": 1})
    assert data.root == root and not (tmp_path / "unused").exists()
    assert open_spacewalk18(synthetic_root=root, seed=3, synthetic=TINY).root == root  # the synthetic one, reused
