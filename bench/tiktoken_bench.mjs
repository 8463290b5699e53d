#!/usr/bin/env node
// The tiktoken (npm, WASM) counterpart of bench/tokenizer_bench.cc: same corpus, same
// chunking, same prompt rule, same id hash, so the figures compare one to one.
//
//   node bench/tiktoken_bench.mjs --corpus build/release/tokenizer_corpus.txt \
//        [--encoding gpt2] [--repeat 5] [--chunk-bytes 4096] [--prompt-tokens 32768]
//        [--prompt-runs 50] [--no-parse-special] [--json]
//
// Chunks are whole lines, each at least --chunk-bytes bytes of UTF-8 (the last may be
// shorter); they are decoded to JS strings before timing, and each is one encode() call,
// whose time includes tiktoken's own JS -> WASM string copy and the returned Uint32Array.
// encode(text, "all") matches Baton's parse_special=true (special-token text becomes the
// special token); --no-parse-special uses encode_ordinary(), Baton's --no-parse-special.
// tiktoken is loaded from tests/oracle/node_modules (npm install there), or from the
// node_modules folder that $TIKTOKEN_NODE_MODULES names.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import path from "node:path";

const usage = `usage: node bench/tiktoken_bench.mjs --corpus FILE [--encoding gpt2|cl100k_base|...]
       [--repeat N] [--chunk-bytes N] [--prompt-tokens N] [--prompt-runs N]
       [--no-parse-special] [--json]
Single-threaded tiktoken encode throughput (MB/s, MB = 10^6 bytes) on whole-line chunks
of the corpus, and the latency of encoding a ~32k-token prefix of it.`;

function parseArgs(argv) {
  const o = {
    corpus: null, encoding: "gpt2", repeat: 5, chunkBytes: 4096, promptTokens: 32768,
    promptRuns: 50, parseSpecial: true, json: false,
  };
  for (let i = 0; i < argv.length; ++i) {
    const a = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
      return argv[++i];
    };
    const int = () => {
      const v = Number(value());
      if (!Number.isInteger(v) || v < 1) throw new Error(`${a} needs a positive integer`);
      return v;
    };
    if (a === "-h" || a === "--help") { console.log(usage); process.exit(0); }
    else if (a === "--corpus") o.corpus = value();
    else if (a === "--encoding") o.encoding = value();
    else if (a === "--repeat") o.repeat = int();
    else if (a === "--chunk-bytes") o.chunkBytes = int();
    else if (a === "--prompt-tokens") o.promptTokens = int();
    else if (a === "--prompt-runs") o.promptRuns = int();
    else if (a === "--no-parse-special") o.parseSpecial = false;
    else if (a === "--json") o.json = true;
    else throw new Error(`unknown argument ${a}\n${usage}`);
  }
  if (!o.corpus) throw new Error(`--corpus is required\n${usage}`);
  return o;
}

function loadTiktoken() {
  const here = path.dirname(fileURLToPath(import.meta.url));
  const base = process.env.TIKTOKEN_NODE_MODULES
    ? path.join(process.env.TIKTOKEN_NODE_MODULES, "..", "package.json")
    : path.join(here, "..", "tests", "oracle", "package.json");
  return createRequire(base)("tiktoken");
}

// Nearest-rank quantile, as tokenizer_bench.cc computes it.
function quantile(values, q) {
  const v = [...values].sort((a, b) => a - b);
  let rank = Math.ceil(q * v.length - 1e-6);
  rank = Math.min(Math.max(rank, 1), v.length);
  return v[rank - 1];
}

function chunks(buf, minBytes) {
  const out = [];
  let start = 0;
  let pos = 0;
  while (pos < buf.length) {
    const nl = buf.indexOf(10, pos);
    pos = nl < 0 ? buf.length : nl + 1;
    if (pos - start >= minBytes || pos === buf.length) {
      out.push(buf.subarray(start, pos).toString("utf8"));
      start = pos;
    }
  }
  return out;
}

const nowS = () => Number(process.hrtime.bigint()) / 1e9;
// CPU time of the whole process (user + system; node's helper threads included), for
// comparison with tokenizer_bench's thread CPU time on a shared machine.
const cpuS = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
};

function main() {
  const opt = parseArgs(process.argv.slice(2));
  const buf = readFileSync(opt.corpus);
  if (buf.length === 0) throw new Error(`${opt.corpus} is empty`);
  const { get_encoding } = loadTiktoken();
  const loadStart = nowS();
  const enc = get_encoding(opt.encoding);
  const loadS = nowS() - loadStart;
  const encode = opt.parseSpecial ? (s) => enc.encode(s, "all") : (s) => enc.encode_ordinary(s);

  const parts = chunks(buf, opt.chunkBytes);

  // Untimed pass: token count and id hash (FNV-1a 32 over each id's 4 LE bytes).
  let tokens = 0;
  let h = 2166136261;
  for (const s of parts) {
    const ids = encode(s);
    tokens += ids.length;
    for (const id of ids) {
      for (let shift = 0; shift < 32; shift += 8) h = Math.imul(h ^ ((id >>> shift) & 0xff), 16777619) >>> 0;
    }
  }

  const passS = [];
  const passCpuS = [];
  for (let r = 0; r < opt.repeat; ++r) {
    let check = 0;
    const cpuStart = cpuS();
    const start = nowS();
    for (const s of parts) check += encode(s).length;
    passS.push(nowS() - start);
    passCpuS.push(cpuS() - cpuStart);
    if (check !== tokens) throw new Error(`pass ${r} gave ${check} tokens, not ${tokens}`);
  }
  const mb = buf.length / 1e6;
  const bestS = quantile(passS, 0);
  const medianS = quantile(passS, 0.5);

  // The prompt: the longest line-ending prefix with at most promptTokens tokens.
  const lineEnds = [];
  for (let p = buf.indexOf(10); p >= 0; p = buf.indexOf(10, p + 1)) lineEnds.push(p + 1);
  const count = (bytes) => encode(buf.subarray(0, bytes).toString("utf8")).length;
  let lo = 0;
  let hi = lineEnds.length;
  while (lo < hi) {
    const mid = Math.floor((lo + hi + 1) / 2);
    if (count(lineEnds[mid - 1]) <= opt.promptTokens) lo = mid;
    else hi = mid - 1;
  }
  const promptBytes = lo ? lineEnds[lo - 1] : 0;
  const prompt = buf.subarray(0, promptBytes).toString("utf8");
  const promptTokens = prompt.length ? encode(prompt).length : 0;
  const promptS = [];
  const promptCpuS = [];
  for (let r = 0; r < opt.promptRuns + 3; ++r) {
    const cpuStart = cpuS();
    const start = nowS();
    const n = encode(prompt).length;
    const s = nowS() - start;
    const cpu = cpuS() - cpuStart;
    if (n !== promptTokens) throw new Error("prompt token count changed");
    if (r >= 3) {
      promptS.push(s);
      promptCpuS.push(cpu);
    }
  }
  enc.free();

  const j = {
    impl: "tiktoken",
    encoding: opt.encoding,
    corpus: opt.corpus,
    corpus_bytes: buf.length,
    chunks: parts.length,
    chunk_bytes: opt.chunkBytes,
    parse_special: opt.parseSpecial,
    tokens,
    ids_fnv1a32: h.toString(16).padStart(8, "0"),
    load_ms: loadS * 1e3,
    repeat: opt.repeat,
    pass_s: passS,
    mb_per_s_best: mb / bestS,
    mb_per_s_median: mb / medianS,
    mb_per_s_cpu_best: mb / quantile(passCpuS, 0),
    mb_per_s_cpu_median: mb / quantile(passCpuS, 0.5),
    tokens_per_s_best: tokens / bestS,
    tokens_per_s_median: tokens / medianS,
    prompt_bytes: promptBytes,
    prompt_tokens: promptTokens,
    prompt_runs: opt.promptRuns,
    prompt_ms_median: quantile(promptS, 0.5) * 1e3,
    prompt_ms_p90: quantile(promptS, 0.9) * 1e3,
    prompt_ms_best: quantile(promptS, 0) * 1e3,
    prompt_cpu_ms_median: quantile(promptCpuS, 0.5) * 1e3,
    prompt_cpu_ms_p90: quantile(promptCpuS, 0.9) * 1e3,
  };
  if (opt.json) {
    console.log(JSON.stringify(j));
    return;
  }
  const f = (x) => x.toFixed(2);
  console.log(`tiktoken    ${opt.encoding} (node ${process.version}, loaded in ${loadS * 1e3 | 0} ms)`);
  console.log(`corpus      ${opt.corpus}: ${buf.length} bytes, ${parts.length} chunks of >= ${opt.chunkBytes} bytes`);
  console.log(`tokens      ${tokens} (${f(buf.length / tokens)} bytes/token), ids fnv1a32 ${j.ids_fnv1a32}`);
  console.log(`throughput  ${f(j.mb_per_s_best)} MB/s best, ${f(j.mb_per_s_median)} MB/s median of ${opt.repeat} (process CPU time: ${f(j.mb_per_s_cpu_best)} best); ${j.tokens_per_s_best | 0} tokens/s best`);
  console.log(`prompt      ${promptTokens} tokens (${promptBytes} bytes): ${f(j.prompt_ms_median)} ms median, ${f(j.prompt_ms_p90)} ms p90, ${f(j.prompt_ms_best)} ms best of ${opt.promptRuns} (process CPU time: ${f(j.prompt_cpu_ms_median)} ms median)`);
}

try {
  main();
} catch (e) {
  console.error(`tiktoken_bench: ${e.message}`);
  process.exit(1);
}
