// Renders Jinja chat templates with @huggingface/jinja, the reference that Baton's
// tokenizer/chat_template must match byte for byte.
//
// stdin: one request {"template": "...", "context": {...}, "now": {...}?}, or a batch
//        {"requests": [request, ...]}.
// stdout: for one request, {"ok": true, "output": "..."} or {"ok": false, "error": "..."};
//         for a batch, {"results": [...]} in request order.
//
// "now" ({year, month, day, hour, minute}, local time) fixes the clock that strftime_now()
// reads, so that outputs are reproducible.
import { Template } from "@huggingface/jinja";

const RealDate = Date;
let fixedNow = null;

// strftime_now() calls `new Date()`; while a request pins the clock, that returns the
// pinned time. Every other use of Date is left alone.
class PinnedDate extends RealDate {
  constructor(...args) {
    if (args.length === 0 && fixedNow !== null) {
      super(fixedNow.year, fixedNow.month - 1, fixedNow.day, fixedNow.hour, fixedNow.minute);
    } else {
      super(...args);
    }
  }
}
globalThis.Date = PinnedDate;

async function readStdin() {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  return Buffer.concat(chunks).toString("utf8");
}

const compiled = new Map();

function render(request) {
  fixedNow = request.now ?? null;
  try {
    let template = compiled.get(request.template);
    if (template === undefined) {
      try {
        template = new Template(request.template);
      } catch (e) {
        template = e instanceof Error ? e : new Error(String(e));
      }
      compiled.set(request.template, template);
    }
    if (template instanceof Error) throw template;
    const output = template.render(request.context ?? {});
    // A lone surrogate (from indexing into a surrogate pair) has no UTF-8 form; Baton
    // renders it as U+FFFD, and so does this.
    return { ok: true, output: output.toWellFormed() };
  } catch (e) {
    return { ok: false, error: e instanceof Error ? `${e.name}: ${e.message}` : String(e) };
  } finally {
    fixedNow = null;
  }
}

const input = JSON.parse(await readStdin());
if (Array.isArray(input.requests)) {
  process.stdout.write(JSON.stringify({ results: input.requests.map(render) }));
} else {
  process.stdout.write(JSON.stringify(render(input)));
}
