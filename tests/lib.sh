# Sourced by the CLI test scripts (". tests/lib.sh", from the repository root): $TWIN, a
# temporary directory ($tmp, also $d) removed at exit, and the output protocol of tests/run.sh.
TWIN=${TWIN:-build/twin}
tmp=$(mktemp -d)
d=$tmp
trap 'rm -rf "$tmp"' EXIT
ok() { echo "ok - $1"; }
nok() { echo "not ok - $1${2:+: $2}"; }
check() { # name, then a condition: a command and its arguments, run as they are, or one
	# shell command string, eval'd; passes when it succeeds
	_check_name=$1
	shift
	if [ $# -eq 1 ]; then eval "$1"; else "$@"; fi && ok "$_check_name" || nok "$_check_name"
}
