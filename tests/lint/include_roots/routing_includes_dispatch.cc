// Compiled by the test layers.include_roots_refuse_unlinked with baton_routing's include
// directories only. The first include is routing's own and must resolve; the second is
// a folder routing does not link, and the compiler must not find it.
#include "routing/routing_policy.h"

// A separate block, so that include sorting keeps this line second.
#include "dispatch/request_run.h"
