#include "tools/trace_render.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string_view>

#include "common/strings.h"

namespace baton::tools {
namespace {

using Json = nlohmann::json;

// Missing keys read as the type's zero, so that a partial trace renders.
double Num(const Json& j, std::string_view key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : 0.0;
}
int64_t Int(const Json& j, std::string_view key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<int64_t>() : 0;
}
bool Flag(const Json& j, std::string_view key) {
  auto it = j.find(key);
  return it != j.end() && it->is_boolean() && it->get<bool>();
}
std::string Str(const Json& j, std::string_view key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}
const Json& Sub(const Json& j, std::string_view key) {
  static const Json kEmpty = Json::object();
  auto it = j.find(key);
  return it != j.end() && it->is_object() ? *it : kEmpty;
}
const Json& List(const Json& j, std::string_view key) {
  static const Json kEmpty = Json::array();
  auto it = j.find(key);
  return it != j.end() && it->is_array() ? *it : kEmpty;
}

std::string Printf(const char* format, auto... args) {
  char buf[256];
  std::snprintf(buf, sizeof(buf), format, args...);
  return buf;
}

// A token's text made visible on one line: quotes, and escapes for the invisible.
std::string Quoted(std::string_view text) {
  std::string out = "'";
  for (char c : text) {
    switch (c) {
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\'':
        out += "\\'";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += Printf("\\x%02x", static_cast<unsigned>(c));
        } else {
          out += c;
        }
    }
  }
  return out + "'";
}

// A special token in angle brackets, unless its text already has them (<|im_start|>).
std::string Special(const std::string& text) {
  if (text.size() >= 2 && text.front() == '<' && text.back() == '>') return text;
  return StrCat("<", text, ">");
}

std::string Percent(double logprob) { return Printf("%.1f%%", 100.0 * std::exp(logprob)); }

void Header(const Json& r, const Json& t, std::string* out) {
  const Json& usage = Sub(r, "usage");
  *out += StrCat("baton trace: model ", Str(t, "model"), "; ", Int(usage, "prompt_tokens"),
                 " prompt tokens (", Int(t, "cached_tokens"), " cached), ",
                 Int(t, "completion_tokens"), " generated, finish ", Str(r, "finish_reason"),
                 Flag(t, "truncated") ? "; steps truncated at the recording bound" : "", "\n");
  *out += StrCat("sampling: temperature ", Printf("%g", Num(t, "temperature")), ", top_p ",
                 Printf("%g", Num(t, "top_p")), ", top_k ", Int(t, "top_k"), "\n");
}

void Prompt(const Json& t, std::string* out) {
  const Json& tokens = List(t, "prompt_tokens");
  const int64_t cached = Int(t, "cached_tokens");
  *out += StrCat("\nprompt: ", tokens.size(), " tokens",
                 cached > 0 ? StrCat(", the first ", cached, " from the prefix cache (before |)")
                            : std::string(),
                 "; special tokens in <>\n  ");
  size_t line = 2;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const Json& tok = tokens[i];
    std::string piece = Flag(tok, "special") ? Special(Str(tok, "text")) : Quoted(Str(tok, "text"));
    piece = StrCat(piece, ":", Int(tok, "id"), " ");
    if (static_cast<int64_t>(i) == cached && cached > 0) piece.insert(0, "| ");
    if (line + piece.size() > 100) {
      *out += "\n  ";
      line = 2;
    }
    *out += piece;
    line += piece.size();
  }
  *out += "\n";
}

void Route(const Json& t, std::string* out) {
  const Json& route = Sub(t, "route");
  *out += StrCat("\nroute: policy ", Str(route, "policy"), ", decided in ",
                 FormatSeconds(Num(route, "route_seconds")),
                 Flag(route, "rerouted") ? " (the first route failed; rerouted)" : "", "\n");
  *out +=
      "    worker                 role        running  queued   kv-use  cached   prefill    "
      "decode  transfer      cost\n";
  for (const Json& c : List(route, "candidates")) {
    const double kv = Num(c, "kv_usage");
    *out += Printf("  %c %-22s %-10s %8lld %7lld %8s %7lld %9s %9s %9s %9s\n",
                   Flag(c, "chosen") ? '*' : ' ', Str(c, "worker").c_str(), Str(c, "role").c_str(),
                   static_cast<long long>(Int(c, "running")),
                   static_cast<long long>(Int(c, "queued_prefill_tokens")),
                   kv < 0 ? "?" : Printf("%.1f%%", 100 * kv).c_str(),
                   static_cast<long long>(Int(c, "cached_tokens")),
                   FormatSeconds(Num(c, "prefill_cost_seconds")).c_str(),
                   FormatSeconds(Num(c, "decode_cost_seconds")).c_str(),
                   FormatSeconds(Num(c, "transfer_cost_seconds")).c_str(),
                   FormatSeconds(Num(c, "cost_seconds")).c_str());
  }
  const std::string prefill = Str(route, "prefill_worker");
  *out +=
      StrCat("  chosen: ",
             prefill.empty() ? "prefill and decode on " : StrCat("prefill ", prefill, ", decode "),
             Str(route, "decode_worker"), "; cached tokens expected ",
             Int(route, "expected_cached_tokens"), ", found ", Int(t, "cached_tokens"), "\n");
}

std::string Candidates(const Json& step) {
  std::string s;
  for (const Json& c : List(step, "top")) {
    if (Int(c, "id") == Int(Sub(step, "chosen"), "id")) continue;
    s += StrCat(" ", Quoted(Str(c, "text")), " ", Percent(Num(c, "logprob")));
  }
  return s;
}

// One line per step: start, forward, batch, context, KV and the token sampled.
void Steps(const Json& steps, std::string* out) {
  *out +=
      "    start      forward    sample   batch seq/tok  ctx      KV        token (p)  "
      "alternatives\n";
  for (const Json& s : steps) {
    std::string line = Printf("  %9s %9s %9s %7lld/%-7lld %-8lld %-9s",
                              FormatSeconds(Num(s, "start_seconds")).c_str(),
                              FormatSeconds(Num(s, "forward_seconds")).c_str(),
                              FormatSeconds(Num(s, "sample_seconds")).c_str(),
                              static_cast<long long>(Int(s, "batch_sequences")),
                              static_cast<long long>(Int(s, "batch_tokens")),
                              static_cast<long long>(Int(s, "context_tokens")),
                              FormatBytes(static_cast<double>(Int(s, "kv_bytes"))).c_str());
    if (Flag(s, "prefill")) line += StrCat(" chunk of ", Int(s, "tokens"), " prompt tokens");
    if (Flag(s, "sampled")) {
      const Json& chosen = Sub(s, "chosen");
      const std::string token =
          Flag(chosen, "special") ? Special(Str(chosen, "text")) : Quoted(Str(chosen, "text"));
      line += StrCat(" -> ", token, " (", Percent(Num(chosen, "logprob")), ") ", Candidates(s));
    }
    if (Num(s, "kv_wait_seconds") > 0) {
      line += StrCat(" [waited ", FormatSeconds(Num(s, "kv_wait_seconds")), " for KV puts]");
    }
    *out += line + "\n";
    const Json& groups = List(s, "layer_groups");
    if (!groups.empty()) {
      std::string g = "      KV layer groups (layers: written at, bytes):";
      for (const Json& lg : groups) {
        const int64_t first = Int(lg, "first_layer");
        g += StrCat(" ", first, "-", first + Int(lg, "layers") - 1, ": +",
                    FormatSeconds(Num(lg, "done_seconds")), " ",
                    FormatBytes(static_cast<double>(Int(lg, "kv_bytes"))), ";");
      }
      *out += g + "\n";
    }
  }
}

void Prefill(const Json& t, std::string* out) {
  const Json& p = Sub(t, "prefill");
  if (Str(p, "worker").empty()) {
    *out += "\nprefill: on the decode worker (no split)\n";
    return;
  }
  *out +=
      StrCat("\nprefill on ", Str(p, "worker"), ": call ", FormatSeconds(Num(p, "call_seconds")),
             ", queue ", FormatSeconds(Num(p, "queue_seconds")), ", compute ",
             FormatSeconds(Num(p, "compute_seconds")), ", KV transfer ",
             FormatSeconds(Num(p, "transfer_seconds")), " (exposed ",
             FormatSeconds(Num(p, "exposed_transfer_seconds")), "), ",
             FormatBytes(Num(p, "kv_bytes_sent")), " in ", Int(p, "blocks_sent"), " blocks (",
             Int(p, "blocks_cached_on_decode"), " already on the decode worker), prefix cache hit ",
             Int(p, "cached_tokens"), " tokens\n");
  Steps(List(p, "steps"), out);
}

void Decode(const Json& t, std::string* out) {
  const Json& steps = List(t, "steps");
  *out += StrCat("\ndecode on ", Str(t, "worker"), ": queue ",
                 FormatSeconds(Num(t, "queue_seconds")), ", ", steps.size(), " steps\n");
  Steps(steps, out);
}

void Memory(const Json& t, std::string* out) {
  const int64_t weights = Int(t, "weight_bytes");
  const int64_t per_token = Int(t, "kv_bytes_per_token");
  int64_t context = 0;
  for (const Json& s : List(t, "steps")) context = std::max(context, Int(s, "context_tokens"));
  const double kv = static_cast<double>(context * per_token);
  *out += StrCat(
      "\nmemory: weights ", FormatBytes(static_cast<double>(weights)), " (", Int(t, "num_layers"),
      " layers); KV ", FormatBytes(static_cast<double>(per_token)),
      " per token; this request's KV at the end ", FormatBytes(kv), " for ", context, " tokens",
      weights > 0 ? Printf(" (%.2f%% of the weights)", 100.0 * kv / static_cast<double>(weights))
                  : std::string(),
      "\n");
  const int64_t at = KvOvertakesWeightsAt(weights, per_token);
  if (at > 0) {
    *out += StrCat("  one sequence's KV cache overtakes the weights at ", at, " tokens of context",
                   context >= at ? " (this request passed it)" : "", "\n");
  }
}

void Totals(const Json& t, std::string* out) {
  *out += StrCat("\ntotals: tokenize ", FormatSeconds(Num(t, "tokenize_seconds")), ", TTFT ",
                 FormatSeconds(Num(t, "time_to_first_token_seconds")), ", TPOT ",
                 FormatSeconds(Num(t, "time_per_output_token_seconds")), ", end to end ",
                 FormatSeconds(Num(t, "total_seconds")), ", ", Int(t, "completion_tokens"),
                 " tokens\n");
}

}  // namespace

std::string FormatBytes(double bytes) {
  if (bytes < 1024) return Printf("%.0f B", bytes);
  if (bytes < 1024.0 * 1024) return Printf("%.1f KiB", bytes / 1024);
  if (bytes < 1024.0 * 1024 * 1024) return Printf("%.1f MiB", bytes / (1024.0 * 1024));
  return Printf("%.2f GiB", bytes / (1024.0 * 1024 * 1024));
}

std::string FormatSeconds(double seconds) {
  if (seconds >= 1) return Printf("%.2f s", seconds);
  if (seconds >= 0.01) return Printf("%.1f ms", seconds * 1e3);
  return Printf("%.2f ms", seconds * 1e3);
}

int64_t KvOvertakesWeightsAt(int64_t weight_bytes, int64_t kv_bytes_per_token) {
  if (kv_bytes_per_token <= 0) return -1;
  return (weight_bytes + kv_bytes_per_token - 1) / kv_bytes_per_token;
}

std::string RenderTrace(const nlohmann::json& result) {
  const Json& t = Sub(result, "trace");
  std::string out;
  Header(result, t, &out);
  if (!Str(t, "rendered_prompt").empty()) {
    out += StrCat("rendered prompt: ", Quoted(Str(t, "rendered_prompt")), "\n");
  }
  Prompt(t, &out);
  Route(t, &out);
  Prefill(t, &out);
  Decode(t, &out);
  Memory(t, &out);
  Totals(t, &out);
  out += StrCat("\ntext: ", Quoted(Str(result, "text")), "\n");
  return out;
}

}  // namespace baton::tools
