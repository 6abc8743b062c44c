#ifndef CACHED_CHIREDIS_SHIM_H
#define CACHED_CHIREDIS_SHIM_H
#include <hiredis/hiredis.h>
#endif
