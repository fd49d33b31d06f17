#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The second half of tests/debian/check.sh, which runs it as root inside
# its throwaway root (a chroot on an overlayfs over /, with the built
# packages in /memd-check/debs and the source tree in /memd-check/src,
# both read-only): the packages install with dpkg -i and work there.
#  1. dpkg -i every package; memd.service is enabled (not started);
#  2. memd version; memd config check /etc/memd/memd.yaml;
#  3. memd plugins list with the installed config and each installed
#     example config: together they load every plugin the packages ship
#     (postgres and mysql too), each from /usr/lib/<triplet>/memd/plugins;
#  4. memd serve with the installed config in /var/lib/memd, as the unit
#     runs it, on a free loopback port: /healthz answers, its SQLite file
#     is in the state directory, SIGTERM ends it with status 0;
#  5. the template plugin (plugins/template) builds with its Makefile
#     against libmemd-dev's memd-plugin.pc, `memd plugins check` accepts
#     it, and once `make install`ed into the plugin directory memd finds
#     it by name;
#  6. a C program builds against libmemd with memd.pc and runs;
#  7. dpkg --purge removes them all: their files, the conffile, and the
#     unit's enablement are gone; the plugin installed in 5. and the
#     service's data in /var/lib/memd stay.
set -euo pipefail

fail() {
	echo "FAIL (in the throwaway root): $*" >&2
	exit 1
}

START_TRIES=5       # ports tried before giving up (another process may take one)
START_TIMEOUT_S=30  # how long memd may take to answer /healthz
STOP_TIMEOUT_S=60   # how long SIGTERM may take (drain + flush)
POLL_S=0.05         # pause between two looks at a condition

[ -x /usr/sbin/policy-rc.d ] && [ -d /memd-check/debs ] || fail "not in check.sh's throwaway root"
ma=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
plugdir=/usr/lib/$ma/memd/plugins
tmp=$(mktemp -d)

# 1. install
if ! dpkg -i /memd-check/debs/*.deb >"$tmp/dpkg.log" 2>&1; then
	cat "$tmp/dpkg.log" >&2
	grep -q 'dependency problems' "$tmp/dpkg.log" &&
		fail "the packages' dependencies are not installed on this machine (see above; scripts/deps.sh test installs the build dependencies, whose libraries they need)"
	fail "dpkg -i failed (above)"
fi
for deb in /memd-check/debs/*.deb; do
	p=$(dpkg-deb -f "$deb" Package)
	[ "$(dpkg-query -W -f='${Status}' "$p")" = "install ok installed" ] ||
		fail "$p is not installed: $(dpkg-query -W -f='${Status}' "$p")"
done
[ -L /etc/systemd/system/multi-user.target.wants/memd.service ] ||
	fail "dpkg -i did not enable memd.service"
[ "$(systemctl is-enabled memd.service 2>&1)" = enabled ] ||
	fail "systemctl is-enabled memd: $(systemctl is-enabled memd.service 2>&1)"
echo "ok: dpkg -i installed them; memd.service is enabled"
[ "$(command -v memd)" = /usr/bin/memd ] || fail "memd is $(command -v memd), want /usr/bin/memd"
grep -qx 'ExecStart=/usr/bin/memd serve --config /etc/memd/memd.yaml' /lib/systemd/system/memd.service ||
	fail "memd.service does not run /usr/bin/memd with /etc/memd/memd.yaml"

# 2. version, config check
version=$(dpkg-query -W -f='${Version}' memd)
memd_version=$(memd version) || fail "memd version failed: $memd_version"
[[ $memd_version == "memd $version "* ]] || fail "memd version says '$memd_version', the package is $version"
echo "ok: $memd_version"
out=$(memd config check /etc/memd/memd.yaml 2>&1) || fail "memd config check /etc/memd/memd.yaml: $out"
echo "ok: $out"

# 3. plugins list
want=$(for f in "$plugdir"/memd-*.so; do basename "$f" .so; done | sed 's/^memd-//' | sort)
for p in sqlite memory filevec qdrant postgres mysql all buffer_window token_window summary_buffer; do
	grep -qx "$p" <<<"$want" || fail "no $plugdir/memd-$p.so installed"
done
mkdir "$tmp/list"
for c in /etc/memd/memd.yaml /usr/share/memd/examples/*.yaml; do
	(cd "$tmp/list" && memd --config "$c" plugins list) >"$tmp/list.json" 2>"$tmp/list.err" ||
		{ cat "$tmp/list.err" >&2; fail "memd --config $c plugins list failed"; }
	python3 -c '
import json, os, sys
doc = json.load(open(sys.argv[1]))
for p in doc["plugins"]:
    if os.path.dirname(p["path"]) != sys.argv[2]:
        sys.exit("%s: plugin %s loaded from %s, not from %s" % (sys.argv[3], p["name"], p["path"], sys.argv[2]))
    print(p["name"])' "$tmp/list.json" "$plugdir" "$c" >>"$tmp/names" || fail "memd plugins list ($c)"
done
got=$(sort -u "$tmp/names")
[ "$got" = "$want" ] || fail "the installed configs load the plugins
$got
want every installed one:
$want"
echo "ok: memd plugins list loads every installed plugin from $plugdir:" $got

# 4. serve once, as the unit does
statedir=/var/lib/memd
mkdir -p "$statedir"
chmod 0700 "$statedir"
log=$tmp/serve.log
pid=
trap '[ -z "$pid" ] || kill -KILL "$pid" 2>/dev/null || true' EXIT
started=
for ((try = 0; try < START_TRIES; try++)); do
	port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	(cd "$statedir" && umask 0077 && exec env MEMD_LISTEN="127.0.0.1:$port" \
		memd serve --config /etc/memd/memd.yaml) >"$log" 2>&1 &
	pid=$!
	deadline=$((SECONDS + START_TIMEOUT_S))
	while ! curl -fsS -o /dev/null "http://127.0.0.1:$port/healthz" 2>/dev/null; do
		if ! kill -0 "$pid" 2>/dev/null; then
			wait "$pid" || true
			pid=
			grep -qi 'address already in use' "$log" && continue 2
			cat "$log" >&2
			fail "memd serve exited before answering /healthz"
		fi
		[ "$SECONDS" -lt "$deadline" ] || { cat "$log" >&2; fail "memd serve did not answer /healthz within ${START_TIMEOUT_S}s"; }
		sleep "$POLL_S"
	done
	started=1
	break
done
[ -n "$started" ] || fail "no free loopback port for memd serve after $START_TRIES tries"
[ -f "$statedir/memd.db" ] || fail "no memd.db in $statedir: $(ls -la "$statedir")"
kill -TERM "$pid"
deadline=$((SECONDS + STOP_TIMEOUT_S))
while kill -0 "$pid" 2>/dev/null && [ "$(ps -o stat= -p "$pid" 2>/dev/null | cut -c1)" != Z ]; do
	[ "$SECONDS" -lt "$deadline" ] || { cat "$log" >&2; fail "memd serve did not exit within ${STOP_TIMEOUT_S}s of SIGTERM"; }
	sleep "$POLL_S"
done
rc=0
wait "$pid" || rc=$?
pid=
[ "$rc" -eq 0 ] || { cat "$log" >&2; fail "memd serve exited $rc after SIGTERM, want 0"; }
echo "ok: memd serve answered /healthz on 127.0.0.1:$port with memd.db in $statedir; SIGTERM, exit 0"

# 5. the template plugin against libmemd-dev
[ "$(pkg-config --variable=plugindir memd-plugin)" = "$plugdir" ] ||
	fail "memd-plugin.pc: plugindir $(pkg-config --variable=plugindir memd-plugin), want $plugdir"
template=/memd-check/src/plugins/template
make -s -C "$tmp" -f "$template/Makefile" O="$tmp/out" >"$tmp/make.log" 2>&1 ||
	{ cat "$tmp/make.log" >&2; fail "the template does not build against libmemd-dev"; }
so=$tmp/out/memd-recent_turns.so
out=$(memd plugins check "$so" 2>&1) || fail "memd plugins check $so: $out"
grep -qxF 'memd-recent_turns.so: ok' <<<"$out" || fail "memd plugins check $so: $out"
make -s -C "$tmp" -f "$template/Makefile" O="$tmp/out" install >>"$tmp/make.log" 2>&1 ||
	{ cat "$tmp/make.log" >&2; fail "make install of the template failed"; }
out=$(cd "$tmp" && memd plugins check recent_turns 2>&1) || fail "memd plugins check recent_turns: $out"
grep -qF "file:        $plugdir/memd-recent_turns.so" <<<"$out" ||
	fail "memd plugins check recent_turns did not find it in $plugdir: $out"
echo "ok: the template plugin builds against libmemd-dev; memd plugins check accepts it, by name once installed"

# 6. a program against libmemd
cat >"$tmp/facade.c" <<'C'
#include <stdio.h>

#include <memd/memd.h>

int main(void)
{
	puts(memd_version_string());
	return 0;
}
C
# shellcheck disable=SC2046 # pkg-config's output is a list of flags
cc -std=c11 -Wall -Wextra -Werror $(pkg-config --cflags memd) -o "$tmp/facade" "$tmp/facade.c" \
	$(pkg-config --libs memd) >"$tmp/cc.log" 2>&1 ||
	{ cat "$tmp/cc.log" >&2; fail "a program does not build against libmemd-dev (memd.pc)"; }
out=$("$tmp/facade") || fail "the program built against libmemd does not run"
[ "$out" = "$memd_version" ] || fail "libmemd says '$out', memd version '$memd_version'"
ldd "$tmp/facade" | grep -Eq "=> (/usr)?/lib/$ma/libmemd\.so\.0 " || fail "the program does not use libmemd0's library: $(ldd "$tmp/facade")"
echo "ok: a program builds against libmemd-dev and runs with libmemd0 ($out)"

# 7. purge
dpkg --purge memd-plugin-postgres memd-plugin-mysql libmemd-dev libmemd0 memd >"$tmp/purge.log" 2>&1 ||
	{ cat "$tmp/purge.log" >&2; fail "dpkg --purge failed"; }
for deb in /memd-check/debs/*.deb; do
	p=$(dpkg-deb -f "$deb" Package)
	! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q installed ||
		fail "$p is still installed after dpkg --purge"
	while IFS= read -r f; do
		[ ! -e "$f" ] || [ -d "$f" ] || fail "$f of $p is still there after dpkg --purge"
	done < <(dpkg-deb -c "$deb" | awk '{ print substr($6, 2) }')
done
[ ! -e /etc/memd/memd.yaml ] || fail "/etc/memd/memd.yaml is still there after dpkg --purge"
[ ! -L /etc/systemd/system/multi-user.target.wants/memd.service ] ||
	fail "memd.service is still enabled after dpkg --purge"
[ -f "$plugdir/memd-recent_turns.so" ] || fail "dpkg --purge removed a plugin it did not install"
[ -f "$statedir/memd.db" ] || fail "dpkg --purge removed the service's data"
echo "ok: dpkg --purge removes them and their conffile and enablement; your plugin and the data stay"
