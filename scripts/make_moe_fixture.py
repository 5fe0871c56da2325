#!/usr/bin/python3
"""Writes tests/golden/moe_reference.bin: two tiny mixture-of-experts GPTs run in PyTorch, the
reference that tests/model/test_moe_pytorch.cpp compares paci's CPU model against.

Regenerate (a developer tool, not a CI dependency; any Python with torch, e.g. the interop
checks' virtual environment, scripts/interop.sh):
    python scripts/make_moe_fixture.py tests/golden/moe_reference.bin

The model is paci's (model/config.hpp, MoeConfig), written here from its definition with PyTorch's
own operations: GPT-2's blocks with the MLP replaced by a router (Linear C->E, no bias), softmax,
torch.topk, gates renormalised over the K chosen, SwiGLU experts w2(silu(w1 x) * w3 x), an optional
ungated shared expert, GShard's capacity priority (every token's first choice before any second),
and Megatron-LM's top-k load-balancing loss
    aux = coef * E / (R * R * K) * sum_e (sum_t probs[t, e]) * tokens_per_expert[e]
added to the cross-entropy for the backward. Case 1: dropless with a shared expert; case 2:
capacity factor 1.0 (assignments dropped), no shared expert. The router starts wide (std 0.3) so
that no two router probabilities of a token are within 1e-4 of each other at a top-k boundary
(checked): float32 rounding cannot flip a choice between PyTorch and paci; the embeddings start
at std 1 so that the tokens spread over every expert (checked: PyTorch's AdamW skips a tensor
without a gradient, paci's decays it).

Binary layout, little-endian, no padding:
    int32   magic = 20261205, version = 1, cases
    per case:
    int32   layers, heads, d_model, max_seq_len, vocab, batch, seq_len, steps,
            experts, top_k, hidden, shared_expert
    float64 capacity_factor, aux_loss_coef, lr, beta1, beta2, eps, weight_decay
    int32   P                      number of parameters
    float32 params[P]              whole model in paci's ParamLayout order (model/layout.hpp)
    int32   tokens[B*T], targets[B*T]
    float32 logits[B*T*V]
    float32 loss                   mean cross-entropy
    float32 aux                    the blocks' load-balancing losses, summed
    float32 grads[P]               d (loss + aux) / d params
    float32 step_losses[steps]     cross-entropy before AdamW update k (k = 0 is the loss above)
"""
import math
import struct
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

MAGIC, VERSION = 20261205, 1
LAYERS, HEADS, D_MODEL, SEQ, VOCAB, BATCH, STEPS = 2, 2, 32, 16, 256, 2, 10
LR, BETA1, BETA2, EPS, WD = 1e-3, 0.9, 0.95, 1e-8, 0.1
CASES = [  # experts, top_k, hidden, shared, capacity_factor, aux_loss_coef
    (4, 2, 48, True, 0.0, 0.1),
    (4, 2, 48, False, 1.0, 0.1),
]


class SwiGLU(nn.Module):
    def __init__(self, c, h):
        super().__init__()
        self.w1 = nn.Linear(c, h, bias=False)
        self.w3 = nn.Linear(c, h, bias=False)
        self.w2 = nn.Linear(h, c, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class MoE(nn.Module):
    def __init__(self, experts, top_k, hidden, shared, capacity_factor, coef):
        super().__init__()
        self.E, self.K, self.cf, self.coef = experts, top_k, capacity_factor, coef
        self.router = nn.Linear(D_MODEL, experts, bias=False)
        self.experts = nn.ModuleList(SwiGLU(D_MODEL, hidden) for _ in range(experts))
        self.shared = SwiGLU(D_MODEL, hidden) if shared else None

    def forward(self, x):
        B, T, C = x.shape
        xs = x.reshape(-1, C)
        R, E, K = xs.shape[0], self.E, self.K
        probs = F.softmax(self.router(xs), dim=-1)
        top, choice = torch.topk(probs, K, dim=-1)
        edges = torch.sort(probs.detach(), dim=-1, descending=True).values
        if K < E:
            gap = (edges[:, K - 1] - edges[:, K]).min().item()
            assert gap > 1e-4, f"a token's K-th and (K+1)-th probabilities are {gap} apart"
        gates = top / top.sum(dim=-1, keepdim=True)
        onehot = F.one_hot(choice, E)  # (R, K, E)
        capacity = R * K if self.cf == 0 else min(R * K, math.ceil(self.cf * R * K / E))
        by_priority = onehot.transpose(0, 1).reshape(K * R, E)  # first choices first
        position = ((torch.cumsum(by_priority, dim=0) - 1) * by_priority).sum(dim=-1)
        kept = (position < capacity).reshape(K, R).transpose(0, 1)  # (R, K)
        self.dropped = int((~kept).sum())
        out = self.shared(xs) if self.shared is not None else torch.zeros_like(xs)
        for e, expert in enumerate(self.experts):
            mask = (choice == e) & kept
            rows = mask.any(dim=-1).nonzero().squeeze(-1)
            if rows.numel() == 0:
                continue
            gate = (gates * mask).sum(dim=-1)[rows]
            out = out.index_add(0, rows, gate[:, None] * expert(xs[rows]))
        tokens_per_expert = onehot.sum(dim=(0, 1)).to(probs.dtype)
        aux = self.coef * E / (R * R * K) * (probs.sum(dim=0) * tokens_per_expert).sum()
        return out.reshape(B, T, C), aux


class Block(nn.Module):
    def __init__(self, moe):
        super().__init__()
        C = D_MODEL
        self.ln_1 = nn.LayerNorm(C, eps=1e-5)
        self.c_attn = nn.Linear(C, 3 * C)
        self.c_proj = nn.Linear(C, C)
        self.ln_2 = nn.LayerNorm(C, eps=1e-5)
        self.moe = MoE(*moe)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, HEADS, C // HEADS).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))
        m, aux = self.moe(self.ln_2(x))
        return x + m, aux


class GPT(nn.Module):
    def __init__(self, moe):
        super().__init__()
        self.wte = nn.Embedding(VOCAB, D_MODEL)
        self.wpe = nn.Embedding(SEQ, D_MODEL)
        self.h = nn.ModuleList(Block(moe) for _ in range(LAYERS))
        self.ln_f = nn.LayerNorm(D_MODEL, eps=1e-5)
        self.lm_head = nn.Linear(D_MODEL, VOCAB, bias=False)

    def forward(self, tokens, targets):
        x = self.wte(tokens) + self.wpe(torch.arange(tokens.shape[1]))
        aux = 0
        for block in self.h:
            x, a = block(x)
            aux = aux + a
        logits = self.lm_head(self.ln_f(x))
        return logits, F.cross_entropy(logits.view(-1, VOCAB), targets.view(-1)), aux

    def ordered(self):
        """(paci name, tensor) in paci's ParamLayout order."""
        out = [("wte", self.wte.weight), ("wpe", self.wpe.weight)]
        for l, b in enumerate(self.h):
            p = f"h.{l}."
            out += [(p + "ln_1.weight", b.ln_1.weight), (p + "ln_1.bias", b.ln_1.bias),
                    (p + "attn.c_attn.weight", b.c_attn.weight),
                    (p + "attn.c_attn.bias", b.c_attn.bias),
                    (p + "attn.c_proj.weight", b.c_proj.weight),
                    (p + "attn.c_proj.bias", b.c_proj.bias),
                    (p + "ln_2.weight", b.ln_2.weight), (p + "ln_2.bias", b.ln_2.bias),
                    (p + "moe.router.weight", b.moe.router.weight)]
            named = [(f"moe.experts.{e}", x) for e, x in enumerate(b.moe.experts)]
            if b.moe.shared is not None:
                named.append(("moe.shared", b.moe.shared))
            for name, x in named:
                out += [(f"{p}{name}.w1.weight", x.w1.weight), (f"{p}{name}.w3.weight", x.w3.weight),
                        (f"{p}{name}.w2.weight", x.w2.weight)]
        out += [("ln_f.weight", self.ln_f.weight), ("ln_f.bias", self.ln_f.bias),
                ("lm_head.weight", self.lm_head.weight)]
        return out


def init_weights(model, gen):
    with torch.no_grad():
        for name, p in model.ordered():
            if name.endswith("router.weight"):
                p.copy_(torch.randn(p.shape, generator=gen) * 0.3)
            elif name in ("wte", "wpe"):  # tokens far apart, so that they spread over experts
                p.copy_(torch.randn(p.shape, generator=gen))
            elif p.dim() >= 2:
                residual = name.endswith("c_proj.weight") or name.endswith("w2.weight")
                std = 0.02 / math.sqrt(2 * LAYERS) if residual else 0.02
                p.copy_(torch.randn(p.shape, generator=gen) * std)
            elif name.endswith("weight"):
                p.copy_(1 + 0.1 * torch.randn(p.shape, generator=gen))
            else:
                p.copy_(0.1 * torch.randn(p.shape, generator=gen))


def flat(tensors):
    return torch.cat([t.detach().reshape(-1) for t in tensors]).tolist()


def run_case(f, moe, seed):
    gen = torch.Generator().manual_seed(seed)
    model = GPT(moe)
    init_weights(model, gen)
    _, params = zip(*model.ordered())
    assert sum(p.numel() for p in params) == sum(p.numel() for p in model.parameters())
    tokens = torch.randint(0, VOCAB, (BATCH, SEQ), generator=gen)
    targets = torch.randint(0, VOCAB, (BATCH, SEQ), generator=gen)
    initial = flat(params)
    logits, loss, aux = model(tokens, targets)
    (loss + aux).backward()
    unused = [name for name, p in model.ordered() if p.grad is None]
    assert not unused, f"no token reaches {unused}: AdamW would skip them, paci would not"
    grads = flat(p.grad for p in params)
    decay = [p for p in params if p.dim() >= 2]
    plain = [p for p in params if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": WD},
                             {"params": plain, "weight_decay": 0.0}],
                            lr=LR, betas=(BETA1, BETA2), eps=EPS, foreach=False)
    step_losses = []
    dropped = [b.moe.dropped for b in model.h]
    for _ in range(STEPS):
        opt.zero_grad(set_to_none=False)  # an expert no token reaches still decays, as in paci
        _, step_loss, step_aux = model(tokens, targets)
        step_losses.append(step_loss.item())
        (step_loss + step_aux).backward()
        opt.step()
    experts, top_k, hidden, shared, cf, coef = moe
    f.write(struct.pack("<12i", LAYERS, HEADS, D_MODEL, SEQ, VOCAB, BATCH, SEQ, STEPS, experts,
                        top_k, hidden, int(shared)))
    f.write(struct.pack("<7d", cf, coef, LR, BETA1, BETA2, EPS, WD))
    f.write(struct.pack("<i", len(initial)))
    f.write(struct.pack(f"<{len(initial)}f", *initial))
    f.write(struct.pack(f"<{tokens.numel()}i", *tokens.reshape(-1).tolist()))
    f.write(struct.pack(f"<{targets.numel()}i", *targets.reshape(-1).tolist()))
    f.write(struct.pack(f"<{logits.numel()}f", *logits.detach().reshape(-1).tolist()))
    f.write(struct.pack("<ff", loss.item(), aux.item()))
    f.write(struct.pack(f"<{len(grads)}f", *grads))
    f.write(struct.pack(f"<{STEPS}f", *step_losses))
    print(f"case {moe}: {len(initial)} parameters, loss {loss.item():.6f}, aux {aux.item():.6f}, "
          f"assignments dropped per block {dropped}, after {STEPS} AdamW steps "
          f"{step_losses[-1]:.6f}")


def main(path):
    torch.set_num_threads(1)
    with open(path, "wb") as f:
        f.write(struct.pack("<3i", MAGIC, VERSION, len(CASES)))
        for i, moe in enumerate(CASES):
            run_case(f, moe, 20261205 + i)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "tests/golden/moe_reference.bin")
