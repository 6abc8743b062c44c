// The helpers are inline functions in include/busy_poll.h; this file gives the target something to build.
#include "busy_poll.h"
