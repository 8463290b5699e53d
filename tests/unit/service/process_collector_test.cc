#include "service/process_collector.h"

#include <unistd.h>

#include <ctime>
#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace baton::service {
namespace {

const prometheus::MetricFamily* Find(const std::vector<prometheus::MetricFamily>& families,
                                     const std::string& name) {
  for (const auto& f : families) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

double Value(const prometheus::MetricFamily& f) {
  return f.type == prometheus::MetricType::Counter ? f.metric.at(0).counter.value
                                                   : f.metric.at(0).gauge.value;
}

TEST(ProcessCollectorTest, ServesTheStandardNames) {
  const auto families = ProcessCollector().Collect();
  for (const char* name : {"process_cpu_seconds_total", "process_resident_memory_bytes",
                           "process_virtual_memory_bytes", "process_open_fds", "process_max_fds",
                           "process_start_time_seconds"}) {
    const auto* f = Find(families, name);
    ASSERT_NE(f, nullptr) << name;
    ASSERT_EQ(f->metric.size(), 1u) << name;
    EXPECT_GE(Value(*f), 0) << name;
  }
  EXPECT_EQ(Find(families, "process_cpu_seconds_total")->type, prometheus::MetricType::Counter);
}

TEST(ProcessCollectorTest, ResidentMemoryMatchesStatm) {
  // statm's second field is the resident set in pages: the oracle, read independently.
  std::vector<char> touched(8 << 20, 1);  // some resident memory of our own
  std::ifstream statm("/proc/self/statm");
  double size_pages = 0, resident_pages = 0;
  ASSERT_TRUE(statm >> size_pages >> resident_pages);
  const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
  const auto families = ProcessCollector().Collect();
  const double rss = Value(*Find(families, "process_resident_memory_bytes"));
  EXPECT_GT(rss, static_cast<double>(touched.size()));
  EXPECT_NEAR(rss, resident_pages * page, 4 << 20);  // within 4 MiB of statm's
  EXPECT_NEAR(Value(*Find(families, "process_virtual_memory_bytes")), size_pages * page, 4 << 20);
}

TEST(ProcessCollectorTest, CountsADescriptorWeOpen) {
  const double before = Value(*Find(ProcessCollector().Collect(), "process_open_fds"));
  std::ifstream held("/proc/self/stat");
  ASSERT_TRUE(held.is_open());
  const double after = Value(*Find(ProcessCollector().Collect(), "process_open_fds"));
  EXPECT_EQ(after, before + 1);
}

TEST(ProcessCollectorTest, StartedBeforeNowAndNotLongAgo) {
  const double start = Value(*Find(ProcessCollector().Collect(), "process_start_time_seconds"));
  const double now = static_cast<double>(std::time(nullptr));
  EXPECT_LE(start, now + 1);
  EXPECT_GT(start, now - 3600);  // a unit test does not run for an hour
}

}  // namespace
}  // namespace baton::service
