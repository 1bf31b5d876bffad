#!/usr/bin/env bash
# Runs every fuzz target in the module for a short time each (default 10s).
set -euo pipefail
t=${1:-10s}
cd "$(dirname "$0")/.."
for pkg in $(go list ./...); do
	dir=$(go list -f '{{.Dir}}' "$pkg")
	for f in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //'); do
		echo "fuzz $pkg $f ($t)"
		go test -run='^$' -fuzz="^$f\$" -fuzztime="$t" "$pkg"
	done
done
