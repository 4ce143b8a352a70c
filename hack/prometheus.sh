#!/usr/bin/env bash
# Fetches, once, Debian's prometheus package (prometheus and promtool) for the tests
# that query a real Prometheus server or check metrics with promtool, and caches the
# two binaries outside the repository, keyed by the package version:
#
#   ${GPUBOT_CACHE:-$HOME/.cache/gpubot}/prometheus-<version>/bin/{prometheus,promtool}
#
# Nothing is installed system-wide: the .deb is downloaded with `apt-get download` and
# unpacked with `dpkg-deb -x` into a temporary directory. If apt's package lists are
# missing (a fresh CI machine), `apt-get update` is run first when we are root.
# Concurrent runs serialize on a lock file. Prints the bin directory on stdout
# (everything else goes to stderr).
#
# Usage: hack/prometheus.sh           fetch what is missing, print the bin directory
#        hack/prometheus.sh --print   print the bin directory only, fetch nothing
set -euo pipefail

# The version of Debian bookworm's package; raise it with the distribution.
PROM_VERSION=2.42.0+ds-5+deb12u1

CACHE_ROOT=${GPUBOT_CACHE:-$HOME/.cache/gpubot}
DIR=$CACHE_ROOT/prometheus-${PROM_VERSION%%+*}
BIN=$DIR/bin

if [[ ${1:-} == --print ]]; then
	echo "$BIN"
	exit 0
fi

log() { echo "prometheus: $*" >&2; }

mkdir -p "$BIN"
exec 9>"$DIR/.lock"
flock 9

if [[ -x $BIN/prometheus && -x $BIN/promtool ]]; then
	echo "$BIN"
	exit 0
fi

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
cd "$TMP"

fetch() { apt-get download "prometheus=$PROM_VERSION" >&2 2>"$TMP/apt.err"; }
if ! fetch; then
	if [[ $(id -u) == 0 ]]; then
		log "apt-get download failed ($(tail -n1 "$TMP/apt.err")); running apt-get update first"
		apt-get update >&2
		fetch || { cat "$TMP/apt.err" >&2; exit 1; }
	else
		cat "$TMP/apt.err" >&2
		log "could not download Debian's prometheus package; run 'apt-get update' as root, or set GPUBOT_SKIP_PROMETHEUS=1 to skip the tests that need it"
		exit 1
	fi
fi
dpkg-deb -x prometheus_*.deb unpacked
install -m 0755 unpacked/usr/bin/prometheus unpacked/usr/bin/promtool "$BIN/"
log "cached prometheus $("$BIN/prometheus" --version 2>&1 | head -n1 | awk '{print $3}') in $BIN"
echo "$BIN"
