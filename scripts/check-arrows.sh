#!/usr/bin/env bash
# Checks the import arrows drawn in docs/design.md ("Layout"): pure packages import
# only the standard library and the packages they are allowed to, and each
# outside system has exactly one adapter package.
#
# Every package named here must exist, and every `go list` must succeed: a
# renamed package or a tree that does not build fails the check instead of
# passing it unchecked. ARROWS_CHECK_PKG names one more package to hold to
# "stdlib only" (scripts/check-arrows-selftest.sh points it at a missing one).
set -euo pipefail
cd "$(dirname "$0")/.."

die() {
	echo "check-arrows: $*" >&2
	exit 1
}

mod=$(go list -m) || die "go list -m failed"
fail=0

# golist ARGS...: go list, or the script stops with its error.
golist() {
	local out
	out=$(go list "$@" 2>&1) || die "go list $* failed:
$out"
	printf '%s\n' "$out"
}

# exists PKG: PKG (a path under the module) is a package, or the script stops.
exists() {
	go list "$mod/$1" >/dev/null 2>&1 ||
		die "$mod/$1 is named by the arrows but is not a package (moved or renamed? update scripts/check-arrows.sh and docs/design.md)"
}

# allow PKG ALLOWED...: PKG may depend on nothing outside ALLOWED (and stdlib).
allow() {
	exists "$1"
	local pkg="$mod/$1"
	shift
	local deps d
	deps=$(golist -deps -f '{{if not .Standard}}{{.ImportPath}}{{end}}' "$pkg")
	for d in $deps; do
		[ "$d" = "$pkg" ] && continue
		local ok=0 a
		for a in "$@"; do
			if [ "$d" = "$mod/$a" ]; then ok=1; fi
		done
		if [ $ok = 0 ]; then
			echo "arrow violation: $pkg imports $d (allowed: stdlib ${*:-})" >&2
			fail=1
		fi
	done
}

# only PKG_PREFIX MODULE_PREFIX: only packages under PKG_PREFIX may import MODULE_PREFIX directly.
only() {
	exists "$1"
	local owner="$mod/$1" ext="$2" pkg imps i
	local list
	list=$(golist -f '{{.ImportPath}} {{join .Imports " "}} {{join .TestImports " "}} {{join .XTestImports " "}}' ./...)
	while read -r pkg imps; do
		for i in $imps; do
			case "$i" in
			"$ext" | "$ext"/*)
				case "$pkg" in
				"$owner" | "$owner"/*) ;;
				*)
					echo "arrow violation: $pkg imports $i (only $owner may)" >&2
					fail=1
					;;
				esac
				;;
			esac
		done
	done <<<"$list"
}

# never PKG_PREFIX FORBIDDEN...: no package under PKG_PREFIX depends on any FORBIDDEN prefix.
never() {
	exists "$1"
	local pkgs deps p d f
	pkgs=$(golist "./$1/...")
	for p in $pkgs; do
		deps=$(golist -deps -f '{{if not .Standard}}{{.ImportPath}}{{end}}' "$p")
		for d in $deps; do
			for f in "${@:2}"; do
				case "$d" in
				"$mod/$f" | "$mod/$f"/*)
					echo "arrow violation: $p imports $d (the simulator never imports the server or the Nomad adapter)" >&2
					fail=1
					;;
				esac
			done
		done
	done
}

allow budgets
allow overlay/contract
allow overlay/policy budgets overlay/contract
never overlay/sim overlay/server overlay/nomad overlay/state
only hcl github.com/hashicorp/hcl/v2
only overlay/nomad github.com/hashicorp/nomad/api
only nvplugin/nvml github.com/NVIDIA/go-nvml
if [ -n "${ARROWS_CHECK_PKG:-}" ]; then
	allow "$ARROWS_CHECK_PKG"
fi

if [ $fail != 0 ]; then exit 1; fi
echo "import arrows: ok"
