// The hints are inline functions in include/memory_hints.h; this file gives the target something to build.
#include "memory_hints.h"
