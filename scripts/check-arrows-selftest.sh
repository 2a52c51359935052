#!/usr/bin/env bash
# Shows that scripts/check-arrows.sh cannot pass what it did not check: it
# fails when a package it names is missing and when `go list` fails, and
# passes on the tree as it is. Run by `make arrows-selftest` (in make test).
set -uo pipefail
cd "$(dirname "$0")/.."
script=./scripts/check-arrows.sh
bad=0

# expect_fail NAME WANT CMD...: CMD must exit non-zero and print WANT.
expect_fail() {
	local name="$1" want="$2" out rc
	shift 2
	out=$("$@" 2>&1)
	rc=$?
	if [ $rc = 0 ] || ! grep -qF -- "$want" <<<"$out"; then
		echo "arrows-selftest: $name: rc $rc, output lacks \"$want\":" >&2
		echo "$out" >&2
		bad=1
	fi
}

expect_fail "missing package" "overlay/no-such-package is named by the arrows but is not a package" \
	env ARROWS_CHECK_PKG=overlay/no-such-package "$script"

# A go whose `list -deps` fails (a tree that does not build, a broken
# module cache): the check must fail, not print ok.
shim=$(mktemp -d)
trap 'rm -rf "$shim"' EXIT
real_go=$(command -v go)
cat >"$shim/go" <<SHIM
#!/usr/bin/env bash
if [ "\$1" = list ] && [ "\${2:-}" = -deps ]; then echo "go: simulated failure" >&2; exit 1; fi
exec "$real_go" "\$@"
SHIM
chmod +x "$shim/go"
expect_fail "go list -deps failing" "simulated failure" env PATH="$shim:$PATH" "$script"

if ! out=$("$script" 2>&1) || [ "$out" != "import arrows: ok" ]; then
	echo "arrows-selftest: the tree as it is: $out" >&2
	bad=1
fi
if [ $bad != 0 ]; then exit 1; fi
echo "arrows selftest: ok (missing package and go list failure both fail the check)"
