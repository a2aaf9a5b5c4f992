# Skald build and test entry points. `make test` is what CI runs.
GO  ?= go
BUF := $(GO) tool -modfile=$(CURDIR)/tools/go.mod buf

.PHONY: test vet lint check-tidy generate check-breaking breaking-baseline check-generated console check-console bench bench-cluster fuzz run jepsen jepsen-ci deploy-check bench-compare bench-ab bench-atrest bench-profile

# The modules nested in this one (api/: the generated API; client/: the Go
# client). ./... at the root does not enter them, so vet, test and
# check-tidy run in each too.
MODULES := api client

## test: vet, then every test with the race detector, in the root module and in $(MODULES) (the README's test command)
test: vet
	$(GO) test -race -count=1 -timeout 30m ./...
	$(GO) test -count=1 -run 'HeapBound' ./fsm # heap bounds: the race detector moves Pebble's memory into the Go heap
	@set -e; for m in $(MODULES); do echo "cd $$m && $(GO) test -race -count=1 -timeout 30m ./..."; (cd $$m && $(GO) test -race -count=1 -timeout 30m ./...); done

vet:
	$(GO) vet ./...
	@set -e; for m in $(MODULES); do echo "cd $$m && $(GO) vet ./..."; (cd $$m && $(GO) vet ./...); done

## check-tidy: fail when go.mod or go.sum of the root module or of $(MODULES) is not what go mod tidy makes it
check-tidy:
	$(GO) mod tidy -diff
	@set -e; for m in $(MODULES); do echo "cd $$m && $(GO) mod tidy -diff"; (cd $$m && $(GO) mod tidy -diff); done

## lint: gofmt, go vet, buf lint and buf format
lint: vet
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	cd rpc && $(BUF) lint && $(BUF) format --diff --exit-code
	cd proto && $(BUF) lint && $(BUF) format --diff --exit-code

GENERATED := api/skald fsm/fsmv1 node/peerv1

## generate: format the .proto sources and regenerate api/skald (public API, rpc/proto; its own module), fsm/fsmv1 and node/peerv1 (internal, proto/)
generate:
	cd rpc && $(BUF) format -w && $(BUF) generate
	cd proto && $(BUF) format -w && $(BUF) generate

# buf-baseline/ holds buf images of the schemas as of a commit of main
# (152969a), which check-breaking compares against: each module under
# its buf.yaml's rules, WIRE for the internal proto/ (log entries, on-disk
# records, peer calls), FILE for the public rpc/. Images, not the git
# history, so the check works in a shallow clone. Move the baseline
# forward after a release, never past a change the check refused:
# `make breaking-baseline REF=<commit>` rewrites the images; commit them.
## check-breaking: fail when proto/ (wire format) or rpc/proto (public API) breaks the buf-baseline/ images (buf breaking)
check-breaking:
	$(BUF) breaking proto --against buf-baseline/internal.binpb
	$(BUF) breaking rpc --against buf-baseline/api.binpb

## breaking-baseline: REF=<commit of main>: rewrite buf-baseline/ from REF's schemas (then commit them)
breaking-baseline:
	@test -n "$(REF)" || { echo "usage: make breaking-baseline REF=<commit>"; exit 2; }
	$(BUF) build '.git#ref=$(REF),subdir=proto' -o buf-baseline/internal.binpb
	$(BUF) build '.git#ref=$(REF),subdir=rpc' -o buf-baseline/api.binpb

## check-generated: fail when the generated Go differs from what rpc/proto and proto/ generate (after lint, check-tidy and check-breaking)
check-generated: lint check-tidy check-breaking
	cd rpc && $(BUF) generate
	cd proto && $(BUF) generate
	@if [ -n "$$(git status --porcelain -- $(GENERATED))" ]; then \
		git status --porcelain -- $(GENERATED); \
		echo "generated code is stale: run 'make generate' and commit"; exit 1; fi

## console: regenerate the console's TypeScript clients from rpc/proto and rebuild console/dist (npm ci, buf, tsc, esbuild; all pinned)
console:
	GO=$(GO) sh console/build.sh

## check-console: fail when console/src/gen or console/dist differ from what `make console` builds
check-console: console
	@if [ -n "$$(git status --porcelain -- console/src/gen console/dist)" ]; then \
		git status --porcelain -- console/src/gen console/dist; \
		echo "the console is stale: run 'make console' and commit"; exit 1; fi

## bench: storage, apply and 3-node cluster benchmarks (not part of test)
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./fsm
	$(GO) test -run '^$$' -bench . -benchtime 4s ./node

## fuzz: the EventoDB /rpc handler and the NDJSON import parser, 60 s each
fuzz:
	$(GO) test -run '^$$' -fuzz FuzzEventoDBRPC -fuzztime 60s ./rpc
	$(GO) test -run '^$$' -fuzz FuzzImportLine -fuzztime 60s ./rpc

## run: a local 3-node cluster of real processes (data in ./skald-dev); Ctrl-C stops it
run:
	$(GO) run ./cmd/skald dev --nodes 3

## bench-cluster: start a local 3-node cluster (ports 18080..18102), run skald bench's standard set, print the table
bench-cluster:
	@set -e; tmp=$$(mktemp -d); $(GO) build -o $$tmp/skald ./cmd/skald; \
	$$tmp/skald dev --nodes 3 --dir $$tmp/dev --base-port 18080 --kurrentdb-port 0 > $$tmp/dev.out 2>&1 & dev=$$!; \
	trap 'kill -TERM '$$dev'; wait '$$dev' || true; rm -rf '$$tmp EXIT; \
	for i in $$(seq 300); do grep -q "cluster ready" $$tmp/dev.out && break; sleep 0.2; done; \
	SKALD_TOKEN=$$(sed -n 's/^Admin token: //p' $$tmp/dev.out) $$tmp/skald bench --standard --duration $${BENCH_DURATION:-10s} \
		--addr 127.0.0.1:18080,127.0.0.1:18090,127.0.0.1:18100

## bench-compare: etcd (apt) and NATS JetStream (go install, pinned), installed if missing, vs Skald: 3 nodes each, same load, server CPU per op from /proc
bench-compare:
	GO=$(GO) bash scripts/bench-compare.sh

## bench-ab: A=<rev> [B=HEAD] [ROUNDS=3] [ARGS="skald bench flags"]: both revisions on fresh 3-node clusters, interleaved, medians
bench-ab:
	GO=$(GO) A=$(A) B=$(or $(B),HEAD) ROUNDS=$(or $(ROUNDS),3) ARGS="$(or $(ARGS),--workload append --concurrency 64 --duration 8s)" bash scripts/bench-ab.sh

## bench-atrest: [ROUNDS=3] [ARGS="skald bench flags"]: server CPU per op with encryption at rest off and on, one build, interleaved
bench-atrest:
	GO=$(GO) ROUNDS=$(or $(ROUNDS),3) ARGS="$(or $(ARGS),--workload append --concurrency 64 --duration 8s)" bash scripts/bench-atrest.sh

## bench-profile: [ARGS="skald bench flags"] [DURATION=16s] [OUT=dir]: CPU profiles of a 3-node run, broken down per node role (bench/README.md)
bench-profile:
	GO=$(GO) ARGS="$(or $(ARGS),--workload append --concurrency 64)" DURATION=$(or $(DURATION),16s) OUT=$(OUT) bash scripts/bench-profile.sh

## jepsen-ci: the chaos smoke runs (mixed, idempotent, retention, consumers, dcb, indexes) and the mutants CI runs (JEPSEN=1; ~6 min; netns when root, else proxies)
jepsen-ci:
	JEPSEN=1 $(GO) test -count=1 -timeout 20m -run 'TestSmoke|TestMutants' ./jepsen

## jepsen: the long chaos campaign: 10 runs x 5 min, 5 nodes, every fault (JEPSEN_ARGS adds flags)
jepsen:
	$(GO) run ./jepsen -workload mixed -nemesis all -nodes 5 -time 5m -count 10 $(JEPSEN_ARGS)

HELM_VERSION := v3.22.0
HELM ?= $(shell command -v helm || echo $$($(GO) env GOPATH)/bin/helm)
CHART := deploy/helm/skald
CHECK := cd deploy/check && $(GO) run .

## deploy-check: helm lint + every rendered variant strictly decoded as Kubernetes objects, compose, Dockerfile and alert rule checks (offline)
deploy-check:
	@test -x "$(HELM)" || $(GO) install helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)
	$(HELM) lint --strict $(CHART)
	$(HELM) template skald $(CHART) --namespace skald | ($(CHECK) k8s -)
	$(HELM) template skald $(CHART) --set replicas=5,antiAffinity=hard,serviceMonitor.enabled=true,podDisruptionBudget.enabled=false | ($(CHECK) k8s -)
	$(HELM) template skald $(CHART) --set tls.enabled=true,tls.secretName=skald-tls,auth.existingSecret=skald-existing,serviceMonitor.enabled=true,metrics.tenantLabels=true | ($(CHECK) k8s -)
	$(HELM) template skald $(CHART) --set tls.enabled=true,tls.certManager.enabled=true,tls.certManager.issuerRef.name=ca,serviceMonitor.enabled=true | ($(CHECK) k8s -)
	@if $(HELM) template skald $(CHART) --set tls.enabled=true >/dev/null 2>&1; then echo "tls without a certificate source must fail"; exit 1; fi
	$(CHECK) compose ../compose.yaml
	$(CHECK) dockerfile ../Dockerfile
	$(CHECK) rules ../prometheus/alerts.yaml
