#!/usr/bin/env bash
# Run the store conformance program against MariaDB with a database of its
# own for every test:
#
#   mysql_each_test.sh PROGRAM
#
# The suite needs a fresh store per test and Criterion runs tests at once,
# while the harness's only per-test marker, @TMPDIR@, is a path (not a
# valid MariaDB database name). So each test of PROGRAM (from --list) runs
# in a process of its own with "@TESTDB@" in $MEMD_CONFORMANCE_CONFIG
# replaced by a fresh name, memd_c<pid>_<n>; the config sets
# create_database: true, so the plugin creates it. The databases are
# dropped afterwards with the mariadb client ($MEMD_MYSQL_* from
# tests/services/mariadb.sh). Fails if any test fails or runs nothing
# (a test that skips itself, saying why, ran), or if PROGRAM lists no
# tests. MEMD_EACH_TEST_JOBS (default 2) tests run at once.
set -uo pipefail

prog=${1:?usage: mysql_each_test.sh PROGRAM}
jobs=${MEMD_EACH_TEST_JOBS:-2}
template=${MEMD_CONFORMANCE_CONFIG:?MEMD_CONFORMANCE_CONFIG is not set}
[[ "$template" == *@TESTDB@* ]] || { echo "mysql_each_test: the config has no @TESTDB@" >&2; exit 1; }
: "${MEMD_MYSQL_HOST:?MEMD_MYSQL_HOST is not set (run under tests/services/with-services.sh)}"

# Each entry is SUITE/TEST: --list names a suite ("store: 25 tests") and
# then its tests ("├── name"), for every suite of the program.
mapfile -t tests < <("$prog" --list 2>/dev/null |
	awk '/^[^ ]+: [0-9]+ tests?$/ { suite = $1; sub(/:$/, "", suite); next }
	     /── / { sub(/^[^ ]*── /, ""); print suite "/" $0 }')
[[ ${#tests[@]} -gt 0 ]] || { echo "mysql_each_test: $prog lists no tests" >&2; exit 1; }

out=$(mktemp -d "${TMPDIR:-/tmp}/memd-each-test.XXXXXX") || exit 1
dbs=()
cleanup() {
	local sql=""
	for db in "${dbs[@]+"${dbs[@]}"}"; do sql+="DROP DATABASE IF EXISTS \`$db\`;"; done
	if [[ -n "$sql" ]]; then
		MYSQL_PWD=$MEMD_MYSQL_PASSWORD mariadb --no-defaults -h "$MEMD_MYSQL_HOST" \
			-P "$MEMD_MYSQL_PORT" -u "$MEMD_MYSQL_USER" -e "$sql" >/dev/null 2>&1 ||
			echo "mysql_each_test: could not drop the test databases" >&2
	fi
	rm -rf "$out"
}
trap cleanup EXIT

run_one() { # INDEX NAME
	local i=$1 name=$2 db="memd_c$$_$1"
	MEMD_CONFORMANCE_CONFIG=${template//@TESTDB@/$db} \
		"$prog" --verbose --filter "$name" >"$out/$i.log" 2>&1
	echo $? >"$out/$i.rc"
}

running=0
for i in "${!tests[@]}"; do
	dbs+=("memd_c$$_$i")
	run_one "$i" "${tests[$i]}" &
	running=$((running + 1))
	if [[ $running -ge $jobs ]]; then
		wait -n
		running=$((running - 1))
	fi
done
wait

failed=0
for i in "${!tests[@]}"; do
	rc=$(cat "$out/$i.rc" 2>/dev/null || echo 1)
	# A filter that matched nothing would pass having run nothing; a test
	# that skipped itself (a store without an optional group of ops, with
	# its reason) did run. --verbose lists the tests the filter left out
	# as "Test is disabled".
	name=${tests[$i]/\//::}
	if [[ "$rc" == 0 ]] && ! grep -q 'Tested: 1 |' "$out/$i.log" &&
		{ ! grep -qF "[SKIP] $name: " "$out/$i.log" ||
		  grep -qF "[SKIP] $name: Test is disabled" "$out/$i.log"; }; then
		rc="0, but the test did not run"
	fi
	if [[ "$rc" != 0 ]]; then
		failed=$((failed + 1))
		echo "== ${tests[$i]}: FAILED (exit $rc)"
		cat "$out/$i.log"
	fi
done
echo "mysql_each_test: ${#tests[@]} tests, $failed failed"
[[ $failed -eq 0 ]]
