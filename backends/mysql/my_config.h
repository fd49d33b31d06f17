/* SPDX-License-Identifier: MIT */
/*
 * my_config: the MariaDB store's config keys, the DSN form
 *
 *     mysql://[user[:password]@]host[:port][/database][?key=value&...]
 *
 * (also mariadb://; host may be [v6-address]; user, password, database
 * and values are percent-decoded; query keys: sslmode, ssl_ca, ssl_cert,
 * ssl_key, socket), and their resolution into my_options: a discrete key
 * that is set wins over the DSN's part, and what neither sets takes the
 * default below. Messages never contain the password.
 */
#ifndef MEMD_MY_CONFIG_H
#define MEMD_MY_CONFIG_H

#include "my_db.h"

#define MY_DEFAULT_HOST "127.0.0.1"
#define MY_DEFAULT_PORT 3306
#define MY_DEFAULT_DATABASE "memd"
#define MY_DEFAULT_USER "memd"
#define MY_DEFAULT_SSLMODE "preferred"
#define MY_DEFAULT_POOL 8
#define MY_DEFAULT_GROUP_COMMIT 32 /* appends per transaction at most */
#define MY_GROUP_COMMIT_MAX 1024
#define MY_DEFAULT_CONNECT_TIMEOUT_S 5
#define MY_DEFAULT_STATEMENT_TIMEOUT_MS 30000

/* The descriptor's NULL-terminated key list. */
extern const memd_config_key *const my_config_keys[];

/* Parse dsn into o (only the parts it names; the strings are malloc'd
 * and replace what o held). MEMD_EINVAL with a message that does not
 * quote the password. */
int32_t my_dsn_parse(const char *dsn, my_options *o, memd_error *err);

/* Read the instance's config through host and resolve it into *ret (which
 * owns its strings; free with my_options_clear). */
int32_t my_config_load(const memd_host *host, my_options *ret, memd_error *err);

/* MY_SSL_* for a sslmode name; -1 if unknown. */
int32_t my_sslmode_parse(const char *name);

#endif
