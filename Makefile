# gpubot — common tasks. `make help` lists them.
GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
LDFLAGS := -X main.version=$(VERSION)
PKGS    := ./...
# The one image name, as in README, deploy/base and deploy/helm.
IMAGE   ?= ghcr.io/gpubot/gpubot

.PHONY: help run build image test vet fmt-check bench fuzz clean k8s-assets prometheus-assets dev-cluster dev-cluster-down

help: ## list the targets
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{ t[NR] = $$1; d[NR] = $$2; if (length($$1) > w) w = length($$1) } \
		END { for (i = 1; i <= NR; i++) if (i in t) printf "  %-*s  %s\n", w, t[i], d[i] }'

run: ## run the bot on its embedded default: console chat, simulated cluster, local bbolt file
	$(GO) run -ldflags "$(LDFLAGS)" ./cmd/gpubot console $(ARGS)

build: ## build bin/gpubot
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/gpubot ./cmd/gpubot

image: ## build the container image ghcr.io/gpubot/gpubot:<git describe> from Dockerfile (needs Docker or a compatible builder)
	docker build --build-arg VERSION=$(VERSION) -t $(IMAGE):$(VERSION) .

test: fmt-check vet k8s-assets prometheus-assets ## run every check CI runs: gofmt, go vet, all tests with the race detector (GPUBOT_SKIP_K8S=1 skips the Kubernetes integration tests, GPUBOT_SKIP_PROMETHEUS=1 the Prometheus ones)
	$(GO) test -race -count=1 -timeout 30m $(PKGS)

k8s-assets: ## build (once) and cache kube-apiserver, etcd, kubectl, Kueue, kwok… for the integration tests; GPUBOT_SKIP_K8S=1 skips
	@if [ "$$GPUBOT_SKIP_K8S" = 1 ]; then echo "GPUBOT_SKIP_K8S=1: skipping the Kubernetes binaries and integration tests"; \
	else hack/k8s-assets.sh >/dev/null; fi

prometheus-assets: ## fetch (once) and cache Debian's prometheus and promtool for the tests; GPUBOT_SKIP_PROMETHEUS=1 skips
	@if [ "$$GPUBOT_SKIP_PROMETHEUS" = 1 ]; then echo "GPUBOT_SKIP_PROMETHEUS=1: skipping Prometheus and the tests that need it"; \
	else hack/prometheus.sh >/dev/null; fi

dev-cluster: ## start a local Kubernetes + Kueue cluster with fake GPU nodes; prints the kubeconfig path
	@hack/dev-cluster.sh up

dev-cluster-down: ## stop the local cluster
	@hack/dev-cluster.sh down

vet: ## go vet every package
	$(GO) vet $(PKGS)

fmt-check: ## fail if gofmt would change a file
	@out=$$(gofmt -l .); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

bench: ## run the benchmarks (figures go into BENCHMARKS.md)
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)

fuzz: ## fuzz the /gpu parser for a minute
	$(GO) test ./commands/ -run '^$$' -fuzz FuzzParse -fuzztime 60s

clean: ## remove build output
	rm -rf bin
