"""Tiny randomly initialised image-text-to-text models of four transformers families (Qwen2.5-VL, LLaVA-OneVision,
Qwen3-VL, Gemma 3), built from
config objects with a byte-level tokenizer made here: no download, no network, a few MB on disk. They
exercise the real code path of the transformers backend (processor, chat template, video tokens, batched
greedy generation) in seconds on a CPU; their replies are noise (random weights), so their accuracy is
not a result.

    python -m spacewalk.multiple_choice.tiny_models --out DIR     # writes DIR/<family> for each family
    python evaluate.py data=egoschema model=mc_transformers model.model=DIR/qwen3_vl   # the family: its model_type
    python evaluate.py data=egoschema model=mc_qwen2_5_vl model.model=DIR/qwen2_5_vl model.num_frames=4
    python evaluate.py data=egocross model=mc_llava_onevision model.model=DIR/llava_onevision model.num_frames=4

Each folder is a regular checkpoint (save_pretrained of the model and its processor), loaded by the backend
like any local model. The tests build the same models in memory (`build(family)`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from spacewalk.core.arguments import output_folder
from spacewalk.core.command_errors import user_errors_reported
from spacewalk.core.errors import ConfigError

FAMILIES = ("qwen2_5_vl", "llava_onevision", "qwen3_vl", "gemma3")

# a ChatML template of the kind the Qwen and LLaVA families ship, with each family's visual token in place of
# VIDEO / IMAGE
TEMPLATE = ("{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
            "{% for part in message['content'] %}{% if part['type'] == 'video' %}VIDEO"
            "{% elif part['type'] == 'image' %}IMAGE"
            "{% else %}{{ part['text'] }}\n{% endif %}{% endfor %}<|im_end|>\n{% endfor %}"
            "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def tiny_tokenizer(special: list[str]):
    """A byte-level tokenizer (one token per byte, no merges) with the family's special tokens."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from tokenizers.pre_tokenizers import ByteLevel
    from transformers import PreTrainedTokenizerFast

    vocab = {token: i for i, token in enumerate(special)}
    for char in sorted(ByteLevel.alphabet()):
        vocab.setdefault(char, len(vocab))
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens(special)
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, eos_token="<|im_end|>", pad_token="<|endoftext|>")


def _qwen_token_ids(tok) -> tuple[dict[str, int], dict]:
    """The Qwen-VL configs' visual token ids and special ids, from the tiny tokenizer (Qwen2.5-VL and Qwen3-VL)."""
    ids = {name: tok.convert_tokens_to_ids(token) for name, token in [
        ("image_token_id", "<|image_pad|>"), ("video_token_id", "<|video_pad|>"),
        ("vision_start_token_id", "<|vision_start|>"), ("vision_end_token_id", "<|vision_end|>")]}
    return ids, dict(eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, bos_token_id=None)


def tiny_qwen2_5_vl(seed: int = 0):
    """(model, processor): one layer of width 32 in each tower; frames resized to 56x56 (one token per pair of
    frames after the 2x2 merge)."""
    import torch
    from transformers import (
        Qwen2_5_VLConfig,
        Qwen2_5_VLForConditionalGeneration,
        Qwen2_5_VLProcessor,
        Qwen2VLImageProcessor,
    )
    from transformers.models.qwen2_vl.video_processing_qwen2_vl import Qwen2VLVideoProcessor

    tok = tiny_tokenizer(["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>",
                          "<|image_pad|>", "<|video_pad|>"])
    template = TEMPLATE.replace("VIDEO", "<|vision_start|><|video_pad|><|vision_end|>").replace(
        "IMAGE", "<|vision_start|><|image_pad|><|vision_end|>")
    pixels = dict(min_pixels=56 * 56, max_pixels=56 * 56)
    processor = Qwen2_5_VLProcessor(image_processor=Qwen2VLImageProcessor(**pixels), tokenizer=tok,
                                    video_processor=Qwen2VLVideoProcessor(**pixels), chat_template=template)
    ids, special = _qwen_token_ids(tok)
    config = Qwen2_5_VLConfig(
        text_config=dict(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=4096,
                         rope_scaling={"type": "mrope", "mrope_section": [2, 2, 4]}, **special),
        vision_config=dict(depth=1, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=32,
                           patch_size=14, spatial_merge_size=2, temporal_patch_size=2, fullatt_block_indexes=[0],
                           window_size=56),
        **ids, **special)
    torch.manual_seed(seed)
    return Qwen2_5_VLForConditionalGeneration(config), processor


def tiny_llava_onevision(seed: int = 0):
    """(model, processor): a one-layer SigLIP tower on 28x28 frames and a one-layer Qwen2 of width 32."""
    import torch
    from transformers import (
        LlavaOnevisionConfig,
        LlavaOnevisionForConditionalGeneration,
        LlavaOnevisionImageProcessor,
        LlavaOnevisionProcessor,
        LlavaOnevisionVideoProcessor,
    )

    tok = tiny_tokenizer(["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<image>", "<video>"])
    size = {"height": 28, "width": 28}
    processor = LlavaOnevisionProcessor(
        image_processor=LlavaOnevisionImageProcessor(size=size, image_grid_pinpoints=[[28, 28]]), tokenizer=tok,
        video_processor=LlavaOnevisionVideoProcessor(size=size), num_image_tokens=4,
        vision_feature_select_strategy="full",
        chat_template=TEMPLATE.replace("VIDEO", "<video>\n").replace("IMAGE", "<image>\n"))
    special = dict(eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, bos_token_id=None)
    config = LlavaOnevisionConfig(
        text_config=dict(model_type="qwen2", vocab_size=len(tok), hidden_size=32, intermediate_size=64,
                         num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1, **special),
        vision_config=dict(model_type="siglip_vision_model", image_size=28, patch_size=14, hidden_size=32,
                           intermediate_size=64, num_hidden_layers=1, num_attention_heads=2),
        image_token_index=tok.convert_tokens_to_ids("<image>"), video_token_index=tok.convert_tokens_to_ids("<video>"),
        vision_feature_select_strategy="full", vision_feature_layer=-1, image_grid_pinpoints=[[28, 28]], **special)
    torch.manual_seed(seed)
    return LlavaOnevisionForConditionalGeneration(config), processor


def tiny_qwen3_vl(seed: int = 0):
    """(model, processor): one layer of width 32 in each tower (16-pixel patches, 2x2 merge, one deepstack layer);
    frames resized to 64x64 (the image processor's bounds; a clip's frames x area within the video processor's),
    one token per pair of frames; its processor writes each frame pair's time into the prompt."""
    import torch
    from transformers import Qwen2VLImageProcessor, Qwen3VLConfig, Qwen3VLForConditionalGeneration, Qwen3VLProcessor
    from transformers.models.qwen3_vl.video_processing_qwen3_vl import Qwen3VLVideoProcessor

    tok = tiny_tokenizer(["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>",
                          "<|image_pad|>", "<|video_pad|>"])
    template = TEMPLATE.replace("VIDEO", "<|vision_start|><|video_pad|><|vision_end|>").replace(
        "IMAGE", "<|vision_start|><|image_pad|><|vision_end|>")
    processor = Qwen3VLProcessor(
        image_processor=Qwen2VLImageProcessor(size={"shortest_edge": 64 * 64, "longest_edge": 64 * 64}, patch_size=16,
                                              merge_size=2),
        # a clip's bound is on frames x height x width: 64x64 frames for clips of up to 64 frames
        video_processor=Qwen3VLVideoProcessor(size={"shortest_edge": 64 * 64, "longest_edge": 64 * 64 * 64},
                                              cap_pixels_per_frame=False),
        tokenizer=tok, chat_template=template)
    ids, special = _qwen_token_ids(tok)
    config = Qwen3VLConfig(
        text_config=dict(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1, head_dim=16, max_position_embeddings=4096,
                         rope_scaling={"rope_type": "default", "mrope_section": [2, 2, 4], "mrope_interleaved": True},
                         **special),
        vision_config=dict(depth=1, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=32,
                           patch_size=16, spatial_merge_size=2, temporal_patch_size=2, num_position_embeddings=16,
                           deepstack_visual_indexes=[0]),
        **ids, **special)
    torch.manual_seed(seed)
    return Qwen3VLForConditionalGeneration(config), processor


def tiny_gemma3(seed: int = 0):
    """(model, processor): a one-layer SigLIP tower on 28x28 images (one soft token each) and a one-layer Gemma 3
    of width 32; no video input (a clip's frames are images)."""
    import torch
    from transformers import (
        Gemma3Config,
        Gemma3ForConditionalGeneration,
        Gemma3ImageProcessor,
        Gemma3Processor,
        PreTrainedTokenizerFast,
    )

    tokens = {"boi_token": "<start_of_image>", "eoi_token": "<end_of_image>", "image_token": "<image_soft_token>"}
    byte_level = tiny_tokenizer(["<|endoftext|>", "<|im_start|>", "<|im_end|>", *tokens.values()])
    # the processor reads its image tokens off the tokenizer's named special tokens
    tok = PreTrainedTokenizerFast(tokenizer_object=byte_level.backend_tokenizer, eos_token="<|im_end|>",
                                  pad_token="<|endoftext|>", extra_special_tokens=tokens)
    processor = Gemma3Processor(image_processor=Gemma3ImageProcessor(size={"height": 28, "width": 28}), tokenizer=tok,
                                image_seq_length=1,
                                chat_template=TEMPLATE.replace("IMAGE", "<start_of_image>").replace("VIDEO", ""))
    special = dict(eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, bos_token_id=None)
    ids = {f"{name}_index": tok.convert_tokens_to_ids(token) for name, token in
           [("boi_token", tokens["boi_token"]), ("eoi_token", tokens["eoi_token"]),
            ("image_token", tokens["image_token"])]}
    config = Gemma3Config(
        text_config=dict(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1, head_dim=16, sliding_window=64, **special),
        vision_config=dict(image_size=28, patch_size=14, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                           num_attention_heads=2),
        mm_tokens_per_image=1, **ids, **special)
    torch.manual_seed(seed)
    return Gemma3ForConditionalGeneration(config), processor


BUILDERS = {"qwen2_5_vl": tiny_qwen2_5_vl, "llava_onevision": tiny_llava_onevision, "qwen3_vl": tiny_qwen3_vl,
            "gemma3": tiny_gemma3}


def build(family: str, seed: int = 0):
    """The tiny (model, processor) of `family`, in memory."""
    if family not in BUILDERS:
        raise ConfigError(f"unknown family {family!r}; choose from {sorted(BUILDERS)}")
    return BUILDERS[family](seed)


def write(out: str | Path, families: Sequence[str] = FAMILIES, seed: int = 0) -> dict[str, Path]:
    """Save each family's tiny checkpoint (model + processor) to out/<family>/; return the folders. A folder is
    written under a temporary name and renamed, so an interrupted run leaves no half checkpoint behind."""
    import shutil

    out = Path(out)
    folders = {}
    for family in families:
        model, processor = build(family, seed)
        final, partial = out / family, out / f".{family}.partial"
        shutil.rmtree(partial, ignore_errors=True)
        model.save_pretrained(partial)
        processor.save_pretrained(partial)
        shutil.rmtree(final, ignore_errors=True)
        partial.rename(final)
        folders[family] = final
    return folders


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m spacewalk.multiple_choice.tiny_models",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=output_folder, required=True, help="writes OUT/<family>/ for each family")
    parser.add_argument("--family", choices=FAMILIES, action="append",
                        help="only this family (repeatable; default: all)")
    parser.add_argument("--seed", type=int, default=0, help="the random initialisation's seed")
    args = parser.parse_args(argv)
    with user_errors_reported():
        written = write(args.out, args.family or FAMILIES, args.seed)
    for family, folder in written.items():
        print(f"{family}: {folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
