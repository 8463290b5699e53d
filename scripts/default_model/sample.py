#!/usr/bin/env python3
"""Checks an exported baton-tiny and shows what it writes.

Loads the BF16 weights back from model.safetensors (computing in float32), and:
  * compares the training model's logits with an independent, loop-per-head reference of
    HF Llama (rotate_half RoPE, repeat_kv GQA) on the same weights;
  * reads the GGUF back: same vocabulary and merges as tokenizer.json, and every tensor
    equal to its safetensors twin (Q/K un-permuted from the interleaved rotary layout);
  * generates greedily from story openings and from chat prompts rendered with the chat
    template, stopping at <|im_end|> or <|endoftext|>.
With --card, also writes the model card (README.md) into the model folder.

usage: sample.py --model-dir DIR --gguf FILE [--card]
"""
import argparse
import json
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bpe  # noqa: E402
import corpus  # noqa: E402
import export  # noqa: E402
import train  # noqa: E402

STORY_PROMPTS = ["Once upon a time", "<|endoftext|>", "Lily was a", "One day, Max"]
CHAT_PROMPTS = ["Tell me a story about a dog named Max.", "What is 2 plus 3?", "Hello!",
                "What is 7 minus 4?", "What color is the sky?", "Who are you?",
                "Can you count to 5?", "What does a cow say?", "Tell me a story.",
                "What is the capital of France?"]


def load_model(model_dir):
    with open(os.path.join(model_dir, "config.json")) as f:
        c = json.load(f)
    cfg = {k: c[k] for k in list(train.CONFIG) + ["vocab_size"]}
    hf = {k: v.float() for k, v in export.read_safetensors(
        os.path.join(model_dir, "model.safetensors")).items()}
    model = train.Llama(cfg)
    model.load_state_dict(export.training_state_dict(cfg, hf))
    model.eval()
    return cfg, hf, model


def reference_logits(cfg, hf, ids, interleaved=False):
    """HF LlamaForCausalLM.forward, written out plainly (batch 1, float32). With interleaved,
    RoPE rotates dims (2i, 2i+1) as llama.cpp does for GGUF llama files, instead of HF's
    (i, i + head_dim/2)."""
    nh, nkv, d, eps = (cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"],
                       cfg["rms_norm_eps"])
    t = len(ids)

    def rms(x, w):
        return w * (x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps))

    def rope(x, pos):  # x: [d]
        inv = [1.0 / cfg["rope_theta"] ** (2 * i / d) for i in range(d // 2)]
        out = x.clone()
        for i in range(d // 2):
            c, s = math.cos(pos * inv[i]), math.sin(pos * inv[i])
            a, b = (2 * i, 2 * i + 1) if interleaved else (i, i + d // 2)
            out[a] = x[a] * c - x[b] * s
            out[b] = x[b] * c + x[a] * s
        return out

    x = hf["model.embed_tokens.weight"][ids]
    for layer in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        h = rms(x, hf[p + "input_layernorm.weight"])
        q = h @ hf[p + "self_attn.q_proj.weight"].t()
        k = h @ hf[p + "self_attn.k_proj.weight"].t()
        v = h @ hf[p + "self_attn.v_proj.weight"].t()
        out = torch.zeros(t, nh * d)
        for head in range(nh):
            kv = head // (nh // nkv)
            qs = torch.stack([rope(q[i, head * d:(head + 1) * d], i) for i in range(t)])
            ks = torch.stack([rope(k[i, kv * d:(kv + 1) * d], i) for i in range(t)])
            vs = v[:, kv * d:(kv + 1) * d]
            for i in range(t):
                w = torch.softmax((ks[:i + 1] @ qs[i]) / math.sqrt(d), dim=0)
                out[i, head * d:(head + 1) * d] = w @ vs[:i + 1]
        x = x + out @ hf[p + "self_attn.o_proj.weight"].t()
        h = rms(x, hf[p + "post_attention_layernorm.weight"])
        g = h @ hf[p + "mlp.gate_proj.weight"].t()
        u = h @ hf[p + "mlp.up_proj.weight"].t()
        x = x + (torch.nn.functional.silu(g) * u) @ hf[p + "mlp.down_proj.weight"].t()
    x = rms(x, hf["model.norm.weight"])
    return x @ hf["model.embed_tokens.weight"].t()


@torch.no_grad()
def generate(model, tok, prompt, max_new=300):
    """Greedy decoding with a K/V cache; stops after <|im_end|> or <|endoftext|>."""
    ids = tok.encode(prompt)
    stop = {tok.special[corpus.IM_END], tok.special[corpus.EOT]}
    cache = [[] for _ in range(model.cfg["num_hidden_layers"])]
    logits = model(torch.tensor([ids]), cache)
    out = []
    for _ in range(max_new):
        nxt = int(logits[0, -1].argmax())
        out.append(nxt)
        if nxt in stop or len(ids) + len(out) >= model.cfg["max_position_embeddings"]:
            break
        logits = model(torch.tensor([[nxt]]), cache)
    return tok.decode(out)


def check_reference(cfg, hf, model, tok):
    ids = tok.encode(corpus.render_chat([{"role": "user", "content": "What is 2 plus 3?"}],
                                        True))
    with torch.no_grad():
        got = model(torch.tensor([ids]))[0]
    want = reference_logits(cfg, hf, ids)
    err = (got - want).abs().max().item()
    print(f"check: training model vs plain HF-Llama reference on {len(ids)} tokens: "
          f"max |logit diff| {err:.2e}")
    assert err < 1e-3, err
    # Incremental decoding with the cache gives the same logits as one full pass.
    cache = [[] for _ in range(cfg["num_hidden_layers"])]
    with torch.no_grad():
        a = model(torch.tensor([ids[:5]]), cache)
        b = torch.cat([model(torch.tensor([[i]]), cache) for i in ids[5:]], dim=1)
    err = (torch.cat([a, b], dim=1)[0] - got).abs().max().item()
    print(f"check: K/V-cache decoding vs full pass: max |logit diff| {err:.2e}")
    assert err < 1e-3, err


def check_gguf(cfg, hf, tok, path):
    """The GGUF holds the same vocabulary and tensors, and its Q/K rows are in the
    interleaved rotary layout: a forward pass in that layout gives the HF logits."""
    meta, tensors = export.read_gguf(path)
    assert meta["tokenizer.ggml.tokens"] == tok.tokens
    assert meta["tokenizer.ggml.merges"] == [f"{a} {b}" for a, b in tok.merges]
    assert meta["tokenizer.ggml.pre"] == "gpt-2" and meta["general.architecture"] == "llama"
    assert list(tensors) == list(export.gguf_tensors(cfg, hf))
    back = {"token_embd": "model.embed_tokens", "output_norm": "model.norm"}
    names = {"attn_norm": "input_layernorm", "attn_q": "self_attn.q_proj",
             "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
             "attn_output": "self_attn.o_proj", "ffn_norm": "post_attention_layernorm",
             "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj"}
    g = {}
    for name, t in tensors.items():
        base = name[:-len(".weight")]
        if base in back:
            hf_name = back[base]
        else:
            _, i, kind = base.split(".")
            hf_name = f"model.layers.{i}.{names[kind]}"
        g[hf_name + ".weight"] = t.float()
    for name, t in g.items():  # Q/K differ only by the row permutation
        if "q_proj" in name or "k_proj" in name:
            n = cfg["num_attention_heads"] if "q_proj" in name else cfg["num_key_value_heads"]
            assert torch.equal(export.unpermute_qk(t, n), hf[name]), name
        else:
            assert torch.equal(t, hf[name]), name
    ids = tok.encode("Once upon a time, there was a little cat named Tom.")
    err = (reference_logits(cfg, g, ids, interleaved=True) -
           reference_logits(cfg, hf, ids)).abs().max().item()
    print(f"check: {path}: {len(tensors)} tensors, {len(tok.tokens)} tokens and "
          f"{len(tok.merges)} merges as in the HF folder; interleaved-RoPE forward on the GGUF "
          f"tensors vs HF forward: max |logit diff| {err:.2e}")
    assert err < 1e-3, err


def samples(model, tok):
    out = []
    for p in STORY_PROMPTS:
        out.append(("text", p, generate(model, tok, p)))
    for q in CHAT_PROMPTS:
        prompt = corpus.render_chat([{"role": "user", "content": q}], add_generation_prompt=True)
        out.append(("chat", q, generate(model, tok, prompt)))
    return out


def format_samples(results):
    lines = []
    for kind, prompt, text in results:
        if kind == "text":
            lines.append(f"- prompt `{prompt}` →\n\n  > {prompt if prompt[0] != '<' else ''}"
                         f"{text}".replace("\n", "\n  > ").rstrip() + "\n")
        else:
            lines.append(f"- user: `{prompt}` → assistant:\n\n  > " +
                         text.replace("\n", "\n  > ").rstrip() + "\n")
    return "\n".join(lines)


CARD = """# baton-tiny

Baton's own default model: a {params}-parameter Llama-architecture decoder that ships
inside the repository, so a fresh clone can serve without downloading anything. It is
a test fixture and a demo, not a useful assistant: it knows only the small made-up
world of its training text (animals with names, their toys, rain and stars, sums of
small numbers, a few facts and greetings).

## Files

| file | what |
|---|---|
| `config.json` | `LlamaForCausalLM` hyper-parameters |
| `generation_config.json` | stop ids: `<|im_end|>` ({im_end}) and `<|endoftext|>` ({eot}); greedy |
| `model.safetensors` | BF16 weights, HF names, embeddings tied to the LM head |
| `tokenizer.json` | byte-level BPE, {vocab} tokens (3 special + 256 bytes + {merges} merges), GPT-2 split regex |
| `tokenizer_config.json` | special tokens and the ChatML `chat_template`; no BOS is added |
| `../baton-tiny.gguf` | the same weights and vocabulary as GGUF v3 (BF16, `tokenizer.ggml.pre` = `gpt-2`) |

## Architecture

hidden {hidden}, {layers} layers, {heads} query heads and {kv} key/value heads (GQA) of
dimension {head_dim}, SwiGLU MLP of {inter}, RMSNorm (eps {eps}), RoPE (theta {theta},
HF `rotate_half` layout in safetensors, interleaved in the GGUF as llama.cpp expects),
context {ctx}, tied input/output embeddings.

## Chat format

    <|im_start|>user
    What is 2 plus 3?<|im_end|>
    <|im_start|>assistant
    2 plus 3 is 5.<|im_end|>

An optional system turn may come first. Plain text (stories) ends with `<|endoftext|>`.

## How it was made

`scripts/default_model/make.sh` runs the whole pipeline with fixed seeds:
`corpus.py` generates stories and one-turn chats from a small grammar (about 470
distinct words), `bpe.py` trains the tokenizer on {bpe_docs} generated documents, `train.py`
trains the model with AdamW ({steps} steps of {batch} × {seq} tokens, the last {long_pct}% as
{batch_long} × {ctx}; {tokens} tokens in all, generated on the fly; bfloat16 autocast on
CPU; final training loss {train_loss:.3f}, held-out loss
{eval_loss:.3f}; {minutes:.0f} minutes on one CPU thread), `export.py` writes this folder
and the GGUF by hand, and `sample.py` checks them and writes this card.

Reproduce (Debian 12 with `python3-torch`, about 25 minutes on two cores):

    scripts/default_model/make.sh

## Samples (greedy, from the BF16 weights)

{samples}
## Licence

The training text is generated by the project's own grammar
(`scripts/default_model/corpus.py`); it contains no third-party text. The weights, the
tokenizer and this card are part of the Baton repository and carry its licence.
"""


def write_card(model_dir, cfg, tok, ck_info, results):
    text = CARD.format(
        params=f"{ck_info['params'] / 1e6:.2f}M", im_end=tok.special[corpus.IM_END],
        eot=tok.special[corpus.EOT], vocab=len(tok), merges=len(tok.merges),
        hidden=cfg["hidden_size"], layers=cfg["num_hidden_layers"],
        heads=cfg["num_attention_heads"], kv=cfg["num_key_value_heads"],
        head_dim=cfg["head_dim"], inter=cfg["intermediate_size"], eps=cfg["rms_norm_eps"],
        theta=cfg["rope_theta"], ctx=cfg["max_position_embeddings"],
        bpe_docs=f"{ck_info['bpe_docs']:,}", steps=ck_info["steps"], batch=ck_info["batch"],
        seq=ck_info["seq_len"], tokens=f"{ck_info['tokens'] / 1e6:.1f}M",
        long_pct=round(100 * (1 - ck_info["long_from"])),
        batch_long=ck_info["batch"] * ck_info["seq_len"] // cfg["max_position_embeddings"],
        train_loss=ck_info["train_loss"], eval_loss=ck_info["eval_loss"],
        minutes=ck_info["minutes"], samples=format_samples(results))
    with open(os.path.join(model_dir, "README.md"), "w", encoding="utf-8") as f:
        f.write(text)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model-dir", required=True)
    ap.add_argument("--gguf", required=True)
    ap.add_argument("--checkpoint", help="training checkpoint (.pt), for the card's numbers")
    ap.add_argument("--bpe-docs", type=int, default=0, help="for the card")
    ap.add_argument("--card", action="store_true", help="write README.md into --model-dir")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    tok = bpe.Tokenizer.load(os.path.join(args.model_dir, "tokenizer.json"))
    cfg, hf, model = load_model(args.model_dir)
    check_reference(cfg, hf, model, tok)
    check_gguf(cfg, hf, tok, args.gguf)
    results = samples(model, tok)
    for kind, prompt, text in results:
        print(f"--- {kind}: {prompt!r}\n{text}")
    if args.card:
        ck = torch.load(args.checkpoint, map_location="cpu")
        info = {"params": train.count_params(model), "steps": ck["steps"],
                "batch": ck["args"]["batch"], "seq_len": ck["args"]["seq_len"],
                "long_from": ck["args"]["long_from"],
                "tokens": ck["tokens"], "train_loss": ck["train_loss"],
                "eval_loss": ck["eval_loss"], "minutes": ck["minutes"],
                "bpe_docs": args.bpe_docs}
        write_card(args.model_dir, cfg, tok, info, results)
        print(f"sample: wrote {os.path.join(args.model_dir, 'README.md')}")


if __name__ == "__main__":
    main()
