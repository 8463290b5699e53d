#include "dispatch/request_trace.h"

#include <cmath>

#include "common/utf8.h"

namespace baton::dispatch {
namespace {

void NameToken(const tokenizer::Tokenizer& tok, baton::v1::TraceCandidate* c) {
  if (!tok.IsValid(c->id())) return;
  c->set_text(SanitizeUtf8(tok.TokenBytes(c->id())));
  c->set_special(tok.IsSpecial(c->id()));
}

void NameTokens(const tokenizer::Tokenizer& tok,
                google::protobuf::RepeatedPtrField<baton::v1::StepTrace>* steps) {
  for (baton::v1::StepTrace& s : *steps) {
    if (!s.sampled()) continue;
    NameToken(tok, s.mutable_chosen());
    for (baton::v1::TraceCandidate& c : *s.mutable_top()) NameToken(tok, &c);
  }
}

// A stop string ends a sequence in the router, after the worker may have stepped on: the
// steps past the last token delivered are dropped.
void KeepSampled(int64_t tokens, google::protobuf::RepeatedPtrField<baton::v1::StepTrace>* steps) {
  int64_t sampled = 0;
  int keep = 0;
  for (; keep < steps->size() && sampled < tokens; ++keep) {
    if (steps->Get(keep).sampled()) ++sampled;
  }
  steps->DeleteSubrange(keep, steps->size() - keep);
}

}  // namespace

void CompleteTrace(const TraceFacts& f, baton::v1::RequestTrace* t) {
  const tokenizer::Tokenizer& tok = *f.tokenizer;
  t->set_model(f.model);
  std::string rendered;
  for (int32_t id : f.prompt_ids) {
    baton::v1::TraceToken* token = t->add_prompt_tokens();
    token->set_id(id);
    if (!tok.IsValid(id)) continue;
    token->set_text(SanitizeUtf8(tok.TokenBytes(id)));
    token->set_special(tok.IsSpecial(id));
    rendered += tok.TokenBytes(id);
  }
  t->set_rendered_prompt(SanitizeUtf8(rendered));
  t->set_cached_tokens(f.cached_tokens);
  if (f.route != nullptr) *t->mutable_route() = *f.route;
  t->mutable_route()->set_route_seconds(f.route_seconds);
  t->mutable_route()->set_rerouted(f.rerouted);

  // The first token is the prefill leg's when there was one.
  const bool split = t->prefill().steps_size() > 0;
  KeepSampled(f.completion_tokens - (split ? 1 : 0), t->mutable_steps());
  NameTokens(tok, t->mutable_prefill()->mutable_steps());
  NameTokens(tok, t->mutable_steps());

  if (f.model_info != nullptr) {
    t->set_weight_bytes(static_cast<int64_t>(f.model_info->weight_bytes()));
    t->set_kv_bytes_per_token(static_cast<int64_t>(f.model_info->kv_bytes_per_token()));
    t->set_num_layers(f.model_info->num_layers());
  }
  t->set_queue_seconds(f.queue_seconds);
  t->set_tokenize_seconds(f.tokenize_seconds);
  t->set_time_to_first_token_seconds(f.time_to_first_token_seconds);
  t->set_total_seconds(f.total_seconds);
  t->set_completion_tokens(f.completion_tokens);
  t->set_time_per_output_token_seconds(f.completion_tokens > 1
                                           ? (f.total_seconds - f.time_to_first_token_seconds) /
                                                 static_cast<double>(f.completion_tokens - 1)
                                           : 0.0);
  if (f.params != nullptr) {
    t->set_temperature(f.params->has_temperature() ? f.params->temperature() : 1.0);
    t->set_top_p(f.params->has_top_p() ? f.params->top_p() : 1.0);
    t->set_top_k(f.params->top_k());
  }
}

}  // namespace baton::dispatch
