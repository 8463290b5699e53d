#!/usr/bin/env node
// Encoding oracle: the upstream JavaScript port of Hugging Face tokenizers
// (@huggingface/tokenizers) encodes and decodes a batch of strings.
//
// stdin:  {"tokenizer_json_path": "...", "tokenizer_config_path": "..." (optional),
//          "texts": ["...", ...]}
// stdout: {"ids": [[...], ...], "decoded": ["...", ...]}
//
// Encoding adds no special tokens (no BOS/EOS from the post-processor); special-token
// text in the input is still matched, as tokenizers does. Decoding skips special tokens
// and does no clean-up of spaces: tokenizers' own decode has none (the clean-up is a
// transformers-side option that tokenizer_config.json may turn on), so it is forced off.
import { readFileSync } from "node:fs";
import process from "node:process";
import { Tokenizer } from "@huggingface/tokenizers";

function readStdin() {
  return readFileSync(0, "utf8");
}

function main() {
  const request = JSON.parse(readStdin());
  if (typeof request.tokenizer_json_path !== "string") {
    throw new Error("request needs a string 'tokenizer_json_path'");
  }
  if (!Array.isArray(request.texts)) throw new Error("request needs an array 'texts'");
  const tokenizerJson = JSON.parse(readFileSync(request.tokenizer_json_path, "utf8"));
  let tokenizerConfig = {};
  if (typeof request.tokenizer_config_path === "string" && request.tokenizer_config_path) {
    try {
      tokenizerConfig = JSON.parse(readFileSync(request.tokenizer_config_path, "utf8"));
    } catch (e) {
      if (e.code !== "ENOENT") throw e;
    }
  }
  const tokenizer = new Tokenizer(tokenizerJson, tokenizerConfig);
  const ids = [];
  const decoded = [];
  for (const text of request.texts) {
    const encoding = tokenizer.encode(text, { add_special_tokens: false });
    ids.push(encoding.ids);
    // decode() refuses an empty list; the text of no tokens is "".
    decoded.push(
      encoding.ids.length === 0
        ? ""
        : tokenizer.decode(encoding.ids, {
            skip_special_tokens: true,
            clean_up_tokenization_spaces: false,
          }),
    );
  }
  process.stdout.write(JSON.stringify({ ids, decoded }));
}

try {
  main();
} catch (e) {
  process.stderr.write(`encode_oracle.mjs: ${e && e.stack ? e.stack : e}\n`);
  process.exit(1);
}
