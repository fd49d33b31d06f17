# SPDX-License-Identifier: MIT
# Sourced by the tests that run README.md's examples as written.
#
# readme_blocks README TITLE LANG [N]: the ```LANG blocks of README's
# section TITLE (its "## " or "### " line, up to the next title of its
# level or above), in order, each followed by the line
# "# ---- end of block"; with N, only the Nth block, without that line.
# Prints nothing when the section or the block is missing.
readme_blocks() {
	awk -v sec="$2" -v lang="$3" -v want="${4:-0}" '
		$0 == sec { in_sec = 1; sub3 = sec ~ /^### /; next }
		in_sec && (/^## / || (sub3 && /^### /)) { exit }
		in_sec && !in_code && $0 == "```" lang { in_code = 1; n++; next }
		in_sec && in_code && /^```$/ { in_code = 0; if (!want) print "# ---- end of block"; next }
		in_sec && in_code && (!want || n == want) { print }
	' "$1"
}
