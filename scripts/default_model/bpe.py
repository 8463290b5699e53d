#!/usr/bin/env python3
"""A byte-level BPE tokenizer (GPT-2 style): trainer, encoder, decoder and HF writer.

Pre-tokenization is GPT-2's split,
    's|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+
written as is into tokenizer.json (a Split pre-tokenizer; PCRE2 and the Rust `tokenizers`
read it) and into the GGUF as tokenizer.ggml.pre = "gpt-2". Python's `re` has no \\p{L},
so this module runs an equivalent pattern ([^\\W\\d_] for letters, \\d for numbers); the two
agree on every ASCII text, which is all the corpus holds.

Special tokens take ids 0..2, the 256 byte tokens the next ids (in byte order), and then
one token per merge.

usage: bpe.py --corpus FILE --vocab-size N --out DIR    (writes DIR/tokenizer.json and
       DIR/tokenizer_config.json)
"""
import argparse
import collections
import json
import os
import re

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
BOS_TOKEN = "<|endoftext|>"
EOS_TOKEN = "<|im_end|>"  # ends an assistant turn; stories end with <|endoftext|>

GPT2_SPLIT_REGEX = (r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|"
                    r"\s+(?!\S)|\s+")
_PY_SPLIT = re.compile(r"'s|'t|'re|'ve|'m|'ll|'d| ?[^\W\d_]+| ?\d+| ?(?:[^\s\w]|_)+|"
                       r"\s+(?!\S)|\s+")
_SPECIAL_SPLIT = re.compile("(" + "|".join(re.escape(t) for t in SPECIAL_TOKENS) + ")")

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")


def bytes_to_unicode():
    """GPT-2's reversible map from the 256 bytes to printable characters."""
    bs = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1)) +
          list(range(ord("\xae"), ord("\xff") + 1)))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


BYTE_TO_CHAR = bytes_to_unicode()
CHAR_TO_BYTE = {c: b for b, c in BYTE_TO_CHAR.items()}


def pre_tokenize(text):
    """Text without special tokens -> byte-level pieces (strings of mapped characters)."""
    return ["".join(BYTE_TO_CHAR[b] for b in m.encode("utf-8")) for m in _PY_SPLIT.findall(text)]


def train(texts, vocab_size):
    """Returns the list of merges (pairs of token strings), most frequent first."""
    counts = collections.Counter()
    for text in texts:
        for part in _SPECIAL_SPLIT.split(text):
            if part and part not in SPECIAL_TOKENS:
                counts.update(pre_tokenize(part))
    words = [[list(w), n] for w, n in sorted(counts.items())]
    n_merges = vocab_size - len(SPECIAL_TOKENS) - 256
    merges = []
    # pair -> count, and pair -> set of word indices holding it, kept up to date.
    pair_count = collections.Counter()
    where = collections.defaultdict(set)
    for i, (syms, n) in enumerate(words):
        for p in zip(syms, syms[1:]):
            pair_count[p] += n
            where[p].add(i)
    while len(merges) < n_merges and pair_count:
        # Most frequent; ties go to the smallest pair so the result never depends on order.
        best = min(pair_count.items(), key=lambda kv: (-kv[1], kv[0]))[0]
        if pair_count[best] < 2:
            break
        merges.append(best)
        merged = best[0] + best[1]
        for i in sorted(where.pop(best, ())):
            syms, n = words[i]
            for p in zip(syms, syms[1:]):
                pair_count[p] -= n
                if pair_count[p] <= 0:
                    del pair_count[p]
            out, j = [], 0
            while j < len(syms):
                if j + 1 < len(syms) and syms[j] == best[0] and syms[j + 1] == best[1]:
                    out.append(merged)
                    j += 2
                else:
                    out.append(syms[j])
                    j += 1
            words[i][0] = out
            for p in zip(out, out[1:]):
                pair_count[p] += n
                where[p].add(i)
    return merges


class Tokenizer:
    def __init__(self, merges):
        self.merges = [tuple(m) for m in merges]
        self.rank = {m: r for r, m in enumerate(self.merges)}
        tokens = list(SPECIAL_TOKENS) + [BYTE_TO_CHAR[b] for b in range(256)]
        tokens += [a + b for a, b in self.merges]
        self.tokens = tokens
        self.vocab = {t: i for i, t in enumerate(tokens)}
        assert len(self.vocab) == len(tokens), "duplicate token"
        self.special = {t: self.vocab[t] for t in SPECIAL_TOKENS}
        self._cache = {}

    def __len__(self):
        return len(self.tokens)

    def _bpe(self, piece):
        ids = self._cache.get(piece)
        if ids is not None:
            return ids
        syms = list(piece)
        while len(syms) > 1:
            best, best_rank = None, None
            for j in range(len(syms) - 1):
                r = self.rank.get((syms[j], syms[j + 1]))
                if r is not None and (best_rank is None or r < best_rank):
                    best, best_rank = j, r
            if best is None:
                break
            syms[best:best + 2] = [syms[best] + syms[best + 1]]
        ids = [self.vocab[s] for s in syms]
        self._cache[piece] = ids
        return ids

    def encode(self, text, parse_special=True):
        ids = []
        parts = _SPECIAL_SPLIT.split(text) if parse_special else [text]
        for part in parts:
            if not part:
                continue
            if parse_special and part in self.special:
                ids.append(self.special[part])
                continue
            for piece in pre_tokenize(part):
                ids.extend(self._bpe(piece))
        return ids

    def decode(self, ids, skip_special=False):
        out = bytearray()
        for i in ids:
            t = self.tokens[i]
            if t in self.special:
                if not skip_special:
                    out += t.encode("utf-8")
                continue
            out += bytes(CHAR_TO_BYTE[c] for c in t)
        return out.decode("utf-8", errors="replace")

    # ------------------------------------------------------------ HF files

    def tokenizer_json(self):
        added = [{"id": self.special[t], "content": t, "single_word": False, "lstrip": False,
                  "rstrip": False, "normalized": False, "special": True} for t in SPECIAL_TOKENS]
        return {
            "version": "1.0",
            "truncation": None,
            "padding": None,
            "added_tokens": added,
            "normalizer": None,
            "pre_tokenizer": {
                "type": "Sequence",
                "pretokenizers": [
                    {"type": "Split", "pattern": {"Regex": GPT2_SPLIT_REGEX},
                     "behavior": "Isolated", "invert": False},
                    {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                     "use_regex": False},
                ],
            },
            "post_processor": None,
            "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                        "use_regex": True},
            "model": {
                "type": "BPE", "dropout": None, "unk_token": None,
                "continuing_subword_prefix": None, "end_of_word_suffix": None,
                "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                "vocab": self.vocab,
                "merges": [f"{a} {b}" for a, b in self.merges],
            },
        }

    def tokenizer_config_json(self, model_max_length):
        decoder = {str(self.special[t]): {"content": t, "lstrip": False, "normalized": False,
                                          "rstrip": False, "single_word": False,
                                          "special": True} for t in SPECIAL_TOKENS}
        return {
            "add_bos_token": False,
            "add_eos_token": False,
            "added_tokens_decoder": decoder,
            "additional_special_tokens": ["<|im_start|>", "<|im_end|>"],
            "bos_token": BOS_TOKEN,
            "eos_token": EOS_TOKEN,
            "pad_token": BOS_TOKEN,
            "unk_token": None,
            "chat_template": CHAT_TEMPLATE,
            "clean_up_tokenization_spaces": False,
            "model_max_length": model_max_length,
            "tokenizer_class": "PreTrainedTokenizerFast",
        }

    def save(self, out_dir, model_max_length=512):
        os.makedirs(out_dir, exist_ok=True)
        with open(os.path.join(out_dir, "tokenizer.json"), "w", encoding="utf-8") as f:
            json.dump(self.tokenizer_json(), f, ensure_ascii=False, indent=2)
            f.write("\n")
        with open(os.path.join(out_dir, "tokenizer_config.json"), "w", encoding="utf-8") as f:
            json.dump(self.tokenizer_config_json(model_max_length), f, ensure_ascii=False,
                      indent=2)
            f.write("\n")

    @classmethod
    def load(cls, path):
        """Reads back a tokenizer.json written by save()."""
        with open(path, encoding="utf-8") as f:
            j = json.load(f)
        merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m)
                  for m in j["model"]["merges"]]
        tok = cls(merges)
        assert tok.vocab == j["model"]["vocab"], "tokenizer.json has an unexpected vocab order"
        return tok


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", required=True, help="training text (UTF-8)")
    ap.add_argument("--vocab-size", type=int, default=1024)
    ap.add_argument("--out", required=True, help="directory for tokenizer.json and "
                    "tokenizer_config.json")
    args = ap.parse_args()
    with open(args.corpus, encoding="utf-8") as f:
        text = f.read()
    tok = Tokenizer(train([text], args.vocab_size))
    tok.save(args.out)
    print(f"bpe: {len(tok)} tokens ({len(tok.merges)} merges) -> {args.out}")


if __name__ == "__main__":
    main()
