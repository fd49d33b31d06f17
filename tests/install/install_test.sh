#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `meson install` gives a working memd, started the way its systemd unit
# starts it:
#  1. `meson install --destdir` this build into a temp root; everything the
#     README's "Installing" lists is there (binary, libmemd, headers,
#     pkg-config files, plugins, example configs, the default config, the
#     unit, the manual page, which describes every command group of
#     `memd --help`);
#  2. the unit runs the installed binary with the installed config, in its
#     state directory, hardened as documented (systemd-analyze verify when
#     systemd-analyze is present);
#  3. its ExecStart, with every path rebased into the temp root, run in
#     its WorkingDirectory with its UMask, no new privileges and (when the
#     kernel has PR_SET_MDWE) the MemoryDenyWriteExecute policy: with a
#     missing config it exits 7 (not restarted); on a free loopback port it
#     serves: /healthz answers, an appended event reads back, the SQLite
#     file is in the state directory, SIGTERM drains and exits 0; started
#     again, the event is still there;
#  4. a C program builds against the installed libmemd with only the
#     installed memd.pc, links and runs; memd-plugin.pc names the plugin
#     directory the plugins were installed into (tests/abi/template_test.sh
#     builds a plugin with it).
# The installed binary finds plugins in its configured install directory
# (<libdir>/memd/plugins as an absolute path), which is not under the temp
# root, so step 3 points MEMD_PLUGIN_PATH at the installed plugin directory
# in the temp root, and checks that every plugin memd loaded came from it.
#
# usage: install_test.sh PREFIX BINDIR LIBDIR INCLUDEDIR SYSCONFDIR DATADIR
#                        UNITDIR PLUGINDIR SANITIZE MANDIR
#   (absolute paths as configured; SANITIZE is meson's b_sanitize)
#   env: MEMD_BUILD_ROOT
set -euo pipefail

fail() {
	echo "FAIL: $*" >&2
	exit 1
}

[ $# -eq 10 ] || fail "usage: $0 PREFIX BINDIR LIBDIR INCLUDEDIR SYSCONFDIR DATADIR UNITDIR PLUGINDIR SANITIZE MANDIR"
prefix=$1 bindir=$2 libdir=$3 includedir=$4 sysconfdir=$5 datadir=$6 unitdir=$7 plugindir=$8
sanitize=$9 mandir=${10}
: "${MEMD_BUILD_ROOT:?run through meson test}"

START_TRIES=5       # ports tried before giving up (another process may take one)
START_TIMEOUT_S=30  # how long memd may take to answer /healthz
STOP_TIMEOUT_S=60   # how long SIGTERM may take (drain + flush)
POLL_S=0.05         # pause between two looks at a condition

tmp=$(mktemp -d "${TMPDIR:-/tmp}/memd-install-test.XXXXXX")
pid=
cleanup() {
	if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
		kill -KILL "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT
root=$tmp/root

# 1. install, and the installed layout
meson install -C "$MEMD_BUILD_ROOT" --no-rebuild --quiet --destdir "$root" >"$tmp/install.log" 2>&1 ||
	{ cat "$tmp/install.log" >&2; fail "meson install failed"; }
need() { # FILE WHAT
	[ -f "$root$1" ] || fail "meson install did not install $2 ($1)"
}
need "$bindir/memd" "the memd binary"
[ -x "$root$bindir/memd" ] || fail "$bindir/memd is not executable"
need "$libdir/libmemd.so" "libmemd"
for h in abi host store strategy vector plugin memd; do
	need "$includedir/memd/$h.h" "the header memd/$h.h"
done
need "$libdir/pkgconfig/memd.pc" "memd.pc"
need "$libdir/pkgconfig/memd-plugin.pc" "memd-plugin.pc"
for p in sqlite memory postgres mysql filevec qdrant all buffer_window token_window summary_buffer; do
	need "$plugindir/memd-$p.so" "the $p plugin"
done
for c in memd sqlite memory postgres mysql filevec qdrant summary_buffer; do
	need "$datadir/memd/examples/$c.yaml" "the example config $c.yaml"
done
need "$sysconfdir/memd/memd.yaml" "the default config"
need "$mandir/man1/memd.1" "the manual page memd(1)"
# Every command group of the usage (its lines "  GROUP ...") is named in
# bold in the manual page (a .B, .BR or .BI line that starts with it).
groups=$("$root$bindir/memd" --help 2>&1 | sed -n 's/^  \([a-z][a-z]*\) .*/\1/p' | sort -u)
[ -n "$groups" ] || fail "memd --help lists no command"
for g in $groups; do
	grep -Eq "^\.(B|BR|BI) \"?$g( |\"|,|\$)" "$root$mandir/man1/memd.1" ||
		fail "memd.1 does not describe the command '$g' of memd --help"
done
if [ "$unitdir" = no ]; then
	# -Dsystemdunitdir=no: run the command line the unit would have.
	unit=$tmp/memd.service
	printf 'ExecStart=%s\nWorkingDirectory=/var/lib/memd\n' \
		"$bindir/memd serve --config $sysconfdir/memd/memd.yaml" >"$unit"
else
	need "$unitdir/memd.service" "the systemd unit"
	unit=$root$unitdir/memd.service
fi
echo "ok: installed layout"

# 2. the unit
key() { # KEY: the value of KEY= in the unit (the last one wins, as in systemd)
	sed -n "s/^$1=//p" "$unit" | tail -n 1
}
want_key() { # KEY VALUE
	[ "$(key "$1")" = "$2" ] || fail "memd.service: $1=$(key "$1"), want $2"
}
exec_start=$(key ExecStart)
[ "$exec_start" = "$bindir/memd serve --config $sysconfdir/memd/memd.yaml" ] ||
	fail "memd.service: ExecStart=$exec_start does not run the installed memd with the installed config"
if [ "$unitdir" = no ]; then
	echo "note: -Dsystemdunitdir=no: no unit installed, none checked"
else
	want_key Type simple
	want_key Restart on-failure
	want_key RestartPreventExitStatus "2 7"
	want_key DynamicUser yes
	want_key StateDirectory memd
	want_key WorkingDirectory /var/lib/memd
	want_key UMask 0077
	for kv in NoNewPrivileges=yes CapabilityBoundingSet= ProtectSystem=strict ProtectHome=yes \
		PrivateTmp=yes PrivateDevices=yes ProtectKernelTunables=yes ProtectKernelModules=yes \
		ProtectKernelLogs=yes ProtectControlGroups=yes \
		"RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6" RestrictNamespaces=yes \
		LockPersonality=yes MemoryDenyWriteExecute=yes SystemCallFilter=@system-service; do
		want_key "${kv%%=*}" "${kv#*=}"
	done
	if command -v systemd-analyze >/dev/null; then
		# Offline check of the unit's syntax, with ExecStart rebased so that
		# the binary it names exists. Only messages about the unit itself
		# count: which system call names systemd's filter tables know depends
		# on the systemd and libseccomp versions.
		mkdir "$tmp/verify"
		sed "s#^ExecStart=$bindir/#ExecStart=$root$bindir/#" "$unit" >"$tmp/verify/memd.service"
		if ! systemd-analyze verify --man=no "$tmp/verify/memd.service" >"$tmp/verify.log" 2>&1 ||
			grep -v 'Failed to parse system call' "$tmp/verify.log" | grep -q 'memd\.service'; then
			cat "$tmp/verify.log" >&2
			fail "systemd-analyze verify refuses memd.service"
		fi
		echo "ok: systemd-analyze verify accepts memd.service"
	else
		echo "note: systemd-analyze not found; memd.service not verified by systemd"
	fi
fi

# 3. run ExecStart as the unit would, paths rebased into the temp root
read -r -a argv <<<"$exec_start"
for i in "${!argv[@]}"; do
	case ${argv[$i]} in
	/*) argv[$i]=$root${argv[$i]} ;;
	esac
done
statedir=$root$(key WorkingDirectory)
mkdir -p "$statedir"
chmod 0700 "$statedir"

free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
# The restrictions systemd would add that a process can put on itself:
# no new privileges, and (kernels >= 6.3) PR_SET_MDWE with
# PR_MDWE_REFUSE_EXEC_GAIN, what MemoryDenyWriteExecute=yes enforces: no
# mapping both writable and executable, none made executable later. Both
# hold across execve.
HARDEN='
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
PR_SET_NO_NEW_PRIVS, PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN = 38, 65, 1
if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
    sys.exit("prctl(PR_SET_NO_NEW_PRIVS): " + os.strerror(ctypes.get_errno()))
if libc.prctl(PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN, 0, 0, 0) != 0:
    print("note: no PR_SET_MDWE here (" + os.strerror(ctypes.get_errno()) +
          "); memd runs without the MemoryDenyWriteExecute policy", file=sys.stderr)
os.execv(sys.argv[1], sys.argv[1:])
'
log=$tmp/memd.log
base=
start() { # run ExecStart until /healthz answers; sets pid and base
	local try port waited
	for ((try = 0; try < START_TRIES; try++)); do
		port=$(free_port)
		base=http://127.0.0.1:$port
		(
			cd "$statedir"
			umask 0077
			exec env -u MEMD_CONFIG MEMD_PLUGIN_PATH="$root$plugindir" \
				MEMD_LISTEN="127.0.0.1:$port" python3 -c "$HARDEN" "${argv[@]}"
		) >>"$log" 2>&1 &
		pid=$!
		waited=0
		while ! curl -fsS -o /dev/null "$base/healthz" 2>/dev/null; do
			if ! kill -0 "$pid" 2>/dev/null; then
				wait "$pid" || true
				pid=
				grep -qi 'address already in use' "$log" && continue 2
				cat "$log" >&2
				fail "the unit's command line exited before answering /healthz"
			fi
			waited=$(awk -v w="$waited" -v p="$POLL_S" 'BEGIN { print w + p }')
			if awk -v w="$waited" -v t="$START_TIMEOUT_S" 'BEGIN { exit !(w >= t) }'; then
				cat "$log" >&2
				fail "memd did not answer /healthz within ${START_TIMEOUT_S}s"
			fi
			sleep "$POLL_S"
		done
		return 0
	done
	fail "no free port for memd after $START_TRIES tries"
}
stop() { # SIGTERM, wait (bounded) for the exit, which must be 0
	local waited=0 rc=0
	kill -TERM "$pid"
	while kill -0 "$pid" 2>/dev/null && [ "$(ps -o stat= -p "$pid" 2>/dev/null | cut -c1)" != Z ]; do
		waited=$(awk -v w="$waited" -v p="$POLL_S" 'BEGIN { print w + p }')
		if awk -v w="$waited" -v t="$STOP_TIMEOUT_S" 'BEGIN { exit !(w >= t) }'; then
			cat "$log" >&2
			fail "memd did not exit within ${STOP_TIMEOUT_S}s of SIGTERM"
		fi
		sleep "$POLL_S"
	done
	wait "$pid" || rc=$?
	pid=
	[ "$rc" -eq 0 ] || { cat "$log" >&2; fail "memd exited $rc after SIGTERM, want 0"; }
}
http() { # METHOD PATH [BODY]: the response body; fails on an HTTP error
	local out
	out=$(curl -sS -X "$1" -H 'Content-Type: application/json' ${3:+-d "$3"} \
		-w '\n%{http_code}' "$base$2") || fail "$1 $2: curl failed"
	case ${out##*$'\n'} in
	2??) printf '%s' "${out%$'\n'*}" ;;
	*) fail "$1 $2 answered ${out##*$'\n'}: ${out%$'\n'*}" ;;
	esac
}

# A config the service cannot use ends it with exit status 7, which the
# unit does not restart on (RestartPreventExitStatus).
rc=0
(cd "$statedir" && env -u MEMD_CONFIG MEMD_PLUGIN_PATH="$root$plugindir" \
	"${argv[@]:0:${#argv[@]}-1}" "$tmp/missing.yaml") >"$tmp/missing.log" 2>&1 || rc=$?
[ "$rc" -eq 7 ] || { cat "$tmp/missing.log" >&2; fail "memd serve with a missing config exited $rc, want 7"; }
echo "ok: a missing config exits 7"

start
echo "ok: the unit's command line serves on $base"
plugins=$(http GET /v1/plugins)
n_paths=$(python3 -c '
import json, sys
doc = json.load(sys.stdin)
paths = [p["path"] for p in doc["plugins"]]
bad = [p for p in paths if not p.startswith(sys.argv[1] + "/")]
if bad:
    sys.exit("plugins loaded from outside the installed plugin directory: %s" % bad)
print(len(paths))' "$root$plugindir" <<<"$plugins") || fail "GET /v1/plugins: $plugins"
[ "$n_paths" -gt 0 ] || fail "GET /v1/plugins lists no plugin: $plugins"
echo "ok: the $n_paths plugins memd loaded are the installed ones"

u=/v1/apps/install/users/alice
http POST "$u/sessions" '{"id":"s1"}' >/dev/null
http POST "$u/sessions/s1/events" \
	'{"events":[{"id":"e1","role":"user","content":"installed memd keeps this"}]}' >/dev/null
http GET "$u/sessions/s1/events" | grep -q 'installed memd keeps this' ||
	fail "the appended event does not read back"
echo "ok: append and read back"
[ -f "$statedir/memd.db" ] || fail "no memd.db in the state directory $statedir: $(ls -la "$statedir")"
mode=$(stat -c %a "$statedir/memd.db")
[ "$mode" = 600 ] || fail "memd.db has mode $mode under UMask=0077, want 600"
stop
grep -q '"stopped"' "$log" || { cat "$log" >&2; fail "memd did not log that it stopped"; }
echo "ok: SIGTERM drains and exits 0"

start
http GET "$u/sessions/s1/events" | grep -q 'installed memd keeps this' ||
	fail "the event is gone after a restart"
stop
echo "ok: the event survives a restart"

# 4. the installed pkg-config files
export PKG_CONFIG_LIBDIR=$root$libdir/pkgconfig
export PKG_CONFIG_PATH=
export PKG_CONFIG_SYSROOT_DIR=$root
[ "$(pkg-config --variable=plugindir memd-plugin)" = "$root$plugindir" ] ||
	fail "memd-plugin.pc: plugindir $(pkg-config --variable=plugindir memd-plugin), want $root$plugindir"
cat >"$tmp/facade.c" <<'C'
#include <stdio.h>
#include <string.h>

#include <memd/memd.h>

int main(int argc, char **argv)
{
	const char *v = memd_version_string();

	if (argc != 2 || !v || strcmp(v, argv[1]) != 0) {
		fprintf(stderr, "libmemd says %s, want %s\n", v ? v : "(null)", argc == 2 ? argv[1] : "?");
		return 1;
	}
	puts(v);
	return 0;
}
C
san=()
[ "$sanitize" = none ] || san=("-fsanitize=$sanitize")
# shellcheck disable=SC2046 # pkg-config's output is a list of flags
cc -std=c11 -Wall -Wextra -Werror "${san[@]}" $(pkg-config --cflags memd) -o "$tmp/facade" \
	"$tmp/facade.c" $(pkg-config --libs memd) >"$tmp/cc.log" 2>&1 ||
	{ cat "$tmp/cc.log" >&2; fail "a program does not build against the installed libmemd (memd.pc)"; }
version=$("$root$bindir/memd" version) || fail "memd version failed"
LD_LIBRARY_PATH=$root$libdir "$tmp/facade" "$version" >/dev/null ||
	fail "the program built against the installed libmemd does not run"
echo "ok: a program builds and runs against the installed libmemd ($version)"
