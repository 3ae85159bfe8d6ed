"""HSTU hyper-parameter probe on a GPU: equations (1)-(3) of Zhai et al. (2024) in PyTorch, on ML-1M.

Not part of the library (which is TensorFlow): an independent transcription of the same
model (sizes, init, cosine scores over a temperature 0.05, full softmax without the
window's other items) with a plain training loop (one window of the last 200 training
items per user, batch 128, Adam), used to choose HSTU's learning rate and to measure
its parts quickly on a lent GPU machine, where TensorFlow is not installed. Prints
validation NDCG@10 (history filtered, full ranking) every 5 epochs.

Usage (PyTorch with CUDA):
    python benchmarks/probes/hstu_torch.py '{"2e-3": {"lr": 0.002, "epochs": 80}}'
Options of a run: lr, warm (warm-up epochs), epochs, soft (softmax attention), rab
(relative position bias), sampled ("position": 128 uniform negatives per position, the
reference's; "shared": 128 shared by the batch).
Data: $TFSEQREC_DATA/ml-1m/ml-1m.txt (default ../shared/data).
"""

import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

dev = "cuda"
torch.manual_seed(0)
np.random.seed(0)
seqs = {}
for line in open(os.path.join(os.environ.get("TFSEQREC_DATA", "../shared/data"), "ml-1m", "ml-1m.txt")):
    if line.strip():
        u, i = line.split()
        seqs.setdefault(int(u), []).append(int(i))
users = sorted(seqs)
NI = max(max(s) for s in seqs.values())
L = 200


def pad(s):
    return [0] * (L - len(s[-L:])) + s[-L:]


tin, tout, vin, vt = [], [], [], []
seen = torch.zeros(len(users), NI + 1, dtype=torch.bool)
for r, u in enumerate(users):
    s = seqs[u]
    tr = s[:-2]
    w = tr[-(L + 1) :]
    tin.append(pad(w[:-1]))
    tout.append(pad(w[1:]))
    vin.append(pad(tr))
    vt.append(s[-2])
    seen[r, tr] = True
Xi, Yo, Vi, Vt = (torch.tensor(a, device=dev) for a in (tin, tout, vin, vt))
seen = seen.to(dev)


class Layer(nn.Module):
    def __init__(s, d, H, drop, soft, rab=True):
        super().__init__()
        s.H, s.a, s.drop, s.soft, s.rab = H, d // H, drop, soft, rab
        s.uvqk = nn.Linear(d, 4 * d, bias=False)
        s.o = nn.Linear(d, d)
        s.pb = nn.Parameter(torch.zeros(2 * L - 1))
        nn.init.xavier_uniform_(s.uvqk.weight)
        nn.init.xavier_uniform_(s.o.weight)
        nn.init.zeros_(s.o.bias)

    def forward(s, x, mask):
        B, n, d = x.shape
        H, a = s.H, s.a
        u, v, q, k = torch.split(F.silu(s.uvqk(F.layer_norm(x, (d,), eps=1e-6))), d, -1)
        logits = torch.einsum("bnha,bmha->bhnm", q.view(B, n, H, a), k.view(B, n, H, a))
        idx = torch.arange(n, device=dev)
        bias = s.pb[idx[None, :] - idx[:, None] + L - 1] if s.rab else 0.0
        ok = (idx[None, :] <= idx[:, None])[None, None] & mask[:, None, None, :]
        if s.soft:
            w = torch.softmax((logits / math.sqrt(a) + bias).masked_fill(~ok, -1e9), -1) * ok
        else:
            w = F.silu(logits + bias) * ok / L
        av = torch.einsum("bhnm,bmha->bnha", w, v.view(B, n, H, a)).reshape(B, n, d)
        return (x + s.o(F.dropout(F.layer_norm(av, (d,), eps=1e-6) * u, s.drop, s.training))) * mask[
            ..., None
        ]


class HSTU(nn.Module):
    def __init__(s, d=50, nl=8, H=2, drop=0.2, soft=False, T=0.05, rab=True):
        super().__init__()
        s.d, s.T, s.drop = d, T, drop
        s.emb = nn.Embedding(NI + 1, d)
        s.pos = nn.Embedding(L, d)
        nn.init.trunc_normal_(s.emb.weight, std=0.02)
        nn.init.trunc_normal_(s.pos.weight, std=math.sqrt(1 / d))
        s.layers = nn.ModuleList(Layer(d, H, drop, soft, rab) for _ in range(nl))

    def forward(s, ids):
        mask = ids > 0
        pos = (mask.long().cumsum(1) - 1).clamp(min=0)
        x = F.dropout(s.emb(ids) * math.sqrt(s.d) + s.pos(pos), s.drop, s.training) * mask[..., None]
        for layer in s.layers:
            x = layer(x, mask)
        return F.normalize(x, dim=-1, eps=1e-6) / s.T

    def scores(s, h):
        return h @ F.normalize(s.emb.weight, dim=-1, eps=1e-6).T


def ndcg(m):
    m.eval()
    tot = 0.0
    with torch.no_grad():
        for b in range(0, len(Vi), 512):
            sc = m.scores(m(Vi[b : b + 512])[:, -1])
            t = Vt[b : b + 512]
            sc[:, 0] = -1e9
            tsc = sc.gather(1, t[:, None])
            sc = sc.masked_fill(seen[b : b + 512], -1e9)
            rank = (sc > tsc).sum(1)
            tot += torch.where(rank < 10, 1 / torch.log2(rank.float() + 2), 0.0).sum().item()
    m.train()
    return tot / len(Vi)


def sampled_loss(m, h, y, per_position):
    """Softmax over the positive and 128 uniform negatives (per position, or shared by the batch); hits masked."""
    h, y = h[y > 0], y[y > 0]
    table = F.normalize(m.emb.weight, dim=-1, eps=1e-6)
    neg = torch.randint(1, NI + 1, (len(y), 128) if per_position else (128,), device=dev)
    pos = (h * table[y]).sum(-1, keepdim=True)
    negl = torch.einsum("nd,nkd->nk", h, table[neg]) if per_position else h @ table[neg].T
    hit = neg == y[:, None] if per_position else neg[None, :] == y[:, None]
    logits = torch.cat([pos, negl.masked_fill(hit, -1e9)], 1)
    return F.cross_entropy(logits, torch.zeros(len(y), dtype=torch.long, device=dev))


def run(name, lr=1e-3, warm=0, epochs=40, sampled=None, **kw):
    torch.manual_seed(0)
    m = HSTU(**kw).to(dev)
    opt = torch.optim.Adam([p for p in m.parameters() if p.requires_grad], lr=lr)
    steps = math.ceil(len(Xi) / 128)
    curve = []
    t0 = time.time()
    step = 0
    for e in range(epochs):
        perm = torch.randperm(len(Xi), device=dev)
        for b in range(steps):
            i = perm[b * 128 : (b + 1) * 128]
            x, y = Xi[i], Yo[i]
            for g in opt.param_groups:
                g["lr"] = lr * min(1.0, (step + 1) / (warm * steps)) if warm else lr
            if sampled is not None:
                loss = sampled_loss(m, m(x), y, sampled == "position")
                opt.zero_grad()
                loss.backward()
                opt.step()
                step += 1
                continue
            lg = m.scores(m(x))  # [B, n, NI+1]
            hist = torch.zeros(len(i), NI + 1, dtype=torch.bool, device=dev)
            hist.scatter_(1, x, True)
            hist.scatter_(1, y, True)
            lg = lg.masked_fill(
                hist[:, None, :] & (torch.arange(NI + 1, device=dev)[None, None] != y[..., None]), -1e9
            )
            lg[..., 0] = -1e9
            wmask = y > 0
            loss = F.cross_entropy(lg[wmask], y[wmask])
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
        if (e + 1) % 5 == 0:
            curve.append(round(ndcg(m), 4))
    print(
        json.dumps({"name": name, "val_ndcg10_every_5_epochs": curve, "s": round(time.time() - t0)}),
        flush=True,
    )


for name, kw in json.loads(sys.argv[1]).items():
    run(name, **kw)
