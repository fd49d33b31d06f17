#!/usr/bin/env bash
# memd search and memd index rebuild from the command line: zero-config
# (keyword search out of the box), a config with filevec for vector and
# hybrid, options and their errors, exit codes, the rebuild's progress bar
# on a terminal (through script(1) when it is installed).
set -uo pipefail

memd="$MEMD_BUILD_ROOT/host/memd"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
unset MEMD_CONFIG

passed=0 failed=0
ok()   { passed=$((passed + 1)); }
fail() { failed=$((failed + 1)); echo "FAIL: $*" >&2; }
expect() { # CODE DESCRIPTION -- command...
	local want=$1 what=$2; shift 3
	"$@" >"$work/out" 2>"$work/err" </dev/null
	local got=$?
	out=$(cat "$work/out"); errout=$(cat "$work/err")
	if [[ $got -eq $want ]]; then ok; else fail "$what: exit $got, want $want; stderr: $errout"; fi
}
contains() { # HAYSTACK NEEDLE DESCRIPTION
	if [[ "$1" == *"$2"* ]]; then ok; else fail "$3: '$2' not in: $1"; fi
}
lacks() { # HAYSTACK NEEDLE DESCRIPTION
	if [[ "$1" != *"$2"* ]]; then ok; else fail "$3: '$2' in: $1"; fi
}

# Zero-config: SQLite in ./data, keyword search.
expect 0 "create" -- "$memd" session create app alice --id s1
printf '%s' '[{"role":"user","content":"I adopted a cat named Miso"},
	{"role":"assistant","content":"Quarterly revenue grew"}]' |
	"$memd" events append app alice s1 >/dev/null || fail "append"
expect 0 "search" -- "$memd" search app alice "cats"
contains "$out" '"mode": "keyword"' "zero-config searches by keyword"
contains "$out" "Miso" "the cat event is found"
lacks "$out" "revenue" "an unrelated event is not"
expect 0 "search another user" -- "$memd" search app bob "cats"
lacks "$out" "Miso" "bob does not see alice's events"
expect 0 "search --k" -- "$memd" search app alice "cat revenue" --k 1
[[ $(grep -c '"event_id"' <<<"$out") -eq 1 ]] && ok || fail "--k 1 gives one result: $out"
expect 0 "search --session" -- "$memd" search app alice "cat" --session nope
lacks "$out" "Miso" "--session narrows"
expect 3 "vector is not enabled" -- "$memd" search app alice "cat" --mode vector
contains "$errout" "index.vector.enabled" "the error names the key"
expect 3 "bad mode" -- "$memd" search app alice "cat" --mode fuzzy
expect 2 "missing query" -- "$memd" search app alice
expect 2 "--k without a value" -- "$memd" search app alice cat --k
expect 2 "--k not a number" -- "$memd" search app alice cat --k many
expect 2 "unknown option" -- "$memd" search app alice cat --colour red

expect 0 "rebuild all" -- "$memd" index rebuild
contains "$out" '"done"' "rebuild reports what it did"
expect 0 "rebuild one user" -- "$memd" index rebuild --app app --user alice
contains "$out" '"user": "alice"' "scoped rebuild names the user"
expect 2 "rebuild with app only" -- "$memd" index rebuild --app app
expect 3 "rebuild a bad scope" -- "$memd" index rebuild --app 'a/b' --user alice
expect 0 "search after rebuild" -- "$memd" search app alice "cats"
contains "$out" "Miso" "still found after rebuilds"

# filevec: vector and hybrid.
cat >memd.yaml <<YAML
stores:
  main: {plugin: sqlite, path: $work/v.db}
  vec: {plugin: filevec, path: $work/vec}
index:
  vector: {enabled: true, store: vec}
YAML
export MEMD_CONFIG=$work/memd.yaml
expect 0 "create (vector)" -- "$memd" session create app alice --id s1
printf '%s' '[{"role":"user","content":"My dog Rex runs in the park"},
	{"role":"user","content":"Tax forms are due in April"}]' |
	"$memd" events append app alice s1 >/dev/null || fail "append (vector)"
for mode in vector hybrid keyword; do
	expect 0 "search --mode $mode" -- "$memd" search app alice "dog running" --mode $mode
	contains "$out" "\"mode\": \"$mode\"" "$mode is answered"
	contains "$out" "Rex" "$mode finds the dog"
done
expect 0 "rebuild (vector)" -- "$memd" index rebuild
expect 0 "vector after rebuild" -- "$memd" search app alice "dog" --mode vector
contains "$out" "Rex" "vector finds the dog after a rebuild"

# The progress bar, when stderr is a terminal.
if command -v script >/dev/null 2>&1; then
	script -qec "$memd index rebuild" /dev/null >"$work/tty" 2>&1 </dev/null
	tty_out=$(tr '\r' '\n' <"$work/tty")
	contains "$tty_out" "rebuilding [" "a progress bar on a terminal"
	contains "$tty_out" "/s" "with a rate"
	contains "$tty_out" "100%" "ending at 100%"
else
	echo "note: script(1) not installed; the progress bar is not checked"
fi
expect 0 "rebuild without a terminal" -- "$memd" index rebuild
lacks "$errout" "rebuilding [" "no progress bar when stderr is not a terminal"

echo "cli-index: $passed passed, $failed failed"
[[ $failed -eq 0 ]]
