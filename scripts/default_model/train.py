#!/usr/bin/env python3
"""Trains baton-tiny: a Llama decoder (RMSNorm, RoPE, GQA, SwiGLU, tied embeddings) in plain
torch on the grammar corpus of corpus.py, tokenized with the BPE of bpe.py.

Everything is seeded; on the same machine and torch build the run repeats exactly (one CPU
thread, deterministic algorithms). Matrix products run in bfloat16 autocast (float32
master weights and optimizer state): on CPUs with AVX512-BF16 this is ~10x faster than
float32 through Debian's reference BLAS.

usage: train.py --tokenizer DIR --out FILE.pt [--steps N] ...   (see --help)
"""
import argparse
import json
import math
import os
import random
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bpe  # noqa: E402
import corpus  # noqa: E402

# The architecture of baton-tiny. vocab_size comes from the tokenizer.
CONFIG = {
    "hidden_size": 128,
    "intermediate_size": 384,
    "num_hidden_layers": 6,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 32,
    "max_position_embeddings": 512,
    "rope_theta": 10000.0,
    "rms_norm_eps": 1e-5,
}


# ---------------------------------------------------------------- model

class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * xf.to(x.dtype)


def rope_cos_sin(cfg, positions):
    """HF Llama's rotary tables (rotate_half layout): dims i and i + head_dim/2 pair up."""
    d = cfg["head_dim"]
    inv_freq = 1.0 / (cfg["rope_theta"] ** (torch.arange(0, d, 2, dtype=torch.float32) / d))
    freqs = positions.float()[:, None] * inv_freq[None, :]
    emb = torch.cat([freqs, freqs], dim=-1)
    return emb.cos(), emb.sin()


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([-x2, x1], dim=-1)


class Attention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        h, d = cfg["hidden_size"], cfg["head_dim"]
        self.nh, self.nkv, self.d = cfg["num_attention_heads"], cfg["num_key_value_heads"], d
        # q_proj, k_proj and v_proj stacked in one matrix (one product, one cast under
        # autocast); export.py splits it again.
        self.qkv_proj = nn.Linear(h, (self.nh + 2 * self.nkv) * d, bias=False)
        self.o_proj = nn.Linear(self.nh * d, h, bias=False)

    def forward(self, x, cos, sin, bias, cache=None):
        b, t, _ = x.shape
        nh, nkv, d = self.nh, self.nkv, self.d
        q, k, v = self.qkv_proj(x).split([nh * d, nkv * d, nkv * d], dim=-1)
        q = q.view(b, t, nh, d).transpose(1, 2)
        k = k.view(b, t, nkv, d).transpose(1, 2)
        v = v.view(b, t, nkv, d).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        if cache is not None:  # generation: cache = [k, v] of the earlier positions
            if cache:
                k, v = torch.cat([cache[0], k], dim=2), torch.cat([cache[1], v], dim=2)
            cache[:] = [k, v]
        s = k.shape[2]
        # GQA as in HF repeat_kv: query head i reads KV head i // rep. The rep query heads
        # of a KV head are stacked along the time axis so no K/V copy is made.
        rep = nh // nkv
        q = q.reshape(b, nkv, rep * t, d)
        att = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(d))
        att = (att.view(b, nkv, rep, t, s).float() + bias).softmax(-1).to(v.dtype)
        y = torch.matmul(att.view(b, nkv, rep * t, s), v)
        y = y.view(b, nh, t, d).transpose(1, 2).reshape(b, t, nh * d)
        return self.o_proj(y)


class MLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        h, i = cfg["hidden_size"], cfg["intermediate_size"]
        self.gate_up_proj = nn.Linear(h, 2 * i, bias=False)  # gate_proj over up_proj
        self.down_proj = nn.Linear(i, h, bias=False)

    def forward(self, x):
        gate, up = self.gate_up_proj(x).chunk(2, dim=-1)
        return self.down_proj(F.silu(gate) * up)


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.input_layernorm = RMSNorm(cfg["hidden_size"], cfg["rms_norm_eps"])
        self.self_attn = Attention(cfg)
        self.post_attention_layernorm = RMSNorm(cfg["hidden_size"], cfg["rms_norm_eps"])
        self.mlp = MLP(cfg)

    def forward(self, x, cos, sin, bias, cache=None):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, bias, cache)
        return x + self.mlp(self.post_attention_layernorm(x))


class Llama(nn.Module):
    """HF LlamaForCausalLM, with q/k/v and gate/up fused (export.py writes HF names)."""

    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.embed_tokens = nn.Embedding(cfg["vocab_size"], cfg["hidden_size"])
        self.layers = nn.ModuleList(Block(cfg) for _ in range(cfg["num_hidden_layers"]))
        self.norm = RMSNorm(cfg["hidden_size"], cfg["rms_norm_eps"])

    def init_weights(self, std=0.02, embed_std=0.02):
        for name, p in self.named_parameters():
            if name.endswith("layernorm.weight") or name == "norm.weight":
                nn.init.ones_(p)
            elif name == "embed_tokens.weight":
                nn.init.normal_(p, std=embed_std)
            elif name.endswith(("o_proj.weight", "down_proj.weight")):
                nn.init.normal_(p, std=std / math.sqrt(2 * self.cfg["num_hidden_layers"]))
            else:
                nn.init.normal_(p, std=std)

    def forward(self, ids, cache=None):
        """ids: [batch, time] -> logits. cache: None, or a list (one entry per layer, empty
        at first) that keeps K/V between calls, for generation."""
        t = ids.shape[1]
        start = cache[0][0].shape[2] if cache and cache[0] else 0
        cos, sin = rope_cos_sin(self.cfg, torch.arange(start, start + t))
        # causal mask, added to the scores: query j sees keys 0 .. start + j
        bias = torch.full((t, start + t), float("-inf")).triu(start + 1)
        x = self.embed_tokens(ids)
        for i, layer in enumerate(self.layers):
            x = layer(x, cos, sin, bias, None if cache is None else cache[i])
        x = self.norm(x)
        return x @ self.embed_tokens.weight.to(x.dtype).t()  # tied LM head


# ---------------------------------------------------------------- data

class Packer:
    """Endless training sequences of seq_len + 1 tokens, packed from corpus documents.

    Each sequence starts at a document (half of them after an <|endoftext|>, so both a bare
    start and a start after a separator are seen); documents follow one another, each ended
    by <|endoftext|>, and the document that overflows is cut."""

    def __init__(self, tok, seed, chat_fraction):
        self.tok = tok
        self.r = random.Random(seed)
        self.eot = tok.special[corpus.EOT]
        self.chat_fraction = chat_fraction

    def sequence(self, seq_len):
        out = [self.eot] if self.r.random() < 0.5 else []
        while len(out) < seq_len + 1:
            out += self.tok.encode(corpus.document(self.r, self.chat_fraction)) + [self.eot]
        return out[:seq_len + 1]

    def batch(self, n, seq_len):
        return torch.tensor([self.sequence(seq_len) for _ in range(n)], dtype=torch.long)


def count_params(model):
    return sum(p.numel() for p in model.parameters())


def name_ids(tok):
    """Token ids of the character names (with and without a leading space)."""
    ids = set()
    for n in corpus.NAMES:
        for v in (n, " " + n):
            e = tok.encode(v)
            if len(e) == 1:
                ids.add(e[0])
    return torch.tensor(sorted(ids))


@torch.no_grad()
def evaluate(model, batch, names):
    """-> (mean loss, mean loss on name tokens). Names are what the model must copy from
    earlier in the text; their loss stays near log(#names) until it learns to."""
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits = model(batch[:, :-1])
    target = batch[:, 1:].flatten()
    loss = F.cross_entropy(logits.float().flatten(0, 1), target, reduction="none")
    is_name = torch.isin(target, names)
    return loss.mean().item(), loss[is_name].mean().item()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tokenizer", required=True, help="directory holding tokenizer.json")
    ap.add_argument("--out", required=True, help="checkpoint to write (.pt)")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--steps", type=int, default=1400)
    ap.add_argument("--batch", type=int, default=16, help="sequences per step")
    ap.add_argument("--seq-len", type=int, default=256, help="training sequence length")
    ap.add_argument("--long-from", type=float, default=0.85,
                    help="from this fraction of the steps on, train on sequences of the full "
                    "context (max_position_embeddings), as many tokens per step")
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--chat-fraction", type=float, default=0.5)
    ap.add_argument("--eval-every", type=int, default=100)
    ap.add_argument("--stop-loss", type=float, default=0.0,
                    help="stop once the held-out loss is below this (0: run all steps)")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch CPU threads (1: fastest on a busy machine, and the results do "
                    "not depend on how work is split between threads)")
    ap.add_argument("--fp32", action="store_true", help="no bfloat16 autocast")
    ap.add_argument("--embed-std", type=float, default=0.02, help="init std of the embeddings")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=INT",
                    help="override an integer of the architecture, e.g. num_attention_heads=8")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    random.seed(args.seed)
    torch.use_deterministic_algorithms(True)

    tok = bpe.Tokenizer.load(os.path.join(args.tokenizer, "tokenizer.json"))
    cfg = dict(CONFIG, vocab_size=len(tok))
    for kv in args.set:
        k, v = kv.split("=")
        assert k in cfg, k
        cfg[k] = int(v)
    model = Llama(cfg)
    model.init_weights(embed_std=args.embed_std)
    print(f"train: {count_params(model):,} parameters, config {json.dumps(cfg)}", flush=True)

    decay = [p for n, p in model.named_parameters() if p.dim() == 2 and "embed" not in n]
    no_decay = [p for n, p in model.named_parameters() if not (p.dim() == 2 and "embed" not in n)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8)

    def lr_at(step):  # linear warmup, cosine to 10%
        if step < args.warmup:
            return args.lr * (step + 1) / args.warmup
        p = (step - args.warmup) / max(1, args.steps - args.warmup)
        return args.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, p))))

    train_data = Packer(tok, args.seed, args.chat_fraction)
    eval_batch = Packer(tok, args.seed + 1, args.chat_fraction).batch(16, args.seq_len)
    long_len = cfg["max_position_embeddings"]
    long_from = int(args.long_from * args.steps)

    t0 = time.time()
    tokens = 0
    last_print = t0
    loss_avg = None
    eval_loss = name_loss = float("nan")
    names = name_ids(tok)
    step = 0
    for step in range(args.steps):
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        if step < long_from:
            batch = train_data.batch(args.batch, args.seq_len)
        else:
            batch = train_data.batch(args.batch * args.seq_len // long_len, long_len)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=not args.fp32):
            logits = model(batch[:, :-1])
        loss = F.cross_entropy(logits.float().flatten(0, 1), batch[:, 1:].flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        tokens += batch[:, 1:].numel()
        loss_avg = loss.item() if loss_avg is None else 0.95 * loss_avg + 0.05 * loss.item()
        done = step + 1 == args.steps
        if (step + 1) % args.eval_every == 0 or done:
            eval_loss, name_loss = evaluate(model, eval_batch, names)
        now = time.time()
        if (step + 1) % args.eval_every == 0 or done or now - last_print > 30:
            last_print = now
            print(f"step {step + 1:5d}/{args.steps}  loss {loss_avg:.4f}  eval {eval_loss:.4f}  "
                  f"(names {name_loss:.2f})  "
                  f"lr {lr_at(step):.2e}  {tokens / (now - t0):,.0f} tok/s  "
                  f"{(now - t0) / 60:.1f} min", flush=True)
        if args.stop_loss and (step + 1) % args.eval_every == 0 and eval_loss < args.stop_loss:
            print(f"train: held-out loss {eval_loss:.4f} < {args.stop_loss}: stopping", flush=True)
            break

    minutes = (time.time() - t0) / 60
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    torch.save({"config": cfg, "state_dict": model.state_dict(), "steps": step + 1,
                "train_loss": loss_avg, "eval_loss": eval_loss, "name_loss": name_loss,
                "minutes": minutes,
                "tokens": tokens, "args": vars(args)}, args.out)
    print(f"train: {step + 1} steps, {tokens:,} tokens, {minutes:.1f} min, train loss "
          f"{loss_avg:.4f}, held-out loss {eval_loss:.4f} -> {args.out}", flush=True)


if __name__ == "__main__":
    main()
