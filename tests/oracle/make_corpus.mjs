#!/usr/bin/env node
// Deterministic generator of tokenizer test strings: the same seed and count always give
// the same corpus, byte for byte. Prints one JSON object per line: {"text": "..."}.
//
//   node tests/oracle/make_corpus.mjs [--count N] [--seed S] [--unicode-new]
//
// The corpus starts with a fixed list of hand-written edge cases, then fills up to
// --count with random compositions of fragments: mixed scripts, emoji (ZWJ sequences,
// flags, skin tones, keycaps), whitespace runs, numbers, code, contractions in odd case,
// punctuation runs, combining characters (NFC and NFD forms) and special-token text.
// The fixed list also holds the smallest inputs of past discrepancies (U+180E).
//
// Letters and digits come only from blocks assigned by Unicode 6.0 or earlier, because
// the implementations compared ship different Unicode versions (V8's ICU, PCRE2,
// utf8proc, Oniguruma), and a letter new in Unicode 15 is \p{L} to one and unassigned to
// another. --unicode-new adds letters from Unicode 15.0-16.0 (which the Rust
// `tokenizers` 0.23 and the oracle treat as \p{L}) to probe exactly that.
//
// Inputs on which the JavaScript oracle is known to differ from the Rust `tokenizers`
// library are kept out, or marked so the test can leave them out:
//   - U+0085 and U+FEFF: the oracle's built-in GPT-2 ByteLevel regex uses JavaScript's
//     \s, which has U+FEFF and lacks U+0085; Oniguruma's \s (White_Space) is the other
//     way round. The corpus has both; the test skips them for ByteLevel(use_regex) only.
//   - U+017F LATIN SMALL LETTER LONG S after an apostrophe: Oniguruma's (?i:'s) matches
//     "'ſ" by Unicode case folding; the oracle folds ASCII only. Left out.
//   - Combining marks and letters assigned after Unicode 9.0 where NFC reorders or
//     composes them: Rust's NFC (unicode-normalization-alignments) knows Unicode 9.0
//     only, the oracle and utf8proc know later versions. Left out (marks used here are
//     all from Unicode 5.0 or earlier).
import process from "node:process";

function parseArgs(argv) {
  const args = { count: 2000, seed: 20240611, unicodeNew: false };
  for (let i = 2; i < argv.length; ++i) {
    const a = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
      return argv[++i];
    };
    if (a === "--count") args.count = Number.parseInt(value(), 10);
    else if (a === "--seed") args.seed = Number.parseInt(value(), 10);
    else if (a === "--unicode-new") args.unicodeNew = true;
    else throw new Error(`unknown argument ${a} (use --count N, --seed S, --unicode-new)`);
  }
  if (!Number.isInteger(args.count) || args.count < 0) throw new Error("--count must be >= 0");
  if (!Number.isInteger(args.seed)) throw new Error("--seed must be an integer");
  return args;
}

// mulberry32: small, fast and the same on every platform (integer arithmetic only).
function makeRng(seed) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const rng = {
    next,
    int: (lo, hi) => lo + Math.floor(next() * (hi - lo + 1)),  // inclusive
    pick: (list) => list[Math.floor(next() * list.length)],
    chance: (p) => next() < p,
    codePoint: (lo, hi) => String.fromCodePoint(rng.int(lo, hi)),
    repeat: (n, f) => Array.from({ length: n }, f).join(""),
  };
  return rng;
}

const cp = (...points) => String.fromCodePoint(...points);

// ---- fragment makers ------------------------------------------------------------------

const LATIN_WORDS = [
  "the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "Hello", "world", "HELLO",
  "café", "naïve", "résumé", "façade", "jalapeño", "Zürich", "Ærøskøbing", "smörgåsbord",
  "Łódź", "Kraków", "Dvořák", "São", "Paulo", "coöperate", "Straße", "ÉCOLE", "Ñandú",
  "İstanbul", "ılık", "Ğ", "œuvre", "Þórr", "ðæt", "Ångström", "señor", "crème", "brûlée",
  "tokenizer", "Tokenization", "UPPERCASE", "camelCase", "snake_case", "kebab-case",
  "a", "I", "x", "internationalization", "pneumonoultramicroscopicsilicovolcanoconiosis",
];
const CYRILLIC_WORDS = ["Привет", "мир", "съешь", "ещё", "этих", "мягких", "французских",
  "булок", "ЁЛКА", "Україна", "їжак", "Ґанок", "Србија", "Ђорђе", "Қазақстан"];
const GREEK_WORDS = ["Γειά", "σου", "κόσμε", "ΑΒΓΔ", "αλφάβητο", "ψυχή", "Ωμέγα", "ϊΐ",
  "ΰ", "σς", "Ἀθῆναι"];
const ARABIC_WORDS = ["مرحبا", "بالعالم", "السَّلَامُ", "عَلَيْكُمْ", "القاهرة", "٢٠٢٤",
  "كتاب", "لا", "ﻻ"];
const HEBREW_WORDS = ["שלום", "עולם", "בְּרֵאשִׁית", "ירושלים", "תל־אביב"];
const DEVANAGARI_WORDS = ["नमस्ते", "दुनिया", "हिन्दी", "क्षत्रिय", "ज्ञान", "श्री",
  "१२३४", "क़िला", "ड़"];
const THAI_WORDS = ["สวัสดี", "ชาวโลก", "ภาษาไทย", "กรุงเทพมหานคร", "๑๒๓", "น้ำ"];
const CJK_WORDS = ["你好", "世界", "中文分词", "漢字", "東京都", "北京大学", "龍", "𠀋", "𪚥",
  "日本語のテキスト", "繁體中文"];
const HANGUL_WORDS = ["안녕하세요", "세계", "한국어", "대한민국", "ㄱㄴㄷ", "똠방각하"];
const KANA_WORDS = ["こんにちは", "ひらがな", "カタカナ", "ｶﾀｶﾅ", "ラーメン", "ゔ", "ヴ",
  "きゃりーぱみゅぱみゅ", "ー", "ゝゞ"];

const SCRIPT_RANGES = [
  [0x00c0, 0x00d6], [0x00d8, 0x00f6], [0x00f8, 0x00ff], [0x0100, 0x017e],  // Latin
  [0x0410, 0x044f],                                                        // Cyrillic
  [0x03b1, 0x03c9], [0x0391, 0x03a1], [0x03a3, 0x03a9],                    // Greek
  [0x0621, 0x063a], [0x0641, 0x064a],                                      // Arabic
  [0x05d0, 0x05ea],                                                        // Hebrew
  [0x0905, 0x0939],                                                        // Devanagari
  [0x0e01, 0x0e2e],                                                        // Thai
  [0x4e00, 0x9fa5],                                                        // CJK
  [0xac00, 0xd7a3],                                                        // Hangul
  [0x3041, 0x3096], [0x30a1, 0x30fa],                                      // kana
];

function scriptWord(r) {
  const lists = [LATIN_WORDS, LATIN_WORDS, CYRILLIC_WORDS, GREEK_WORDS, ARABIC_WORDS,
    HEBREW_WORDS, DEVANAGARI_WORDS, THAI_WORDS, CJK_WORDS, HANGUL_WORDS, KANA_WORDS];
  if (r.chance(0.25)) {
    const [lo, hi] = r.pick(SCRIPT_RANGES);
    return r.repeat(r.int(1, 8), () => r.codePoint(lo, hi));
  }
  return r.pick(r.pick(lists));
}

const EMOJI = ["😀", "😂", "🤖", "🚀", "❤️", "❤", "✨", "🔥", "👍", "🎉", "🥲", "🐍", "☃",
  "⭐", "🍣", "🧑", "🙏", "💯", "©", "®", "™", "↩️", "⚠️"];
const ZWJ = ["👨‍👩‍👧‍👦", "👩‍💻", "🏳️‍🌈", "🏴‍☠️", "👁️‍🗨️", "🧑🏽‍🚀", "👩🏿‍❤️‍💋‍👨🏻",
  "🐕‍🦺", "❤️‍🔥"];
const SKIN = [0x1f3fb, 0x1f3fc, 0x1f3fd, 0x1f3fe, 0x1f3ff];
const FLAGS = ["US", "GB", "JP", "DE", "FR", "BR", "IN", "UA", "KR", "CN"];

function emoji(r) {
  switch (r.int(0, 5)) {
    case 0: return r.pick(EMOJI);
    case 1: return r.pick(ZWJ);
    case 2: return r.pick(["👋", "👍", "🤝", "✋", "🙌", "🏃"]) + cp(r.pick(SKIN));
    case 3: {
      const f = r.pick(FLAGS);
      return cp(0x1f1e6 + f.charCodeAt(0) - 65, 0x1f1e6 + f.charCodeAt(1) - 65);
    }
    case 4: return r.pick(["1", "#", "*", "9"]) + "\uFE0F\u20E3";  // keycap
    default:  // England's subdivision flag: tag characters
      return "🏴\u{E0067}\u{E0062}\u{E0065}\u{E006E}\u{E0067}\u{E007F}";
  }
}

const WS_ATOMS = [" ", " ", " ", "\t", "\n", "\r\n", "\n\n\n", "\u00A0", "\u3000", "\u2009",
  "\u202F", "\u2003", "\r", "\v", "\f", "\u2028", "\u1680", "\u200B"];
// Rare, since the test cannot check them on every tokenizer (see the top of this file).
const RARE_WS = ["\u0085", "\uFEFF", "\u0085 ", " \uFEFF"];

function whitespace(r) {
  if (r.chance(0.02)) return r.pick(RARE_WS);
  if (r.chance(0.3)) return " ".repeat(r.int(2, 40));
  if (r.chance(0.2)) return "\t".repeat(r.int(1, 6));
  return r.repeat(r.int(1, 5), () => r.pick(WS_ATOMS));
}

function number(r) {
  const digits = (n) => r.repeat(n, () => String(r.int(0, 9)));
  switch (r.int(0, 11)) {
    case 0: return digits(r.int(1, 40));
    case 1: return `${digits(r.int(1, 6))}.${digits(r.int(1, 8))}`;
    case 2: return r.pick(["1,000,000", "12,345.67", "-42", "+7", "3.14159", "1e-10",
      "6.022e23", "0x1F", "0b1011", "1_000_000", "99%", "$1,299.99", "€5", "¥100", "£3"]);
    case 3: return `${digits(3)}-${digits(3)}-${digits(4)}`;
    case 4: return `${r.int(1, 12)}/${r.int(1, 28)}/${r.int(1900, 2099)}`;
    case 5: return `${r.int(0, 23)}:${String(r.int(0, 59)).padStart(2, "0")}`;
    case 6: return r.pick(["١٢٣٤٥", "۱۲۳", "१२३", "๑๒๓", "１２３４", "²³¹", "½¼¾", "ⅫⅣ",
      "①②③", "〇一二", "𝟙𝟚𝟛"]);
    case 7: return `v${r.int(0, 9)}.${r.int(0, 99)}.${r.int(0, 999)}`;
    case 8: return `${r.int(0, 255)}.${r.int(0, 255)}.${r.int(0, 255)}.${r.int(0, 255)}`;
    case 9: return digits(r.int(1, 3)) + r.pick(["st", "nd", "rd", "th", "km", "kg", "px"]);
    case 10: return `${digits(r.int(1, 4))}x${digits(r.int(1, 4))}`;
    default: return String(r.int(0, 1000000));
  }
}

const CODE = [
  "def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n",
  "class Foo:\n\tdef __init__(self):\n\t\tself.x = {'a': 1, \"b\": [2, 3]}\n",
  "for i in range(10):\n    print(f\"{i:>4d} -> {i**2}\")  # squares\n",
  "import numpy as np\nx = np.zeros((3, 4), dtype=np.float32)\nx[..., 0] += 1.5e-3\n",
  "#include <vector>\n\nint main() {\n  std::vector<int> v{1, 2, 3};\n  for (auto& x : v) x *= 2;\n  return 0;\n}\n",
  "template <typename T>\nconstexpr T Max(T a, T b) noexcept { return a > b ? a : b; }\n",
  "if (p != nullptr && p->next) {\n    p = p->next;  // advance\n} else {\n    delete p;\n}\n",
  "{\n  \"name\": \"baton\",\n  \"version\": \"1.0.0\",\n  \"tags\": [\"llm\", \"serving\"],\n  \"nested\": {\"a\": null, \"b\": true, \"c\": -1.5}\n}",
  "[{\"id\":1,\"text\":\"Hello\\nworld\"},{\"id\":2,\"text\":\"\\u00e9\"}]",
  "SELECT id, name FROM users WHERE age >= 18 ORDER BY name DESC;",
  "<div class=\"x\"><p>Hi &amp; bye</p></div>",
  "fn main() {\n    let s: &str = \"héllo\";\n    println!(\"{s:?}\");\n}\n",
  "    \n\t  \n    return;    \n",
  "x=>x*2; a===b ?? c; i++; j--; k<<=2; m>>>=1; n!==o",
  "$ ls -la | grep '\\.cc$' && echo \"done\" 2>&1 >/dev/null",
];

function code(r) {
  const snippet = r.pick(CODE);
  if (!r.chance(0.3)) return snippet;
  const indent = r.pick(["  ", "    ", "\t", "        "]);
  return snippet.split("\n").map((l) => (l ? indent + l : l)).join("\n");
}

const CONTRACTION_BASES = ["I", "you", "we", "they", "it", "he", "she", "that", "there", "who",
  "YOU", "We", "Can", "don", "ISN", "won"];
const CONTRACTIONS = ["'s", "'S", "'t", "'T", "'re", "'RE", "'Re", "'rE", "'ve", "'VE", "'Ve",
  "'m", "'M", "'ll", "'LL", "'Ll", "'lL", "'d", "'D", "’s", "’LL", "'", "''", "n't", "N'T"];

function contraction(r) {
  const base = r.chance(0.85) ? r.pick(CONTRACTION_BASES) : "";
  let s = base + r.pick(CONTRACTIONS);
  if (r.chance(0.3)) s += r.pick(["", "s", "t", "ll", "x", " ", "'s"]);
  return s;
}

const PUNCT = ["!", "?", ".", ",", ";", ":", "...", "…", "—", "–", "-", "«", "»", "„", "“",
  "”", "‘", "’", "(", ")", "[", "]", "{", "}", "<", ">", "/", "\\", "|", "@", "#", "$", "%",
  "^", "&", "*", "_", "=", "+", "~", "`", "'", "\"", "¿", "¡", "。", "、", "！", "？", "：",
  "·", "•", "§", "¶", "†", "‽", "⁂", "※"];

function punctuation(r) {
  if (r.chance(0.3)) return r.pick(PUNCT).repeat(r.int(2, 12));
  return r.repeat(r.int(1, 8), () => r.pick(PUNCT));
}

// Each entry: [NFC form, NFD form]; plus forms that NFC changes although they look composed.
const COMBINING = [
  ["é", "e\u0301"], ["ñ", "n\u0303"], ["ö", "o\u0308"], ["Å", "A\u030A"], ["ệ", "e\u0323\u0302"],
  ["Tiếng Việt", "Tie\u0302\u0301ng Vie\u0323\u0302t"], ["한국어", "\u1112\u1161\u11AB\u1100\u116E\u11A8\u110B\u1165"],
  ["ǖ", "u\u0308\u0304"], ["ḱ", "k\u0301"], ["ώ", "\u03C9\u0301"], ["й", "\u0438\u0306"],
  ["が", "\u304B\u3099"], ["パ", "\u30CF\u309A"],
];
const NFC_CHANGES = [
  "\u212B",                // ANGSTROM SIGN -> Å
  "\u2126",                // OHM SIGN -> Ω
  "\u212A",                // KELVIN SIGN -> K
  "\u0958",                // DEVANAGARI QA: composition-excluded, NFC is क + nukta
  "\uF900",                // CJK compatibility ideograph -> 豈
  "a\u0323\u0301",         // already canonical order
  "a\u0301\u0323",         // reordered by NFC (ccc 230 after 220)
  "e\u0301\u0301",         // two acute accents: only the first composes
  "\u0344",                // COMBINING GREEK DIALYTIKA TONOS -> two marks
  "\u1E9B\u0323",          // long s with dot above + dot below
  "q\u0307\u0323",
];

function combining(r) {
  switch (r.int(0, 3)) {
    case 0: return r.pick(COMBINING)[0];
    case 1: return r.pick(COMBINING)[1];
    case 2: return r.pick(NFC_CHANGES);
    default: {  // zalgo-ish: a letter with a pile of marks
      const base = r.pick(["a", "Z", "o", "ж", "α", "字"]);
      return base + r.repeat(r.int(1, 6), () => r.codePoint(0x0300, 0x036f));
    }
  }
}

const SPECIAL = ["<|im_start|>", "<|im_end|>", "<|begin_of_text|>", "<|end_of_text|>",
  "<|eot_id|>", "<|start_header_id|>", "<|end_header_id|>", "<|reserved_special_token_7|>",
  "<|endoftext|>", "<s>", "</s>", "<unk>", "<think>", "</think>", "<tool_call>",
  "<|fim_prefix|>", "<|vision_pad|>", "<|python_tag|>"];
const NEAR_SPECIAL = ["<|im_start", "<|im_start|", "im_start|>", "<|IM_START|>", "< s>", "<s",
  "<<s>>", "<|<|endoftext|>|>", "<|begin_of_text|><|begin_of_text|>", "<|endoftext|>>",
  "<|end|>", "<||>", "</s></s>", "<s><s>"];

function special(r) {
  const s = r.chance(0.75) ? r.pick(SPECIAL) : r.pick(NEAR_SPECIAL);
  const pad = () => (r.chance(0.3) ? r.pick([" ", "\n", "  ", "\t"]) : "");
  return pad() + s + pad();
}

// Letters from Unicode 15.0 and 16.0 (CJK Extensions H and I, Kawi, Nag Mundari, Garay,
// Todhri, Kirat Rai), only with --unicode-new.
const NEW_LETTER_RANGES = [[0x31350, 0x323af], [0x2ebf0, 0x2ee5d], [0x11f04, 0x11f10],
  [0x1e4d0, 0x1e4eb], [0x10d4a, 0x10d65], [0x105c0, 0x105f3], [0x16d43, 0x16d6a]];

function newLetters(r) {
  const [lo, hi] = r.pick(NEW_LETTER_RANGES);
  const s = r.repeat(r.int(1, 3), () => r.codePoint(lo, hi));
  return r.pick(["", ".", "/", " ", ">"]) + s + r.pick(["", ".a", "/Qv", ">A", " x"]);
}

const MAKERS = [
  [scriptWord, 6], [emoji, 2], [whitespace, 3], [number, 2], [code, 1], [contraction, 2],
  [punctuation, 2], [combining, 2], [special, 1],
];

function fragment(r, makers) {
  const total = makers.reduce((s, [, w]) => s + w, 0);
  let x = r.next() * total;
  for (const [make, w] of makers) {
    if ((x -= w) < 0) return make(r);
  }
  return makers[0][0](r);
}

function randomText(r, makers) {
  const n = r.chance(0.15) ? r.int(20, 120) : r.int(1, 12);
  let s = "";
  for (let i = 0; i < n; ++i) {
    if (i > 0 && r.chance(0.6)) s += r.chance(0.8) ? " " : r.pick(WS_ATOMS);
    s += fragment(r, makers);
  }
  if (r.chance(0.1)) s = " " + s;
  if (r.chance(0.1)) s += " ".repeat(r.int(1, 3));
  return s;
}

// ---- fixed edge cases -----------------------------------------------------------------

const FIXED = [
  "", " ", "  ", "   ", "\t", "\n", "\n\n", "\n\n\n", "\r\n", "\r\n\r\n", " \n", "\n ",
  "Hello world", " Hello world", "Hello World!", "hello  world", "Hello\tworld",
  "trailing spaces   ", "   leading spaces", "line one\nline two\n\nline four\n",
  "tab\tseparated\tvalues\n1\t2\t3", "a\u00A0b\u00A0\u00A0c", "全角\u3000スペース\u3000\u3000です",
  "I'm", "I'M", "you'll", "YOU'LL", "You'Ll", "we've", "WE'VE", "it's", "IT'S", "It'S",
  "they're", "THEY'RE", "I'd", "I'D", "don't", "DON'T", "'s", "'S", "''", "'", "O'Neil's",
  "rock 'n' roll", "'tis", "’s curly", "y'all'd've",
  "1", "12", "123", "1234", "12345", "123456789012345678901234567890", "3.14159",
  "1,000,000", "1.000.000,00", "0.5", "-0.5", "2024-06-11", "10:30", "1e10", "٣٤٥",
  "١٢٣٤٥٦٧", "１２３４５", "²³", "½", "Ⅻ", "①②", "x²+y²=z²",
  "!!!", "???", "!?!?", "...", "……", "---", "___", "***", "###", "@@@", "<<<>>>", "(((", ")))",
  "«guillemets»", "„Anführungszeichen“", "—em dash—", "¿Qué?", "¡Hola!",
  "👍", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇺🇸🇯🇵", "1️⃣", "❤️", "🤖🤖🤖", "a😀b", " 😀 ",
  "é", "e\u0301", "café", "cafe\u0301", "Å", "A\u030A", "\u212B", "\u2126", "\u0958",
  "\uF900", "a\u0301\u0323", "a\u0323\u0301", "\u1112\u1161\u11AB", "한",
  "Привет, мир!", "Γειά σου κόσμε", "مرحبا بالعالم", "שלום עולם", "नमस्ते दुनिया",
  "สวัสดีชาวโลก", "你好，世界！", "안녕하세요 세계", "こんにちは世界", "カタカナ ひらがな 漢字",
  "mixed: Hello Привет 你好 مرحبا 👋",
  "<|im_start|>", "<|im_end|>", "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n",
  "<|begin_of_text|>", "<|begin_of_text|>Hello", "Hello<|begin_of_text|>",
  "<|start_header_id|>system<|end_header_id|>\n\nYou are helpful.<|eot_id|>",
  "<s>", "</s>", "<s>Hello</s>", "<s> Hello </s>", "<unk>", "<|endoftext|>",
  "text<|endoftext|>text", "<|endoftext|><|endoftext|>", " <|endoftext|> ",
  "<think>\nreasoning\n</think>\n\nanswer", "<tool_call>{\"name\": \"f\"}</tool_call>",
  "<|im_start", "<|im_start|", "<|IM_START|>", "<<|im_end|>>", "< |im_end| >",
  "def f():\n    return 1\n", "    indented", "\t\tdouble tab", "x = {\"a\": [1, 2, 3]}",
  "int main() { return 0; }", "   \n   \n   ", "a\n\n\n\nb", "a \n b", "a  \nb", "a\r\nb\r\n",
  "end with newline\n", "multiple   spaces   between   words",
  "ab" + " ".repeat(100) + "cd", "x".repeat(300), "ab".repeat(200), "1".repeat(100),
  "!".repeat(100), "\n".repeat(50), "😀".repeat(30), "字".repeat(100),
  "hello" + "\u0301".repeat(20),
  // U+180E MONGOLIAN VOWEL SEPARATOR is not White_Space (since Unicode 6.3), so not \s.
  " \u180E.", " \u180Ea", "x \u180E!", "  \u180E", "\u180E",
  // U+0085 NEXT LINE is White_Space; U+FEFF is not (the test skips these for GPT-2).
  "a\u0085 b", "a \u0085b", "\u0085", "a \uFEFFb", "\uFEFFHello", "x\uFEFF\uFEFF y",
];

function main() {
  const { count, seed, unicodeNew } = parseArgs(process.argv);
  const r = makeRng(seed);
  const makers = unicodeNew ? [...MAKERS, [newLetters, 3]] : MAKERS;
  const lines = [];
  for (const text of FIXED) {
    if (lines.length >= count) break;
    lines.push(JSON.stringify({ text }));
  }
  while (lines.length < count) lines.push(JSON.stringify({ text: randomText(r, makers) }));
  process.stdout.write(lines.length ? lines.join("\n") + "\n" : "");
}

main();
