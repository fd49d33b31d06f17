#!/usr/bin/env bash
# Set up and run every test: installs missing Debian packages, then builds
# and runs the whole suite twice: with warnings as errors (plus the core
# suites again under valgrind), and under AddressSanitizer +
# UndefinedBehaviorSanitizer; then builds the Debian packages and checks
# them (tests/debian/check.sh, as root). Every phase runs even when an
# earlier one failed; a summary of all phases closes the output, and the
# exit status is non-zero if any phase failed.
set -uo pipefail
root=$(cd "$(dirname "$0")" && pwd)
cd "$root"
scripts/deps.sh test || { echo "test.sh: installing the dependencies failed" >&2; exit 1; }

jobs=$(nproc 2>/dev/null || echo 2)
phases=()   # "name<TAB>passed|failed<TAB>seconds"
failed=0

# Runs one phase (a function and its arguments), records how it ended;
# returns non-zero if it failed.
phase() { # NAME FUNCTION ARGS...
	local name=$1 start=$SECONDS status=passed; shift
	echo "== $name"
	"$@" || status=failed
	phases+=("$name"$'\t'"$status"$'\t'"$((SECONDS - start))")
	[[ $status == passed ]] || { failed=1; return 1; }
}

build() { # DIR MESON-OPTIONS...
	local dir=$1; shift
	if [[ -f "$dir/build.ninja" ]]; then
		meson configure "$dir" "$@" >/dev/null || return
	else
		meson setup "$dir" "$@" >/dev/null || return
	fi
	ninja -C "$dir" -j "$jobs"
}

# Throwaway PostgreSQL/MariaDB servers on loopback for the whole suite
# (tests/services/); a server that does not start fails the phase.
suite() { # DIR TIMEOUT-MULTIPLIER
	tests/services/with-services.sh -- \
		meson test -C "$1" --no-rebuild --print-errorlogs --num-processes "$jobs" \
		--timeout-multiplier "$2"
}

valgrind_suites() { # DIR
	meson test -C "$1" --no-rebuild --print-errorlogs --num-processes "$jobs" \
		--timeout-multiplier 10 --wrap='valgrind -q --trace-children=yes --error-exitcode=99 --leak-check=full --show-leak-kinds=definite --errors-for-leak-kinds=definite' \
		host_units facade config conformance-memory conformance-sqlite openai_msgs facade_messages
}

if phase "build with -Werror" build build-test-werror -Dwerror=true -Dbuildtype=debugoptimized; then
	phase "suite (-Werror build)" suite build-test-werror 2
	phase "valgrind memcheck on the core suites" valgrind_suites build-test-werror
fi

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export LSAN_OPTIONS="suppressions=$root/tests/lsan.supp"
if phase "build with ASan + UBSan" build build-test-sanitize -Dwerror=true -Dbuildtype=debug \
	-Db_sanitize=address,undefined -Db_lundef=false; then
	phase "suite (ASan + UBSan build)" suite build-test-sanitize 4
fi

# The Debian packages (debian/) build once more from a clean copy of the
# tree, pass lintian, and work installed in a throwaway root.
phase "Debian packages" tests/debian/check.sh

echo
echo "== summary"
for p in "${phases[@]}"; do
	IFS=$'\t' read -r name status secs <<<"$p"
	printf '%-42s %-7s %5ss\n' "$name" "$status" "$secs"
done
n_failed=$(printf '%s\n' "${phases[@]}" | grep -c $'\tfailed\t' || true)
echo "test.sh: $(( ${#phases[@]} - n_failed )) phases passed, $n_failed failed"
exit $(( failed ? 1 : 0 ))
