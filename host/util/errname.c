/* SPDX-License-Identifier: MIT */
#include "util/errname.h"

#include <memd/abi.h>

const char *errname(int32_t code)
{
	switch (code) {
	case MEMD_EINVAL: return ERRNAME_EINVAL;
	case MEMD_ENOTFOUND: return ERRNAME_ENOTFOUND;
	case MEMD_ECONFLICT: return ERRNAME_ECONFLICT;
	case MEMD_ENOMEM: return ERRNAME_ENOMEM;
	case MEMD_EIO: return ERRNAME_EIO;
	case MEMD_ENOTSUP: return ERRNAME_ENOTSUP;
	case MEMD_EUNAVAIL: return ERRNAME_EUNAVAIL;
	case MEMD_ETIMEDOUT: return ERRNAME_ETIMEDOUT;
	case MEMD_ECANCELED: return ERRNAME_ECANCELED;
	case MEMD_ETOOBIG: return ERRNAME_ETOOBIG;
	case MEMD_EABI: return ERRNAME_EABI;
	case MEMD_EINTERNAL: return ERRNAME_EINTERNAL;
	case MEMD_EAUTH: return ERRNAME_EAUTH;
	case MEMD_EFORBIDDEN: return ERRNAME_EFORBIDDEN;
	default: return NULL;
	}
}
