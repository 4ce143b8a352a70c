#!/usr/bin/env bash
# Builds, once, the Kubernetes and Kueue binaries that gpubot's integration tests and
# `make dev-cluster` run, from the Go module proxy (no Docker, no prebuilt downloads),
# into a cache directory outside the repository keyed by the versions:
#
#   ${GPUBOT_CACHE:-$HOME/.cache/gpubot}/k8s-v1.37.2-etcd-v3.6.16-kueue-v0.17.0-kwok-v0.8.0/
#     bin/{kube-apiserver,etcd,kubectl,kueue,kube-controller-manager,kube-scheduler,kwok}
#     kueue/crds/*.yaml  kueue/webhook/manifests.yaml  kwok/stages/*.yaml
#     autoscaler/crds/autoscaling.x-k8s.io_provisioningrequests.yaml (the cluster
#       autoscaler's ProvisioningRequest CRD, from the module Kueue builds against: with
#       it installed, Kueue's ProvisioningRequest admission check controller runs)
#
# What is present is reused; only what is missing is built. Wrapper modules live in a
# temporary directory that is removed on exit. Concurrent runs serialize on a lock file.
# Prints the asset directory on stdout (everything else goes to stderr).
#
# Usage: hack/k8s-assets.sh            build what is missing, print the directory
#        hack/k8s-assets.sh --print    print the directory only, build nothing
set -euo pipefail

K8S_VERSION=v1.37.2
K8S_STAGING_VERSION=v0.37.2
ETCD_VERSION=v3.6.16
KUEUE_VERSION=v0.17.0
KWOK_VERSION=v0.8.0

CACHE_ROOT=${GPUBOT_CACHE:-$HOME/.cache/gpubot}
DIR=$CACHE_ROOT/k8s-$K8S_VERSION-etcd-$ETCD_VERSION-kueue-$KUEUE_VERSION-kwok-$KWOK_VERSION

if [[ ${1:-} == --print ]]; then
	echo "$DIR"
	exit 0
fi

mkdir -p "$DIR/bin" "$DIR/kueue/crds" "$DIR/kueue/webhook" "$DIR/kwok/stages"
exec 9>"$DIR/.lock"
flock 9

log() { echo "k8s-assets: $*" >&2; }

export GOWORK=off GOFLAGS=-buildvcs=false CGO_ENABLED=0
TMP=$(mktemp -d)
trap 'chmod -R u+w "$TMP" 2>/dev/null; rm -rf "$TMP"' EXIT

TIMES=$DIR/build-times.txt
timed() { # timed NAME COMMAND... — runs the command and appends its duration to build-times.txt
	local name=$1 start end
	shift
	start=$(date +%s)
	log "building $name…"
	"$@" >&2
	end=$(date +%s)
	log "built $name in $((end - start)) s"
	echo "$name $((end - start))s $(date -u +%Y-%m-%dT%H:%M:%SZ)" >>"$TIMES"
}

missing() { [[ ! -x $DIR/bin/$1 ]]; }

moddir() { go mod download -json "$1" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p'; }

# --- Kubernetes: one wrapper module for apiserver, controller-manager, scheduler, kubectl.
k8s_cmds=()
for c in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
	if missing "$c"; then k8s_cmds+=("$c"); fi
done
if ((${#k8s_cmds[@]})); then
	w=$TMP/k8s
	mkdir -p "$w"
	(
		cd "$w"
		go mod init gpubot.local/k8s-assets >/dev/null 2>&1
		kdir=$(moddir "k8s.io/kubernetes@$K8S_VERSION")
		{
			echo "require k8s.io/kubernetes $K8S_VERSION"
			# Kubernetes' go.mod replaces its staging modules with ./staging paths; point
			# each at its published version instead (sample-* have none and are unused).
			sed -n 's#^[[:space:]]*\(k8s.io/[a-z0-9-]*\) => ./staging/.*#\1#p' "$kdir/go.mod" |
				grep -v -e sample-cli-plugin -e sample-controller |
				while read -r m; do echo "replace $m => $m $K8S_STAGING_VERSION"; done
		} >>go.mod
		{
			echo '//go:build tools'
			echo
			echo 'package tools'
			echo
			echo 'import ('
			for c in "${k8s_cmds[@]}"; do echo "	_ \"k8s.io/kubernetes/cmd/$c\""; done
			echo ')'
		} >tools.go
		go mod tidy >&2
	)
	vpkg=k8s.io/component-base/version
	minor=${K8S_VERSION#v1.}
	minor=${minor%%.*}
	ldflags="-s -w -X $vpkg.gitVersion=$K8S_VERSION -X $vpkg.gitMajor=1 -X $vpkg.gitMinor=$minor"
	ldflags+=" -X k8s.io/client-go/pkg/version.gitVersion=$K8S_VERSION"
	for c in "${k8s_cmds[@]}"; do
		timed "$c" bash -c "cd '$w' && go build -trimpath -ldflags '$ldflags' -o '$DIR/bin/$c.tmp' k8s.io/kubernetes/cmd/$c"
		mv "$DIR/bin/$c.tmp" "$DIR/bin/$c"
	done
fi

# --- etcd: its server module's root package is the etcd main package.
if missing etcd; then
	w=$TMP/etcd
	mkdir -p "$w"
	(
		cd "$w"
		go mod init gpubot.local/etcd-assets >/dev/null 2>&1
		echo "require go.etcd.io/etcd/server/v3 $ETCD_VERSION" >>go.mod
		printf '//go:build tools\n\npackage tools\n\nimport _ "go.etcd.io/etcd/server/v3"\n' >tools.go
		go mod tidy >&2
	)
	timed etcd bash -c "cd '$w' && go build -trimpath -ldflags '-s -w' -o '$DIR/bin/etcd.tmp' go.etcd.io/etcd/server/v3"
	mv "$DIR/bin/etcd.tmp" "$DIR/bin/etcd"
fi

# --- Kueue controller, CRDs and webhook manifests.
if missing kueue; then
	timed kueue env GOBIN="$TMP/gobin" go install -trimpath -ldflags '-s -w' "sigs.k8s.io/kueue/cmd/kueue@$KUEUE_VERSION"
	mv "$TMP/gobin/kueue" "$DIR/bin/kueue"
fi
if [[ ! -f $DIR/kueue/webhook/manifests.yaml ]]; then
	kq=$(moddir "sigs.k8s.io/kueue@$KUEUE_VERSION")
	cp "$kq"/config/components/crd/bases/*.yaml "$DIR/kueue/crds/"
	cp "$kq/config/components/webhook/manifests.yaml" "$DIR/kueue/webhook/manifests.yaml.tmp"
	chmod u+w "$DIR"/kueue/crds/*.yaml "$DIR/kueue/webhook/manifests.yaml.tmp"
	mv "$DIR/kueue/webhook/manifests.yaml.tmp" "$DIR/kueue/webhook/manifests.yaml"
fi

# --- The ProvisioningRequest CRD (autoscaling.x-k8s.io), from the cluster autoscaler's
# API module at the version Kueue's go.mod requires.
if [[ ! -f $DIR/autoscaler/crds/autoscaling.x-k8s.io_provisioningrequests.yaml ]]; then
	kq=$(moddir "sigs.k8s.io/kueue@$KUEUE_VERSION")
	av=$(sed -n 's#^[[:space:]]*k8s.io/autoscaler/cluster-autoscaler/apis \(v[^ ]*\).*#\1#p' "$kq/go.mod" | head -1)
	if [[ -z $av ]]; then
		log "Kueue's go.mod names no k8s.io/autoscaler/cluster-autoscaler/apis version"
		exit 1
	fi
	ad=$(moddir "k8s.io/autoscaler/cluster-autoscaler/apis@$av")
	mkdir -p "$DIR/autoscaler/crds"
	install -m 0644 "$ad/config/crd/autoscaling.x-k8s.io_provisioningrequests.yaml" "$DIR/autoscaler/crds/.provreq.tmp"
	mv "$DIR/autoscaler/crds/.provreq.tmp" "$DIR/autoscaler/crds/autoscaling.x-k8s.io_provisioningrequests.yaml"
fi

# --- kwok (fake nodes whose pods run) and its stage files.
if missing kwok; then
	timed kwok env GOBIN="$TMP/gobin" go install -trimpath -ldflags '-s -w' "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
	mv "$TMP/gobin/kwok" "$DIR/bin/kwok"
fi
if [[ ! -f $DIR/kwok/stages/.complete ]]; then
	kw=$(moddir "sigs.k8s.io/kwok@$KWOK_VERSION")
	n=0
	while read -r f; do
		n=$((n + 1))
		install -m 0644 "$f" "$DIR/kwok/stages/$(basename "$f")"
	done < <(find "$kw/kustomize/stage/node/fast" "$kw/kustomize/stage/node/heartbeat" "$kw/kustomize/stage/pod/general" -maxdepth 1 -name '*.yaml' ! -name kustomization.yaml | sort)
	if ((n == 0)); then
		log "no kwok stage files found under $kw/kustomize/stage"
		exit 1
	fi
	touch "$DIR/kwok/stages/.complete"
fi

echo "$DIR"
