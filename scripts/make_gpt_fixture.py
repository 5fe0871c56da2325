#!/usr/bin/python3
"""Writes tests/golden/gpt_reference.bin: a tiny GPT-2 (untied head, tanh GELU) run in PyTorch,
the reference that tests/model/test_pytorch_fixture.cpp compares paci's CPU model against.

Regenerate (a developer tool, not a CI dependency; Debian 12: apt-get install -y python3-torch):
    /usr/bin/python3 scripts/make_gpt_fixture.py tests/golden/gpt_reference.bin

The script writes its own weights (GPT-2 init plus noise on LayerNorms and biases, so every
gradient path is exercised), runs one batch, and records logits, loss, every gradient, and the
losses of 10 AdamW steps on that batch (decay only on tensors of >= 2 dims, PyTorch semantics).

Binary layout, little-endian, no padding (magic and version first, as every paci format):
    int32   magic = 20260414, version = 1
    int32   layers, heads, d_model, max_seq_len, vocab, batch, seq_len, steps
    float64 lr, beta1, beta2, eps, weight_decay
    int32   P                      number of parameters
    float32 params[P]              whole model in paci's ParamLayout order (model/layout.hpp):
                                   wte, wpe, per block h.{l}: ln_1.weight, ln_1.bias,
                                   attn.c_attn.weight (3C,C), attn.c_attn.bias, attn.c_proj.weight,
                                   attn.c_proj.bias, ln_2.weight, ln_2.bias, mlp.c_fc.weight (4C,C),
                                   mlp.c_fc.bias, mlp.c_proj.weight (C,4C), mlp.c_proj.bias;
                                   then ln_f.weight, ln_f.bias, lm_head.weight (V,C)
    int32   tokens[B*T], targets[B*T]
    float32 logits[B*T*V]
    float32 loss                   mean cross-entropy
    float32 grads[P]               d loss / d params, same order
    float32 step_losses[steps]     loss before update k (k = 0 is the loss above)
"""
import math
import struct
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

MAGIC, VERSION = 20260414, 1
LAYERS, HEADS, D_MODEL, SEQ, VOCAB, BATCH, STEPS = 2, 2, 32, 16, 256, 2, 10
LR, BETA1, BETA2, EPS, WD = 1e-3, 0.9, 0.95, 1e-8, 0.1


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        C = D_MODEL
        self.ln_1 = nn.LayerNorm(C, eps=1e-5)
        self.attn_c_attn = nn.Linear(C, 3 * C)
        self.attn_c_proj = nn.Linear(C, C)
        self.ln_2 = nn.LayerNorm(C, eps=1e-5)
        self.mlp_c_fc = nn.Linear(C, 4 * C)
        self.mlp_c_proj = nn.Linear(4 * C, C)

    def attention(self, x):
        B, T, C = x.shape
        hs = C // HEADS
        q, k, v = self.attn_c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, HEADS, hs).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
        mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
        att = F.softmax(att.masked_fill(~mask, float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.attn_c_proj(y)

    def forward(self, x):
        x = x + self.attention(self.ln_1(x))
        return x + self.mlp_c_proj(F.gelu(self.mlp_c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(VOCAB, D_MODEL)
        self.wpe = nn.Embedding(SEQ, D_MODEL)
        self.h = nn.ModuleList(Block() for _ in range(LAYERS))
        self.ln_f = nn.LayerNorm(D_MODEL, eps=1e-5)
        self.lm_head = nn.Linear(D_MODEL, VOCAB, bias=False)  # untied

    def forward(self, tokens, targets):
        T = tokens.shape[1]
        x = self.wte(tokens) + self.wpe(torch.arange(T))
        for block in self.h:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        return logits, F.cross_entropy(logits.view(-1, VOCAB), targets.view(-1))

    def ordered(self):
        """(paci name, tensor) in paci's ParamLayout order."""
        out = [("wte", self.wte.weight), ("wpe", self.wpe.weight)]
        for l, b in enumerate(self.h):
            for name, mod in (("ln_1", b.ln_1), ("attn.c_attn", b.attn_c_attn),
                              ("attn.c_proj", b.attn_c_proj), ("ln_2", b.ln_2),
                              ("mlp.c_fc", b.mlp_c_fc), ("mlp.c_proj", b.mlp_c_proj)):
                out += [(f"h.{l}.{name}.weight", mod.weight), (f"h.{l}.{name}.bias", mod.bias)]
        out += [("ln_f.weight", self.ln_f.weight), ("ln_f.bias", self.ln_f.bias),
                ("lm_head.weight", self.lm_head.weight)]
        return out


def init_weights(model, gen):
    with torch.no_grad():
        for name, p in model.ordered():
            if p.dim() >= 2:
                std = 0.02 / math.sqrt(2 * LAYERS) if name.endswith("c_proj.weight") else 0.02
                p.copy_(torch.randn(p.shape, generator=gen) * std)
            elif name.endswith("weight"):  # LayerNorm gains around 1
                p.copy_(1 + 0.1 * torch.randn(p.shape, generator=gen))
            else:  # biases around 0
                p.copy_(0.1 * torch.randn(p.shape, generator=gen))


def flat(tensors):
    return torch.cat([t.detach().reshape(-1) for t in tensors]).tolist()


def main(path):
    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(20260414)
    model = GPT()
    init_weights(model, gen)
    names, params = zip(*model.ordered())
    tokens = torch.randint(0, VOCAB, (BATCH, SEQ), generator=gen)
    targets = torch.randint(0, VOCAB, (BATCH, SEQ), generator=gen)
    initial = flat(params)

    logits, loss = model(tokens, targets)
    loss.backward()
    grads = flat(p.grad for p in params)

    decay = [p for p in params if p.dim() >= 2]
    plain = [p for p in params if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": WD},
                             {"params": plain, "weight_decay": 0.0}],
                            lr=LR, betas=(BETA1, BETA2), eps=EPS, foreach=False)
    opt.zero_grad()
    step_losses = []
    for _ in range(STEPS):
        _, step_loss = model(tokens, targets)
        step_losses.append(step_loss.item())
        opt.zero_grad()
        step_loss.backward()
        opt.step()

    with open(path, "wb") as f:
        f.write(struct.pack("<10i", MAGIC, VERSION, LAYERS, HEADS, D_MODEL, SEQ, VOCAB, BATCH,
                            SEQ, STEPS))
        f.write(struct.pack("<5d", LR, BETA1, BETA2, EPS, WD))
        f.write(struct.pack("<i", len(initial)))
        f.write(struct.pack(f"<{len(initial)}f", *initial))
        f.write(struct.pack(f"<{tokens.numel()}i", *tokens.reshape(-1).tolist()))
        f.write(struct.pack(f"<{targets.numel()}i", *targets.reshape(-1).tolist()))
        f.write(struct.pack(f"<{logits.numel()}f", *logits.detach().reshape(-1).tolist()))
        f.write(struct.pack("<f", loss.item()))
        f.write(struct.pack(f"<{len(grads)}f", *grads))
        f.write(struct.pack(f"<{STEPS}f", *step_losses))
    print(f"{path}: {len(initial)} parameters, loss {loss.item():.6f}, "
          f"after {STEPS} AdamW steps {step_losses[-1]:.6f}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "tests/golden/gpt_reference.bin")
