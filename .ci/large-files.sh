#!/usr/bin/env bash
# Fails when a file tracked by git is larger than 1 MB (1,048,576 bytes) and is not test
# data (under a testdata/ directory): a built binary or a dump committed by mistake stays
# in every clone forever. Names each such file with its size.
set -euo pipefail
cd "$(dirname "$0")/.."

limit=$((1024 * 1024))
status=0
while IFS= read -r -d '' f; do
	case "/$f" in */testdata/*) continue ;; esac
	[ -f "$f" ] || continue # deleted in the work tree, not yet in the index
	size=$(wc -c <"$f")
	if [ "$size" -gt "$limit" ]; then
		echo "tracked file $f is $size bytes, over the 1 MB limit for files outside testdata/ (untrack it: git rm --cached $f, and add it to .gitignore)" >&2
		status=1
	fi
done < <(git ls-files -z)
exit $status
