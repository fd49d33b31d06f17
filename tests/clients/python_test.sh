#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The Python client (clients/python, memd_client) against a real `memd
# serve` with API keys: its unittest suite, run from the source tree
# (no install), with the server's address and keys in the environment.
set -euo pipefail

memd="$MEMD_BUILD_ROOT/host/memd"
src="$MEMD_SOURCE_ROOT/clients/python"
source "$MEMD_SOURCE_ROOT/tests/common/npm_serve.sh"
command -v python3 >/dev/null || { echo "FAIL: python3 is not installed (scripts/deps.sh test)" >&2; exit 1; }

work=$(mktemp -d)
# The server is stopped, and waited for, before its files go.
trap 'serve_stop; rm -rf "$work"' EXIT
unset MEMD_CONFIG

# Keys of at least 32 bytes, new for each run.
admin_key=$(python3 -c 'import secrets; print(secrets.token_hex(32))')
read_key=$(python3 -c 'import secrets; print(secrets.token_hex(32))')
config() {
	cat <<YAML
server:
  listen: "127.0.0.1:$1"
  api_keys:
    - {key: "$admin_key", scope: admin}
    - {key: "$read_key", scope: read}
stores:
  main: {plugin: sqlite, path: $work/memd.db}
sessions: {store: main}
apps:
  '*': {working_memory: {strategy: all}}
YAML
}
serve_start "$work" config

# Bytecode goes to the work directory, not into the source tree.
cd "$src"
MEMD_URL="http://127.0.0.1:$port" MEMD_API_KEY="$admin_key" MEMD_READ_KEY="$read_key" \
	PYTHONPYCACHEPREFIX="$work/pycache" PYTHONPATH="$src" \
	python3 -m unittest discover -s tests -t tests -v

# README.md's Python example ("Use memd from your agent"), as written but
# for memd's address and the key this server wants.
source "$MEMD_SOURCE_ROOT/tests/common/readme_blocks.sh"
readme_blocks "$MEMD_SOURCE_ROOT/README.md" "## Use memd from your agent" python 1 >"$work/readme.py"
grep -q 'Client("http://127.0.0.1:8700")' "$work/readme.py" ||
	{ echo "FAIL: README.md's Python example is missing or makes no Client(\"http://127.0.0.1:8700\")" >&2; exit 1; }
sed -i "s|Client(\"http://127.0.0.1:8700\")|Client(\"http://127.0.0.1:$port\", api_key=\"$admin_key\")|" "$work/readme.py"
echo 'print(messages)' >>"$work/readme.py"
PYTHONPYCACHEPREFIX="$work/pycache" PYTHONPATH="$src" python3 "$work/readme.py" >"$work/readme.out" ||
	{ echo "FAIL: README.md's Python example" >&2; exit 1; }
grep -q "'content': 'Plan a trip to Lisbon in May'" "$work/readme.out" ||
	{ echo "FAIL: README.md's Python example did not give the message back as context: $(cat "$work/readme.out")" >&2; exit 1; }
echo "python_test: README.md's Python example runs"
