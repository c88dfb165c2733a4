"""The synthetic data sets the tests use, each named and defined once: the generators' option fields
(spacewalk/benchmarks/*/synthetic), read by the session fixtures `synthetic_spacewalk18(**PRESET)`,
`synthetic_egoschema(PRESET)`, ... (tests/conftest.py: one data set per value, shared by every module and worker
that asks for it), or handed to a command as `+data.synthetic.<field>=<value>` (`overrides`). A test that needs
its own variant writes `{**PRESET, "n_train": 2}` beside the test, saying why."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# ---- Spacewalk-18 -------------------------------------------------------------------------------------------

# multiple choice: one test recording of 4-5 minutes with four questions (the transformers backends, the visual
# budget, the summaries, the golden prompts)
QA_ONE_TEST = dict(n_train=1, n_val=1, n_test=1, minutes=(4, 5), steps_per_video=(3, 5), samples_per_video=20,
                   retrieval_samples_per_video=4, questions_per_video=4)
# multiple choice through evaluate.py: two test recordings, eight questions each (the end-to-end runs, the OpenAI
# client against `transformers serve`, lmms-eval)
QA_TWO_TESTS = dict(n_train=1, n_val=1, n_test=2, minutes=(4, 5), steps_per_video=(3, 5), samples_per_video=40,
                    retrieval_samples_per_video=4, questions_per_video=8)
# the harness's own tests: two test recordings, six questions and 60 step samples each
QA_HARNESS = dict(n_train=1, n_val=1, n_test=2, minutes=(4, 5), steps_per_video=(3, 5), samples_per_video=60,
                  retrieval_samples_per_video=4, questions_per_video=6)
# one recording per split of 3-4 minutes: the all-layer towers and the epoch order
SHORT = dict(n_train=1, n_val=1, n_test=1, minutes=(3, 4), steps_per_video=(3, 4), samples_per_video=60,
             retrieval_samples_per_video=10, questions_per_video=2)
# the same with two training recordings (VideoMAE + MLP)
SHORT_TWO_TRAIN = {**SHORT, "n_train": 2}
# the same with 100 step samples a recording: the feature bank and the step-recognition DataModule
SHORT_BANK = {**SHORT, "samples_per_video": 100}
# the smallest set: 3-minute recordings with two steps (a sweep, a DataModule or a backend built in a second)
SWEEP = dict(n_train=1, n_val=1, n_test=1, minutes=(3, 3), steps_per_video=(2, 2), samples_per_video=50,
             retrieval_samples_per_video=50, questions_per_video=2)
# the generator's own tests: 6-8 minutes, 5-6 steps, every kind of file at 1 fps and 32 pixels
GENERATOR = dict(n_train=2, n_val=1, n_test=1, steps_per_video=(5, 6), minutes=(6.0, 8.0), video_fps=1.0,
                 frame_size=32, samples_per_video=300, retrieval_samples_per_video=200, questions_per_video=6)
# intra-video retrieval: 15-18 minutes (room for 30 s clips far apart), small frames at 0.5 fps
RETRIEVAL = dict(n_train=2, n_val=1, n_test=1, minutes=(15, 18), steps_per_video=(4, 6), samples_per_video=50,
                 retrieval_samples_per_video=10, questions_per_video=2, video_fps=0.5, frame_size=16)
# the same with fewer, longer steps: with 4-6 its val recording has one usable pair for the all-layer run
RETRIEVAL_LONG_STEPS = {**RETRIEVAL, "steps_per_video": (3, 4)}
# one recording per split of 12-14 minutes: the retrieval all-layer module's tests
RETRIEVAL_SHORT = dict(n_train=1, n_val=1, n_test=1, minutes=(12, 14), steps_per_video=(3, 4), samples_per_video=20,
                       retrieval_samples_per_video=10, questions_per_video=2, video_fps=0.5, frame_size=16)
# train.py end to end: two training recordings, 200 step samples each
TRAIN = dict(n_train=2, n_val=1, n_test=1, minutes=(4, 5), steps_per_video=(3, 5), samples_per_video=200,
             retrieval_samples_per_video=20, questions_per_video=2)
# the all-layer towers end to end (text under each LFB head, VideoMAE, the 1 fps cells): TRAIN's recordings with 60
# step samples each; what those runs check (each tower trains and tests end to end, the official scorer agrees)
# needs no more, and every sample is a window through a trainable encoder
TOWERS = {**TRAIN, "samples_per_video": 60}
# train.py end to end where a run's intervals are read: with one test recording the recordings' interval is
# undefined (Student's t has no degree of freedom), so these runs have two
TRAIN_TWO_TESTS = {**TRAIN, "n_test": 2}
# evaluate.py end to end: two test recordings, 300 step samples each
EVALUATE = dict(n_train=2, n_val=1, n_test=2, minutes=(4, 5), steps_per_video=(3, 5), samples_per_video=300,
                retrieval_samples_per_video=20, questions_per_video=2)
# the all-layer recipe end to end: three training recordings of 6-8 steps
ALL_LAYER = dict(n_train=3, n_val=1, n_test=1, minutes=(6, 8), steps_per_video=(6, 8), samples_per_video=100,
                 retrieval_samples_per_video=20, questions_per_video=2)
# the core install's run (seed 1)
CORE_INSTALL = dict(n_train=2, n_val=1, n_test=1, minutes=(6.0, 8.0), steps_per_video=(4, 5), samples_per_video=200,
                    retrieval_samples_per_video=50, questions_per_video=4)

# ---- EgoSchema and EgoCross ---------------------------------------------------------------------------------

# the default synthetic EgoSchema of the fixture: 30 questions, 20 answered
EGOSCHEMA = dict(n_questions=30, n_answered=20)
# tiny videos (4 s at 2 fps, 32 pixels) for the tiny video LLMs
EGOSCHEMA_TINY_VIDEOS = dict(n_questions=6, n_answered=4, seconds=4, fps=2, frame_size=32)
# the same with four questions: one run per transformers family
EGOSCHEMA_FAMILIES = dict(n_questions=4, n_answered=3, seconds=4, fps=2, frame_size=32)
# the default synthetic EgoCross of the fixture: three questions per category
EGOCROSS = dict(per_category=3)
# one question per category, 3-5 frames of 32 pixels, for the tiny video LLMs
EGOCROSS_TINY_VIDEOS = dict(per_category=1, frames=(3, 5), frame_size=32)


def overrides(preset: Mapping[str, Any]) -> list[str]:
    """The preset as a command's `+data.synthetic.<field>=<value>` overrides (sequences as `[a,b]`)."""
    def value(v: Any) -> str:
        return f"[{','.join(map(str, v))}]" if isinstance(v, list | tuple) else str(v)

    return [f"+data.synthetic.{key}={value(v)}" for key, v in preset.items()]
