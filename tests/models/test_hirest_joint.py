"""HiRESTJointModule: the pieces (frames, segmentation decoding, beam search, schedule) and short Lightning
runs of a tiny model on a tiny synthetic HiREST (CPU): it overfits, writes the official formats in both
inference modes, and survives a checkpoint round trip."""

from __future__ import annotations

import json
import math
from functools import partial
from types import SimpleNamespace

import numpy as np
import pytest
import pytorch_lightning as pl
import torch

from datamodules.hirest import HiRESTDataModule
from models.beam_search import beam_search
from models.hirest_joint import HiRESTJointModule
from models.hirest_joint_network import CaptionDecoder, JointEncoder
from models.hirest_segmentation import boundaries_to_steps, peak_span
from spacewalk.benchmarks.hirest.dataset import HiREST
from spacewalk.benchmarks.hirest.joint_model_io import (
    PREDICTION_FILES,
    TASKS,
    caption_tokenizer,
    decode_caption,
    time_to_frame,
)

from helpers.hirest_fakes import FakeFeatures, write_hirest_root

TINY = dict(video_dim=8, query_dim=4, asr_dim=6, embed_dim=16, hidden_dim=32, num_layers=1, num_heads=2,
            ffn_dim=64, max_frames=64, dropout=0.0, decoder_layers=1, max_words=16)


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    # tiny tensors: several threads on a shared CPU spend their time waiting on each other (50x slower)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def tokenizer():
    return caption_tokenizer()


def trainer(**kwargs) -> pl.Trainer:
    defaults = dict(accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                    enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
                    use_distributed_sampler=False)
    return pl.Trainer(**{**defaults, **kwargs})


# --------------------------------------------------------------------------------------------------
# pieces


def test_time_to_frame_is_the_originals_digitize():
    for t, n in [(0.0, 10), (0.2, 10), (3.0, 10), (3.5, 10), (9.0, 10), (9.5, 10), (40.0, 10)]:
        bins = np.linspace(0, n - 1, n)
        assert time_to_frame(t, n) == min(int(np.digitize(t, bins, right=True)), n - 1)


def test_peak_span():
    p = np.array([0.0, 0.0, 0.05, 0.3, 0.4, 0.2, 0.05, 0.0])
    assert peak_span(p, 0.5) == (2, 5)  # grown while p / peak > 0.5: stops on the first frame at or under it
    assert peak_span(np.array([0.6, 0.4, 0.0]), 0.5) is None  # reaches frame 0
    assert peak_span(np.zeros(5), 0.5) is None


def test_boundaries_to_steps():
    # 23 is under 5 s after 21; the last step closes at the end however short (the official gap filling)
    assert boundaries_to_steps(10, 40, [21, 23, 30, 38], 5) == [(10, 21), (21, 30), (30, 38), (38, 40)]
    assert boundaries_to_steps(10, 40, [], 5) == [(10, 40)]
    assert boundaries_to_steps(10, 40, [9, 41, 25], 5) == [(10, 25), (25, 40)]  # clamped into the moment
    assert boundaries_to_steps(7, 7, [7], 5) == [(7, 7)]


def test_encoder_masks_padding():
    torch.manual_seed(0)
    enc = JointEncoder(**{k: TINY[k] for k in ("video_dim", "query_dim", "asr_dim", "embed_dim", "hidden_dim",
                                               "num_layers", "num_heads", "ffn_dim", "max_frames")}).eval()
    frames, asr, query = torch.randn(1, 12, 8), torch.randn(1, 12, 6), torch.randn(1, 4)
    mask = torch.ones(1, 12, dtype=torch.bool)
    alone = enc(frames, query, asr, mask, mask)
    padded_mask = torch.cat([mask, torch.zeros(1, 5, dtype=torch.bool)], 1)
    padded = enc(torch.cat([frames, torch.randn(1, 5, 8)], 1), query, torch.cat([asr, torch.randn(1, 5, 6)], 1),
                 padded_mask, padded_mask)
    assert torch.allclose(alone, padded[:, :12], atol=1e-5)
    # the temporal input runs from -1 to 1 over the valid frames
    time = JointEncoder.scaled_time(padded_mask)[0]
    assert time[0] == -1 and time[11] == 1 and (time[12:] == 0).all()


class TableDecoder:
    """A decoder whose next-token log-probabilities depend on the last token only (vocab: 0 pad, 1 bos,
    2 eos, 3 A, 4 B). Greedy takes A (0.6) then ends with 0.34; beam search finds B then eos (0.4)."""

    table = {1: [0, 0, 0, 0.6, 0.4], 3: [0, 0, 0.34, 0.33, 0.33], 4: [0, 0, 1.0, 0, 0]}

    def __call__(self, tokens, memory, memory_mask):
        probs = torch.tensor([self.table.get(int(t), [0, 0, 1.0, 0, 0]) for t in tokens[:, -1]]) + 1e-9
        return probs.log()[:, None].expand(-1, tokens.shape[1], -1)


def greedy(decoder, memory, bos, eos, max_len):
    out = []
    for row in memory:
        tokens = [bos]
        for _ in range(max_len):
            nxt = int(decoder(torch.tensor([tokens]), row[None], None)[0, -1].argmax())
            if nxt == eos:
                break
            tokens.append(nxt)
        out.append(tokens[1:])
    return out


def test_beam_search_finds_the_better_sequence():
    memory = torch.zeros(2, 3, 4)
    assert beam_search(TableDecoder(), memory, None, 1, 1, 2, 0, 10) == [[3], [3]]
    assert beam_search(TableDecoder(), memory, None, 2, 1, 2, 0, 10) == [[4], [4]]


def test_beam_of_one_is_greedy_and_sequences_are_valid():
    torch.manual_seed(1)
    decoder = CaptionDecoder(vocab_size=50, hidden_dim=32, num_layers=1, num_heads=2, ffn_dim=64, max_words=12,
                             dropout=0.0).eval()
    with torch.no_grad():
        decoder.bias[7] = 3.0  # an eos that wins sometimes
    memory = torch.randn(6, 5, 32)
    one = beam_search(decoder, memory, None, 1, 1, 7, 0, 12)
    assert one == greedy(decoder, memory, 1, 7, 12)
    three = beam_search(decoder, memory, None, 3, 1, 7, 0, 12)
    for ids in one + three:
        assert len(ids) <= 12 and all(0 < i < 50 and i not in (1, 7) for i in ids[1:] or ids)
        assert 7 not in ids and 0 not in ids


def test_decode_caption(tokenizer):
    ids = tokenizer.convert_tokens_to_ids(tokenizer.tokenize("Unbelievable onions, diced"))
    assert decode_caption(tokenizer, ids) == "unbelievable onions , diced"


def test_segmentation_decoding_iterates_and_marks():
    """Stub logits peaking on the first unmarked planted boundary: the loop finds them one by one, masks
    them out and marks them, and the steps keep boundaries >= 5 s apart."""
    module = HiRESTJointModule(**TINY, min_step_seconds=5)
    planted = [12, 14, 25]  # 14 is too close to 12
    calls = []

    def logits(frames, query, asr, frame_mask, region, marks):
        calls.append((region.clone(), marks.clone()))
        out = torch.full(region.shape, -10.0)
        for b in range(region.shape[0]):
            todo = [p for p in planted if region[b, p]]
            if todo:
                out[b, todo[0]] = 10.0
        return out.masked_fill(~region, -math.inf)

    module.model.boundary_logits = logits
    t = 40
    mask = torch.ones(1, t, dtype=torch.bool)
    steps = module.segment_moments(torch.zeros(1, t, 8), torch.zeros(1, 4), torch.zeros(1, t, 6), mask,
                                   torch.tensor([[5, 33]]))
    region0, marks0 = calls[0]
    assert np.flatnonzero(region0[0]).tolist() == list(range(5, 34)) and np.flatnonzero(marks0[0]).tolist() == [5]
    region1, marks1 = calls[1]
    assert not region1[0, 11:14].any() and np.flatnonzero(marks1[0]).tolist() == [5, 11, 13]
    # peaks at 12, 14, 25 give spans [11, 13], [13, 15], [24, 26]; then the flat rest of the region gives
    # [4, 11], [15, 24], [26, 34] (the original keeps any peak above 1e-5); clamped into [5, 33], kept when
    # >= 5 s after the last kept boundary: 5, 11, 24, and the end 33
    assert [c[1][0].nonzero().flatten().tolist() for c in calls[2:4]] == [[5, 11, 13, 15], [5, 11, 13, 15, 24, 26]]
    assert steps == [[(5, 11), (11, 24), (24, 33)]]


def test_linear_warmup_then_decay():
    module = HiRESTJointModule(**TINY, optimizer=partial(torch.optim.AdamW, lr=1e-3, weight_decay=0.01))
    module._trainer = SimpleNamespace(estimated_stepping_batches=100)
    config = module.configure_optimizers()
    optimizer, scheduler = config["optimizer"], config["lr_scheduler"]["scheduler"]
    assert config["lr_scheduler"]["interval"] == "step"
    assert isinstance(optimizer, torch.optim.AdamW) and optimizer.defaults["weight_decay"] == 0.01
    lrs = []
    for _ in range(100):
        lrs.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    assert lrs[0] == 0 and lrs[5] == pytest.approx(5e-4) and lrs[10] == pytest.approx(1e-3)
    assert lrs[55] == pytest.approx(5e-4) and lrs[99] == pytest.approx(1e-3 / 90)


# --------------------------------------------------------------------------------------------------
# a tiny model trained once on the tiny synthetic data


class Losses(pl.Callback):
    def __init__(self):
        self.epochs = []

    def on_train_epoch_end(self, trainer, module):
        self.epochs.append({k: float(v) for k, v in trainer.callback_metrics.items() if k.startswith("train/")})


def _fit(root, tokenizer, epochs: int, batch_size: int, tasks=TASKS, seed: int = 0):
    hirest = HiREST(write_hirest_root(root / "data", videos={"train": 6, "val": 2, "test": 3}))
    features = FakeFeatures(hirest, noise=0.05)
    torch.manual_seed(seed)
    dm = HiRESTDataModule(hirest, features, tokenizer=tokenizer, batch_size=batch_size, seed=seed, train_tasks=tasks)
    module = HiRESTJointModule(**TINY, optimizer=partial(torch.optim.AdamW, lr=3e-3, weight_decay=0.0),
                               schedule="constant", beam_size=3,
                               tokenizer=tokenizer)
    losses = Losses()
    t = trainer(max_epochs=epochs, callbacks=[losses], limit_val_batches=0, default_root_dir=root)
    t.fit(module, datamodule=dm)
    return SimpleNamespace(module=module.eval(), dm=dm, hirest=hirest, features=features, losses=losses.epochs,
                           root=root, trainer=t)


@pytest.fixture(scope="module")
def trained(tmp_path_factory, tokenizer):
    """The three tasks round-robin: a tiny shared encoder learns them all, if not to perfection."""
    return _fit(tmp_path_factory.mktemp("joint"), tokenizer, epochs=30, batch_size=4)


def test_training_lowers_every_loss(trained):
    first, last = trained.losses[0], trained.losses[-1]
    for task in TASKS:
        assert last[f"train/{task}_loss_epoch"] < 0.25 * first[f"train/{task}_loss_epoch"], task


@pytest.mark.parametrize("task", TASKS)
def test_each_head_learns_the_planted_answers(task, tmp_path, tokenizer):
    """One task at a time (a tiny encoder shared by three tasks fits them less reliably), then its official
    predictions on the training split: seconds <-> frames and the step order round trip."""
    run = _fit(tmp_path, tokenizer, epochs=40, batch_size=2, tasks=[task])
    module, hirest = run.module, run.hirest
    module.output_dir = tmp_path / "out"
    dm = HiRESTDataModule(hirest, run.features, tokenizer=tokenizer, batch_size=4, predict_split="train")
    trainer().predict(module, datamodule=dm)
    pred = _read(tmp_path / "out")
    truth = {a.video: a for a in hirest.step_annotations("train")}
    if task == "moment_retrieval":
        found = {v: e["bounds"] for videos in pred[task].values() for v, e in videos.items()}
        assert found == {v: list(a.moment) for v, a in truth.items()}
    elif task == "step_captioning":
        assert {v: [c["sentence"] for c in e["captions"]] for v, e in pred[task].items()} == \
            {v: [s.heading.strip() for s in a.steps] for v, a in truth.items()}
    else:
        for v, entry in pred[task].items():
            found = [b[0] for b in entry["bounds"][1:]]
            inner = [s.start for s in truth[v].steps[1:]]
            # the original's decoding puts a boundary on the frame before a sharp peak (where the peak's span
            # starts), and the moment's end, predicted too, can leave a last step of a second
            assert all(any(abs(f - b) <= 1 for f in found) for b in inner), (found, inner)
            assert all(any(abs(f - b) <= 1 for b in inner + [truth[v].moment[1]]) for f in found), (found, inner)


def test_val_loss_is_retrieval_plus_captioning(trained):
    out = trainer().validate(trained.module, datamodule=trained.dm, verbose=False)[0]
    assert set(out) >= {"val/loss", "val/moment_retrieval_loss", "val/moment_segmentation_loss",
                        "val/step_captioning_loss"}
    assert out["val/loss"] == pytest.approx(out["val/moment_retrieval_loss"] + out["val/step_captioning_loss"])


def _read(out_dir):
    return {task: json.loads((out_dir / name).read_text()) for task, name in PREDICTION_FILES.items()}


def test_oracle_predictions_in_the_official_formats(trained, tmp_path):
    module, hirest = trained.module, trained.hirest
    module.output_dir = tmp_path
    trainer().test(module, datamodule=trained.dm, verbose=False)
    pred = _read(tmp_path)
    assert pred == module.predictions
    # moment retrieval: {query: {video: {"bounds": [s, e]}}} for every clip pair of the masked test split
    pairs = {(a.query, a.video) for a in hirest.annotations("test") if a.clip}
    assert {(q, v) for q, vs in pred["moment_retrieval"].items() for v in vs} == pairs
    for vs in pred["moment_retrieval"].values():
        for entry in vs.values():
            assert list(entry) == ["bounds"] and len(entry["bounds"]) == 2 and entry["bounds"][0] <= entry["bounds"][1]
    gt = hirest.moment_gt("test")
    # segmentation of the GT moment: {video: {"bounds": [[s, e], ...]}}, a partition of the moment
    assert set(pred["moment_segmentation"]) == set(gt)
    for video, entry in pred["moment_segmentation"].items():
        bounds = entry["bounds"]
        assert bounds[0][0] == gt[video].moment[0] and bounds[-1][1] == gt[video].moment[1]
        assert all(a[1] == b[0] for a, b in zip(bounds, bounds[1:]))
    # captions of the GT steps, in step order: {video: {"captions": [{"sentence": ...}], ...}}
    assert set(pred["step_captioning"]) == set(gt)
    for video, entry in pred["step_captioning"].items():
        assert len(entry["captions"]) == len(gt[video].captions)
        assert all(list(c) == ["sentence"] and isinstance(c["sentence"], str) for c in entry["captions"])
        assert entry["bounds"] == [list(b) for b in gt[video].bounds]


def test_end_to_end_chains_the_tasks(trained, tmp_path, tokenizer):
    module = trained.module
    module.hparams.inference = "end_to_end"
    module.output_dir = tmp_path
    try:
        dm = HiRESTDataModule(trained.hirest, trained.features, tokenizer=tokenizer, batch_size=4,
                              inference="end_to_end")
        trainer().test(module, datamodule=dm, verbose=False)
    finally:
        module.hparams.inference = "oracle"
    pred = _read(tmp_path)
    moments = {v: e["bounds"] for vs in pred["moment_retrieval"].values() for v, e in vs.items()}
    assert set(pred["moment_segmentation"]) == set(moments) == set(pred["step_captioning"])
    for video, (s, e) in moments.items():
        steps = pred["moment_segmentation"][video]["bounds"]
        assert steps[0][0] == s and steps[-1][1] == e  # segments of the PREDICTED moment
        assert pred["step_captioning"][video]["bounds"] == steps  # captions of the predicted steps
        assert len(pred["step_captioning"][video]["captions"]) == len(steps)


def test_predict_on_val(trained, tmp_path, tokenizer):
    module = trained.module
    module.output_dir = tmp_path
    dm = HiRESTDataModule(trained.hirest, trained.features, tokenizer=tokenizer, predict_split="val")
    batches = trainer().predict(module, datamodule=dm)
    pred = _read(tmp_path)
    per_batch = {v for loader in batches for out in loader for v in out["moment_segmentation"]}
    assert per_batch == set(pred["moment_segmentation"])
    assert set(pred["moment_segmentation"]) == {a.video for a in trained.hirest.step_annotations("val")}


def test_checkpoint_round_trip(trained, tmp_path):
    path = tmp_path / "joint.ckpt"
    trained.trainer.save_checkpoint(path)
    raw = torch.load(path, map_location="cpu", weights_only=True)  # plain hyper-parameters only
    assert "tokenizer" not in raw["hyper_parameters"] and raw["hyper_parameters"]["hidden_dim"] == 32
    loaded = HiRESTJointModule.load_from_checkpoint(path, tokenizer=trained.module.tokenizer).eval()
    assert dict(loaded.hparams) == {**dict(trained.module.hparams)}
    for key, value in trained.module.state_dict().items():
        assert torch.equal(value, loaded.state_dict()[key]), key
    batch = next(iter(trained.dm.test_dataloader()[2]))
    assert loaded.caption(batch["frames"], batch["query"], batch["asr"]) == \
        trained.module.caption(batch["frames"], batch["query"], batch["asr"])


def test_bad_arguments():
    with pytest.raises(ValueError, match="inference"):
        HiRESTJointModule(**TINY, inference="chain")
    with pytest.raises(ValueError, match="schedule"):
        HiRESTJointModule(**TINY, schedule="cosine")


def test_tokenizer_must_match_the_model(tokenizer):
    with pytest.raises(ValueError, match="does not match"):
        _ = HiRESTJointModule(**TINY, eos_id=5, tokenizer=tokenizer).tokenizer
    assert HiRESTJointModule(**TINY, tokenizer=tokenizer).tokenizer is tokenizer


def test_defaults_are_the_papers():
    import inspect

    model = {k: p.default for k, p in inspect.signature(HiRESTJointModule).parameters.items()}
    assert {k: model[k] for k in ("video_dim", "query_dim", "asr_dim", "embed_dim", "hidden_dim", "num_layers",
                                  "num_heads", "max_frames", "decoder_layers", "max_words", "caption_frames",
                                  "beam_size", "segmentation_max_iterations", "min_step_seconds",
                                  "warmup_fraction", "vocab_size", "bos_id", "eos_id", "pad_id")} == {
        "video_dim": 1024, "query_dim": 1024, "asr_dim": 384, "embed_dim": 512, "hidden_dim": 768, "num_layers": 2,
        "num_heads": 12, "max_frames": 2048, "decoder_layers": 2, "max_words": 48, "caption_frames": 20,
        "beam_size": 3, "segmentation_max_iterations": 20, "min_step_seconds": 5,
        "warmup_fraction": 0.1, "vocab_size": 30522, "bos_id": 101, "eos_id": 102, "pad_id": 0}
    from models.hirest_joint import PAPER_OPTIMIZER

    assert (PAPER_OPTIMIZER.func, PAPER_OPTIMIZER.keywords) == (torch.optim.AdamW, {"lr": 1e-5, "weight_decay": 0.01})
    data = {k: p.default for k, p in inspect.signature(HiRESTDataModule).parameters.items()}
    assert (data["batch_size"], data["max_frames"], data["max_words"], data["caption_frames"]) == (5, 2048, 48, 20)


def test_captions_are_scored_only_with_oracle_steps_and_java(monkeypatch):
    from spacewalk.training import hirest

    monkeypatch.setattr(hirest.shutil, "which", lambda name: "/usr/bin/java")
    assert hirest.captions_unscored("oracle") is None
    assert "model.inference=oracle" in hirest.captions_unscored("end_to_end")
    monkeypatch.setattr(hirest.shutil, "which", lambda name: None)
    assert "java is not on PATH" in hirest.captions_unscored("oracle")
