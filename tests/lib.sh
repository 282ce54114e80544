# Sourced by the CLI test scripts (". tests/lib.sh", from the repository root): $TWIN, a
# temporary directory ($tmp, also $d) removed at exit, and the output protocol of tests/run.sh.
TWIN=${TWIN:-build/twin}
tmp=$(mktemp -d)
d=$tmp
trap 'rm -rf "$tmp"' EXIT
ok() { echo "ok - $1"; }
nok() { echo "not ok - $1${2:+: $2}"; }
check() { # name, command...: passes when the command succeeds
	n=$1
	shift
	if "$@"; then ok "$n"; else nok "$n"; fi
}
