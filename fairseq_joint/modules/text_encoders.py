"""Document encoders of GILE (Pappas & Henderson 2019, Sec. 2.1): WAN and HAN.

* WAN (word attention network, the BioASQ baseline): word vectors -> encoder g_w (Eq. 1) -> word
  attention (Eq. 2) -> document vector h.
* HAN (hierarchical attention network): the same at the word level gives one vector s_i per sentence
  (Eq. 2), then a sentence encoder g_s and sentence attention give h.

g_w / g_s are ``dense`` (an activated linear layer, the paper's DENSE), ``gru`` or ``bigru``. The
attention of Eq. 2 is ``α_t = softmax_t(v_tᵀ u)`` with ``v_t = tanh(W h_t + b)`` (f_w, parameters W_w) and
a learned context vector u; padding positions get no weight.
"""

from typing import List, Optional

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor

from fairseq_joint.modules.output_layers import identity_init_

ENCODER_CHOICES = ("wan", "han")
LAYER_CHOICES = ("dense", "gru", "bigru")


class AttentionPooling(nn.Module):
    """Eq. 2: ``Σ_t softmax_t(tanh(W h_t + b)ᵀ u) h_t`` over the unmasked positions."""

    def __init__(self, dim: int, attention_dim: int):
        super().__init__()
        self.proj = nn.Linear(dim, attention_dim)
        self.context = nn.Parameter(torch.empty(attention_dim).normal_(0, attention_dim ** -0.5))

    def forward(self, states: Tensor, mask: Tensor) -> Tensor:
        """states (B, T, D), mask (B, T) True where real; rows without any real position give zeros."""
        energy = torch.tanh(self.proj(states)) @ self.context
        energy = energy.masked_fill(~mask, float("-inf"))
        alpha = torch.softmax(energy, dim=-1).nan_to_num(0.0)
        return torch.einsum("bt,btd->bd", alpha, states)


class SequenceLayer(nn.Module):
    """g_w or g_s of Eq. 1: dense (activated linear), GRU or bidirectional GRU, output size ``dim``."""

    def __init__(self, kind: str, input_dim: int, dim: int, activation: str):
        super().__init__()
        self.kind = kind
        if kind == "dense":
            self.layer = nn.Linear(input_dim, dim)
            self.activation = {"relu": torch.relu, "tanh": torch.tanh, "sigmoid": torch.sigmoid}[activation]
        else:
            bi = kind == "bigru"
            self.layer = nn.GRU(input_dim, dim // 2 if bi else dim, batch_first=True, bidirectional=bi)

    def identity_init_(self) -> None:
        """Start a dense layer as the (rectangular) identity map with zero bias: g(x) = act(x) (a GRU has no identity
        form)."""
        identity_init_(self.layer.weight)
        with torch.no_grad():
            nn.init.zeros_(self.layer.bias)

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        if self.kind == "dense":
            return self.activation(self.layer(x))
        lengths = mask.sum(1).clamp(min=1).cpu()
        packed = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        out, _ = self.layer(packed)
        out, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=x.size(1))
        return out


class WordAttentionEncoder(nn.Module):
    """WAN: ``h = Σ_t α_t g_w(E x_t)`` (Eqs. 1-2)."""

    def __init__(self, embed_dim: int, dim: int, attention_dim: int, layer: str = "dense",
                 activation: str = "relu", dropout: float = 0.0):
        super().__init__()
        self.word = SequenceLayer(layer, embed_dim, dim, activation)
        self.attention = AttentionPooling(dim, attention_dim)
        self.dropout = dropout
        self.output_dim = dim

    def forward(self, embedded: Tensor, mask: Tensor, src_tokens: Optional[Tensor] = None) -> Tensor:
        x = F.dropout(embedded, self.dropout, self.training)
        return self.attention(self.word(x, mask), mask)


class HierarchicalAttentionEncoder(nn.Module):
    """HAN: word level (Eqs. 1-2) per sentence -> s_i, then sentence level g_s + attention -> h.

    Sentences end after any token id in ``sentence_end_ids`` (e.g. the ids of ``.``, ``!``, ``?``).
    """

    def __init__(self, embed_dim: int, dim: int, attention_dim: int, sentence_end_ids: List[int],
                 word_layer: str = "dense", sentence_layer: str = "dense", activation: str = "relu",
                 dropout: float = 0.0):
        super().__init__()
        self.words = WordAttentionEncoder(embed_dim, dim, attention_dim, word_layer, activation, dropout)
        self.sentence = SequenceLayer(sentence_layer, dim, dim, activation)
        self.attention = AttentionPooling(dim, attention_dim)
        self.register_buffer("sentence_end_ids", torch.LongTensor(sorted(set(sentence_end_ids))), persistent=False)
        self.output_dim = dim

    def split_sentences(self, src_tokens: Tensor, mask: Tensor):
        """(B, T) -> sentence index and position of every token, and the sentence count per document."""
        is_end = torch.isin(src_tokens, self.sentence_end_ids) & mask
        # a token belongs to the sentence opened after the previous end marker
        sent = torch.cumsum(is_end.long(), dim=1) - is_end.long()
        starts = torch.zeros_like(sent)
        starts[:, 1:] = (sent[:, 1:] != sent[:, :-1]).long()
        starts[:, 0] = 1
        first_pos = torch.arange(src_tokens.size(1), device=src_tokens.device).expand_as(sent)
        start_pos = torch.cummax(torch.where(starts.bool(), first_pos, torch.zeros_like(first_pos)), dim=1).values
        pos = first_pos - start_pos
        num_sent = torch.where(mask, sent + 1, torch.zeros_like(sent)).max(dim=1).values
        return sent, pos, num_sent

    def forward(self, embedded: Tensor, mask: Tensor, src_tokens: Tensor) -> Tensor:
        B, T, D = embedded.shape
        sent, pos, num_sent = self.split_sentences(src_tokens, mask)
        S = int(num_sent.max().clamp(min=1))
        L = int(pos[mask].max().item()) + 1 if mask.any() else 1
        grid = embedded.new_zeros(B, S, L, D)
        grid_mask = torch.zeros(B, S, L, dtype=torch.bool, device=embedded.device)
        b = torch.arange(B, device=embedded.device).unsqueeze(1).expand(B, T)
        grid[b[mask], sent[mask], pos[mask]] = embedded[mask]
        grid_mask[b[mask], sent[mask], pos[mask]] = True
        s = self.words(grid.view(B * S, L, D), grid_mask.view(B * S, L)).view(B, S, -1)
        sent_mask = grid_mask.any(-1)
        return self.attention(self.sentence(s, sent_mask), sent_mask)
