#!/usr/bin/env bash
# A throwaway MariaDB server for memd's tests, on 127.0.0.1 at a
# non-default port, with all its files in a directory of its own.
#
#   mariadb.sh start DIR    mariadb-install-db in DIR/data, start mariadbd,
#                           create user memd (random password) and database
#                           memd; write DIR/env (export lines, see below).
#                           Fails (non-zero) if the server does not come up.
#   mariadb.sh stop DIR     stop the server and remove DIR.
#   mariadb.sh halt DIR     kill the server at once (SIGKILL, like a crash),
#                           keep DIR: for outage tests.
#   mariadb.sh resume DIR   start a halted server again on the same port.
#   mariadb.sh var          print MEMD_MYSQL_HOST (the variable that shows a
#                           server is already there; see with-services.sh)
#
# DIR/env exports MEMD_MYSQL_HOST, MEMD_MYSQL_PORT, MEMD_MYSQL_DATABASE,
# MEMD_MYSQL_USER, MEMD_MYSQL_PASSWORD, MEMD_MYSQL_SOCKET, MEMD_MYSQL_DIR
# and MEMD_MYSQL_SSL_CA.
#
# TLS: the server gets a certificate for 127.0.0.1 and localhost from a
# throwaway CA (openssl; DIR/tls/ca.pem is MEMD_MYSQL_SSL_CA), so clients
# can test sslmode verify_identity. MEMD_MARIADB_TLS=0 starts it without
# TLS (MEMD_MYSQL_SSL_CA is then empty).
#
# User memd has exactly the privileges README.md asks operators to grant
# (SELECT, INSERT, UPDATE, DELETE, CREATE, ALTER, INDEX, DROP) on database
# memd. On every database named memd_* (the tests give each test a
# database of its own, made by the plugin's create_database) it also has
# TRIGGER, which only the feed-order test uses (to stall a commit).
#
# As root, the server runs as the unprivileged user "mysql" (created by the
# Debian package). If MariaDB is not installed, it is installed with
# apt-get. The server's own defaults are kept where memd must not depend on
# them (character set latin1), so the tests prove the plugin sets what it
# needs. innodb_flush_log_at_trx_commit=2: a commit reaches the OS before it
# is acknowledged, so killing the server loses nothing (the tests never
# crash the machine).
set -euo pipefail

MY_PORT_BASE=23306     # non-default ports: 23306..43305
MY_PORT_SPAN=20000
MY_START_TRIES=5
MY_START_WAIT_S=60
MY_STOP_WAIT_S=30
MY_MAX_CONNECTIONS=400
MY_CONNECT_TIMEOUT_S=60   # handshakes are slow on a loaded test machine
MY_OS_USER=mysql

die() { echo "mariadb.sh: $*" >&2; exit 1; }

# The server binary; installs the package when it is missing.
server_bin() {
	local b
	b=$(command -v mariadbd || command -v /usr/sbin/mariadbd || true)
	if [[ -z "$b" ]]; then
		echo "mariadb.sh: MariaDB server not found; installing it" >&2
		apt_install mariadb-server mariadb-client
		b=$(command -v mariadbd || command -v /usr/sbin/mariadbd || true)
		[[ -n "$b" ]] || die "the mariadb-server package did not provide mariadbd"
	fi
	echo "$b"
}

is_root() { [[ $(id -u) -eq 0 ]]; }

# Install a Debian package (as root or through sudo).
apt_install() { # PACKAGE...
	local sudo=()
	if [[ $(id -u) -ne 0 ]]; then
		command -v sudo >/dev/null || die "need root (or sudo) to apt-get install $*"
		sudo=(sudo)
	fi
	export DEBIAN_FRONTEND=noninteractive
	"${sudo[@]}" apt-get update -qq >&2
	"${sudo[@]}" apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

# A throwaway CA and a server certificate for 127.0.0.1 in DIR/tls.
make_certs() { # DIR
	local tls=$1/tls
	command -v openssl >/dev/null || apt_install openssl
	mkdir -p "$tls"
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
		-subj "/CN=memd test CA" -keyout "$tls/ca.key" -out "$tls/ca.pem" 2>/dev/null &&
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
		-subj "/CN=127.0.0.1" -keyout "$tls/server.key" -out "$tls/server.csr" 2>/dev/null &&
	printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' >"$tls/ext" &&
	openssl x509 -req -in "$tls/server.csr" -CA "$tls/ca.pem" -CAkey "$tls/ca.key" \
		-CAcreateserial -days 2 -extfile "$tls/ext" -out "$tls/server.pem" 2>/dev/null ||
		die "could not make the test certificates"
	is_root && chown -R "$MY_OS_USER" "$tls"
	return 0
}

# The server's TLS options when DIR has certificates.
tls_opts() { # DIR
	local tls=$1/tls
	[[ -f "$tls/server.pem" ]] || return 0
	printf '%s\n' "--ssl-ca=$tls/ca.pem" "--ssl-cert=$tls/server.pem" "--ssl-key=$tls/server.key"
}

# Options the installer and the server share (sizes kept small: the tests
# hold little data and the machine is small; temp files in DIR, where no
# other server's can clash with them).
common_opts() { # DIR
	local dir=$1
	printf '%s\n' --no-defaults "--datadir=$dir/data" "--tmpdir=$dir/tmp" \
		--innodb-buffer-pool-size=64M --innodb-log-file-size=32M \
		--innodb-data-file-path=ibdata1:12M:autoextend
	is_root && printf '%s\n' "--user=$MY_OS_USER"
	return 0
}

client() { # DIR SQL...: run statements as root over the socket
	local dir=$1; shift
	mariadb --no-defaults -uroot --socket="$dir/mysqld.sock" -N -B "$@"
}

server_up() { # DIR PORT -> 0 once it accepts connections
	local dir=$1 port=$2 bin pid
	bin=$(server_bin)
	mapfile -t opts < <(common_opts "$dir"; tls_opts "$dir")
	"$bin" "${opts[@]}" --port="$port" --bind-address=127.0.0.1 \
		--socket="$dir/mysqld.sock" --pid-file="$dir/mysqld.pid" \
		--log-error="$dir/server.log" --skip-name-resolve \
		--max-connections="$MY_MAX_CONNECTIONS" --innodb-flush-log-at-trx-commit=2 \
		--connect-timeout="$MY_CONNECT_TIMEOUT_S" \
		</dev/null >/dev/null 2>&1 &
	pid=$!
	echo "$pid" > "$dir/server.pid"
	for ((t = 0; t < MY_START_WAIT_S * 10; t++)); do
		if ! kill -0 "$pid" 2>/dev/null; then
			wait "$pid" 2>/dev/null || true
			return 1
		fi
		if mariadb-admin --no-defaults -uroot --socket="$dir/mysqld.sock" \
			--connect-timeout=1 ping >/dev/null 2>&1; then
			return 0
		fi
		sleep 0.1
	done
	kill -KILL "$pid" 2>/dev/null || true
	return 1
}

server_down() { # DIR SIGNAL: stop the server and wait until it is gone
	local dir=$1 sig=$2 pid
	[[ -f "$dir/server.pid" ]] || return 0
	pid=$(cat "$dir/server.pid")
	kill "-$sig" "$pid" 2>/dev/null || { rm -f "$dir/server.pid"; return 0; }
	for ((t = 0; t < MY_STOP_WAIT_S * 10; t++)); do
		kill -0 "$pid" 2>/dev/null || { rm -f "$dir/server.pid"; return 0; }
		sleep 0.1
	done
	kill -KILL "$pid" 2>/dev/null || true
	for ((t = 0; t < MY_STOP_WAIT_S * 10; t++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	rm -f "$dir/server.pid"
}

cmd_start() {
	local dir=$1 port password ok=0
	[[ -d "$dir" ]] || mkdir -p "$dir"
	dir=$(cd "$dir" && pwd)
	server_bin >/dev/null
	if is_root; then
		id "$MY_OS_USER" >/dev/null 2>&1 || \
			useradd --system --home-dir /nonexistent --shell /usr/sbin/nologin "$MY_OS_USER"
		chown "$MY_OS_USER" "$dir"
	fi
	chmod 700 "$dir"
	mkdir -p "$dir/tmp"
	is_root && chown "$MY_OS_USER" "$dir/tmp"
	[[ "${MEMD_MARIADB_TLS:-1}" == 0 ]] || make_certs "$dir"
	mapfile -t opts < <(common_opts "$dir")
	mariadb-install-db "${opts[@]}" --auth-root-authentication-method=normal \
		--skip-test-db --skip-name-resolve >"$dir/install.log" 2>&1 \
		|| { cat "$dir/install.log" >&2; die "mariadb-install-db failed"; }
	for ((i = 0; i < MY_START_TRIES; i++)); do
		port=$((MY_PORT_BASE + (RANDOM * 32768 + RANDOM) % MY_PORT_SPAN))
		if server_up "$dir" "$port"; then ok=1; break; fi
	done
	if [[ $ok -ne 1 ]]; then
		tail -n 20 "$dir/server.log" >&2 || true
		die "server did not start in $dir"
	fi
	password=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
	client "$dir" -e "
		CREATE DATABASE memd;
		CREATE USER 'memd'@'127.0.0.1' IDENTIFIED BY '$password';
		CREATE USER 'memd'@'localhost' IDENTIFIED BY '$password';
		GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, ALTER, INDEX, DROP
		  ON \`memd\`.* TO 'memd'@'127.0.0.1', 'memd'@'localhost';
		GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, ALTER, INDEX, DROP, TRIGGER
		  ON \`memd\\_%\`.* TO 'memd'@'127.0.0.1', 'memd'@'localhost';" \
		|| die "could not create user and database"
	umask 077
	cat >"$dir/env" <<-EOF
	export MEMD_MYSQL_HOST=127.0.0.1
	export MEMD_MYSQL_PORT=$port
	export MEMD_MYSQL_DATABASE=memd
	export MEMD_MYSQL_USER=memd
	export MEMD_MYSQL_PASSWORD=$password
	export MEMD_MYSQL_SOCKET='$dir/mysqld.sock'
	export MEMD_MYSQL_DIR='$dir'
	export MEMD_MYSQL_SSL_CA='$( [[ -f "$dir/tls/ca.pem" ]] && echo "$dir/tls/ca.pem" )'
	EOF
	echo "$port" > "$dir/port"
	echo "mariadb.sh: MariaDB up on 127.0.0.1:$port ($dir)" >&2
}

cmd_stop() {
	local dir=$1
	[[ -d "$dir" ]] || return 0
	# Its files go with DIR: nothing to shut down cleanly.
	server_down "$dir" KILL
	rm -rf "$dir"
}

cmd_halt() {
	server_down "$1" KILL
}

cmd_resume() {
	local dir=$1
	[[ -f "$dir/port" ]] || die "$dir holds no server to resume"
	server_up "$dir" "$(cat "$dir/port")" || {
		tail -n 20 "$dir/server.log" >&2 || true
		die "server did not restart in $dir"
	}
}

[[ "${1:-}" == var ]] && { echo MEMD_MYSQL_HOST; exit 0; }
[[ $# -eq 2 ]] || die "usage: mariadb.sh start|stop|halt|resume DIR, or mariadb.sh var"
case "$1" in
	start) cmd_start "$2" ;;
	stop) cmd_stop "$2" ;;
	halt) cmd_halt "$2" ;;
	resume) cmd_resume "$2" ;;
	*) die "unknown command '$1'" ;;
esac
