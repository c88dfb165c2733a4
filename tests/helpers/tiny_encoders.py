"""The tiny encoders: the one factory of every test that needs a video encoder. Randomly initialised
configurations of the real classes (32x32 frames, 4 frames per clip, 16-d unless asked otherwise), so no test
fetches weights; each call gives the same network."""

from __future__ import annotations

# open_clip's ViT-B-32 architecture, shrunk
TINY_CLIP = dict(embed_dim=16, vision_cfg=dict(image_size=32, layers=2, width=32, head_width=16, patch_size=16),
                 text_cfg=dict(context_length=16, vocab_size=49408, width=16, heads=2, layers=1))


def tiny_clip(num_frames: int = 4, layers: int = 2, batch_size: int = 64, **model_cfg):
    """An open_clip image-text model as a video encoder (its weights from init_seed 0), `num_frames` per clip;
    `model_cfg` overrides TINY_CLIP's keys (embed_dim=8: another network)."""
    from spacewalk.encoders.openclip import open_clip_video_encoder

    cfg = {**TINY_CLIP, "vision_cfg": {**TINY_CLIP["vision_cfg"], "layers": layers}, **model_cfg}
    return open_clip_video_encoder("ViT-B-32", random_init=True, init_seed=0, model_cfg=cfg, num_frames=num_frames,
                                   batch_size=batch_size)


def tiny_clip_tokenizer():
    """A CLIP tokenizer over the lowercase letters (54 tokens): tiny_xclip's text side."""
    from transformers import CLIPTokenizer

    vocab = {"<|startoftext|>": 0, "<|endoftext|>": 1}
    for c in "abcdefghijklmnopqrstuvwxyz":
        vocab[c] = len(vocab)
        vocab[c + "</w>"] = len(vocab)
    return CLIPTokenizer(vocab=vocab, merges=[])


def tiny_xclip(layers: int = 1, projection_dim: int = 16, batch_size: int = 8):
    """X-CLIP (transformers) with `layers` ViT blocks and its text tower (tiny_clip_tokenizer). Drawn from
    torch's global generator seeded 0 here, as these tests always built it."""
    import torch
    from transformers import XCLIPConfig

    from spacewalk.encoders.hf_video import xclip_video_encoder

    torch.manual_seed(0)
    config = XCLIPConfig(
        text_config=dict(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, max_position_embeddings=24),
        vision_config=dict(image_size=32, patch_size=16, hidden_size=16, intermediate_size=32, num_hidden_layers=layers,
                           num_attention_heads=2, num_frames=4, mit_hidden_size=projection_dim,
                           mit_intermediate_size=32, mit_num_hidden_layers=1, mit_num_attention_heads=2),
        projection_dim=projection_dim, prompt_layers=1, prompt_num_attention_heads=2)
    return xclip_video_encoder(config=config, tokenizer=tiny_clip_tokenizer(), batch_size=batch_size)


def tiny_videomae(layers: int = 1, hidden_size: int = 16, batch_size: int = 8):
    """VideoMAE (transformers, video only) with `layers` blocks, 4 frames in tubelets of 2. Drawn from torch's
    global generator seeded 0 here, as these tests always built it."""
    import torch
    from transformers import VideoMAEConfig

    from spacewalk.encoders.hf_video import videomae_video_encoder

    torch.manual_seed(0)
    config = VideoMAEConfig(image_size=32, patch_size=16, num_frames=4, tubelet_size=2, hidden_size=hidden_size,
                            intermediate_size=32, num_hidden_layers=layers, num_attention_heads=2)
    return videomae_video_encoder(config=config, batch_size=batch_size)


