#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# memd's Debian packages (debian/) build, are lintian-clean, hold what they
# should, and work once installed:
#  1. copy the source tree (the working-tree versions of the files git
#     tracks, and new files git does not ignore; no build directories) to
#     a temp dir; debian/changelog's version is meson's project version;
#  2. dpkg-buildpackage -b -us -uc there (DEB_BUILD_OPTIONS defaults to
#     parallel=2);
#  3. lintian on the .changes prints no error and no warning;
#  4. each package holds the files it should (dpkg-deb -c), and not the
#     others': the client libraries of PostgreSQL and MariaDB are needed
#     by their plugin packages only; /etc/memd/memd.yaml is a conffile;
#  5. the packages are installed with dpkg -i into a throwaway root: a
#     private mount namespace (unshare --mount) in which an overlayfs
#     whose lower layer is / and whose upper layer is a tmpfs is the root
#     of a chroot; fresh /proc, /dev, /run and /tmp are mounted in it.
#     What the packages depend on is satisfied by the host's own
#     libraries (./test.sh installed the build dependencies); everything
#     dpkg writes goes to the tmpfs, which disappears with the namespace.
#     A policy-rc.d (the Debian way to say "start no service here") and
#     the missing /run/systemd/system keep memd.service from starting
#     during the install. tests/debian/in_root.sh then runs there: the
#     unit is enabled, memd version, plugins list (the installed plugins,
#     the postgres and mysql ones too), config check, serve once on
#     loopback, the template plugin built against libmemd-dev and checked,
#     a program built against libmemd, and dpkg --purge;
#  6. the host is untouched: its dpkg database knows the memd packages as
#     before (none, on a build machine), and no file of theirs appeared.
# Needs root (mount namespaces, chroot, dpkg -i into the throwaway root).
#
# usage: tests/debian/check.sh [--keep]   (--keep: leave the temp dir)
set -euo pipefail

fail() {
	echo "FAIL: $*" >&2
	exit 1
}

src=$(cd "$(dirname "$0")/../.." && pwd)
PACKAGES=(memd libmemd0 libmemd-dev memd-plugin-postgres memd-plugin-mysql)
OVERLAY_TMPFS_SIZE=1g # the throwaway root's writable layer (dpkg writes a few MB)

# Runs inside the private mount namespace (check.sh calls itself through
# unshare): builds the throwaway root and runs in_root.sh in it.
if [ "${1:-}" = __namespace ]; then
	ovl=$2 debs=$3 tree=$4
	mount --make-rprivate /
	mount -t tmpfs -o "size=$OVERLAY_TMPFS_SIZE,mode=0755" memd-check "$ovl"
	mkdir "$ovl/upper" "$ovl/work" "$ovl/root"
	mount -t overlay memd-check -o "lowerdir=/,upperdir=$ovl/upper,workdir=$ovl/work" "$ovl/root" ||
		fail "cannot mount an overlayfs over / (needs root and overlayfs)"
	r=$ovl/root
	mount -t proc proc "$r/proc"
	mount --rbind /dev "$r/dev"
	mount -t tmpfs -o mode=0755 run "$r/run"
	mount -t tmpfs -o mode=1777 tmp "$r/tmp"
	mkdir -p "$r/memd-check/debs" "$r/memd-check/src"
	mount --bind -o ro "$debs" "$r/memd-check/debs"
	mount --bind -o ro "$tree" "$r/memd-check/src"
	printf '#!/bin/sh\n# memd check: start no service in this throwaway root\nexit 101\n' >"$r/usr/sbin/policy-rc.d"
	chmod 0755 "$r/usr/sbin/policy-rc.d"
	exec chroot "$r" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
		TMPDIR=/tmp /bin/bash /memd-check/src/tests/debian/in_root.sh
fi

keep=0
[ "${1:-}" = --keep ] && keep=1
[ "$(id -u)" -eq 0 ] || fail "needs root: mount namespaces, an overlayfs and chroot for the throwaway root"
for t in dpkg-buildpackage dh lintian dpkg-deb unshare chroot git; do
	command -v "$t" >/dev/null || fail "$t not found (scripts/deps.sh test installs it)"
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/memd-debian-check.XXXXXX")
cleanup() {
	if [ "$keep" = 1 ]; then
		echo "kept $tmp"
	else
		rm -rf "$tmp"
	fi
}
trap cleanup EXIT
ma=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
arch=$(dpkg-architecture -qDEB_HOST_ARCH)

# What the host has of the packages, before.
host_state() {
	local p
	for p in "${PACKAGES[@]}"; do
		printf '%s %s\n' "$p" "$(dpkg-query -W -f='${Status} ${Version}' "$p" 2>/dev/null || echo absent)"
	done
}
host_before=$(host_state)

# 1. a clean copy of the tree
tree=$tmp/memd
mkdir "$tree"
git -C "$src" ls-files -z --cached --others --exclude-standard |
	(cd "$src" && xargs -0 -r sh -c 'for f; do [ -e "$f" ] || [ -L "$f" ] && printf "%s\0" "$f"; done' sh) |
	(cd "$src" && tar -cf - --null --no-recursion -T -) | tar -xf - -C "$tree" ||
	fail "cannot copy the source tree"
[ -f "$tree/debian/control" ] || fail "the copy has no debian/control"
version=$(cd "$tree" && dpkg-parsechangelog -S Version)
project_version=$(sed -n "s/^  version : '\([^']*\)',$/\1/p" "$tree/meson.build")
[ -n "$project_version" ] || fail "no project version in meson.build"
[ "$version" = "$project_version" ] ||
	fail "debian/changelog is at $version, meson.build at $project_version: add a changelog entry"
echo "ok: copied the tree; packaging memd $version"

# 2. build
export DEB_BUILD_OPTIONS=${DEB_BUILD_OPTIONS:-parallel=2 nocheck}
(cd "$tree" && dpkg-buildpackage -b -us -uc) >"$tmp/build.log" 2>&1 ||
	{ tail -n 60 "$tmp/build.log" >&2; fail "dpkg-buildpackage failed (log above)"; }
changes=$tmp/memd_${version}_${arch}.changes
[ -f "$changes" ] || fail "dpkg-buildpackage made no $changes"
deb() { # PACKAGE: its .deb
	echo "$tmp/${1}_${version}_${arch}.deb"
}
for p in "${PACKAGES[@]}"; do
	[ -f "$(deb "$p")" ] || fail "dpkg-buildpackage made no $(basename "$(deb "$p")")"
done
echo "ok: dpkg-buildpackage built ${PACKAGES[*]}"

# 3. lintian
lintian -I --fail-on error,warning "$changes" >"$tmp/lintian.log" 2>&1 || {
	cat "$tmp/lintian.log" >&2
	fail "lintian finds errors or warnings (above)"
}
if grep -q '^[EW]: ' "$tmp/lintian.log"; then
	cat "$tmp/lintian.log" >&2
	fail "lintian finds errors or warnings (above)"
fi
echo "ok: lintian: no errors, no warnings; its info tags:"
grep -v '^running with root privileges' "$tmp/lintian.log" | sed 's/^/   /' || true

# 4. contents
contents() { # PACKAGE: its paths, one per line, without the leading .
	dpkg-deb -c "$(deb "$1")" | awk '{ p = $6; for (i = 7; i <= NF; i++) p = p " " $i; sub(/^\./, "", p); sub(/ -> .*/, "", p); print p }'
}
has() { # PACKAGE PATH...
	local p=$1 f list
	shift
	list=$(contents "$p")
	for f; do
		grep -qxF -- "$f" <<<"$list" || fail "$p does not hold $f; it holds:
$list"
	done
}
lacks() { # PACKAGE REGEX
	local hit
	hit=$(contents "$1" | grep -E -- "$2" || true)
	[ -z "$hit" ] || fail "$1 should not hold $hit"
}
field() { # PACKAGE FIELD
	dpkg-deb -f "$(deb "$1")" "$2"
}
plugdir=/usr/lib/$ma/memd/plugins
for p in "${PACKAGES[@]}"; do
	echo "-- $p"
	contents "$p" | grep -v '/$' | sed 's/^/   /'
done
has memd /usr/bin/memd /etc/memd/memd.yaml /lib/systemd/system/memd.service \
	/usr/share/memd/openapi.yaml /usr/share/man/man1/memd.1.gz /usr/share/doc/memd/copyright \
	/usr/share/doc/memd/examples
for pl in sqlite memory filevec qdrant all buffer_window token_window summary_buffer; do
	has memd "$plugdir/memd-$pl.so"
done
for c in memd sqlite memory postgres mysql filevec qdrant summary_buffer; do
	has memd "/usr/share/memd/examples/$c.yaml"
done
lacks memd 'memd-(postgres|mysql)\.so|libmemd\.so|/include/'
has libmemd0 "/usr/lib/$ma/libmemd.so.0" "/usr/lib/$ma/libmemd.so.$version"
lacks libmemd0 'libmemd\.so$|/include/|/memd/plugins/'
for h in abi host store strategy vector plugin memd; do
	has libmemd-dev "/usr/include/memd/$h.h"
done
has libmemd-dev "/usr/lib/$ma/libmemd.so" "/usr/lib/$ma/pkgconfig/memd.pc" \
	"/usr/lib/$ma/pkgconfig/memd-plugin.pc"
has memd-plugin-postgres "$plugdir/memd-postgres.so"
has memd-plugin-mysql "$plugdir/memd-mysql.so"
[ "$(contents memd-plugin-postgres | grep -c '\.so$')" = 1 ] || fail "memd-plugin-postgres holds more than its plugin"
[ "$(contents memd-plugin-mysql | grep -c '\.so$')" = 1 ] || fail "memd-plugin-mysql holds more than its plugin"
dpkg-deb --ctrl-tarfile "$(deb memd)" | tar -xOf - ./conffiles | grep -qxF /etc/memd/memd.yaml ||
	fail "/etc/memd/memd.yaml is not a conffile of memd"
depends() { # PACKAGE REGEX: Depends matches
	field "$1" Depends | grep -Eq -- "$2" || fail "$1 Depends: $(field "$1" Depends); want $2"
}
depends memd-plugin-postgres "(^|, )memd \(= $version\)"
depends memd-plugin-postgres '(^|, )libpq5'
depends memd-plugin-mysql "(^|, )memd \(= $version\)"
depends memd-plugin-mysql '(^|, )libmariadb3'
depends libmemd-dev "(^|, )libmemd0 \(= $version\)"
! field memd Depends | grep -Eq 'libpq|libmariadb' || fail "memd depends on a database client: $(field memd Depends)"
echo "ok: each package holds what it should"

# 5. install into a throwaway root and use it there
debs=$tmp/debs
mkdir "$debs" "$tmp/ovl"
for p in "${PACKAGES[@]}"; do
	cp "$(deb "$p")" "$debs/"
done
# The files the packages ship that the host lacks now must still be missing.
absent=$tmp/absent
for p in "${PACKAGES[@]}"; do
	contents "$p" | grep -v '/$'
done | while IFS= read -r f; do
	[ -e "$f" ] || [ -L "$f" ] || printf '%s\n' "$f"
done >"$absent"
unshare --mount --fork -- "$0" __namespace "$tmp/ovl" "$debs" "$tree" ||
	fail "the packages do not install or work in the throwaway root (above)"

# 6. the host is untouched
host_after=$(host_state)
[ "$host_before" = "$host_after" ] || fail "the host's package database changed:
before: $host_before
after:  $host_after"
while IFS= read -r f; do
	[ ! -e "$f" ] && [ ! -L "$f" ] || fail "$f appeared on the host"
done <"$absent"
echo "ok: the host is untouched (its memd packages as before, $(wc -l <"$absent") packaged files still absent)"
