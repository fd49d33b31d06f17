#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The template plugin (plugins/template) builds out of tree against an
# installed memd, exactly as a third party would build it, and loads:
#  1. `meson install --destdir` this build into a temp dir;
#  2. build the template with its plain Makefile and only that install's
#     pkg-config file (PKG_CONFIG_LIBDIR/SYSROOT), into the temp dir;
#     nothing may be written into the source tree;
#  3. it exports exactly memd_plugin_entry_v1;
#  4. `memd plugins check` accepts it (validated in a child process);
#  5. TEMPLATE_RUN loads it and checks that the strategy does its job.
#
# usage: template_test.sh MEMD TEMPLATE_RUN   (env: MEMD_SOURCE_ROOT, MEMD_BUILD_ROOT)
set -euo pipefail

fail() {
	echo "FAIL: $*" >&2
	exit 1
}

[ $# -eq 2 ] || fail "usage: $0 MEMD TEMPLATE_RUN"
memd=$1
template_run=$2
: "${MEMD_SOURCE_ROOT:?run through meson test}"
: "${MEMD_BUILD_ROOT:?run through meson test}"
template_src="$MEMD_SOURCE_ROOT/plugins/template"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/memd-template-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# 1. install
meson install -C "$MEMD_BUILD_ROOT" --no-rebuild --quiet --destdir "$tmp/root" >"$tmp/install.log" 2>&1 ||
	{ cat "$tmp/install.log" >&2; fail "meson install failed"; }
pc=$(find "$tmp/root" -name memd-plugin.pc -print -quit)
[ -n "$pc" ] || fail "meson install did not install memd-plugin.pc"
[ -f "$(find "$tmp/root" -path '*/include/memd/plugin.h' -print -quit)" ] ||
	fail "meson install did not install memd/plugin.h"

# 2. build out of tree, seeing only the installed memd
export PKG_CONFIG_LIBDIR
PKG_CONFIG_LIBDIR=$(dirname "$pc")
export PKG_CONFIG_PATH=
export PKG_CONFIG_SYSROOT_DIR="$tmp/root"
cflags=$(pkg-config --cflags memd-plugin)
case "$cflags" in
*"$tmp/root"*) ;;
*) fail "pkg-config --cflags memd-plugin does not point into the install: $cflags" ;;
esac
before=$(cd "$template_src" && find . -print | sort)
make -s -C "$tmp" -f "$template_src/Makefile" O="$tmp/out" >"$tmp/make.log" 2>&1 ||
	{ cat "$tmp/make.log" >&2; fail "make failed"; }
if grep -q "warning" "$tmp/make.log"; then
	cat "$tmp/make.log" >&2
	fail "the template builds with warnings"
fi
after=$(cd "$template_src" && find . -print | sort)
[ "$before" = "$after" ] || fail "the build wrote into $template_src: $(diff <(echo "$before") <(echo "$after") || true)"
so="$tmp/out/memd-recent_turns.so"
[ -f "$so" ] || fail "make did not produce $so"

# 3. exports
"$MEMD_SOURCE_ROOT/tests/abi/exports_test.sh" "$so"

# 4. memd plugins check
out=$("$memd" plugins check "$so") || fail "memd plugins check refused it: $out"
for want in "memd-recent_turns.so: ok" "name:        recent_turns" "kinds:       strategy" \
	"turns: int, default 3" "max_tokens: int, default 0" "init:        ok"; do
	grep -qF -- "$want" <<<"$out" || fail "memd plugins check output lacks '$want':
$out"
done
echo "ok: memd plugins check accepts $(basename "$so")"

# 5. it works
"$template_run" "$so"

# 6. memd loads it from config, by path, as an app's strategy.
work="$tmp/memd"
mkdir -p "$work"
memd_abs=$(cd "$(dirname "$memd")" && pwd)/$(basename "$memd")
cat >"$work/memd.yaml" <<YAML
stores:
  main: {plugin: memory}
apps:
  "*": {working_memory: {strategy: "$so", turns: 2}}
YAML
"$memd" config check "$work/memd.yaml" >/dev/null || fail "memd config check refused a config naming the template"
out=$(cd "$work" && "$memd_abs" --config memd.yaml plugins list 2>&1) || fail "memd did not start with the template: $out"
grep -qF '"recent_turns"' <<<"$out" || fail "plugins list lacks recent_turns: $out"
echo "ok: memd loads $(basename "$so") from its config"
