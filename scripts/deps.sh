#!/usr/bin/env bash
# Install the Debian packages memd needs that are missing.
#   scripts/deps.sh run    what building and running memd needs
#   scripts/deps.sh test   that, plus what the test suite needs
#   scripts/deps.sh bench  that, plus what the benchmarks compare against
#                          (never installed by ./test.sh)
# Runs apt-get (as root, or through sudo) only when something is missing.
set -euo pipefail

run_pkgs=(meson ninja-build gcc pkg-config libc6-dev
          libsqlite3-dev libjansson-dev libyaml-dev libcurl4-openssl-dev
          libmicrohttpd-dev libpq-dev libmariadb-dev
          tzdata) # the IANA zones a lane's daily reset is reckoned in (TZif files)
test_pkgs=(libcriterion-dev binutils make sqlite3 valgrind python3 curl nodejs postgresql
           mariadb-server mariadb-client openssl
           python3-setuptools python3-wheel python3-pip # client-python builds the Python client's wheel offline
           # tests/debian/check.sh: build the packages and lint them
           build-essential debhelper dpkg-dev lintian)
# tests/bench/filevec_faiss.py: FAISS IndexFlatIP beside filevec_bench;
# linux-perf: `perf record -g` on memd serve under http_bench.
bench_pkgs=(python3-faiss python3-numpy linux-perf)

want=("${run_pkgs[@]}")
case "${1:-run}" in
	run) ;;
	test) want+=("${test_pkgs[@]}") ;;
	bench) want+=("${test_pkgs[@]}" "${bench_pkgs[@]}") ;;
	*) echo "usage: $0 run|test|bench" >&2; exit 2 ;;
esac

missing=()
for p in "${want[@]}"; do
	status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
	[[ "$status" == "install ok installed" ]] || missing+=("$p")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

echo "memd: installing ${missing[*]}" >&2
sudo=()
if [[ $(id -u) -ne 0 ]]; then
	command -v sudo >/dev/null || { echo "memd: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
	sudo=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
