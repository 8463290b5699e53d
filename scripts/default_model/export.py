#!/usr/bin/env python3
"""Writes a trained baton-tiny checkpoint as a Hugging Face folder and as a GGUF file.

  OUT_DIR/config.json, generation_config.json, model.safetensors (BF16), tokenizer.json,
  tokenizer_config.json, README.md
  OUT_GGUF (GGUF v3, BF16 tensors, GPT-2 byte-level vocabulary, chat template)

Both formats are written by hand (no safetensors / gguf / transformers packages).

usage: export.py --checkpoint FILE.pt --tokenizer DIR --out-dir DIR --gguf FILE
"""
import argparse
import json
import os
import shutil
import struct
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bpe  # noqa: E402

MODEL_NAME = "baton-tiny"


# ---------------------------------------------------------------- tensors

def hf_state_dict(cfg, sd):
    """Fused training parameters -> HF LlamaForCausalLM names, float32, in HF's order."""
    nh, nkv, d = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    inter = cfg["intermediate_size"]
    out = {"model.embed_tokens.weight": sd["embed_tokens.weight"]}
    for i in range(cfg["num_hidden_layers"]):
        p, q = f"layers.{i}.", f"model.layers.{i}."
        qw, kw, vw = sd[p + "self_attn.qkv_proj.weight"].split([nh * d, nkv * d, nkv * d])
        gw, uw = sd[p + "mlp.gate_up_proj.weight"].split([inter, inter])
        out[q + "input_layernorm.weight"] = sd[p + "input_layernorm.weight"]
        out[q + "self_attn.q_proj.weight"] = qw
        out[q + "self_attn.k_proj.weight"] = kw
        out[q + "self_attn.v_proj.weight"] = vw
        out[q + "self_attn.o_proj.weight"] = sd[p + "self_attn.o_proj.weight"]
        out[q + "post_attention_layernorm.weight"] = sd[p + "post_attention_layernorm.weight"]
        out[q + "mlp.gate_proj.weight"] = gw
        out[q + "mlp.up_proj.weight"] = uw
        out[q + "mlp.down_proj.weight"] = sd[p + "mlp.down_proj.weight"]
    out["model.norm.weight"] = sd["norm.weight"]
    return {k: v.detach().float().contiguous() for k, v in out.items()}


def training_state_dict(cfg, hf):
    """The inverse of hf_state_dict: HF names -> the fused parameters of train.Llama."""
    sd = {"embed_tokens.weight": hf["model.embed_tokens.weight"], "norm.weight":
          hf["model.norm.weight"]}
    for i in range(cfg["num_hidden_layers"]):
        p, q = f"layers.{i}.", f"model.layers.{i}."
        sd[p + "self_attn.qkv_proj.weight"] = torch.cat(
            [hf[q + f"self_attn.{n}_proj.weight"] for n in "qkv"])
        sd[p + "mlp.gate_up_proj.weight"] = torch.cat(
            [hf[q + "mlp.gate_proj.weight"], hf[q + "mlp.up_proj.weight"]])
        for n in ["input_layernorm.weight", "post_attention_layernorm.weight",
                  "self_attn.o_proj.weight", "mlp.down_proj.weight"]:
            sd[p + n] = hf[q + n]
    return sd


def bf16_bytes(t):
    """float tensor -> little-endian BF16 bytes (round to nearest even, as torch casts)."""
    return t.to(torch.bfloat16).contiguous().view(torch.int16).numpy().astype("<i2").tobytes()


def bf16_from_bytes(buf, shape):
    import numpy as np
    a = np.frombuffer(buf, dtype="<i2").copy()
    return torch.from_numpy(a).view(torch.bfloat16).reshape(shape)


# ---------------------------------------------------------------- safetensors

def write_safetensors(path, tensors, metadata=None):
    """tensors: name -> float tensor, stored as BF16. Layout: u64 LE header size, JSON
    header (name -> dtype, shape, data_offsets; space-padded to 8 bytes), raw data."""
    header, blobs, offset = {}, [], 0
    if metadata:
        header["__metadata__"] = metadata
    for name in sorted(tensors):
        data = bf16_bytes(tensors[name])
        header[name] = {"dtype": "BF16", "shape": list(tensors[name].shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    h = json.dumps(header, separators=(",", ":")).encode("utf-8")
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def read_safetensors(path):
    """-> name -> bfloat16 tensor (BF16 files only, which is what write_safetensors makes)."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        assert info["dtype"] == "BF16", info
        a, b = info["data_offsets"]
        out[name] = bf16_from_bytes(data[a:b], info["shape"])
    return out


# ---------------------------------------------------------------- GGUF

GGUF_UINT32, GGUF_INT32, GGUF_FLOAT32, GGUF_BOOL, GGUF_STRING, GGUF_ARRAY = 4, 5, 6, 7, 8, 9
GGML_TYPE_BF16 = 30
LLAMA_FTYPE_MOSTLY_BF16 = 32
TOKEN_TYPE_NORMAL, TOKEN_TYPE_CONTROL = 1, 3
GGUF_ALIGNMENT = 32


def _gguf_str(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def _gguf_value(vtype, value):
    if vtype == GGUF_STRING:
        return _gguf_str(value)
    if vtype == GGUF_UINT32:
        return struct.pack("<I", value)
    if vtype == GGUF_INT32:
        return struct.pack("<i", value)
    if vtype == GGUF_FLOAT32:
        return struct.pack("<f", value)
    if vtype == GGUF_BOOL:
        return struct.pack("<?", value)
    if vtype == GGUF_ARRAY:
        etype, items = value
        return (struct.pack("<IQ", etype, len(items)) +
                b"".join(_gguf_value(etype, x) for x in items))
    raise ValueError(vtype)


def permute_qk(w, n_head):
    """HF rotate_half rows -> GGUF/llama.cpp interleaved rotary rows (convert_hf_to_gguf.py's
    LlamaModel.permute)."""
    rows, cols = w.shape
    return w.reshape(n_head, 2, rows // n_head // 2, cols).swapaxes(1, 2).reshape(rows, cols)


def unpermute_qk(w, n_head):
    rows, cols = w.shape
    return w.reshape(n_head, rows // n_head // 2, 2, cols).swapaxes(1, 2).reshape(rows, cols)


def gguf_tensors(cfg, hf):
    """HF tensors -> GGUF names (llama.cpp's llama tensor map), Q/K permuted."""
    nh, nkv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    out = {"token_embd.weight": hf["model.embed_tokens.weight"]}
    names = {"input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q",
             "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
             "self_attn.o_proj": "attn_output", "post_attention_layernorm": "ffn_norm",
             "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}
    for i in range(cfg["num_hidden_layers"]):
        for hf_name, g_name in names.items():
            w = hf[f"model.layers.{i}.{hf_name}.weight"]
            if g_name == "attn_q":
                w = permute_qk(w, nh)
            elif g_name == "attn_k":
                w = permute_qk(w, nkv)
            out[f"blk.{i}.{g_name}.weight"] = w
    out["output_norm.weight"] = hf["model.norm.weight"]
    return out


def gguf_metadata(cfg, tok, chat_template):
    types = [TOKEN_TYPE_CONTROL if t in tok.special else TOKEN_TYPE_NORMAL for t in tok.tokens]
    a = "llama"
    return [
        ("general.architecture", GGUF_STRING, a),
        ("general.name", GGUF_STRING, MODEL_NAME),
        ("general.file_type", GGUF_UINT32, LLAMA_FTYPE_MOSTLY_BF16),
        ("general.alignment", GGUF_UINT32, GGUF_ALIGNMENT),
        (f"{a}.vocab_size", GGUF_UINT32, cfg["vocab_size"]),
        (f"{a}.context_length", GGUF_UINT32, cfg["max_position_embeddings"]),
        (f"{a}.embedding_length", GGUF_UINT32, cfg["hidden_size"]),
        (f"{a}.feed_forward_length", GGUF_UINT32, cfg["intermediate_size"]),
        (f"{a}.block_count", GGUF_UINT32, cfg["num_hidden_layers"]),
        (f"{a}.attention.head_count", GGUF_UINT32, cfg["num_attention_heads"]),
        (f"{a}.attention.head_count_kv", GGUF_UINT32, cfg["num_key_value_heads"]),
        (f"{a}.attention.key_length", GGUF_UINT32, cfg["head_dim"]),
        (f"{a}.attention.value_length", GGUF_UINT32, cfg["head_dim"]),
        (f"{a}.attention.layer_norm_rms_epsilon", GGUF_FLOAT32, cfg["rms_norm_eps"]),
        (f"{a}.rope.freq_base", GGUF_FLOAT32, cfg["rope_theta"]),
        (f"{a}.rope.dimension_count", GGUF_UINT32, cfg["head_dim"]),
        ("tokenizer.ggml.model", GGUF_STRING, "gpt2"),
        ("tokenizer.ggml.pre", GGUF_STRING, "gpt-2"),
        ("tokenizer.ggml.tokens", GGUF_ARRAY, (GGUF_STRING, tok.tokens)),
        ("tokenizer.ggml.token_type", GGUF_ARRAY, (GGUF_INT32, types)),
        ("tokenizer.ggml.merges", GGUF_ARRAY, (GGUF_STRING, [f"{x} {y}" for x, y in
                                                             tok.merges])),
        ("tokenizer.ggml.bos_token_id", GGUF_UINT32, tok.special[bpe.BOS_TOKEN]),
        ("tokenizer.ggml.eos_token_id", GGUF_UINT32, tok.special[bpe.EOS_TOKEN]),
        ("tokenizer.ggml.eot_token_id", GGUF_UINT32, tok.special[bpe.EOS_TOKEN]),
        ("tokenizer.ggml.padding_token_id", GGUF_UINT32, tok.special[bpe.BOS_TOKEN]),
        ("tokenizer.ggml.add_bos_token", GGUF_BOOL, False),
        ("tokenizer.ggml.add_eos_token", GGUF_BOOL, False),
        ("tokenizer.chat_template", GGUF_STRING, chat_template),
    ]


def write_gguf(path, metadata, tensors):
    """GGUF v3: header, metadata, tensor infos (dims innermost first), aligned data."""
    out = bytearray(b"GGUF")
    out += struct.pack("<IQQ", 3, len(tensors), len(metadata))
    for key, vtype, value in metadata:
        out += _gguf_str(key) + struct.pack("<I", vtype) + _gguf_value(vtype, value)
    blobs, offset = [], 0
    for name, t in tensors.items():
        data = bf16_bytes(t)
        dims = list(reversed(t.shape))  # ggml order: ne[0] is the innermost (row) length
        out += _gguf_str(name) + struct.pack("<I", len(dims))
        out += b"".join(struct.pack("<Q", n) for n in dims)
        out += struct.pack("<IQ", GGML_TYPE_BF16, offset)
        blobs.append(data)
        offset += len(data) + (-len(data) % GGUF_ALIGNMENT)
    out += b"\0" * (-len(out) % GGUF_ALIGNMENT)
    for data in blobs:
        out += data + b"\0" * (-len(data) % GGUF_ALIGNMENT)
    with open(path, "wb") as f:
        f.write(out)


def read_gguf(path):
    """A minimal reader for the files write_gguf makes: -> (metadata dict, name -> tensor)."""
    with open(path, "rb") as f:
        buf = f.read()
    pos = 0

    def take(fmt):
        nonlocal pos
        v = struct.unpack_from(fmt, buf, pos)
        pos += struct.calcsize(fmt)
        return v[0] if len(v) == 1 else v

    def string():
        nonlocal pos
        n = take("<Q")
        s = buf[pos:pos + n].decode("utf-8")
        pos += n
        return s

    def value(vtype):
        if vtype == GGUF_STRING:
            return string()
        if vtype == GGUF_ARRAY:
            etype, n = take("<I"), take("<Q")
            return [value(etype) for _ in range(n)]
        return take({GGUF_UINT32: "<I", GGUF_INT32: "<i", GGUF_FLOAT32: "<f",
                     GGUF_BOOL: "<?"}[vtype])

    assert buf[:4] == b"GGUF"
    pos = 4
    version, n_tensors, n_kv = take("<I"), take("<Q"), take("<Q")
    assert version == 3
    meta = {}
    for _ in range(n_kv):
        key = string()
        meta[key] = value(take("<I"))
    infos = []
    for _ in range(n_tensors):
        name = string()
        dims = [take("<Q") for _ in range(take("<I"))]
        ttype, off = take("<I"), take("<Q")
        assert ttype == GGML_TYPE_BF16
        infos.append((name, dims, off))
    align = meta.get("general.alignment", 32)
    start = pos + (-pos % align)
    tensors = {}
    for name, dims, off in infos:
        shape = list(reversed(dims))
        n = 2
        for x in shape:
            n *= x
        tensors[name] = bf16_from_bytes(buf[start + off:start + off + n], shape)
    return meta, tensors


# ---------------------------------------------------------------- HF folder

def config_json(cfg, tok):
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": cfg["vocab_size"],
        "hidden_size": cfg["hidden_size"],
        "intermediate_size": cfg["intermediate_size"],
        "num_hidden_layers": cfg["num_hidden_layers"],
        "num_attention_heads": cfg["num_attention_heads"],
        "num_key_value_heads": cfg["num_key_value_heads"],
        "head_dim": cfg["head_dim"],
        "hidden_act": "silu",
        "max_position_embeddings": cfg["max_position_embeddings"],
        "rms_norm_eps": cfg["rms_norm_eps"],
        "rope_theta": cfg["rope_theta"],
        "rope_scaling": None,
        "attention_bias": False,
        "attention_dropout": 0.0,
        "mlp_bias": False,
        "initializer_range": 0.02,
        "pretraining_tp": 1,
        "tie_word_embeddings": True,
        "use_cache": True,
        "bos_token_id": tok.special[bpe.BOS_TOKEN],
        "eos_token_id": tok.special[bpe.EOS_TOKEN],
        "pad_token_id": tok.special[bpe.BOS_TOKEN],
        "torch_dtype": "bfloat16",
        "transformers_version": "4.44.0",
    }


def generation_config_json(tok):
    return {
        "bos_token_id": tok.special[bpe.BOS_TOKEN],
        "eos_token_id": [tok.special[bpe.EOS_TOKEN], tok.special["<|endoftext|>"]],
        "pad_token_id": tok.special[bpe.BOS_TOKEN],
        "do_sample": False,
        "transformers_version": "4.44.0",
    }


def write_json(path, obj):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=2, ensure_ascii=False)
        f.write("\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--tokenizer", required=True, help="directory from bpe.py")
    ap.add_argument("--out-dir", required=True, help="the HF folder to (re)write")
    ap.add_argument("--gguf", required=True, help="the GGUF file to write")
    args = ap.parse_args()

    ck = torch.load(args.checkpoint, map_location="cpu")
    cfg = ck["config"]
    tok = bpe.Tokenizer.load(os.path.join(args.tokenizer, "tokenizer.json"))
    assert len(tok) == cfg["vocab_size"]
    hf = hf_state_dict(cfg, ck["state_dict"])

    os.makedirs(args.out_dir, exist_ok=True)
    write_safetensors(os.path.join(args.out_dir, "model.safetensors"), hf, {"format": "pt"})
    write_json(os.path.join(args.out_dir, "config.json"), config_json(cfg, tok))
    write_json(os.path.join(args.out_dir, "generation_config.json"), generation_config_json(tok))
    for name in ["tokenizer.json", "tokenizer_config.json"]:
        shutil.copyfile(os.path.join(args.tokenizer, name), os.path.join(args.out_dir, name))
    with open(os.path.join(args.tokenizer, "tokenizer_config.json"), encoding="utf-8") as f:
        chat_template = json.load(f)["chat_template"]
    os.makedirs(os.path.dirname(os.path.abspath(args.gguf)), exist_ok=True)
    write_gguf(args.gguf, gguf_metadata(cfg, tok, chat_template), gguf_tensors(cfg, hf))
    for p in [os.path.join(args.out_dir, n) for n in sorted(os.listdir(args.out_dir))] + [
            args.gguf]:
        print(f"export: {p} ({os.path.getsize(p):,} bytes)")


if __name__ == "__main__":
    main()
