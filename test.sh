#!/usr/bin/env bash
# Set up and run every test: installs missing Debian packages, then builds
# and runs the whole suite twice: with warnings as errors (plus the core
# suites again under valgrind), and under AddressSanitizer +
# UndefinedBehaviorSanitizer. Exits non-zero on any failure.
set -euo pipefail
root=$(cd "$(dirname "$0")" && pwd)
cd "$root"
scripts/deps.sh test

jobs=$(nproc 2>/dev/null || echo 2)

suite() { # NAME TIMEOUT-MULTIPLIER MESON-OPTIONS...
	local dir="build-test-$1" slow=$2; shift 2
	if [[ -f "$dir/build.ninja" ]]; then
		meson configure "$dir" "$@" >/dev/null
	else
		meson setup "$dir" "$@" >/dev/null
	fi
	ninja -C "$dir" -j "$jobs"
	# Throwaway PostgreSQL/MariaDB servers on loopback for the whole run
	# (tests/services/); a server that does not start fails the run.
	tests/services/with-services.sh -- \
		meson test -C "$dir" --print-errorlogs --num-processes "$jobs" --timeout-multiplier "$slow"
}

echo "== build with -Werror, run the suite"
suite werror 2 -Dwerror=true -Dbuildtype=debugoptimized

echo "== valgrind memcheck on the core suites (same -Werror build)"
meson test -C build-test-werror --no-rebuild --print-errorlogs --num-processes "$jobs" \
	--timeout-multiplier 10 --wrap='valgrind -q --trace-children=yes --error-exitcode=99 --leak-check=full --show-leak-kinds=definite --errors-for-leak-kinds=definite' \
	host_units facade config conformance-memory conformance-sqlite

echo "== build with ASan + UBSan, run the suite"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export LSAN_OPTIONS="suppressions=$root/tests/lsan.supp"
suite sanitize 4 -Dwerror=true -Dbuildtype=debug -Db_sanitize=address,undefined -Db_lundef=false
