#include "worker/step_trace_proto.h"

namespace baton::worker {

void AppendStepTraces(std::span<const engine::StepTrace> steps, double offset_seconds,
                      google::protobuf::RepeatedPtrField<baton::v1::StepTrace>* out) {
  for (const engine::StepTrace& s : steps) {
    baton::v1::StepTrace* t = out->Add();
    t->set_start_seconds(s.start_seconds + offset_seconds);
    t->set_forward_seconds(s.forward_seconds);
    t->set_sample_seconds(s.sample_seconds);
    t->set_kv_wait_seconds(s.kv_wait_seconds);
    t->set_batch_sequences(s.batch_sequences);
    t->set_batch_tokens(s.batch_tokens);
    t->set_tokens(s.tokens);
    t->set_context_tokens(s.context_tokens);
    t->set_prefill(s.prefill);
    t->set_kv_bytes(s.kv_bytes);
    for (const engine::TraceLayerGroup& g : s.layer_groups) {
      baton::v1::LayerGroupTrace* lg = t->add_layer_groups();
      lg->set_first_layer(g.first_layer);
      lg->set_layers(g.layers);
      lg->set_done_seconds(g.done_seconds);
      lg->set_kv_bytes(g.kv_bytes);
    }
    if (!s.sampled) continue;
    t->set_sampled(true);
    t->mutable_chosen()->set_id(s.sampled->id);
    t->mutable_chosen()->set_logprob(s.sampled->logprob);
    for (const auto& [id, logprob] : s.sampled->top_logprobs) {
      baton::v1::TraceCandidate* c = t->add_top();
      c->set_id(id);
      c->set_logprob(logprob);
    }
  }
}

}  // namespace baton::worker
