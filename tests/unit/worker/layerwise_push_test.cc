// The layer-wise push, end to end in one process: a prefill-side ModelRunner writes a
// prompt's K/V into its pool, and its layer hook puts each layer's K/V of the touched pages
// into a decode-side pool over real UCX (tcp and shared memory) while the next layers
// compute. The decode side then continues the sequence from the pages it received, under
// other page ids, and its logits must be bit-identical to the prefill side's own.
#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "engine/model_runner.h"
#include "gtest/gtest.h"
#include "kvcache/kv_pool.h"
#include "model/model.h"
#include "transport/registered_region.h"
#include "transport/ucx_endpoint.h"
#include "transport/ucx_worker.h"

namespace baton::worker {
namespace {

using engine::ForwardOutput;
using engine::LogitsWanted;
using engine::ModelRunner;
using engine::SequenceInput;
using kvcache::KvPool;
using transport::RegisteredRegion;
using transport::UcxEndpoint;
using transport::UcxWorker;

const std::string kModel = std::string(BATON_SOURCE_DIR) + "/models/baton-tiny";

class LayerwisePushTest : public ::testing::TestWithParam<const char*> {};

TEST_P(LayerwisePushTest, DecodeFromPushedPagesMatchesThePrefillSide) {
  auto opened = model::Model::Open(kModel);
  ASSERT_TRUE(opened.ok()) << opened.status();
  const model::Model& m = **opened;
  const kvcache::PageLayout layout = engine::PageLayoutFor(m.config(), 16, "bf16");
  constexpr int kPages = 8;
  auto local = *KvPool::Create(layout, kPages);
  auto remote = *KvPool::Create(layout, kPages);
  std::vector<int32_t> local_pages, remote_pages;
  for (int i = 0; i < kPages; ++i) local_pages.push_back(*local->Allocate());
  for (int i = 0; i < kPages; ++i) remote_pages.push_back(*remote->Allocate());
  std::reverse(remote_pages.begin(), remote_pages.end());  // other ids on the other side
  const int64_t page_bytes = layout.page_bytes();
  const int64_t layer_bytes = layout.layer_elements() * kvcache::DtypeBytes(layout.dtype);  // K, V

  auto receiver = UcxWorker::Create({.transports = GetParam()});
  auto sender = UcxWorker::Create({.transports = GetParam()});
  ASSERT_TRUE(receiver.ok() && sender.ok());
  auto remote_region =
      RegisteredRegion::Register(**receiver, remote->block_data(0), kPages * page_bytes);
  auto local_region =
      RegisteredRegion::Register(**sender, local->block_data(0), kPages * page_bytes);
  ASSERT_TRUE(remote_region.ok() && local_region.ok());
  auto ep = UcxEndpoint::Connect(**sender, (*receiver)->address());
  ASSERT_TRUE(ep.ok()) << ep.status();
  auto target = (*ep)->ImportRegion((*remote_region)->packed_rkey(), (*remote_region)->base(),
                                    kPages * page_bytes);
  ASSERT_TRUE(target.ok()) << target.status();

  ThreadPool threads(2);
  ModelRunner prefill(m, local.get(), &threads);
  std::vector<int64_t> layers_seen;
  absl::Status push_status;
  prefill.set_layer_kv_hook([&](int64_t layer, std::span<const SequenceInput> batch) {
    layers_seen.push_back(layer);
    for (const SequenceInput& s : batch) {
      // The pages this forward wrote: those holding positions [start, start + tokens).
      const int64_t first = s.start_pos / layout.block_size;
      const int64_t last =
          (s.start_pos + static_cast<int64_t>(s.tokens.size()) - 1) / layout.block_size;
      for (int64_t b = first; b <= last && push_status.ok(); ++b) {
        const std::byte* src = local->block_data(s.block_table[b]) + layer * layer_bytes;
        const int32_t dst = remote_pages[b];
        push_status = (*ep)->Put(src, layer_bytes, **target, dst * page_bytes + layer * layer_bytes,
                                 local_region->get());
      }
    }
  });

  // A 45-token prompt in two chunks, as chunked prefill runs it.
  std::vector<int32_t> prompt;
  for (int i = 0; i < 45; ++i) prompt.push_back(3 + (i * 37) % 200);
  ForwardOutput out;
  const SequenceInput chunk1{std::span(prompt).first(30), 0, local_pages, LogitsWanted::kNone};
  ASSERT_TRUE(prefill.Forward(std::span(&chunk1, 1), &out).ok());
  const SequenceInput chunk2{std::span(prompt).subspan(30), 30, local_pages, LogitsWanted::kLast};
  ASSERT_TRUE(prefill.Forward(std::span(&chunk2, 1), &out).ok());
  ASSERT_TRUE(push_status.ok()) << push_status;
  ASSERT_TRUE((*ep)->Flush(absl::Now() + absl::Seconds(20)).ok());
  std::vector<int64_t> want_layers;
  for (int pass = 0; pass < 2; ++pass) {
    for (int64_t l = 0; l < m.config().num_layers; ++l) want_layers.push_back(l);
  }
  EXPECT_EQ(layers_seen, want_layers) << "one call per layer, in order, per forward";
  for (int b = 0; b < 3; ++b) {  // 45 tokens: pages 0..2
    EXPECT_EQ(std::memcmp(local->block_data(local_pages[b]), remote->block_data(remote_pages[b]),
                          page_bytes),
              0)
        << "page " << b << " differs after the push";
  }

  // Both sides decode the same tokens; the decode side reads only what was pushed.
  prefill.set_layer_kv_hook(nullptr);
  ModelRunner decode(m, remote.get(), &threads);
  std::vector<int32_t> tokens = prompt;
  for (int step = 0; step < 6; ++step) {
    const int32_t next = 5 + step * 11;
    tokens.push_back(next);
    const int64_t pos = static_cast<int64_t>(tokens.size()) - 1;
    ForwardOutput a, b;
    const SequenceInput on_prefill{std::span(tokens).subspan(pos, 1), pos, local_pages,
                                   LogitsWanted::kLast};
    const SequenceInput on_decode{std::span(tokens).subspan(pos, 1), pos, remote_pages,
                                  LogitsWanted::kLast};
    ASSERT_TRUE(prefill.Forward(std::span(&on_prefill, 1), &a).ok());
    ASSERT_TRUE(decode.Forward(std::span(&on_decode, 1), &b).ok());
    ASSERT_EQ(a.logits.size(), b.logits.size());
    EXPECT_EQ(std::memcmp(a.logits.data(), b.logits.data(), a.logits.size() * sizeof(float)), 0)
        << "decode step " << step << ": logits differ between the two sides";
  }
}

INSTANTIATE_TEST_SUITE_P(Transports, LayerwisePushTest, ::testing::Values("tcp", "sm"),
                         [](const ::testing::TestParamInfo<const char*>& p) {
                           return std::string(p.param);
                         });

}  // namespace
}  // namespace baton::worker
