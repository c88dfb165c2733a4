import dataclasses
import hashlib
import json
import math
import re
from pathlib import Path

import av
import numpy as np
import pytest

import spacewalk.benchmarks.hirest.synthetic.generate as hs
from spacewalk.benchmarks.hirest.dataset import HiREST
from spacewalk.benchmarks.hirest.subtitles import Subtitle, read_srt, write_srt
from spacewalk.benchmarks.hirest.synthetic.__main__ import main
from spacewalk.benchmarks.hirest.synthetic.generate import (
    ASR_DIR,
    RECORD_FILE,
    VAL_TESTING_SPLIT_FILE,
    VIDEO_DIR,
    ensure_hirest,
    generate_hirest,
)
from spacewalk.benchmarks.hirest.synthetic.options import HiRESTOptions
from spacewalk.benchmarks.hirest.synthetic.plan import plan_hirest
from spacewalk.benchmarks.hirest.synthetic.vocabulary import CATEGORIES as THINGS
from spacewalk.media.video import open_video

from window_decoding import decode_window

# small enough to generate in about a second, big enough for every kind of video and annotation quirk
TINY = HiRESTOptions(seed=3, n_train=4, n_val=2, n_test=2, videos_per_query=(1, 3), n_distractors=3,
                     seconds=(20.0, 34.0), p_zero_length_step=0.6, p_trailing_space=0.3, frame_size=32)
# smaller still, for the tests that generate several times
MINI = HiRESTOptions(seed=1, n_train=1, n_val=1, n_test=1, videos_per_query=(1, 1), n_distractors=1,
                     seconds=(20.0, 20.0), frame_size=16)

SPLIT_FILES = {s: f"data/splits/all_data_{s}.json" for s in ("train", "val", "test")}
NEGATIVES = "data/splits/all_data_test_negative_samples.json"
CATEGORIES = "data/evaluation/categories.json"
TEST_GT = "data/evaluation/formatted_moment_evaluation_gt.json"
VAL_GT = "data/val_testing/formated_moment_evaluation_gt.json"
JSON_FILES = [*SPLIT_FILES.values(), NEGATIVES, CATEGORIES, TEST_GT, VAL_GT, VAL_TESTING_SPLIT_FILE]


@pytest.fixture(scope="module")
def root(synthetic_hirest) -> Path:
    return synthetic_hirest(TINY)


@pytest.fixture(scope="module")
def plan():
    return plan_hirest(TINY)


def _load(root: Path, rel: str):
    return json.loads((root / rel).read_text(encoding="utf-8"))


def _split_videos(root: Path, split: str) -> dict[str, dict]:
    return {v: a for videos in _load(root, SPLIT_FILES[split]).values() for v, a in videos.items()}


def _frame_hashes(path: Path) -> list[str]:
    """Each decoded frame's digest: uint8 pixels, compared between two generations on this machine (exact)."""
    with av.open(str(path)) as container:
        return [hashlib.sha1(f.to_ndarray(format="rgb24").tobytes()).hexdigest() for f in container.decode(video=0)]


# --------------------------------------------------------------------------------------------------
# layout and schema


def test_layout(root, plan):
    files = {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}
    split_videos = [v for s in SPLIT_FILES for v in _split_videos(root, s)]
    distractors = [p.video for p in plan.distractors]
    expected = {*JSON_FILES, RECORD_FILE, *(f"{VIDEO_DIR}/{v}" for v in split_videos + distractors),
                *(f"{ASR_DIR}/{v[:-4]}.srt" for v in split_videos)}  # no ASR for distractors, like the release
    assert files == expected
    assert len(set(split_videos + distractors)) == len(split_videos) + len(distractors)
    for v in split_videos + distractors:
        assert re.fullmatch(r"[A-Za-z0-9_-]{11}\.mp4", v)
    record = _load(root, RECORD_FILE)
    assert record["synthetic"] is True and "synthetic" in record["note"].lower()
    assert record["options"] == json.loads(json.dumps(dataclasses.asdict(TINY)))
    # the release's own reader takes it as it is
    data = HiREST(root)
    assert data.videos() == split_videos + distractors


def _check_entry(entry: dict, masked: bool) -> None:
    assert list(entry) == ["relevant", "clip", "v_duration", "bounds", "steps"]
    assert entry["relevant"] is True and isinstance(entry["clip"], bool)
    assert type(entry["v_duration"]) is float and entry["v_duration"] > 0
    assert isinstance(entry["bounds"], list) and [type(b) for b in entry["bounds"]] == [int, int]
    if masked:
        assert entry["bounds"] == [0, 1] and entry["steps"] == []
    elif not entry["clip"]:
        assert entry["bounds"] == [0, 0] and entry["steps"] == []
    for i, step in enumerate(entry["steps"]):
        assert list(step) == ["index", "heading", "absolute_bounds"]
        assert step["index"] == i and isinstance(step["heading"], str) and step["heading"].strip()
        assert [type(b) for b in step["absolute_bounds"]] == [int, int]


def test_schema(root):
    for split, rel in SPLIT_FILES.items():
        queries = _load(root, rel)
        assert queries and all(isinstance(q, str) and videos for q, videos in queries.items())
        for videos in queries.values():
            for entry in videos.values():
                _check_entry(entry, masked=split == "test")
    for rel, bound_type in ((TEST_GT, float), (VAL_GT, int)):  # as in the release
        for entry in _load(root, rel).values():
            assert list(entry) == ["captions", "bounds"]
            for cap in entry["captions"]:
                assert list(cap) == ["start", "end", "sentence"]
                assert [type(cap["start"]), type(cap["end"]), type(cap["sentence"])] == [int, int, str]
            assert all([type(x) for x in b] == [bound_type] * 2 for b in entry["bounds"])
            assert entry["bounds"] == [[c["start"], c["end"]] for c in entry["captions"]]
    # the release's formatting: one line, except the test split (indent 2)
    for rel in JSON_FILES:
        assert ("\n" in (root / rel).read_text()) == (rel == SPLIT_FILES["test"]), rel


def _signature(obj, depth=0):
    """Key names and value types, with the free-text keys (queries, video names) folded to their type."""
    if isinstance(obj, dict):
        free = depth == 0 or any(k.endswith(".mp4") for k in obj)
        return ("dict", tuple(sorted({("*" if free else k, _signature(v, depth + 1)) for k, v in obj.items()})))
    if isinstance(obj, list):
        return ("list", tuple(sorted({_signature(v, depth + 1) for v in obj})))
    return type(obj).__name__


def _signatures(base: Path, rel: str) -> set:
    data = _load(base, rel)
    if rel == CATEGORIES:
        return {("keys", tuple(data))} | {("value", type(v).__name__)
                                          for table in data.values() for v in table.values()}
    if rel == NEGATIVES:
        return {(re.sub(r"\d+$", "N", k), _signature(v, 1)) for k, v in data.items()}
    if rel in (TEST_GT, VAL_GT):  # per video
        return {_signature(e, 2) for e in data.values()}
    return {_signature(e, 2) for videos in data.values() for e in videos.values()}  # splits: per (query, video)


def test_schema_matches_the_release(root, real_hirest_root):
    for rel in JSON_FILES:
        ours, real = _signatures(root, rel), _signatures(real_hirest_root, rel)
        assert ours <= real, (rel, ours - real)
        assert ("\n" in (root / rel).read_text()) == ("\n" in (real_hirest_root / rel).read_text()), rel
    for split in ("val", "test"):
        ours, real = ({(e["clip"], bool(e["steps"])) for e in _split_videos(base, split).values()}
                      for base in (root, real_hirest_root))
        assert ours <= real
    real_test = _split_videos(real_hirest_root, "test")
    assert all(real_test[v]["clip"] for v in _load(real_hirest_root, TEST_GT))  # GT: clippable videos only


# --------------------------------------------------------------------------------------------------
# annotation rules


def test_steps_tile_moments(root):
    kinds, headings = set(), []
    for split in ("train", "val"):
        videos = _split_videos(root, split)
        assert any(e["clip"] and e["steps"] for e in videos.values())
        for e in videos.values():
            kinds.add((e["clip"], bool(e["steps"])))
            if not e["clip"]:
                continue
            s, t = e["bounds"]
            assert 0 < s < t < e["v_duration"] and (t - s) < 0.75 * e["v_duration"]  # clippable: < 75 %
            steps = [st["absolute_bounds"] for st in e["steps"]]
            if steps:
                assert steps[0][0] == s and steps[-1][1] == t
                assert all(a[1] == b[0] for a, b in zip(steps, steps[1:]))
                assert all(a <= b for a, b in steps)
            headings += [st["heading"] for st in e["steps"]]
    assert kinds == {(False, False), (True, False), (True, True)}
    gt_captions = [c for rel in (TEST_GT, VAL_GT) for e in _load(root, rel).values() for c in e["captions"]]
    headings += [c["sentence"] for c in gt_captions]
    assert any(h.endswith(" ") for h in headings) and any(h != h.strip() for h in headings)
    assert any(h[0].isupper() for h in headings) and any(h[0].islower() for h in headings)
    zero = [c for c in gt_captions if c["start"] == c["end"]]
    zero += [st for split in ("train", "val") for e in _split_videos(root, split).values() for st in e["steps"]
             if st["absolute_bounds"][0] == st["absolute_bounds"][1]]
    assert zero


def test_test_split_is_masked_and_its_gt_holds_the_hidden_steps(root, plan):
    masked = _split_videos(root, "test")
    hidden = {p.video: p for videos in plan.splits["test"].values() for p in videos.values()}
    assert list(masked) == list(hidden)
    for v, e in masked.items():
        assert e["bounds"] == [0, 1] and e["steps"] == []
        assert (e["clip"], e["v_duration"]) == (hidden[v].clip, hidden[v].duration)
    gt = _load(root, TEST_GT)
    # the release: exactly the clippable test videos with steps, in split order
    assert list(gt) == [v for v, p in hidden.items() if p.clip and p.steps]
    assert any(p.clip and not p.steps for p in hidden.values()) or any(not p.clip for p in hidden.values())
    for v, entry in gt.items():
        steps = hidden[v].steps
        assert [(c["start"], c["end"], c["sentence"]) for c in entry["captions"]] == \
            [(*s["absolute_bounds"], s["heading"]) for s in steps]
        assert entry["captions"][0]["start"] == hidden[v].bounds[0]
        assert entry["captions"][-1]["end"] == hidden[v].bounds[1]
    data = HiREST(root)
    assert [a.video for a in data.step_annotations("test")] == list(gt)


def test_val_testing_copies_the_val_split(root):
    assert (root / VAL_TESTING_SPLIT_FILE).read_bytes() == (root / SPLIT_FILES["val"]).read_bytes()
    val = _split_videos(root, "val")
    gt = _load(root, VAL_GT)
    assert list(gt) == [v for v, e in val.items() if e["clip"] and e["steps"]]
    for v, entry in gt.items():
        assert entry["captions"] == [{"start": s["absolute_bounds"][0], "end": s["absolute_bounds"][1],
                                      "sentence": s["heading"]} for s in val[v]["steps"]]
        assert entry["bounds"] == [s["absolute_bounds"] for s in val[v]["steps"]]


def test_negatives_and_categories(root, plan):
    negatives = _load(root, NEGATIVES)
    assert list(negatives) == [f"negative video_{i}" for i in range(TINY.n_distractors)]
    assert all(list(v.values()) == [{}] for v in negatives.values())
    split_videos = {v for s in SPLIT_FILES for v in _split_videos(root, s)}
    names = [v for entry in negatives.values() for v in entry]
    assert not set(names) & split_videos and len(set(names)) == len(names)
    queries = {q for s in SPLIT_FILES for q in _load(root, SPLIT_FILES[s])}
    assert sum(len(_load(root, SPLIT_FILES[s])) for s in SPLIT_FILES) == len(queries)  # no query in two splits
    # distractors show tasks no query asks for
    assert not {p.task.query for p in plan.distractors} & queries
    cats = _load(root, CATEGORIES)
    assert list(cats) == ["prompt_to_cat", "video_to_cat"]
    assert set(cats["prompt_to_cat"]) == queries and set(cats["video_to_cat"]) == split_videos
    assert set(cats["prompt_to_cat"].values()) <= set(THINGS)


# --------------------------------------------------------------------------------------------------
# videos and subtitles


def test_videos_decode_at_one_fps(root, plan):
    for p in plan.videos():
        path = root / VIDEO_DIR / p.video
        with open_video(path, "decord") as reader:
            assert reader.num_frames == p.n_frames == round(p.duration * TINY.video_fps)
            assert reader.duration == pytest.approx(p.duration, abs=0.01)
        clips = decode_window(path, 0.0, p.duration, "dense", fps=1.0)
        assert clips[0].frames.shape == (math.ceil(p.duration), TINY.frame_size, TINY.frame_size, 3)


def test_the_picture_follows_the_steps(root, plan):
    """At 1 fps, frames change much more across a step boundary than inside a step (segmentation can work)."""
    across, within = [], []
    for p in plan.videos()[:8]:
        frames = decode_window(root / VIDEO_DIR / p.video, 0.0, p.duration, "dense", fps=1.0)[0].frames
        frames = frames.astype(np.float32)
        cuts = {int(s.start) for s in p.shots}  # step starts and camera cuts
        starts = {s.start for s in p.shown}
        for t in range(1, len(frames)):
            diff = float(np.abs(frames[t] - frames[t - 1]).mean())
            if t in starts and t - 1 not in starts:
                across.append(diff)
            elif t not in cuts:
                within.append(diff)
    assert np.median(across) > 4 * np.median(within)


EDITED = dataclasses.replace(TINY, shot_seconds=(2.0, 5.0), p_continuous_step=0.5, camera_motion=0.02)


def test_editing_options_change_the_shots_only():
    """Off (the defaults), a step has at most one close-up cut, no fade and a camera that does not pan (the
    version-1 look); on, steps are cut into shots of shot_seconds, some step changes are one take with a
    cross-fade, shots pan. The annotation, the steps shown and the subtitles stay the same either way."""
    plain, edited = plan_hirest(TINY), plan_hirest(EDITED)
    for p, q in zip(plain.videos(), edited.videos()):
        assert (p.video, p.steps, p.shown, p.sentences) == (q.video, q.steps, q.shown, q.sentences)
        assert all(s.fade_from is None and s.pan == (0.0, 0.0) for s in p.shots)
        assert all(sum(st.start < s.start < st.end for s in p.shots) <= 1 for st in p.shown)
        starts = [s.start for s in q.shots]
        assert starts == sorted(starts)
        for shot in q.shots:
            if shot.fade_from is not None:  # centred on a step start, continuing the take before it
                assert any(abs(shot.start + shot.fade / 2 - st.start) < 1e-9 for st in q.shown[1:])
                assert (shot.zoom, shot.shift, shot.seed) == (shot.fade_from.zoom, shot.fade_from.shift,
                                                              shot.fade_from.seed)
    shots = [s for q in edited.videos() for s in q.shots if s.kind == "step"]
    fades = sum(s.fade_from is not None for s in shots)
    boundaries = sum(len(q.shown) - 1 for q in edited.videos())
    assert 0.3 * boundaries < fades < 0.7 * boundaries
    long_steps = [(q, st) for q in edited.videos() for st in q.shown if st.end - st.start >= 8]
    assert all(sum(st.start < s.start < st.end for s in q.shots) >= 1 for q, st in long_steps)
    assert any(s.pan != (0.0, 0.0) for s in shots)
    again = plan_hirest(EDITED)
    assert [[(s.start, s.zoom, s.seed, s.fade) for s in q.shots] for q in again.videos()] == \
        [[(s.start, s.zoom, s.seed, s.fade) for s in q.shots] for q in edited.videos()]


def test_a_step_change_in_one_take_is_gradual(tmp_path):
    """At 1 fps the largest one-second change around a cross-faded step start is well below a hard cut's:
    what makes a frame-difference (SSIM) segmenter miss such boundaries."""
    root = generate_hirest(tmp_path / "edited", EDITED, progress=False)
    faded, cut = [], []
    for p in plan_hirest(EDITED).videos():
        frames = decode_window(root / VIDEO_DIR / p.video, 0.0, p.duration, "dense", fps=1.0)[0].frames
        change = np.r_[0.0, np.abs(np.diff(frames.astype(np.float32), axis=0)).mean((1, 2, 3))]
        for shot in p.shots:
            if shot.fade_from is not None:
                b = int(round(shot.start + shot.fade / 2))
                faded.append(change[max(b - 2, 0):b + 3].max())
            elif any(st.start == shot.start for st in p.shown[1:]):
                cut.append(change[int(shot.start)])
    assert len(faded) >= 5 and len(cut) >= 5
    assert np.median(faded) < 0.7 * np.median(cut)


def test_subtitles_are_whisper_srt(root, plan):
    mentioned, steps = 0, 0
    for p in (p for videos in plan.splits.values() for q in videos.values() for p in q.values()):
        path = root / ASR_DIR / f"{p.video[:-4]}.srt"
        text = path.read_text(encoding="utf-8")
        assert text.endswith("\n\n")
        assert [int(n) for n in re.findall(r"^(\d+)\n\d\d:", text, re.M)] == list(range(1, len(p.sentences) + 1))
        subs = [(s.start, s.end, s.text) for s in read_srt(path)]  # the package's one SRT reader
        assert subs == p.sentences
        assert all(0 <= a < b <= p.duration for a, b, _ in subs)
        assert all(x[1] <= y[0] for x, y in zip(subs, subs[1:]))  # in order, never overlapping
        assert all(round(t * 1000) % 20 == 0 for a, b, _ in subs for t in (a, b))  # Whisper's 20 ms grid
        assert all(t == t.strip() and t for _, _, t in subs)
        for s in p.shown:  # the narration talks about what is on screen
            steps += 1
            mentioned += any(a < s.end and b > s.start and s.kind.obj in t for a, b, t in subs)
        if p.clip:  # outside the moment: chat, no step narration
            outside = [t for a, b, t in subs if b <= p.bounds[0]]
            assert not any(s.kind.obj in t for s in p.shown for t in outside[2:])
    assert mentioned >= 0.6 * steps


def test_srt_is_written_as_whisper_writes_it(tmp_path):
    # whisper.utils.write_srt (the version the authors used): index, HH:MM:SS,mmm --> HH:MM:SS,mmm, the text
    subs = [Subtitle(1.0, 2.5, "Hello."), Subtitle(3661.02, 3662.0, "Um, cut the red paper.")]
    assert write_srt(tmp_path / "a.srt", subs).read_text(encoding="utf-8") == (
        "1\n00:00:01,000 --> 00:00:02,500\nHello.\n\n2\n01:01:01,020 --> 01:01:02,000\nUm, cut the red paper.\n\n")


# --------------------------------------------------------------------------------------------------
# generation: deterministic, reused, atomic


def test_same_options_same_dataset(root, tmp_path):
    again = generate_hirest(tmp_path / "again", TINY, progress=False)
    for rel in [*JSON_FILES, RECORD_FILE, *(str(p.relative_to(root)) for p in (root / ASR_DIR).iterdir())]:
        assert (again / rel).read_bytes() == (root / rel).read_bytes(), rel
    for path in sorted((root / VIDEO_DIR).iterdir()):
        assert _frame_hashes(again / VIDEO_DIR / path.name) == _frame_hashes(path), path.name
    other = plan_hirest(dataclasses.replace(TINY, seed=4))
    assert [p.video for p in other.videos()] != [p.video for p in plan_hirest(TINY).videos()]


def test_ensure_hirest_reuses_and_regenerates(tmp_path, monkeypatch):
    target = tmp_path / "hirest"
    assert ensure_hirest(target, MINI, progress=False) == target.absolute()
    record = (target / RECORD_FILE).read_bytes()
    generate = hs.generate_hirest

    def fail(*args, **kwargs):
        raise AssertionError("regenerated a dataset that was up to date")

    monkeypatch.setattr(hs, "generate_hirest", fail)
    assert ensure_hirest(target, dataclasses.asdict(MINI), progress=False) == target.absolute()  # a mapping
    assert ensure_hirest(target, progress=False, **dataclasses.asdict(MINI)) == target.absolute()  # fields
    monkeypatch.setattr(hs, "generate_hirest", generate)

    ensure_hirest(target, MINI, progress=False, n_train=2)  # other options: regenerated in place
    assert (target / RECORD_FILE).read_bytes() != record
    assert len(_load(target, SPLIT_FILES["train"])) == 2
    assert not [p for p in tmp_path.iterdir() if p.name != "hirest"]  # no leftovers beside it

    foreign = tmp_path / "mine"
    (foreign / "data").mkdir(parents=True)
    (foreign / "data/notes.txt").write_text("keep me")
    with pytest.raises(ValueError, match="not a synthetic HiREST"):
        ensure_hirest(foreign, MINI, progress=False)
    assert (foreign / "data/notes.txt").read_text() == "keep me"

    empty = tmp_path / "empty"
    empty.mkdir()
    assert (ensure_hirest(empty, MINI, progress=False) / RECORD_FILE).is_file()


def test_generation_is_atomic(tmp_path, monkeypatch):
    write_video, calls = hs.write_video, []

    def interrupted(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return write_video(*args, **kwargs)

    monkeypatch.setattr(hs, "write_video", interrupted)
    with pytest.raises(KeyboardInterrupt):
        generate_hirest(tmp_path / "hirest", MINI, progress=False)
    assert list(tmp_path.iterdir()) == []  # no root, no partial folder

    monkeypatch.setattr(hs, "write_video", write_video)
    root = generate_hirest(tmp_path / "hirest", MINI, progress=False)
    before = {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}
    calls.clear()
    monkeypatch.setattr(hs, "write_video", interrupted)
    with pytest.raises(KeyboardInterrupt):  # a failed regeneration leaves the old dataset as it was
        ensure_hirest(root, MINI, progress=False, seed=2)
    assert {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()} == before
    assert [p.name for p in tmp_path.iterdir()] == ["hirest"]
    with pytest.raises(FileExistsError):
        generate_hirest(root, MINI, progress=False)


def test_cli_refuses_an_existing_root(root, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--root", str(root)])
    assert exit_info.value.code == 2 and "exists" in capsys.readouterr().err


@pytest.mark.parametrize("bad", [dict(n_val=0), dict(n_train=200), dict(videos_per_query=(2, 1)),
                                 dict(seconds=(10.0, 30.0)), dict(steps_per_moment=(1, 9)),
                                 dict(p_whole=0.7, p_clip_without_steps=0.5), dict(frame_size=30),
                                 dict(video_fps=0), dict(shot_seconds=(1.0, 3.0)), dict(shot_seconds=(4.0, 3.0)),
                                 dict(p_continuous_step=1.5), dict(camera_motion=0.5)])
def test_bad_options_are_refused(bad):
    with pytest.raises(ValueError):
        HiRESTOptions(**bad)


def test_default_sizes():
    opts = HiRESTOptions()
    plan = plan_hirest(opts)
    assert [len(plan.splits[s]) for s in ("train", "val", "test")] == [30, 10, 10]
    assert len(plan.distractors) == 20
    videos = plan.videos()
    assert all(20 <= p.duration <= 90 for p in videos)
    assert sum(p.clip and bool(p.steps) for p in videos) >= 0.4 * len(videos)
