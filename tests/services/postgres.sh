#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for memd's tests, on 127.0.0.1 at a
# non-default port, with its data in a directory of its own.
#
#   postgres.sh start DIR     initdb in DIR/data, start the server, create
#                             role memd (password) and database memd; write
#                             DIR/env (export lines, see below). Fails (non-zero)
#                             if the server does not come up.
#   postgres.sh stop DIR      stop the server and remove DIR.
#   postgres.sh halt DIR      stop the server at once (immediate shutdown, like
#                             a crash), keep DIR: for outage tests.
#   postgres.sh resume DIR    start a halted server again on the same port.
#   postgres.sh var           print MEMD_PG_DSN (the variable that shows a
#                             server is already there; see with-services.sh)
#
# DIR/env exports MEMD_PG_DSN (conninfo without the password),
# MEMD_PG_PASSWORD, MEMD_PG_HOST, MEMD_PG_PORT, MEMD_PG_DATABASE,
# MEMD_PG_USER and MEMD_PG_DIR.
#
# As root, the server runs as the unprivileged user "postgres" (created by
# the Debian package). If PostgreSQL is not installed, it is installed with
# apt-get. fsync is off (the tests never crash the machine, only the server,
# and every commit still reaches the OS before it is acknowledged).
set -euo pipefail

PG_PORT_BASE=25432     # non-default ports: 25432..45431
PG_PORT_SPAN=20000
PG_START_TRIES=5
PG_START_WAIT_S=60
PG_MAX_CONNECTIONS=300

die() { echo "postgres.sh: $*" >&2; exit 1; }

pg_bindir() {
	local d
	d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
	if [[ -z "$d" || ! -x "$d/initdb" ]]; then
		echo "postgres.sh: PostgreSQL server not found; installing it" >&2
		[[ $(id -u) -eq 0 ]] || die "need root to apt-get install postgresql"
		export DEBIAN_FRONTEND=noninteractive
		apt-get update -qq >&2
		apt-get install -y -qq --no-install-recommends postgresql >/dev/null
		d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
		[[ -n "$d" && -x "$d/initdb" ]] || die "PostgreSQL install did not provide initdb"
	fi
	echo "$d"
}

# Run a command as the cluster's owner.
as_owner() {
	if [[ $(id -u) -eq 0 ]]; then
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}

owner_setup() { # DIR
	if [[ $(id -u) -eq 0 ]]; then
		id postgres >/dev/null 2>&1 || \
			useradd --system --home-dir /var/lib/postgresql --shell /usr/sbin/nologin postgres
		chown postgres "$1"
	fi
	chmod 700 "$1"
}

server_start() { # BIN DIR PORT -> 0 if up
	local bin=$1 dir=$2 port=$3
	as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t "$PG_START_WAIT_S" \
		-o "-p $port -k $dir" start >/dev/null 2>&1
}

cmd_start() {
	local dir=$1 bin port password ok=0
	[[ -d "$dir" ]] || mkdir -p "$dir"
	dir=$(cd "$dir" && pwd)
	bin=$(pg_bindir)
	owner_setup "$dir"
	password=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
	printf '%s\n' "$password" > "$dir/pwfile"
	[[ $(id -u) -eq 0 ]] && chown postgres "$dir/pwfile"
	as_owner "$bin/initdb" -D "$dir/data" -U postgres -E UTF8 --no-locale \
		--auth-local=trust --auth-host=scram-sha-256 --pwfile="$dir/pwfile" --no-sync \
		>"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; die "initdb failed"; }
	rm -f "$dir/pwfile"
	cat >>"$dir/data/postgresql.conf" <<-EOF
	listen_addresses = '127.0.0.1'
	max_connections = $PG_MAX_CONNECTIONS
	fsync = off
	full_page_writes = off
	shared_buffers = 64MB
	log_min_messages = warning
	log_min_error_statement = panic
	EOF
	for ((i = 0; i < PG_START_TRIES; i++)); do
		port=$((PG_PORT_BASE + (RANDOM * 32768 + RANDOM) % PG_PORT_SPAN))
		if server_start "$bin" "$dir" "$port"; then ok=1; break; fi
	done
	if [[ $ok -ne 1 ]]; then
		tail -n 20 "$dir/server.log" >&2 || true
		die "server did not start in $dir"
	fi
	as_owner "$bin/psql" -h "$dir" -p "$port" -U postgres -d postgres -v ON_ERROR_STOP=1 -q \
		-c "CREATE ROLE memd LOGIN PASSWORD '$password'" \
		-c "CREATE DATABASE memd OWNER memd" >/dev/null \
		|| die "could not create role and database"
	cat >"$dir/env" <<-EOF
	export MEMD_PG_HOST=127.0.0.1
	export MEMD_PG_PORT=$port
	export MEMD_PG_DATABASE=memd
	export MEMD_PG_USER=memd
	export MEMD_PG_PASSWORD=$password
	export MEMD_PG_DSN='host=127.0.0.1 port=$port dbname=memd user=memd'
	export MEMD_PG_DIR='$dir'
	EOF
	echo "$port" > "$dir/port"
	echo "postgres.sh: PostgreSQL up on 127.0.0.1:$port ($dir)" >&2
}

cmd_stop() {
	local dir=$1 bin
	[[ -d "$dir" ]] || return 0
	bin=$(pg_bindir)
	if [[ -f "$dir/data/postmaster.pid" ]]; then
		as_owner "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || \
			as_owner "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
	fi
	rm -rf "$dir"
}

cmd_halt() {
	local dir=$1 bin
	bin=$(pg_bindir)
	as_owner "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null
}

cmd_resume() {
	local dir=$1 bin
	bin=$(pg_bindir)
	server_start "$bin" "$dir" "$(cat "$dir/port")" || {
		tail -n 20 "$dir/server.log" >&2 || true
		die "server did not restart in $dir"
	}
}

[[ "${1:-}" == var ]] && { echo MEMD_PG_DSN; exit 0; }
[[ $# -eq 2 ]] || die "usage: postgres.sh start|stop|halt|resume DIR, or postgres.sh var"
case "$1" in
	start) cmd_start "$2" ;;
	stop) cmd_stop "$2" ;;
	halt) cmd_halt "$2" ;;
	resume) cmd_resume "$2" ;;
	*) die "unknown command '$1'" ;;
esac
