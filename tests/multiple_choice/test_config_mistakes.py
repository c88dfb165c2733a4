"""The multiple-choice harness given what a user gets wrong in its config: a question file that is not a path, is
empty, or repeats a question id; a task with no items or repeated item ids; a transformers checkpoint folder without
config.json, with a model_type no family has, a file or a name that is nowhere. Each is refused naming the setting
or the file and the id (a command prints it on one `error:` line, exit 2), before any record is written; none is
scored as if it were a result."""

from __future__ import annotations

import json

import pytest

from spacewalk.benchmarks.spacewalk18.data.dataset import Spacewalk18
from spacewalk.benchmarks.spacewalk18.questions.question_answering import QuestionAnswering
from spacewalk.core.errors import ConfigError, DataError, UserInputError
from spacewalk.multiple_choice import runner
from spacewalk.multiple_choice.backends.baselines import ScriptedBackend
from spacewalk.multiple_choice.backends.transformers_vlm import TransformersVLMBackend
from spacewalk.multiple_choice.items import MultipleChoiceItem

from openai_stub import Task


@pytest.fixture(scope="module")
def dataset(synthetic_spacewalk18):
    return Spacewalk18(synthetic_spacewalk18(n_train=1, n_val=1, n_test=1, minutes=(3, 3), steps_per_video=(2, 2),
                                             samples_per_video=50, retrieval_samples_per_video=50,
                                             questions_per_video=3))


def test_a_question_file_that_is_not_a_path_empty_or_repeating_an_id_is_refused(dataset, tmp_path):
    with pytest.raises(ConfigError, match=r"data.questions=\[\]: the path of a question file"):
        QuestionAnswering(dataset, questions=[])
    empty = tmp_path / "empty.json"
    empty.write_text("[]")
    with pytest.raises(DataError, match=f"{empty}: holds no questions"):
        QuestionAnswering(dataset, questions=empty)
    questions = json.loads((dataset.root / "tasks/question_answering/test.json").read_text())
    repeated = tmp_path / "repeated.json"
    repeated.write_text(json.dumps(questions + [questions[0]]))
    with pytest.raises(DataError) as error:
        QuestionAnswering(dataset, questions=repeated)
    assert str(error.value) == (f"{repeated}: item question {len(questions)} (video {questions[0]['video_id']}): "
                                f"field 'question_id': question_id {questions[0]['question_id']} is also question 0's; "
                                "each question needs its own")


def items(*ids: str) -> list[MultipleChoiceItem]:
    return [MultipleChoiceItem(id=i, question=f"{i}?", options=("x", "y"), answer=0) for i in ids]


def test_the_runner_refuses_a_task_with_no_items_or_repeated_ids(tmp_path):
    with pytest.raises(DataError, match="task toy has no items to answer"):
        runner.run(Task([]), ScriptedBackend(), tmp_path / "empty", progress=False)
    with pytest.raises(DataError, match=r"task toy: item ids \['a', 'c'\] occur more than once"):
        runner.run(Task(items("a", "b", "a", "c", "c")), ScriptedBackend(), tmp_path / "repeated", progress=False)
    assert not list(tmp_path.rglob("records.jsonl"))


def test_a_checkpoint_that_is_not_one_is_named(tmp_path):
    no_config = tmp_path / "no_config"
    no_config.mkdir()
    unknown = tmp_path / "unknown"
    unknown.mkdir()
    (unknown / "config.json").write_text('{"model_type": "nonsense_vlm"}')
    untyped = tmp_path / "untyped"
    untyped.mkdir()
    (untyped / "config.json").write_text('{"hidden_size": 8}')
    no_weights = tmp_path / "no_weights"
    no_weights.mkdir()
    (no_weights / "config.json").write_text('{"model_type": "qwen2_5_vl"}')
    a_file = tmp_path / "weights.bin"
    a_file.write_text("")
    cases = [(dict(model=str(no_config)), f"model.model={no_config}: a folder without config.json"),
             (dict(model=str(unknown)), "the checkpoint's model_type 'nonsense_vlm' is not a family the transformers "
                                        "backend knows"),
             (dict(model=str(untyped)), f"model.model={untyped}: its config.json has no \"model_type\""),
             (dict(model=str(a_file)), f"model.model={a_file}: a file, not a checkpoint folder"),
             (dict(model=str(tmp_path / "nowhere")), f"model.model={tmp_path / 'nowhere'}: neither a checkpoint "
                                                     "folder nor a hub model in the local cache"),
             (dict(model=str(no_weights)), f"model.model={no_weights}: cannot load the checkpoint ("),
             (dict(model=str(tmp_path / "nowhere"), family="qwen2_5_vl"),
              f"model.model={tmp_path / 'nowhere'}: cannot load the checkpoint (")]
    for settings, message in cases:
        with pytest.raises(UserInputError) as error:
            TransformersVLMBackend(**settings)
        assert str(error.value).startswith(message), (settings, str(error.value))
