// Graceful stop for servers: block SIGINT and SIGTERM before any thread starts (threads
// inherit the mask), then wait for one on the main thread.
//
//   BlockStopSignals();
//   ... start servers ...
//   WaitForStopSignal();  // returns on Ctrl-C or SIGTERM
//   ... drain and shut down ...
#pragma once

namespace baton {

void BlockStopSignals();
// Returns the signal that arrived (SIGINT or SIGTERM).
int WaitForStopSignal();

}  // namespace baton
