// Prometheus helpers over prometheus-cpp core: the text exposition a /metrics handler serves
// (with baton_build_info and the process metrics of process_collector.h appended),
// and the latency buckets every histogram in Baton shares, so dashboards can compare them.
//
//   prometheus::Registry registry;
//   auto& latency = prometheus::BuildHistogram().Name("baton_request_seconds")
//                       .Help("Request latency").Register(registry)
//                       .Add({}, LatencyBuckets());
//   out.Send(200, kMetricsContentType, RenderMetrics(registry));
#pragma once

#include <string>
#include <string_view>

#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace baton::service {

inline constexpr std::string_view kMetricsContentType = "text/plain; version=0.0.4; charset=utf-8";

// The registry in text exposition format 0.0.4.
std::string RenderMetrics(const prometheus::Registry& registry);

// Upper bounds in seconds from 1 ms to 60 s, about three per decade (1, 2.5, 5 steps).
prometheus::Histogram::BucketBoundaries LatencyBuckets();

}  // namespace baton::service
