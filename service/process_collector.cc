#include "service/process_collector.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <sstream>
#include <string>
#include <system_error>

namespace baton::service {
namespace {

prometheus::MetricFamily Family(const char* name, const char* help, prometheus::MetricType type,
                                double value) {
  prometheus::MetricFamily f;
  f.name = name;
  f.help = help;
  f.type = type;
  prometheus::ClientMetric m;
  if (type == prometheus::MetricType::Counter) {
    m.counter.value = value;
  } else {
    m.gauge.value = value;
  }
  f.metric.push_back(std::move(m));
  return f;
}

// The seconds since the epoch at which the machine booted (/proc/stat's btime); -1 if unknown.
double BootTime() {
  std::ifstream in("/proc/stat");
  std::string key;
  while (in >> key) {
    if (key == "btime") {
      double t = -1;
      in >> t;
      return t;
    }
    in.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  }
  return -1;
}

}  // namespace

std::vector<prometheus::MetricFamily> ProcessCollector::Collect() const {
  using prometheus::MetricType;
  std::vector<prometheus::MetricFamily> out;
  // /proc/self/stat: the command name (field 2) may hold spaces and parentheses, so the
  // fields are counted from the last ')'. After it come field 3 (state) onwards.
  std::ifstream stat_file("/proc/self/stat");
  std::string stat((std::istreambuf_iterator<char>(stat_file)), std::istreambuf_iterator<char>());
  const size_t close = stat.rfind(')');
  if (close != std::string::npos) {
    std::istringstream fields(stat.substr(close + 1));
    std::string field;
    double utime = 0, stime = 0, start_ticks = 0, vsize = 0, rss_pages = 0;
    for (int i = 3; i <= 24 && fields >> field; ++i) {
      if (i == 14) utime = std::stod(field);
      if (i == 15) stime = std::stod(field);
      if (i == 22) start_ticks = std::stod(field);
      if (i == 23) vsize = std::stod(field);
      if (i == 24) rss_pages = std::stod(field);
    }
    const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
    const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
    out.push_back(Family("process_cpu_seconds_total",
                         "Total user and system CPU time spent in seconds.", MetricType::Counter,
                         (utime + stime) / ticks));
    out.push_back(Family("process_resident_memory_bytes", "Resident memory size in bytes.",
                         MetricType::Gauge, rss_pages * page));
    out.push_back(Family("process_virtual_memory_bytes", "Virtual memory size in bytes.",
                         MetricType::Gauge, vsize));
    const double boot = BootTime();
    if (boot >= 0) {
      out.push_back(Family("process_start_time_seconds",
                           "Start time of the process since unix epoch in seconds.",
                           MetricType::Gauge, boot + start_ticks / ticks));
    }
  }
  std::error_code ec;
  std::filesystem::directory_iterator fds("/proc/self/fd", ec);
  if (!ec) {
    double open = 0;
    for (auto it = fds; it != std::filesystem::directory_iterator(); it.increment(ec)) {
      if (ec) break;
      ++open;
    }
    // The iterator's own descriptor is among them.
    out.push_back(Family("process_open_fds", "Number of open file descriptors.", MetricType::Gauge,
                         open - 1));
  }
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0) {
    out.push_back(Family("process_max_fds", "Maximum number of open file descriptors.",
                         MetricType::Gauge, static_cast<double>(limit.rlim_cur)));
  }
  return out;
}

}  // namespace baton::service
