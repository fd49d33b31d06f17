# SPDX-License-Identifier: MIT
# Sourced by the tests that check memd against an npm package (tests/mcp,
# tests/openai, tests/clients): node and npm, the pinned packages, and a real `memd
# serve` on a free port. Needs bash with `set -euo pipefail`; every
# failure prints "FAIL: ..." and exits 1.

# npm_install NAME DIR SRC FILE...: copy SRC's FILEs (package.json,
# package-lock.json and what tsc compiles) into DIR, the test's work
# directory, and install the packages pinned in package-lock.json there
# (npm ci), again only when the lock file changed. Installs npm when node
# came without it. NAME prefixes what it says. Sets tsc to the compiler
# the packages installed.
npm_install() {
	local name=$1 dir=$2 src=$3 stamp f
	shift 3
	command -v node >/dev/null || { echo "FAIL: node is not installed (scripts/deps.sh test)" >&2; exit 1; }
	if ! command -v npm >/dev/null; then
		# Debian's nodejs comes without npm (as in tests/tokens/setup.sh).
		local sudo=()
		[[ $(id -u) -eq 0 ]] || sudo=(sudo)
		echo "$name: installing npm" >&2
		DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends npm >&2 ||
			{ echo "FAIL: npm is missing and could not be installed" >&2; exit 1; }
	fi
	for f in "$@"; do
		cp "$src/$f" "$dir/"
	done
	stamp="$dir/node_modules/.memd-lock-$(sha256sum "$src/package-lock.json" | cut -c1-16)"
	if [[ ! -f "$stamp" ]]; then
		(cd "$dir" && npm ci --no-audit --no-fund --loglevel=error >npm-ci.log 2>&1) ||
			{ cat "$dir/npm-ci.log" >&2; echo "FAIL: npm ci" >&2; exit 1; }
		touch "$stamp"
	fi
	tsc="$dir/node_modules/.bin/tsc"
}

# serve_start WORK WRITE_CONFIG: start `memd serve` ($memd) with the
# configuration WRITE_CONFIG PORT writes to WORK/memd.yaml, on a free port
# (another taker between the probe and serve's bind is a retry with
# another port), and wait (bounded) until it listens. Sets port and
# serve_pid; its log is WORK/serve.err. serve_stop stops it.
serve_start() {
	local work=$1 write_config=$2 try i
	for ((try = 0; try < 20; try++)); do
		port=$((20000 + RANDOM % 12000))
		(exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && continue
		"$write_config" "$port" >"$work/memd.yaml"
		"$memd" --config "$work/memd.yaml" serve 2>"$work/serve.err" &
		serve_pid=$!
		for ((i = 0; i < 600; i++)); do # bounded: until it listens or exits
			grep -q '"listening"' "$work/serve.err" && break
			kill -0 "$serve_pid" 2>/dev/null || break
			sleep 0.1
		done
		grep -q '"listening"' "$work/serve.err" && break
		wait "$serve_pid" || true
		serve_pid=
		grep -q "Address already in use" "$work/serve.err" || break
	done
	grep -q '"listening"' "$work/serve.err" || { echo "FAIL: serve did not start: $(cat "$work/serve.err")" >&2; exit 1; }
}

# serve_sqlite [YAML]: make the work directory $work (removed at exit,
# after serve_stop), then serve_start `memd serve` there on a free port
# with one store, SQLite at $work/memd.db, holding the sessions, and YAML
# (more top-level configuration, e.g. apps:) after it. Sets work, port
# and serve_pid.
serve_sqlite() {
	serve_more_yaml=${1:-}
	work=$(mktemp -d)
	# The server is stopped, and waited for, before its files go.
	trap 'serve_stop; rm -rf "$work"' EXIT
	unset MEMD_CONFIG
	serve_start "$work" serve_sqlite_config
}

# serve_sqlite's configuration for PORT.
serve_sqlite_config() {
	cat <<YAML
server: {listen: "127.0.0.1:$1"}
stores:
  main: {plugin: sqlite, path: $work/memd.db}
sessions: {store: main}
$serve_more_yaml
YAML
}

# Stop the server serve_start started, and wait for it: it writes (a
# keyword snapshot, the database's last pages) until it has exited. Does
# nothing when none runs.
serve_stop() {
	if [[ -n "${serve_pid:-}" ]]; then
		kill "$serve_pid" 2>/dev/null
		wait "$serve_pid" 2>/dev/null || true
	fi
}
