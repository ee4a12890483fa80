#!/usr/bin/env bash
# Fails when a package of the module has no package doc comment ("// Package x ..." or,
# for a command, "// Command ..." above its package clause). go list's .Doc comes from
# the non-test files only, so a package of test files only is checked in those files.
set -euo pipefail
cd "$(dirname "$0")/.."

go=${GO:-go}
# Read first, so that a failing go list fails the check.
list=$($go list -f '{{if not .Doc}}{{.ImportPath}} {{.Dir}} {{join .TestGoFiles " "}} {{join .XTestGoFiles " "}}{{end}}' ./...)
status=0
while read -r pkg dir files; do
	[ -n "$pkg" ] || continue
	found=
	for f in $files; do
		# A comment block that ends right above the package clause.
		if awk '/^package /{ if (prev ~ /^\/\//) found=1; exit } { prev=$0 } END { exit !found }' "$dir/$f"; then
			found=1
			break
		fi
	done
	if [ -z "$found" ]; then
		echo "package $pkg has no package doc comment (add a doc.go: // Package $(basename "$pkg") ...)" >&2
		status=1
	fi
done <<<"$list"
exit $status
