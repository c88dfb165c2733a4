"""The HiREST joint model's network (docs/hirest.md, The paper's models): the shared encoder, the three task heads and
the caption decoder (models/hirest_joint.py trains it; models/hirest_joint_losses.py says what it is trained on).

Architecture (the authors' j-min/HiREST `modeling.py` + CLIP4Caption, re-written; every size is a
constructor argument with the paper's default):
- input per frame (1 fps): LayerNorm(Linear(frame -> 512)) * unit(Linear(query -> 512))
  + Linear(LayerNorm(ASR 384)) (the subtitle embedding on each second it covers, zeros in silence)
  + MLP(time scaled to [-1, 1]) + mask embedding (1 inside the region of interest)
  + boundary embedding (segmentation only: 1 on the boundaries found so far);
- shared encoder: Linear(512 -> 768) + learned positions (2048) + LayerNorm, 2 post-LN transformer layers
  (768, 12 heads, GELU); random init (BERT-style N(0, 0.02) on the CLIP4Caption parts, PyTorch's defaults
  on the input layers, as the original before it loads CLIP4Caption's weights);
- moment retrieval: Linear(768, 1) start and end heads, BCE against one-hot frames over the video's
  frames, independent argmax;
- moment segmentation: Linear(768, 1) over frames, cross-entropy for the next boundary; frames outside
  [current step start, moment end] are masked and the boundaries so far are marked (teacher forcing);
- step captioning: the step's input frames cut to the first 20 or stretched to 20 by repetition, encoded,
  and a 2-layer post-LN transformer decoder (BERT-base uncased WordPiece, 48 tokens, embeddings tied to
  the output layer) with cross-attention; beam search (3).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from spacewalk.benchmarks.hirest.joint_model_io import BERT_VOCAB_SIZE


def _bert_init(module: nn.Module) -> None:
    if isinstance(module, (nn.Linear, nn.Embedding)):
        module.weight.data.normal_(0.0, 0.02)
    if isinstance(module, nn.Linear) and module.bias is not None:
        module.bias.data.zero_()
    if isinstance(module, nn.LayerNorm):
        module.weight.data.fill_(1.0)
        module.bias.data.zero_()


class JointEncoder(nn.Module):
    """Input embedding per frame + the shared transformer encoder: [B, T, *] -> [B, T, hidden_dim]."""

    def __init__(self, video_dim: int, query_dim: int, asr_dim: int = 384, use_asr: bool = True,
                 embed_dim: int = 512, hidden_dim: int = 768, num_layers: int = 2, num_heads: int = 12,
                 ffn_dim: int = 3072, max_frames: int = 2048, dropout: float = 0.1):
        super().__init__()
        self.max_frames = max_frames
        self.video_proj = nn.Linear(video_dim, embed_dim)
        self.video_norm = nn.LayerNorm(embed_dim)
        self.query_proj = nn.Linear(query_dim, embed_dim)
        self.asr = nn.Sequential(nn.LayerNorm(asr_dim), nn.Linear(asr_dim, embed_dim)) if use_asr else None
        self.temporal = nn.Sequential(nn.Linear(1, embed_dim), nn.Tanh(), nn.Linear(embed_dim, embed_dim))
        self.mask_embed = nn.Embedding(2, embed_dim)
        self.boundary_embed = nn.Embedding(2, embed_dim)
        # CLIP4Caption's visual encoder
        self.proj = nn.Linear(embed_dim, hidden_dim)
        self.positions = nn.Embedding(max_frames, hidden_dim)
        self.norm = nn.LayerNorm(hidden_dim, eps=1e-12)
        self.dropout = nn.Dropout(dropout)
        layer = nn.TransformerEncoderLayer(hidden_dim, num_heads, ffn_dim, dropout, activation="gelu",
                                           batch_first=True, norm_first=False)
        self.layers = nn.TransformerEncoder(layer, num_layers, enable_nested_tensor=False)
        for part in (self.proj, self.positions, self.norm, self.layers):
            part.apply(_bert_init)

    @staticmethod
    def scaled_time(frame_mask: torch.Tensor) -> torch.Tensor:
        """[B, T]: frame t of n valid frames at -1 + 2t / (n - 1) (-1 for n = 1), 0 on padding."""
        n = frame_mask.sum(1, keepdim=True).to(torch.float32)
        t = torch.arange(frame_mask.shape[1], device=frame_mask.device, dtype=torch.float32)[None]
        return torch.where(frame_mask, -1.0 + 2.0 * t / (n - 1).clamp(min=1.0), torch.zeros_like(t))

    def forward(self, frames: torch.Tensor, query: torch.Tensor, asr: torch.Tensor | None,
                frame_mask: torch.Tensor, region_mask: torch.Tensor,
                boundary_mask: torch.Tensor | None = None) -> torch.Tensor:
        b, t, _ = frames.shape
        if t > self.max_frames:
            raise ValueError(f"{t} frames, but the encoder has positions for {self.max_frames} "
                             "(the data module cuts videos to max_frames)")
        x = self.video_norm(self.video_proj(frames)) * F.normalize(self.query_proj(query), dim=-1)[:, None]
        if self.asr is not None:
            x = x + self.asr(asr)
        if boundary_mask is not None:
            x = x + self.boundary_embed(boundary_mask.long())
        x = x + self.temporal(self.scaled_time(frame_mask).to(x.dtype)[..., None])
        x = x + self.mask_embed(region_mask.long())
        h = self.proj(x) + self.positions(torch.arange(t, device=frames.device))[None]
        h = self.dropout(self.norm(h))
        return self.layers(h, src_key_padding_mask=~frame_mask)


class CaptionDecoder(nn.Module):
    """CLIP4Caption's decoder: token + position embeddings, post-LN layers (self-attention, cross-attention,
    feed-forward), a dense-GELU-LayerNorm transform and an output layer tied to the token embeddings."""

    def __init__(self, vocab_size: int = BERT_VOCAB_SIZE, hidden_dim: int = 768, num_layers: int = 2,
                 num_heads: int = 12, ffn_dim: int = 3072, max_words: int = 48, dropout: float = 0.1):
        super().__init__()
        self.max_words = max_words
        self.tokens = nn.Embedding(vocab_size, hidden_dim)
        self.positions = nn.Embedding(max_words, hidden_dim)
        self.norm = nn.LayerNorm(hidden_dim, eps=1e-12)
        self.dropout = nn.Dropout(dropout)
        layer = nn.TransformerDecoderLayer(hidden_dim, num_heads, ffn_dim, dropout, activation="gelu",
                                           batch_first=True, norm_first=False)
        self.layers = nn.TransformerDecoder(layer, num_layers)
        self.transform = nn.Sequential(nn.Linear(hidden_dim, hidden_dim), nn.GELU(),
                                       nn.LayerNorm(hidden_dim, eps=1e-12))
        self.bias = nn.Parameter(torch.zeros(vocab_size))
        self.apply(_bert_init)

    def forward(self, tokens: torch.Tensor, memory: torch.Tensor,
                memory_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Logits [B, L, V] for the next token at every position (causal; right padding needs no mask)."""
        length = tokens.shape[1]
        if length > self.max_words:
            raise ValueError(f"{length} tokens, but the decoder has positions for {self.max_words}")
        h = self.tokens(tokens) + self.positions(torch.arange(length, device=tokens.device))[None]
        h = self.dropout(self.norm(h))
        causal = nn.Transformer.generate_square_subsequent_mask(length, device=tokens.device, dtype=h.dtype)
        h = self.layers(h, memory, tgt_mask=causal, tgt_is_causal=True,
                        memory_key_padding_mask=None if memory_mask is None else ~memory_mask)
        return self.transform(h) @ self.tokens.weight.t() + self.bias


class HiRESTJointModel(nn.Module):
    """Encoder + the three task heads. Inputs follow the batch contract of models/hirest_joint.py."""

    def __init__(self, video_dim: int, query_dim: int, asr_dim: int = 384, use_asr: bool = True,
                 embed_dim: int = 512, hidden_dim: int = 768, num_layers: int = 2, num_heads: int = 12,
                 ffn_dim: int = 3072, max_frames: int = 2048, dropout: float = 0.1,
                 vocab_size: int = BERT_VOCAB_SIZE, decoder_layers: int = 2, max_words: int = 48):
        super().__init__()
        self.encoder = JointEncoder(video_dim, query_dim, asr_dim, use_asr, embed_dim, hidden_dim, num_layers,
                                    num_heads, ffn_dim, max_frames, dropout)
        self.start_head = nn.Linear(hidden_dim, 1)
        self.end_head = nn.Linear(hidden_dim, 1)
        self.boundary_head = nn.Linear(hidden_dim, 1)
        self.decoder = CaptionDecoder(vocab_size, hidden_dim, decoder_layers, num_heads, ffn_dim, max_words,
                                      dropout)

    def moment_logits(self, frames, query, asr, frame_mask) -> tuple[torch.Tensor, torch.Tensor]:
        """Start and end logits [B, T]; the region is the whole video."""
        h = self.encoder(frames, query, asr, frame_mask, frame_mask)
        return self.start_head(h).squeeze(-1), self.end_head(h).squeeze(-1)

    def boundary_logits(self, frames, query, asr, frame_mask, region_mask, boundary_mask) -> torch.Tensor:
        """Next-boundary logits [B, T], -inf outside the region."""
        h = self.encoder(frames, query, asr, frame_mask, region_mask, boundary_mask)
        return self.boundary_head(h).squeeze(-1).masked_fill(~(region_mask & frame_mask), -math.inf)

    def caption_memory(self, frames, query, asr) -> torch.Tensor:
        """Encoder output [B, L, H] of steps' L frames (all valid, all inside the region)."""
        mask = torch.ones(frames.shape[:2], dtype=torch.bool, device=frames.device)
        return self.encoder(frames, query, asr, mask, mask)
