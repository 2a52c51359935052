#!/usr/bin/env bash
# Checks the import arrows drawn in docs/design.md ("Layout"): pure packages import
# only the standard library and the packages they are allowed to, and each
# outside system has exactly one adapter package.
set -euo pipefail
cd "$(dirname "$0")/.."
mod=$(go list -m)
fail=0

# deps PKG: every non-standard package PKG depends on, transitively.
deps() {
	go list -deps -f '{{if not .Standard}}{{.ImportPath}}{{end}}' "$1" 2>/dev/null | grep -v "^$1\$" || true
}

# allow PKG ALLOWED...: PKG may depend on nothing outside ALLOWED (and stdlib).
allow() {
	local pkg="$mod/$1"; shift
	if ! go list "$pkg" >/dev/null 2>&1; then return 0; fi
	local d
	for d in $(deps "$pkg"); do
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
	local owner="$mod/$1" ext="$2"
	go list -f '{{.ImportPath}} {{join .Imports " "}} {{join .TestImports " "}} {{join .XTestImports " "}}' ./... |
		while read -r pkg imps; do
			for i in $imps; do
				case "$i" in
				"$ext" | "$ext"/*)
					case "$pkg" in
					"$owner" | "$owner"/*) ;;
					*)
						echo "arrow violation: $pkg imports $i (only $owner may)" >&2
						echo x
						;;
					esac
					;;
				esac
			done
		done | grep -q x && fail=1 || true
}

allow budgets
allow overlay/contract
allow overlay/policy budgets overlay/contract
for p in $(go list ./overlay/sim/... 2>/dev/null); do
	for d in $(deps "$p"); do
		case "$d" in
		"$mod/overlay/server"* | "$mod/overlay/nomad"* | "$mod/overlay/state"*)
			echo "arrow violation: $p imports $d (the simulator never imports the server or the Nomad adapter)" >&2
			fail=1
			;;
		esac
	done
done
only hcl github.com/hashicorp/hcl/v2
only overlay/nomad github.com/hashicorp/nomad/api
only nvplugin/nvml github.com/NVIDIA/go-nvml

if [ $fail != 0 ]; then exit 1; fi
echo "import arrows: ok"
