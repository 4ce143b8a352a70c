#!/usr/bin/env bash
# Starts (up) or stops (down) gpubot's local dev cluster: kube-apiserver,
# etcd, Kueue, kube-controller-manager, kube-scheduler and kwok fake GPU
# nodes, with the example Kueue setup. State lives in
# ${GPUBOT_CACHE:-$HOME/.cache/gpubot}/dev-cluster.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${GPUBOT_CACHE:-$HOME/.cache/gpubot}/dev-cluster
PID=$DIR/devcluster.pid

case ${1:-up} in
up)
	if [[ -f $PID ]] && kill -0 "$(cat "$PID")" 2>/dev/null; then
		echo "dev cluster already running (pid $(cat "$PID")); kubeconfig: $DIR/kubeconfig"
		exit 0
	fi
	hack/k8s-assets.sh >/dev/null
	mkdir -p "$DIR"
	go build -o "$DIR/devcluster" ./hack/devcluster
	rm -f "$DIR/ready"
	nohup "$DIR/devcluster" -dir "$DIR" "${@:2}" >"$DIR/devcluster.log" 2>&1 &
	echo $! >"$PID"
	for _ in $(seq 1 300); do
		if [[ -f $DIR/ready ]]; then
			cat <<MSG
dev cluster running (pid $(cat "$PID")).
  kubeconfig: $DIR/kubeconfig
  try:        KUBECONFIG=$DIR/kubeconfig $(hack/k8s-assets.sh --print)/bin/kubectl get nodes
  gpubot:     go run ./cmd/gpubot console --kubeconfig $DIR/kubeconfig --config $DIR/gpubot.yaml --data-dir $DIR/gpubot
  stop:       make dev-cluster-down
MSG
			exit 0
		fi
		if ! kill -0 "$(cat "$PID")" 2>/dev/null; then
			echo "dev cluster failed to start; see $DIR/devcluster.log" >&2
			tail -20 "$DIR/devcluster.log" >&2
			exit 1
		fi
		sleep 0.5
	done
	echo "dev cluster not ready after 150 s; see $DIR/devcluster.log" >&2
	exit 1
	;;
down)
	if [[ ! -f $PID ]]; then
		echo "no dev cluster running"
		exit 0
	fi
	p=$(cat "$PID")
	if kill "$p" 2>/dev/null; then
		while kill -0 "$p" 2>/dev/null; do sleep 0.2; done
	fi
	rm -f "$PID" "$DIR/ready"
	echo "dev cluster stopped"
	;;
*)
	echo "usage: $0 up|down" >&2
	exit 2
	;;
esac
