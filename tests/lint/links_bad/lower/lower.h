// check_links.py must reject this tree: lower's header includes upper's, and baton_lower
// does not link baton_upper.
#pragma once

#include "upper/upper.h"
