"""The lean LFB TF encoder (models/lean_transformer.py) against nn.TransformerEncoder itself: the same outputs and
gradients in training (dropout masks included) and in evaluation, and the same training run of the lfb_tf recipe
at w = 5 min on the synthetic default."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from models.heads import LFBTransformer, query_cell
from models.lean_transformer import encode_at

D, HEADS, FF = 16, 4, 32


def plain_stack(norm_first: bool, dropout: float, layers: int = 2) -> nn.TransformerEncoder:
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(D, HEADS, FF, dropout, batch_first=True, norm_first=norm_first)
    return nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)


def window_batch(batch: int = 10, cells: int = 7):
    """Cells [B, M, D], key padding [B, M] (True = padding, at the end of each window as a clipped window
    has it) and a query cell inside each window."""
    g = torch.Generator().manual_seed(1)
    x = torch.randn(batch, cells, D, generator=g)
    lengths = torch.randint(2, cells + 1, (batch,), generator=g)
    padding = torch.arange(cells)[None] >= lengths[:, None]
    query_pos = (torch.rand(batch, generator=g) * lengths).long()
    return x, padding, query_pos


def outputs_and_grads(encoder, run, x):
    x = x.clone().requires_grad_(True)
    torch.manual_seed(5)  # the dropout masks' draws
    out = run(encoder, x)
    weights = torch.linspace(-1, 1, out.numel()).reshape(out.shape)
    (out * weights).sum().backward()
    return out.detach(), x.grad, {n: p.grad for n, p in encoder.named_parameters()}


@pytest.mark.parametrize("norm_first", [False, True], ids=["post_norm", "pre_norm"])
@pytest.mark.parametrize("chunk", [3, 64], ids=["chunks_of_3", "one_chunk"])
@pytest.mark.parametrize("layers", [1, 2])
def test_a_training_step_equals_the_plain_stack_dropout_included(norm_first, chunk, layers):
    x, padding, query_pos = window_batch()
    plain = plain_stack(norm_first, dropout=0.1, layers=layers).train()
    lean = copy.deepcopy(plain)
    out, x_grad, grads = outputs_and_grads(
        plain, lambda enc, x: query_cell(enc(x, src_key_padding_mask=padding), query_pos), x)
    lean_out, lean_x_grad, lean_grads = outputs_and_grads(
        lean, lambda enc, x: encode_at(enc, x, padding, query_pos, chunk), x)
    # the same masks: the lean path drops exactly what the plain stack drops (float rounding apart: the last layer
    # runs one row, the scale sits on q alone)
    torch.testing.assert_close(lean_out, out, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(lean_x_grad, x_grad, rtol=1e-5, atol=1e-6)
    assert grads.keys() == lean_grads.keys()
    for name in grads:
        torch.testing.assert_close(lean_grads[name], grads[name], rtol=1e-5, atol=1e-6, msg=name)
    # dropout did drop something, so the equality above is the masks', not an absence of masks
    with torch.no_grad():
        no_dropout = query_cell(plain.eval()(x, src_key_padding_mask=padding), query_pos)
    assert (no_dropout - out).abs().max() > 1e-2


def test_evaluation_equals_the_plain_stack_and_ignores_padding():
    x, padding, query_pos = window_batch()
    plain = plain_stack(False, dropout=0.1).eval()
    with torch.no_grad():
        expected = query_cell(plain(x, src_key_padding_mask=padding), query_pos)
        got = encode_at(plain, x, padding, query_pos, chunk=4)
        x_other = x.masked_fill(padding[..., None], 7.0)  # what padding holds changes nothing
        other = encode_at(plain, x_other, padding, query_pos, chunk=4)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(other, got, rtol=0, atol=0)


def test_the_lean_head_and_the_plain_head_share_parameters_and_checkpoints():
    torch.manual_seed(0)
    lean = LFBTransformer(D, nhead=HEADS, dim_feedforward=FF)
    torch.manual_seed(0)
    plain = LFBTransformer(D, nhead=HEADS, dim_feedforward=FF, lean=False)
    assert lean.state_dict().keys() == plain.state_dict().keys()
    plain.load_state_dict(lean.state_dict())


def test_an_encoder_it_does_not_compute_is_refused():
    x, padding, query_pos = window_batch()
    layer = nn.TransformerEncoderLayer(D, HEADS, FF, batch_first=False)
    with pytest.raises(TypeError, match="batch_first"):
        encode_at(nn.TransformerEncoder(layer, 1, enable_nested_tensor=False), x, padding, query_pos)
    with pytest.raises(ValueError, match="final norm"):
        encode_at(nn.TransformerEncoder(nn.TransformerEncoderLayer(D, HEADS, FF, batch_first=True), 1,
                                        norm=nn.LayerNorm(D), enable_nested_tensor=False), x, padding, query_pos)


# ----------------------------------------------------------------------- the lfb_tf recipe on the synthetic default

def lfb_tf_training(datamodule, lean: bool, steps: int):
    """The lfb_tf recipe as conf/model/lfb_tf.yaml builds it (lean set), trained `steps` batches from seed 0:
    the loss of every step, the first step's gradients and the parameters after the last step."""
    import hydra
    from omegaconf import open_dict

    from spacewalk.training.tasks import take_served_tasks

    from helpers.commands import compose_train

    cfg = compose_train("model=lfb_tf", f"model.head.lean={lean}")
    take_served_tasks(cfg)
    with open_dict(cfg):
        cfg.model.head.dim = datamodule.feature_dim
    torch.manual_seed(0)
    model = hydra.utils.instantiate(cfg.model).train()
    optimizer = model.optimizer_factory(params=list(model.parameters()))
    torch.manual_seed(1)  # the dropout masks
    losses, first_grads = [], None
    for step, batch in enumerate(datamodule.train_dataloader()):
        if step == steps:
            break
        loss, _ = model.step_loss(model(batch), batch["label"])
        optimizer.zero_grad()
        loss.backward()
        if first_grads is None:
            first_grads = {n: p.grad.clone() for n, p in model.named_parameters()}
        optimizer.step()
        losses.append(loss.item())
    return losses, first_grads, {n: p.detach().clone() for n, p in model.named_parameters()}


@pytest.mark.slow
def test_lfb_tf_trains_the_same_lean_or_plain_at_5_min_on_the_synthetic_default(synthetic_spacewalk18, tmp_path):
    from datamodules.step_recognition import StepRecognitionDataModule
    from spacewalk.benchmarks.spacewalk18.data.dataset import Spacewalk18

    from helpers.fakes import FakeText

    # the text vectors are MiniLM's width, fixed per text (the encoder plays no part in what is compared, and
    # MiniLM's bank of the ten recordings takes minutes on a loaded machine). Batches of 128: four of the recipe's
    # checkpointed chunks of 32 samples, the last one whole (the recipe's 512 makes 16 such chunks and takes four
    # times as long; the samples are independent of each other, so what is compared is the same per sample)
    dm = StepRecognitionDataModule(Spacewalk18(synthetic_spacewalk18()), tmp_path / "bank",
                                   text_encoder=FakeText(dim=384), context_seconds=300.0, modalities="text",
                                   batch_size=128, cells=True, seed=0)
    dm.setup()
    steps, lr = 3, 1e-4  # lr: conf/optimizer/adam.yaml's
    plain_losses, plain_grads, plain_params = lfb_tf_training(dm, lean=False, steps=steps)
    lean_losses, lean_grads, lean_params = lfb_tf_training(dm, lean=True, steps=steps)
    assert len(plain_losses) == steps and plain_losses[-1] != plain_losses[0]  # it trained
    # every step's loss: the same masks and the same updates (one mask drawn differently moves a loss by far more
    # than 1e-5)
    assert lean_losses == pytest.approx(plain_losses, rel=1e-5)
    # the first step's gradients, from the same parameters: float rounding apart, to 1e-5 of each tensor's largest
    # (the key bias's gradient is float noise on both paths: a softmax ignores a shift common to all its keys)
    for name, grad in plain_grads.items():
        torch.testing.assert_close(lean_grads[name], grad, rtol=1e-4, atol=1e-5 * float(grad.abs().max()),
                                   msg=name)
    # the parameters after the steps: Adam divides each gradient by its own running scale, so an element whose
    # gradient is float noise (the key bias) moves by up to lr a step on either path, differently; no element
    # may differ by more than that
    for name, value in plain_params.items():
        assert (lean_params[name] - value).abs().max() <= steps * lr, name
