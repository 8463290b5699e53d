#include "common/stop_signals.h"

#include <pthread.h>
#include <signal.h>

namespace baton {
namespace {

sigset_t StopSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

}  // namespace

void BlockStopSignals() {
  const sigset_t set = StopSignals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

int WaitForStopSignal() {
  const sigset_t set = StopSignals();
  int signal = 0;
  sigwait(&set, &signal);
  return signal;
}

}  // namespace baton
