/* SPDX-License-Identifier: MIT */
/*
 * errname: the one name of each MEMD_E* code, as the HTTP error bodies
 * ("code") and the metrics' code labels both say it.
 */
#ifndef MEMD_HOST_ERRNAME_H
#define MEMD_HOST_ERRNAME_H

#include <stdint.h>

#define ERRNAME_EINVAL "invalid_request"
#define ERRNAME_ENOTFOUND "not_found"
#define ERRNAME_ECONFLICT "conflict"
#define ERRNAME_ENOMEM "out_of_memory"
#define ERRNAME_EIO "storage_error"
#define ERRNAME_ENOTSUP "not_supported"
#define ERRNAME_EUNAVAIL "unavailable"
#define ERRNAME_ETIMEDOUT "timeout"
#define ERRNAME_ECANCELED "canceled"
#define ERRNAME_ETOOBIG "too_large"
#define ERRNAME_EABI "plugin_error"
#define ERRNAME_EINTERNAL "internal"
#define ERRNAME_EAUTH "unauthorized"
#define ERRNAME_EFORBIDDEN "forbidden"

/* The name of a MEMD_E* code; NULL for any other value. Static storage. */
const char *errname(int32_t code);

#endif
