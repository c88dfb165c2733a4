"""Multiple choice scored by likelihood (`model.scoring=loglik`, spacewalk/multiple_choice/likelihood.py) on the tiny
random checkpoints of the four families and on tiny language models (Llama, Gemma 3 text: the families of the
packaged SmolLM2 and Gemma 3 270M): every option's score, computed from one encoding of the prompt and batched
continuations on its cache, equals the log-probability a direct forward pass of the same model gives the prompt
followed by that continuation; likelihood and generation choose the same option when the model is scripted to
prefer one answer; and `python evaluate.py data=egoschema model=mc_transformers model.scoring=loglik` records every
option's score with no unparsable reply for each family."""

from __future__ import annotations

import json

import pytest
import torch

from spacewalk.core.errors import ConfigError
from spacewalk.multiple_choice import likelihood, tiny_models
from spacewalk.multiple_choice.backends.transformers_vlm import TransformersVLMBackend
from spacewalk.multiple_choice.items import MultipleChoiceItem, Visual
from spacewalk.multiple_choice.task import Prompt

from helpers.commands import run_command
from helpers.encoded_videos import write_video

ALL = tiny_models.FAMILIES  # every family of tiny video LLM
OPTIONS = ("a red cube", "the blue sphere on the left", "none", "two green cones")


def tiny_language_model(kind: str):
    """(model, tokenizer) of a one-layer Llama (with a chat template, as SmolLM2's) or Gemma 3 text model (none, as
    the Gemma 3 270M base model), on the byte-level tokenizer of tiny_models."""
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig, LlamaConfig, LlamaForCausalLM

    tok = tiny_models.tiny_tokenizer(["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
    special = dict(eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, bos_token_id=None)
    torch.manual_seed(0)
    if kind == "llama":
        tok.chat_template = tiny_models.TEMPLATE.replace("{% for part in message['content'] %}", "").replace(
            "{% if part['type'] == 'video' %}VIDEO{% elif part['type'] == 'image' %}IMAGE"
            "{% else %}{{ part['text'] }}\n{% endif %}{% endfor %}", "{{ message['content'] }}\n")
        model = LlamaForCausalLM(LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64,
                                             num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                                             max_position_embeddings=2048, **special))
    else:  # sliding-window layers (window 8) next to a global one, as Gemma 3's: the cache has both kinds
        model = Gemma3ForCausalLM(Gemma3TextConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64,
                                                   num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                                                   head_dim=16, sliding_window=8,
                                                   layer_types=["sliding_attention", "full_attention"],
                                                   max_position_embeddings=2048, **special))
    return model, tok


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    import numpy as np

    folder = tmp_path_factory.mktemp("loglik")
    frames = np.random.default_rng(1).integers(0, 256, (8, 48, 64, 3), dtype=np.uint8)
    return Visual(video=write_video(folder / "v.mp4", frames, 4), start=0.0, end=2.0)


def backend_of(kind: str, **settings) -> TransformersVLMBackend:
    if kind in ALL:
        model, processor = tiny_models.build(kind)
        return TransformersVLMBackend(model_object=model, processor=processor, dtype="float32", device="cpu",
                                      num_frames=2, scoring="loglik", **settings)
    model, tok = tiny_language_model(kind)
    return TransformersVLMBackend(model_object=model, processor=tok, dtype="float32", device="cpu", text_only=True,
                                  scoring="loglik", **settings)


def direct_logprob(backend: TransformersVLMBackend, inputs, continuation: list[int]) -> float:
    """The continuation's log-probability from one forward pass over the prompt and the continuation together."""
    ids = torch.cat([inputs["input_ids"], torch.tensor([continuation])], dim=1)
    full = {**inputs, "input_ids": ids, "attention_mask": torch.ones_like(ids)}
    for key in ("token_type_ids", "mm_token_type_ids"):  # the continuation is text
        if key in inputs:
            full[key] = torch.cat([inputs[key], torch.zeros((1, len(continuation)), dtype=inputs[key].dtype)], dim=1)
    with torch.inference_mode():
        logits = backend.model(**full).logits[0].float()
    start = inputs["input_ids"].shape[1]
    logprobs = torch.log_softmax(logits[start - 1:-1], dim=-1)
    return float(logprobs[torch.arange(len(continuation)), torch.tensor(continuation)].sum())


@pytest.mark.parametrize("kind", [*ALL, "llama", "gemma3_text"])
def test_each_options_score_equals_a_direct_forward_pass(kind, clip, monkeypatch):
    # any lengths share a batch: 8 continuations in batches of 3, 3 and 2, rows of different lengths padded
    monkeypatch.setattr(likelihood, "SIMILAR_LENGTH", 0.0)
    backend = backend_of(kind, loglik_batch_size=3)
    item = MultipleChoiceItem(id="q1", question="Which object moves?", options=OPTIONS, answer=1,
                              visual=clip if kind in ALL else None)
    prompt = Prompt((Prompt.VISUAL, "Watch the clip.", f"Question: {item.question}",
                     "\n".join(f"({c}) {o}" for c, o in zip("ABCD", OPTIONS)), "Answer with the letter."),
                    labels=("A", "B", "C", "D"))
    reply = backend.answer([item], [prompt])[0]
    per_option = reply.meta["loglik"]
    assert reply.choice is not None and reply.text == "" and len(per_option) == 4
    shown = backend._visuals(prompt, item) if backend.rule is not None else None
    inputs = backend._inputs([prompt], [item], [shown] if shown else [None])
    if kind in ALL:  # the clip reached the model: the scores are of a prompt with visual tokens
        assert reply.meta["visual_tokens"] > 0
    sep = "" if backend.tokenizer.decode(inputs["input_ids"][0, -1:])[-1].isspace() else " "
    if kind == "gemma3_text":  # no chat template: the plain prompt ends with the answer cue, a space follows
        assert backend.tokenizer.decode(inputs["input_ids"][0]).endswith("\nAnswer:") and sep == " "
    for option, label, scores in zip(OPTIONS, "ABCD", per_option):
        for kind_, text in (("text", option), ("label", label)):
            ids = backend._continuation(sep + text)
            assert scores[f"{kind_}_tokens"] == len(ids)
            assert scores[f"{kind_}_sum"] == pytest.approx(direct_logprob(backend, inputs, ids), abs=2e-4)
            assert scores[f"{kind_}_mean"] == pytest.approx(scores[f"{kind_}_sum"] / len(ids))
    # the choice is the best option by choose_by (text_sum by default); scores hold that number per option
    assert list(reply.scores) == [o["text_sum"] for o in per_option]
    assert reply.choice == max(range(4), key=lambda i: per_option[i]["text_sum"])


def test_continuations_are_batched_longest_first_with_rows_of_similar_lengths():
    lengths = [2, 105, 20, 85, 91, 1, 2, 24, 2, 83]
    order = sorted((i for i, n in enumerate(lengths) if n > 1), key=lambda i: -lengths[i])
    batches = likelihood._similar_lengths(order, [[0] * n for n in lengths], batch_size=3)
    # 85 has at least 80 % of 105's tokens and joins it, 83 does not; a full batch starts the next one
    assert [[lengths[i] for i in batch] for batch in batches] == [[105, 91, 85], [83], [24, 20], [2, 2, 2]]


def test_a_prompt_without_option_labels_is_refused():
    backend = backend_of("llama")
    item = MultipleChoiceItem(id="open1", question="What happens?", options=("x", "y"))
    with pytest.raises(ConfigError, match="open1.*label"):
        backend.answer([item], [Prompt(("What happens?",))])


def test_settings_are_checked():
    model, tok = tiny_language_model("llama")
    with pytest.raises(ConfigError, match="scoring"):
        TransformersVLMBackend(model_object=model, processor=tok, text_only=True, scoring="perplexity")
    with pytest.raises(ConfigError, match="choose_by"):
        TransformersVLMBackend(model_object=model, processor=tok, text_only=True, scoring="loglik", choose_by="max")
    with pytest.raises(ConfigError, match="text_only=true"):  # a language model cannot be shown the clip
        TransformersVLMBackend(model_object=model, processor=tok)


def test_a_prompt_longer_than_the_models_context_is_refused():
    backend = backend_of("llama")
    backend.context = 40
    item = MultipleChoiceItem(id="long1", question="q", options=("x", "y"))
    with pytest.raises(ConfigError, match="long1.*context of 40"):
        backend.answer([item], [Prompt(("word " * 20,), labels=("A", "B"))])


@pytest.mark.parametrize("kind", [*ALL, "llama"])
def test_likelihood_and_generation_agree_when_the_model_is_scripted_to_prefer_an_answer(kind, clip):
    """The model's output layer is given a bias towards the letter "C": greedy generation (one token) writes C,
    and the letters' likelihoods rank C first; without the bias the two are free to disagree."""
    backend = backend_of(kind, choose_by="label_sum", max_new_tokens=1)
    preferred = backend.tokenizer.convert_tokens_to_ids("C")
    head = backend.model.get_output_embeddings()
    head.register_forward_hook(lambda module, args, out: out + 50.0 * torch.nn.functional.one_hot(
        torch.tensor(preferred), out.shape[-1]).to(out.dtype))
    items = [MultipleChoiceItem(id=f"q{i}", question=f"Question {i}?", options=OPTIONS,
                                visual=clip if kind in ALL else None) for i in range(2)]
    prompts = [Prompt((Prompt.VISUAL, item.question, "Answer with A, B, C or D."), labels=("A", "B", "C", "D"))
               for item in items]
    scored = backend.answer(items, prompts)
    backend.scoring = "generate"
    generated = backend.answer(items, prompts)
    assert [r.text for r in generated] == ["C", "C"]
    assert [r.choice for r in scored] == [2, 2]


@pytest.mark.slow
@pytest.mark.parametrize("family", ALL)
def test_evaluate_scores_every_option_by_likelihood(family, tmp_path):
    folder = tiny_models.write(tmp_path / "models", [family])[family]
    log_dir = tmp_path / "logs"
    run_command("evaluate.py", "data=egoschema", f"data.synthetic_root={tmp_path / 'synthetic'}",
                "+data.synthetic.n_questions=4", "+data.synthetic.n_answered=4", "model=mc_transformers",
                f"model.model={folder}", "model.scoring=loglik", "model.num_frames=2", "multiple_choice.progress=false",
                "multiple_choice.wandb.enabled=false", env={"SPACEWALK_LOG_DIR": str(log_dir)})
    run = next(log_dir.glob("evaluate/runs/multiple_choice/egoschema/mc_transformers/*/metrics.json")).parent
    metrics = json.loads((run / "metrics.json").read_text())
    records = [json.loads(line) for line in (run / "records.jsonl").read_text().splitlines()]
    assert len(records) == 4 and metrics["unparsable_all"] == 0
    for record in records:
        assert record["choice"] is not None and len(record["meta"]["loglik"]) == 5 and len(record["scores"]) == 5
        assert record["meta"]["scoring"] == "loglik" and record["meta"]["visual_tokens"] > 0


def test_generation_stops_at_a_stop_string():
    """A base model goes on past its answer; `stop_strings` (the Gemma 3 270M preset's "\\n") ends the reply there."""
    backend = backend_of("llama", max_new_tokens=8)
    backend.scoring = "generate"
    preferred = backend.tokenizer.convert_tokens_to_ids("x")
    backend.model.get_output_embeddings().register_forward_hook(
        lambda module, args, out: out + 50.0 * torch.nn.functional.one_hot(torch.tensor(preferred),
                                                                           out.shape[-1]).to(out.dtype))
    item = MultipleChoiceItem(id="s1", question="q", options=("x", "y"))
    prompt = Prompt(("Say x.",), labels=("A", "B"))
    assert backend.answer([item], [prompt])[0].text == "x" * 8
    backend.stop_strings = ["x"]
    assert backend.answer([item], [prompt])[0].text == "x"


def test_a_reply_that_opens_with_the_stop_string_goes_on_to_its_text():
    """A base model may open its answer with a line break (Gemma 3 after "Answer:"): with "\\n" as the stop string
    the reply is the line that follows, not empty; the stop counts only once the row has written something."""
    backend = backend_of("llama", max_new_tokens=8)
    backend.scoring = "generate"
    newline = backend.tokenizer("\n", add_special_tokens=False)["input_ids"][-1]
    x = backend.tokenizer.convert_tokens_to_ids("x")
    assert backend.tokenizer.decode([newline]) == "\n"
    order = [newline, x, x, newline, x, x, x, x]  # the token each step is pushed to
    steps = []

    def push(module, args, out):
        token = order[min(len(steps), len(order) - 1)]
        steps.append(token)
        return out + 50.0 * torch.nn.functional.one_hot(torch.tensor(token), out.shape[-1]).to(out.dtype)

    backend.model.get_output_embeddings().register_forward_hook(push)
    item = MultipleChoiceItem(id="s1", question="q", options=("x", "y"))
    prompt = Prompt(("Say x.",), labels=("A", "B"))
    backend.stop_strings = ["\n"]
    assert backend.answer([item], [prompt])[0].text == "xx"
    assert len(steps) == 4  # it stopped at the second line break, not at the first nor at the limit
