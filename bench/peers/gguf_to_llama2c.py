#!/usr/bin/env python3
"""Convert a small Llama GGUF file (f32/f16 weights) to llama2.c's run.c format.

Writes MODEL.bin (the legacy "version 0" checkpoint run.c reads: a 7-int32 header, then every
weight as float32) and TOKENIZER.bin (max token length, then per token: float score, int32
length, bytes). Standard library only; meant for stories260K (1.2 MB) and other tiny models,
not for large files.

Facts relied on (from the GGUF and llama2.c formats):
- GGUF stores a matrix with ne[0] = input features contiguous, i.e. the same bytes as a
  row-major (out, in) PyTorch weight, which is what run.c's matmul reads.
- llama.cpp's Llama GGUF files keep Q and K in the interleaved-pair RoPE layout of the original
  Llama checkpoints, which is the layout run.c rotates, so no permutation is needed.
- run.c reads the RoPE tables (freq_cis_real/imag) from the legacy file but recomputes them;
  they are written for the format's sake (theta 10000, as run.c hard-codes).
"""

import argparse
import math
import struct
import sys
from array import array

GGUF_MAGIC = b"GGUF"
GGML_F32, GGML_F16 = 0, 1

# GGUF metadata value types -> struct format (scalar ones).
SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q",
          11: "<q", 12: "<d"}
T_STRING, T_ARRAY = 8, 9


class Reader:
    def __init__(self, data):
        self.data, self.pos = data, 0

    def take(self, fmt):
        (v,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return v

    def string(self):
        n = self.take("<Q")
        s = self.data[self.pos:self.pos + n]
        self.pos += n
        return s.decode("utf-8", errors="surrogateescape")

    def value(self, vtype):
        if vtype in SCALAR:
            return self.take(SCALAR[vtype])
        if vtype == T_STRING:
            return self.string()
        if vtype == T_ARRAY:
            etype, n = self.take("<I"), self.take("<Q")
            return [self.value(etype) for _ in range(n)]
        raise ValueError(f"unknown GGUF metadata type {vtype}")


def read_gguf(path):
    with open(path, "rb") as f:
        data = f.read()
    r = Reader(data)
    if data[:4] != GGUF_MAGIC:
        raise ValueError(f"{path}: not a GGUF file")
    r.pos = 4
    version = r.take("<I")
    if version < 2:
        raise ValueError(f"{path}: GGUF version {version} is not supported")
    n_tensors, n_kv = r.take("<Q"), r.take("<Q")
    meta = {}
    for _ in range(n_kv):
        key = r.string()
        meta[key] = r.value(r.take("<I"))
    infos = []
    for _ in range(n_tensors):
        name = r.string()
        dims = [r.take("<Q") for _ in range(r.take("<I"))]
        ttype, offset = r.take("<I"), r.take("<Q")
        infos.append((name, dims, ttype, offset))
    align = meta.get("general.alignment", 32)
    base = (r.pos + align - 1) // align * align
    tensors = {}
    for name, dims, ttype, offset in infos:
        count = math.prod(dims)
        start = base + offset
        if ttype == GGML_F32:
            a = array("f")
            a.frombytes(data[start:start + 4 * count])
        elif ttype == GGML_F16:
            raw = data[start:start + 2 * count]
            a = array("f", struct.unpack(f"<{count}e", raw))
        else:
            raise ValueError(f"{path}: tensor {name} has type {ttype}; only f32 and f16 are "
                             "converted (quantized types have no llama2.c counterpart)")
        if sys.byteorder != "little":
            a.byteswap()
        tensors[name] = (dims, a)
    return meta, tensors


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("gguf", help="input .gguf (a Llama model with f32 or f16 weights)")
    ap.add_argument("model_out", help="output llama2.c checkpoint (.bin)")
    ap.add_argument("tokenizer_out", help="output llama2.c tokenizer (.bin)")
    args = ap.parse_args()

    meta, t = read_gguf(args.gguf)
    arch = meta.get("general.architecture")
    if arch != "llama":
        sys.exit(f"gguf_to_llama2c: architecture {arch!r}, want 'llama'")
    p = f"{arch}."
    dim = meta[p + "embedding_length"]
    hidden = meta[p + "feed_forward_length"]
    n_layers = meta[p + "block_count"]
    n_heads = meta[p + "attention.head_count"]
    n_kv_heads = meta.get(p + "attention.head_count_kv", n_heads)
    seq_len = meta[p + "context_length"]
    theta = meta.get(p + "rope.freq_base", 10000.0)
    if abs(theta - 10000.0) > 1e-3:
        print(f"gguf_to_llama2c: warning: rope theta {theta}; run.c hard-codes 10000",
              file=sys.stderr)
    tokens = meta["tokenizer.ggml.tokens"]
    scores = meta.get("tokenizer.ggml.scores", [0.0] * len(tokens))
    vocab = len(tokens)
    head_size = dim // n_heads
    if head_size * n_heads != dim:
        sys.exit("gguf_to_llama2c: run.c needs n_heads * head_size == dim")

    def get(name, shape):
        dims, a = t[name]
        if list(reversed(dims)) != list(shape) and dims != list(shape[::-1]):
            sys.exit(f"gguf_to_llama2c: {name} has dims {dims}, want {list(shape[::-1])}")
        return a

    # A file that repeats the embedding as output.weight is written as a shared classifier,
    # as llama2.c's own checkpoints of tied models are.
    shared = "output.weight" not in t or t["output.weight"][1] == t["token_embd.weight"][1]
    out = array("f")
    out.extend(get("token_embd.weight", (vocab, dim)))
    per_layer = [
        ("attn_norm", (dim,)),
        ("attn_q", (n_heads * head_size, dim)),
        ("attn_k", (n_kv_heads * head_size, dim)),
        ("attn_v", (n_kv_heads * head_size, dim)),
        ("attn_output", (dim, n_heads * head_size)),
        ("ffn_norm", (dim,)),
        ("ffn_gate", (hidden, dim)),   # w1
        ("ffn_down", (dim, hidden)),   # w2
        ("ffn_up", (hidden, dim)),     # w3
    ]
    for suffix, shape in per_layer:  # run.c wants each kind for all layers, then the next kind
        for l in range(n_layers):
            out.extend(get(f"blk.{l}.{suffix}.weight", shape))
    out.extend(get("output_norm.weight", (dim,)))
    half = head_size // 2
    freqs = [1.0 / (10000.0 ** (2 * i / head_size)) for i in range(half)]
    out.extend(math.cos(pos * f) for pos in range(seq_len) for f in freqs)
    out.extend(math.sin(pos * f) for pos in range(seq_len) for f in freqs)
    if not shared:
        out.extend(get("output.weight", (vocab, dim)))
    if sys.byteorder != "little":
        out.byteswap()
    with open(args.model_out, "wb") as f:
        f.write(struct.pack("<7i", dim, hidden, n_layers, n_heads, n_kv_heads,
                            vocab if shared else -vocab, seq_len))
        out.tofile(f)

    bos = meta.get("tokenizer.ggml.bos_token_id", 1)
    eos = meta.get("tokenizer.ggml.eos_token_id", 2)
    pieces = []
    for i, tok in enumerate(tokens):
        # As llama2.c's tokenizer export: BOS/EOS on lines of their own, SentencePiece's
        # U+2581 as a space; byte tokens stay "<0xNN>", which run.c decodes itself.
        if i == bos:
            tok = "\n<s>\n"
        elif i == eos:
            tok = "\n</s>\n"
        pieces.append(tok.replace("\u2581", " ").encode("utf-8", errors="surrogateescape"))
    with open(args.tokenizer_out, "wb") as f:
        f.write(struct.pack("<i", max(len(b) for b in pieces)))
        for b, s in zip(pieces, scores):
            f.write(struct.pack("<fi", s, len(b)))
            f.write(b)
    print(f"wrote {args.model_out} (dim {dim}, hidden {hidden}, layers {n_layers}, heads "
          f"{n_heads}/{n_kv_heads}, vocab {vocab}{'' if shared else ' unshared'}, seq {seq_len}) "
          f"and {args.tokenizer_out}")


if __name__ == "__main__":
    main()
