#ifndef HG_CPQ_SHIM_H
#define HG_CPQ_SHIM_H
/* libpq (Debian libpq-dev), for the PostgreSQL sink. */
#include <libpq-fe.h>
#endif
