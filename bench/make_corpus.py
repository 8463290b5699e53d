#!/usr/bin/env python3
"""Writes a deterministic corpus of mixed text for the tokenizer throughput benchmark.

    python3 bench/make_corpus.py OUT_FILE [--bytes 4194304] [--seed 1]

The corpus is made here from word lists and templates (nothing is downloaded or copied):
short "documents" of three kinds, interleaved so that any prefix is mixed too:

  - English prose (~50% of the bytes): sentences from templates over word lists, with
    contractions, numbers, quotes and punctuation;
  - source code (~30%): C++, Python and JSON-like text with indentation runs;
  - multilingual text (~20%): Cyrillic, CJK (Chinese, Japanese), Korean, Arabic, Greek,
    Devanagari, accented Latin (French, German, Spanish, Vietnamese) and emoji,
    including ZWJ sequences and skin-tone modifiers.

The same seed and size give byte-identical output on any Python 3 (it uses only
random.Random's integer-seeded generator, whose sequence is stable across versions).
Every line ends with "\\n"; the file is valid UTF-8 and contains no "<|...|>" markers.
"""

import argparse
import random
import sys

# ---------------------------------------------------------------------------------------
# English
# ---------------------------------------------------------------------------------------

NOUNS = """time year people way day man woman thing child world life hand part eye place work
week case point government company number group problem fact river mountain city village
garden kitchen window door table chair book letter story history question answer reason
engine server request response token model kernel memory cache queue thread socket buffer
teacher student doctor farmer driver painter writer reader engineer manager council market
bridge road station harbour island forest valley storm winter summer morning evening night
music song picture camera bottle coffee bread apple orange paper pencil computer network
system program language country family friend neighbour partner customer office meeting
decision idea result method theory experiment sample signal pattern budget report plan
""".split()

VERBS_PAST = """walked talked opened closed found lost built wrote read saw heard followed
carried moved changed started finished answered asked measured noticed painted planted
repaired designed tested shipped deployed measured compared explained described reported
remembered forgot discovered questioned borrowed returned crossed climbed visited watched
""".split()

VERBS_PRESENT = """walks talks opens closes finds loses builds writes reads sees hears follows
carries moves changes starts finishes answers asks measures notices paints plants repairs
designs tests ships deploys compares explains describes reports remembers discovers visits
""".split()

VERBS_BASE = """walk talk open close find lose build write read see hear follow carry move
change start finish answer ask measure notice paint plant repair design test ship deploy
compare explain describe report remember discover question borrow return cross climb visit
""".split()

ADJECTIVES = """old new small large quiet loud bright dark early late quick slow careful
strange simple complex ancient modern narrow wide heavy light warm cold green blue red
golden silver empty crowded honest clever patient tired happy serious famous hidden broken
""".split()

ADVERBS = """quickly slowly carefully quietly suddenly finally rarely often always never
certainly probably nearly almost really simply clearly gently loudly eagerly calmly
""".split()

NAMES = """Alice Bob Carol David Emma Frank Grace Henry Isabel Jack Karen Liam Maria Noah
Olivia Peter Quinn Rachel Samuel Teresa Umar Victor Wendy Xavier Yusuf Zoe Anna Marco
""".split()

PLACES = """London Paris Berlin Madrid Lisbon Vienna Prague Warsaw Oslo Dublin Boston Denver
Chicago Toronto Sydney Nairobi Cairo Mumbai Tokyo Seoul Lima Quito Austin Seattle
""".split()

MONTHS = """January February March April May June July August September October November
December""".split()

CONNECTIVES = ["However,", "Meanwhile,", "Later that day,", "In the end,", "At first,",
               "Surprisingly,", "Of course,", "As a result,", "Even so,", "Then"]


def english_sentence(r: random.Random) -> str:
    n = r.choice
    t = r.randrange(14)
    if t == 0:
        s = f"The {n(ADJECTIVES)} {n(NOUNS)} {n(VERBS_PAST)} the {n(NOUNS)} near the {n(NOUNS)}."
    elif t == 1:
        s = f"{n(NAMES)} {n(ADVERBS)} {n(VERBS_PAST)} a {n(ADJECTIVES)} {n(NOUNS)} in {n(PLACES)}."
    elif t == 2:
        s = f"{n(CONNECTIVES)} {n(NAMES)} said, \"I don't think the {n(NOUNS)} is {n(ADJECTIVES)}.\""
    elif t == 3:
        s = (f"On {r.randint(1, 28)} {n(MONTHS)} {r.randint(1850, 2030)}, about "
             f"{r.randint(2, 9999):,} {n(NOUNS)}s {n(VERBS_PAST)} the {n(NOUNS)}.")
    elif t == 4:
        s = f"It's {n(ADJECTIVES)}, and they're {n(ADVERBS)} {n(VERBS_PAST)} by {n(NAMES)}'s {n(NOUNS)}."
    elif t == 5:
        s = f"Why would anyone {n(VERBS_BASE)} a {n(NOUNS)} that {n(VERBS_PRESENT)} every {n(NOUNS)}?"
    elif t == 6:
        s = (f"The {n(NOUNS)} costs ${r.randint(1, 500)}.{r.randint(0, 99):02d} "
             f"({r.randint(1, 99)}% less than last {n(['week', 'month', 'year'])}).")
    elif t == 7:
        s = f"We'll {n(VERBS_BASE)} the {n(NOUNS)}; you've {n(VERBS_PAST)} the {n(NOUNS)} already!"
    elif t == 8:
        s = (f"{n(CONNECTIVES)} the {n(NOUNS)} -- {n(ADJECTIVES)} and {n(ADJECTIVES)} -- "
             f"{n(VERBS_PAST)} {n(ADVERBS)}.")
    elif t == 9:
        s = (f"According to {n(NAMES)} {n(NAMES)[0]}. {n(NAMES)}son, the {n(NOUNS)} "
             f"{n(VERBS_PRESENT)} {r.randint(2, 40)} times per {n(['hour', 'day', 'minute'])}.")
    elif t == 10:
        s = f"She'd {n(VERBS_BASE)} it, but I'm not sure he'll {n(VERBS_BASE)} the {n(NOUNS)}."
    elif t == 11:
        s = (f"See section {r.randint(1, 12)}.{r.randint(1, 9)} of the {n(NOUNS)} report "
             f"(v{r.randint(1, 4)}.{r.randint(0, 20)}) for details.")
    elif t == 12:
        s = (f"Every {n(NOUNS)} in {n(PLACES)} {n(VERBS_PRESENT)} a {n(NOUNS)}, "
             f"a {n(NOUNS)}, and a {n(ADJECTIVES)} {n(NOUNS)}.")
    else:
        s = f"\"{n(ADJECTIVES).capitalize()} {n(NOUNS)}s!\" {n(NAMES)} {n(['shouted', 'whispered', 'wrote'])}."
    return s


def english_doc(r: random.Random) -> str:
    paragraphs = []
    if r.random() < 0.3:
        title = " ".join(w.capitalize() for w in (r.choice(ADJECTIVES), r.choice(NOUNS)))
        paragraphs.append(f"{'#' * r.randint(1, 3)} The {title} of {r.choice(PLACES)}")
    for _ in range(r.randint(1, 4)):
        sentences = [english_sentence(r) for _ in range(r.randint(2, 7))]
        if r.random() < 0.15:
            paragraphs.append("\n".join(f"- {s}" for s in sentences))
        else:
            paragraphs.append(" ".join(sentences))
    return "\n\n".join(paragraphs) + "\n\n"


# ---------------------------------------------------------------------------------------
# Source code
# ---------------------------------------------------------------------------------------

IDENT_PARTS = """buffer count index value result token request response cache entry node
offset length size limit config state handle queue batch block page slot score weight
input output prefix suffix model layer head rank shard device stream event error status
""".split()

TYPES_CPP = ["int", "int64_t", "size_t", "float", "double", "bool", "std::string",
             "std::vector<int32_t>", "absl::Status", "std::string_view", "uint8_t"]


def ident(r: random.Random, style: str) -> str:
    parts = [r.choice(IDENT_PARTS) for _ in range(r.randint(1, 3))]
    if style == "snake":
        return "_".join(parts)
    if style == "camel":
        return parts[0] + "".join(p.capitalize() for p in parts[1:])
    return "".join(p.capitalize() for p in parts)  # Pascal


def expr(r: random.Random, style: str) -> str:
    t = r.randrange(6)
    a, b = ident(r, style), ident(r, style)
    if t == 0:
        return f"{a} + {b} * {r.randint(1, 64)}"
    if t == 1:
        return f"({a} - {b}) / {r.randint(2, 16)}"
    if t == 2:
        return f"{a}[{b} % {r.randint(2, 1024)}]"
    if t == 3:
        return f"{a} >= {b} && {a} < 0x{r.randint(0, 0xFFFF):04x}" if style != "snake" else \
            f"{a} >= {b} and {a} < 0x{r.randint(0, 0xFFFF):04x}"
    if t == 4:
        return f"{a}.size()" if style != "snake" else f"len({a})"
    return f"{r.random() * 1000:.3f}"


def cpp_function(r: random.Random) -> str:
    name = ident(r, "pascal")
    ret = r.choice(TYPES_CPP)
    params = ", ".join(f"{r.choice(TYPES_CPP)} {ident(r, 'snake')}" for _ in range(r.randint(0, 3)))
    lines = []
    if r.random() < 0.6:
        lines.append(f"// {english_sentence(r)}")
    lines.append(f"{ret} {name}({params}) {{")
    depth = 1
    for _ in range(r.randint(3, 14)):
        pad = "  " * depth
        t = r.randrange(7)
        if t == 0 and depth < 4:
            lines.append(f"{pad}for (int i = 0; i < {ident(r, 'snake')}.size(); ++i) {{")
            depth += 1
        elif t == 1 and depth < 4:
            lines.append(f"{pad}if ({expr(r, 'camel')}) {{")
            depth += 1
        elif t == 2 and depth > 1:
            depth -= 1
            lines.append("  " * depth + "}")
        elif t == 3:
            lines.append(f"{pad}const auto {ident(r, 'snake')} = {expr(r, 'camel')};")
        elif t == 4:
            lines.append(f"{pad}std::printf(\"%s: %d\\n\", {ident(r, 'snake')}.c_str(), "
                         f"{r.randint(0, 99)});")
        elif t == 5:
            lines.append(f"{pad}{ident(r, 'snake')}_ += {expr(r, 'camel')};  // {r.choice(NOUNS)}")
        else:
            lines.append(f"{pad}BATON_RETURN_IF_ERROR({ident(r, 'pascal')}(&{ident(r, 'snake')}));")
    while depth > 1:
        depth -= 1
        lines.append("  " * depth + "}")
    lines.append(f"  return {ret}{{}};")
    lines.append("}")
    return "\n".join(lines) + "\n\n"


def python_function(r: random.Random) -> str:
    name = ident(r, "snake")
    params = ", ".join(ident(r, "snake") for _ in range(r.randint(0, 4)))
    lines = [f"def {name}({params}):"]
    if r.random() < 0.5:
        lines.append(f'    """{english_sentence(r)}"""')
    depth = 1
    for _ in range(r.randint(2, 12)):
        pad = "    " * depth
        t = r.randrange(6)
        if t == 0 and depth < 4:
            lines.append(f"{pad}for {ident(r, 'snake')} in range({r.randint(1, 100)}):")
            depth += 1
            lines.append("    " * depth + f"{ident(r, 'snake')}.append({expr(r, 'snake')})")
        elif t == 1 and depth < 4:
            lines.append(f"{pad}if {expr(r, 'snake')}:")
            depth += 1
            lines.append("    " * depth + f"raise ValueError(f\"bad {{{ident(r, 'snake')}!r}}\")")
        elif t == 2 and depth > 1:
            depth -= 1
            lines.append("    " * depth + f"{ident(r, 'snake')} = None")
        elif t == 3:
            lines.append(f"{pad}{ident(r, 'snake')} = {{'{r.choice(IDENT_PARTS)}': "
                         f"{r.randint(0, 999)}, '{r.choice(IDENT_PARTS)}': [{expr(r, 'snake')}]}}")
        elif t == 4:
            lines.append(f"{pad}# {english_sentence(r)}")
        else:
            lines.append(f"{pad}print(f\"{{{ident(r, 'snake')}:>{r.randint(2, 12)}}} "
                         f"{r.choice(NOUNS)}s\")")
    lines.append(f"    return {ident(r, 'snake')}")
    return "\n".join(lines) + "\n\n"


def json_value(r: random.Random, depth: int, indent: int) -> str:
    t = r.randrange(7 if depth < 3 else 4)
    if t == 0:
        return str(r.randint(-1000, 100000))
    if t == 1:
        return f"{r.random() * 100:.4f}"
    if t == 2:
        return r.choice(["true", "false", "null"])
    if t == 3:
        return f'"{r.choice(ADJECTIVES)} {r.choice(NOUNS)}"'
    pad = " " * (indent * (depth + 1))
    end_pad = " " * (indent * depth)
    if t in (4, 5):
        items = [f'{pad}"{ident(r, "snake")}": {json_value(r, depth + 1, indent)}'
                 for _ in range(r.randint(1, 5))]
        return "{\n" + ",\n".join(items) + "\n" + end_pad + "}"
    items = [json_value(r, depth + 1, indent) for _ in range(r.randint(1, 6))]
    return "[" + ", ".join(items) + "]"


def code_doc(r: random.Random) -> str:
    t = r.random()
    if t < 0.4:
        return cpp_function(r)
    if t < 0.75:
        return python_function(r)
    items = [f'  "{ident(r, "snake")}": {json_value(r, 1, 2)}' for _ in range(r.randint(2, 8))]
    return "{\n" + ",\n".join(items) + "\n}\n\n"


# ---------------------------------------------------------------------------------------
# Multilingual
# ---------------------------------------------------------------------------------------

# Each entry: (word list, joiner, sentence end). Words written for this script.
RUSSIAN = """время человек город река дом работа система память очередь запрос ответ модель
старый новый быстро медленно говорит пишет читает строит открывает закрывает вечером утром
большой маленький зелёный синий дорога мост книга письмо история вопрос""".split()
UKRAINIAN = """місто річка будинок робота пам'ять черга відповідь швидко повільно читає
пише великий малий зелений синій дорога книжка лист питання""".split()
GREEK = """χρόνος άνθρωπος πόλη ποτάμι σπίτι δουλειά σύστημα μνήμη ερώτηση απάντηση
παλιός νέος γρήγορα αργά γράφει διαβάζει μεγάλος μικρός δρόμος βιβλίο""".split()
FRENCH = """été café garçon élève forêt château fenêtre théâtre naïve où déjà très
après ça français hôpital noël cœur œuvre première deuxième légère""".split()
GERMAN = """Straße Mädchen Bäume größer über Fußgänger Brücke Käse schön müssen
Übersetzung Geschäft Äpfel Öffnungszeiten fünf Grüße weiß heißt Tür""".split()
SPANISH = """niño año mañana corazón canción español pequeño señor ¿cómo? ¡qué! está
árbol camión jamás última música página según también""".split()
VIETNAMESE = """người Việt Nam tiếng nói thành phố sông nước nhà làm việc hệ thống bộ nhớ
câu hỏi trả lời nhanh chậm đọc viết lớn nhỏ đường sách""".split()
ARABIC = """الوقت الإنسان المدينة النهر البيت العمل النظام الذاكرة السؤال الجواب
قديم جديد بسرعة ببطء يكتب يقرأ كبير صغير الطريق الكتاب""".split()
HINDI = """समय मनुष्य शहर नदी घर काम प्रणाली स्मृति प्रश्न उत्तर पुराना नया
जल्दी धीरे लिखता पढ़ता बड़ा छोटा सड़क किताब""".split()
KOREAN = """시간 사람 도시 강 집 일 시스템 메모리 질문 대답 오래된 새로운 빨리
천천히 쓴다 읽는다 큰 작은 길 책""".split()
# CJK: characters joined without spaces.
CHINESE = list("时间人城市河流房子工作系统内存队列请求回答模型旧新快慢写读大小绿蓝道路书信历史问题"
               "我们你他她它的了在是有不这个那里说看听走")
JAPANESE = ["時間", "人", "都市", "川", "家", "仕事", "システム", "メモリ", "質問", "答え",
            "古い", "新しい", "速く", "ゆっくり", "書きます", "読みます", "大きい", "小さい",
            "道", "本", "は", "が", "を", "に", "で", "と", "の", "です", "ました", "トークン"]
EMOJI = ["😀", "😂", "🥲", "🚀", "🔥", "✨", "👍🏽", "👩‍💻", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇯🇵",
         "🇫🇷", "❤️", "🎉", "🤖", "📦", "☕", "🌍", "🧪", "✅"]

SPACED = [(RUSSIAN, "."), (UKRAINIAN, "."), (GREEK, ";"), (FRENCH, "."), (GERMAN, "."),
          (SPANISH, "."), (VIETNAMESE, "."), (ARABIC, "؟"), (HINDI, "।"), (KOREAN, ".")]


def multilingual_sentence(r: random.Random) -> str:
    t = r.random()
    if t < 0.6:
        words, end = r.choice(SPACED)
        s = " ".join(r.choice(words) for _ in range(r.randint(4, 14)))
        s = s[0].upper() + s[1:] + end
    elif t < 0.75:
        s = "".join(r.choice(CHINESE) for _ in range(r.randint(8, 40))) + "。"
    elif t < 0.88:
        s = "".join(r.choice(JAPANESE) for _ in range(r.randint(5, 20))) + "。"
    else:
        words, end = r.choice(SPACED)
        s = " ".join(r.choice(words + EMOJI) for _ in range(r.randint(3, 10))) + end
    if r.random() < 0.2:
        s += " " + "".join(r.choice(EMOJI) for _ in range(r.randint(1, 4)))
    return s


def multilingual_doc(r: random.Random) -> str:
    paragraphs = []
    for _ in range(r.randint(1, 3)):
        paragraphs.append(" ".join(multilingual_sentence(r) for _ in range(r.randint(2, 6))))
    return "\n\n".join(paragraphs) + "\n\n"


# ---------------------------------------------------------------------------------------

KINDS = [("english", english_doc, 0.50), ("code", code_doc, 0.30),
         ("multilingual", multilingual_doc, 0.20)]


def make_corpus(target_bytes: int, seed: int) -> tuple[bytes, dict]:
    r = random.Random(seed)
    out = []
    size = 0
    by_kind = {name: 0 for name, _, _ in KINDS}
    while size < target_bytes:
        # Pick the kind that is furthest below its byte share, with some randomness so the
        # interleaving is irregular; keeps the mix close to the shares at every prefix.
        name, fn, _ = max(KINDS, key=lambda k: k[2] * (size + 1) - by_kind[k[0]] +
                          r.random() * 2000)
        doc = fn(r).encode("utf-8")
        out.append(doc)
        size += len(doc)
        by_kind[name] += len(doc)
    data = b"".join(out)[:target_bytes]
    # Cut back to the last complete line so the file ends cleanly.
    data = data[:data.rfind(b"\n") + 1]
    return data, by_kind


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", help="file to write")
    ap.add_argument("--bytes", type=int, default=4 << 20, help="target size (default 4 MiB)")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    data, by_kind = make_corpus(args.bytes, args.seed)
    data.decode("utf-8")  # asserts validity
    assert b"<|" not in data
    with open(args.out, "wb") as f:
        f.write(data)
    total = sum(by_kind.values())
    mix = ", ".join(f"{k} {100 * v / total:.0f}%" for k, v in by_kind.items())
    lines = data.count(b"\n")
    print(f"make_corpus: wrote {len(data)} bytes, {lines} lines ({mix}) to {args.out}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
