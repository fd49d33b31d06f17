/* SPDX-License-Identifier: MIT */
#include "my_db.h"

#include <errmsg.h>
#include <mysqld_error.h>

#include "pu_storage.h"

int32_t my_map_errno(unsigned e, uint32_t *ret_flags, int *ret_lost)
{
	uint32_t flags = 0;
	int lost = 0;
	int32_t code;

	switch (e) {
	/* The connection is gone or unusable: the server is down, restarting
	 * or unreachable. */
	case CR_CONNECTION_ERROR:
	case CR_CONN_HOST_ERROR:
	case CR_SERVER_GONE_ERROR:
	case CR_SERVER_LOST:
	case CR_SERVER_LOST_EXTENDED:
	case CR_SERVER_HANDSHAKE_ERR:
	case CR_IPSOCK_ERROR:
	case CR_SOCKET_CREATE_ERROR:
	case CR_ERR_NET_READ:
	case CR_ERR_NET_WRITE:
	case CR_MALFORMED_PACKET:
	case CR_COMMANDS_OUT_OF_SYNC:
	case CR_SSL_CONNECTION_ERROR: /* a TLS session or handshake broke */
	case ER_CONNECTION_KILLED:
	case ER_SERVER_SHUTDOWN:
	case ER_NET_READ_ERROR:
	case ER_NET_READ_INTERRUPTED:
	case ER_NET_ERROR_ON_WRITE:
	case ER_NET_PACKETS_OUT_OF_ORDER:
	case ER_UNKNOWN_STMT_HANDLER:
		code = pu_storage_code(PU_STORAGE_UNREACHABLE, &flags);
		lost = 1;
		break;
	/* The server cannot take more now: connections, its own memory. */
	case ER_CON_COUNT_ERROR:
	case ER_TOO_MANY_USER_CONNECTIONS:
	case ER_OUTOFMEMORY:
	case ER_OUT_OF_RESOURCES:
		code = pu_storage_code(PU_STORAGE_UNREACHABLE, &flags);
		break;
	/* Busy or contended: the same call may succeed in a moment. */
	case ER_LOCK_DEADLOCK:
	case ER_LOCK_WAIT_TIMEOUT:
	case ER_QUERY_INTERRUPTED:
	case ER_NEED_REPREPARE:
		code = pu_storage_code(PU_STORAGE_BUSY, &flags);
		break;
	/* No space: InnoDB's "table is full" is its tablespace failing to
	 * grow on a full disk. */
	case ER_RECORD_FILE_FULL:
	case ER_DISK_FULL:
		code = pu_storage_code(PU_STORAGE_FULL, &flags);
		break;
	/* The server runs --read-only (a replica, or an operator's switch). */
	case ER_OPTION_PREVENTS_STATEMENT:
	case ER_READ_ONLY_MODE:
		code = pu_storage_code(PU_STORAGE_READONLY, &flags);
		break;
	case ER_ERROR_ON_READ:
	case ER_ERROR_ON_WRITE:
	case ER_GET_ERRNO:
	case ER_CRASHED_ON_USAGE:
	case ER_NOT_KEYFILE:
		code = pu_storage_code(PU_STORAGE_IO, &flags);
		break;
	case ER_STATEMENT_TIMEOUT:
		code = MEMD_ETIMEDOUT;
		flags = MEMD_ERROR_RETRYABLE;
		break;
	case ER_DUP_ENTRY:
		code = MEMD_ECONFLICT;
		break;
	/* The server closes the connection after refusing a packet. */
	case ER_NET_PACKET_TOO_LARGE:
	case CR_NET_PACKET_TOO_LARGE:
		code = MEMD_ETOOBIG;
		lost = 1;
		break;
	case ER_TRUNCATED_WRONG_VALUE_FOR_FIELD:
	case ER_DATA_TOO_LONG:
		code = MEMD_EINVAL;
		break;
	case CR_OUT_OF_MEMORY:
		code = MEMD_ENOMEM;
		break;
	default:
		code = MEMD_EIO;
		break;
	}
	if (ret_flags)
		*ret_flags = flags;
	if (ret_lost)
		*ret_lost = lost;
	return code;
}
