# gpubot — common tasks. `make help` lists them.
GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
LDFLAGS := -X main.version=$(VERSION)
PKGS    := ./...

.PHONY: help run build test vet fmt-check bench fuzz clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

run: ## run the bot on its embedded default: console chat, simulated cluster, local bbolt file
	$(GO) run -ldflags "$(LDFLAGS)" ./cmd/gpubot console $(ARGS)

build: ## build bin/gpubot
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/gpubot ./cmd/gpubot

test: fmt-check vet ## run every check CI runs: gofmt, go vet, all tests with the race detector
	$(GO) test -race -count=1 $(PKGS)

vet:
	$(GO) vet $(PKGS)

fmt-check:
	@out=$$(gofmt -l .); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

bench: ## run the benchmarks (figures go into BENCHMARKS.md)
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)

fuzz: ## fuzz the /gpu parser for a minute
	$(GO) test ./commands/ -run '^$$' -fuzz FuzzParse -fuzztime 60s

clean: ## remove build output
	rm -rf bin
