#!/usr/bin/env bash
# Run a command with throwaway database servers for memd's tests:
#
#   with-services.sh [--only NAME[,NAME...]] [--] CMD [ARGS...]
#
# NAME is a service script beside this one (NAME.sh: postgres, mariadb).
# Without --only, every service that has a script here is started. Each
# service is started in a fresh temp dir, on 127.0.0.1 at a non-default
# port, and its connection variables are exported for CMD (see the
# service's script; e.g. MEMD_PG_DSN, MEMD_PG_PASSWORD). The servers are
# stopped and their dirs removed when CMD ends, whatever way it ends.
# A service whose variable (named by `NAME.sh var`, e.g. MEMD_PG_DSN) is
# already in the environment is reused, not started again, so nested use costs nothing.
#
# A server that fails to start is an error (exit 1): tests never skip for
# want of a server. CMD's exit status is returned.
#
# The contract for a service script NAME.sh (tests/services/README.md):
#   NAME.sh start DIR   start the server with its files in DIR (which exists),
#                       write DIR/env (sh "export VAR=..." lines); exit 0
#                       only when the server accepts connections
#   NAME.sh stop DIR    stop the server and remove DIR
#   NAME.sh var         print the variable that shows it is already running
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
only=""

while [[ $# -gt 0 ]]; do
	case "$1" in
		--only) only=$2; shift 2 ;;
		--only=*) only=${1#--only=}; shift ;;
		--) shift; break ;;
		*) break ;;
	esac
done
[[ $# -gt 0 ]] || { echo "usage: with-services.sh [--only NAME,...] [--] CMD [ARGS...]" >&2; exit 2; }

if [[ -z "$only" ]]; then
	names=()
	for f in "$here"/*.sh; do
		n=$(basename "$f" .sh)
		[[ "$n" == with-services ]] && continue
		names+=("$n")
	done
else
	IFS=',' read -r -a names <<<"$only"
fi

started=()   # "NAME DIR" of servers this run started
cleanup() {
	local entry name dir
	for entry in "${started[@]+"${started[@]}"}"; do
		name=${entry%% *}
		dir=${entry#* }
		"$here/$name.sh" stop "$dir" || echo "with-services: stopping $name failed" >&2
	done
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

for name in "${names[@]}"; do
	script="$here/$name.sh"
	[[ -f "$script" ]] || { echo "with-services: no service script $script" >&2; exit 1; }
	var=$(bash "$script" var) || { echo "with-services: $name.sh var failed" >&2; exit 1; }
	if [[ -n "${!var:-}" ]]; then
		continue # already running for us
	fi
	dir=$(mktemp -d "${TMPDIR:-/tmp}/memd-$name.XXXXXX") || exit 1
	if ! bash "$script" start "$dir"; then
		echo "with-services: $name did not start" >&2
		started+=("$name $dir")
		exit 1
	fi
	started+=("$name $dir")
	# shellcheck disable=SC1091
	source "$dir/env" || { echo "with-services: $name wrote no usable $dir/env" >&2; exit 1; }
done

"$@"
