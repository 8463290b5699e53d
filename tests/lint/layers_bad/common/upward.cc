// A deliberate violation: the layer check must reject this tree.
#include "tokenizer/tokenizer.h"
