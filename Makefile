# prefect-push: build, test and run. Every target installs what it needs (as root on Debian) only if missing.
SHELL := /bin/bash
export PATH := $(PATH):/opt/swift/usr/bin

SWIFT      ?= swift
PYTHON     ?= python3
VENV       := .venv
PREFECT    := $(VENV)/bin/prefect
PREFECT_VERSION := 3.9.1
APT_PACKAGES := pkg-config libwebsockets-dev libnghttp2-dev libssl-dev libsqlite3-dev libjansson-dev libcmark-dev \
                libcap-dev zlib1g-dev nghttp2-client nghttp2-server openssl ca-certificates curl perl make tcl xz-utils \
                procps
IMAGE_PACKAGES := umoci skopeo zstd
BIN_DEBUG  := .build/debug/prefect-push
BIN        := .build/release/prefect-push
STATIC_DIR := $(CURDIR)/.build/static
# Every build the Makefile runs treats compiler warnings as errors (our Swift targets and the CShims C target; the
# system-library targets are only module maps). A plain `swift build` doesn't, so work in progress still builds.
STRICT_FLAGS  := -Xswiftc -warnings-as-errors -Xcc -Werror
# Release: static C libraries (deploy/static-libs.sh), linked by lld with packed relative relocations (DT_RELR:
# 12 kB instead of 1.1 MB of .rela.dyn). DT_RELR needs glibc 2.36 or later where the binary runs (Debian 12, the
# image); `make build PACK_RELOCS=` gives a binary 1.1 MB larger that runs on glibc 2.35 (Ubuntu 22.04).
# Functions are laid out in the order of deploy/symbol-order.txt (`make symbol-order` writes it): the code that runs
# at start-up and idle first, the pause path next, so fewer of the binary's pages stay resident. Our modules are
# compiled a section per function so that the order applies function by function. docs/benchmarks.md "Footprint" has the
# numbers (and why not -Osize), `make size-report` where the bytes go.
PACK_RELOCS   ?= -Xlinker -z -Xlinker pack-relative-relocs
STRIP_FLAGS   ?= -Xlinker --strip-all
# The DWARF unwind tables left out of the release executables (deploy/drop-unwind-tables.ld says why it is safe);
# `make build UNWIND_TABLES=` keeps them.
UNWIND_TABLES ?= -Xlinker -T -Xlinker $(CURDIR)/deploy/drop-unwind-tables.ld -Xlinker --no-eh-frame-hdr
SYMBOL_ORDER  := -Xlinker --symbol-ordering-file=$(CURDIR)/deploy/symbol-order.txt -Xlinker --no-warn-symbol-ordering
# The release build reports the checkout's version (git describe) and commit: deploy/build-stamp.sh writes them into
# $(BUILD_STAMP) (git-ignored), compiled in by -DPREFECT_PUSH_STAMPED (Sources/Relay/Process/BuildInfo.swift). Other builds
# report 0.1.0+unknown. BUILD_VERSION / BUILD_COMMIT override git (deploy/Dockerfile passes them).
BUILD_STAMP   := Sources/Relay/Process/BuildStamp.generated.swift
RELEASE_COMPILE := -c release --static-swift-stdlib --disable-local-rpath --pkg-config-path $(STATIC_DIR)/pkgconfig \
                   -Xswiftc -Xfrontend -Xswiftc -function-sections -Xswiftc -DPREFECT_PUSH_STAMPED $(STRICT_FLAGS)
RELEASE_FLAGS := $(RELEASE_COMPILE) -Xswiftc -use-ld=lld $(PACK_RELOCS) $(SYMBOL_ORDER) $(UNWIND_TABLES) $(STRIP_FLAGS)
KUBERNETES_VALIDATE := $(VENV)/bin/kubernetes-validate
KUBERNETES_VALIDATE_VERSION := 1.37.0
KUBERNETES_VERSION ?= 1.31.0
AIOAPNS_VERSION := 4.0
BENCH_ARGS ?=
CHAOS_ARGS ?=
RUN_PORT   ?= 8080
PREFECT_PORT ?= 4200

.PHONY: deps deps-apt deps-python deps-image deps-systemd systemd-verify deps-bench deps-valgrind deps-prometheus prometheus-check release-inputs symbol-order build debug test lint k8s-validate run demo bench bench-build size-report chaos \
        chaos-quick chaos-asan chaos-asan-smoke soak docs-tables rest-client-bench clean fuzz fuzz-build fuzz-smoke test-sanitize test-asan test-tsan slow-connections bad-input \
        image image-archive push apply deploy apns-key status health logs test-unprivileged

deps: deps-apt deps-python

# Installs the Debian packages in $(1) that are missing.
define apt_install
	@missing=""; for p in $(1); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi
endef

deps-apt:
	$(call apt_install,$(APT_PACKAGES))

deps-image:
	$(call apt_install,$(IMAGE_PACKAGES))

deps-systemd:
	$(call apt_install,systemd)

# promtool for the alert rules and the dashboard, and prometheus itself for PrometheusScrapeTests (Debian's package
# has both). On a host with systemd, installing it also starts a Prometheus on :9090; the tests don't use that one.
deps-prometheus:
	$(call apt_install,prometheus python3-yaml)

deps-python: $(PREFECT) $(KUBERNETES_VALIDATE)

$(PREFECT):
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --disable-pip-version-check prefect==$(PREFECT_VERSION)

$(KUBERNETES_VALIDATE): $(PREFECT)
	$(VENV)/bin/pip install -q --disable-pip-version-check kubernetes-validate==$(KUBERNETES_VALIDATE_VERSION)

# Release: the Swift runtime, the C libraries (lws, nghttp2, OpenSSL, SQLite, cmark, libcap, zlib) and
# libstdc++ are linked in statically (OpenSSL built from Debian's source with only what is used: deploy/openssl.sh),
# so the node needs only glibc (2.36+, see PACK_RELOCS), libm and libgcc_s.
# deploy/static-libs.sh explains how; the debug and test builds don't use it and stay dynamic.
build: deps-apt release-inputs
	$(SWIFT) build $(RELEASE_FLAGS) --product prefect-push
	@ls -l $(BIN) | awk '{print "built $(BIN): " $$5 " bytes"}'
	@echo "dynamic: $$(ldd $(BIN) | awk '{print $$1}' | tr '\n' ' ')"

# The release build's inputs that SwiftPM doesn't track: the static libraries (built once), the version stamp (its
# file is rewritten only when it changes), and the compiler and linker flags and the symbol order. SwiftPM
# recompiles on a source change but not on a changed -Xswiftc flag, and relinks on neither a changed archive nor a
# changed order file: a change of the compile flags drops the compiled release modules (and the module cache, whose
# modules name the checkout's old path when it was copied: the flags name the path too), and the release executables
# are always linked again (under a second each).
release-inputs:
	@sh deploy/static-libs.sh $(STATIC_DIR)
	@sh deploy/build-stamp.sh $(BUILD_STAMP)
	@stamp=.build/release-flags; flags="$(RELEASE_COMPILE)"; \
	if [ "$$(cat $$stamp 2>/dev/null)" != "$$flags" ]; then \
	  rm -rf .build/release/*.build .build/release/*.swiftmodule .build/release/Modules .build/release/ModuleCache; \
	  mkdir -p .build; \
	  printf '%s' "$$flags" > $$stamp; fi
	@rm -f .build/release/prefect-push .build/release/fake-apns .build/release/prefect-push-bench

debug: deps-apt
	$(SWIFT) build $(STRICT_FLAGS) --product prefect-push

# Unit tests plus integration tests against a real Prefect server the tests start themselves, after the
# Kubernetes manifests, the systemd unit and the alert rules are checked, every product has built in release
# (warnings as errors: the CI gate), the release relay has pushed over TLS (tools/release-smoke.py: the static build
# and its trimmed OpenSSL) and held 3,000 pauses flat (a soak smoke), the image has passed its checks, each fuzz
# harness has run a few seconds and the quick fault-injection scenarios have passed, the relay built plain and with
# AddressSanitizer. The test run is bounded (tools/bounded-test.sh): past the bound it prints the test process's stacks
# and fails.
# The packages are installed first, one apt at a time; then the parts run in two lanes at once (make -j2, one per
# core), each part waiting for what it needs and for the part before it in its lane:
#   builds:  debug build -> static libraries -> release build -> fuzz build -> ASan build -> ASan chaos smoke
#   checks:  venv -> lint and manifests -> Swift suites -> release smoke, soak smoke, image checks and the image under
#            podman -> fuzz smoke -> chaos quick
# so the downloads and the suites (which mostly wait on Prefect and sockets) run beside the compiles. Each part's
# output comes whole when it ends, with the seconds since the start. A fresh clone on this 2-core VM: 826 s at
# 9a9c9af on an idle machine, 1321 s and 1340 s at 6e557e2 with two busy loops on both cores.
TEST_BOUND_SECONDS ?= 900
ifndef TEST_START
TEST_START := $(shell date +%s)
endif
test_passed = @echo "== $@ passed, $$(( $$(date +%s) - $(TEST_START) )) s into make test"
test: deps-apt deps-systemd deps-prometheus deps-image deps-podman
	@$(MAKE) --no-print-directory -j2 --output-sync=target TEST_START=$$(date +%s) test-parts

.PHONY: test-parts test-venv test-checks test-debug-build test-static test-release-build test-release test-suites \
        test-chaos test-fuzz-build test-fuzz test-asan-build test-chaos-asan
test-parts: test-chaos-asan test-chaos
	@echo "make test: every part passed in $$(( $$(date +%s) - $(TEST_START) )) s"

# The builds lane.
test-debug-build:
	$(SWIFT) build $(STRICT_FLAGS) --build-tests
	$(test_passed)

test-static: | test-debug-build
	$(MAKE) --no-print-directory release-inputs
	$(test_passed)

test-release-build: test-static
	$(SWIFT) build $(RELEASE_FLAGS)
	$(test_passed)

test-fuzz-build: | test-release-build
	$(MAKE) --no-print-directory fuzz-build FUZZ_OPT=-Onone
	$(test_passed)

test-asan-build: | test-fuzz-build
	$(ASAN_BUILD)
	$(test_passed)

test-chaos-asan: export SWIFT_BACKTRACE := enable=no
test-chaos-asan: test-asan-build test-debug-build test-venv
	$(CHAOS_ASAN) $(CHAOS_ASAN_SMOKE)
	$(test_passed)

# The checks lane.
test-venv: $(PREFECT) $(KUBERNETES_VALIDATE)

test-checks: test-venv
	$(MAKE) --no-print-directory lint k8s-validate systemd-verify prometheus-check
	$(VENV)/bin/python tools/verdict-selftest.py
	$(test_passed)

test-suites: test-debug-build test-venv | test-checks
	$(MAKE) --no-print-directory test-unprivileged
	PREFECT_BIN=$(CURDIR)/$(PREFECT) PROMETHEUS_BIN=/usr/bin/prometheus SWIFT=$(SWIFT) tools/bounded-test.sh $(TEST_BOUND_SECONDS)
	$(test_passed)

test-release: test-release-build test-venv | test-suites
	$(VENV)/bin/python tools/release-smoke.py
	$(VENV)/bin/python bench/soak.py --pauses $(SOAK_SMOKE_PAUSES) --every $(SOAK_SMOKE_EVERY) --out .build/soak-smoke.json
	$(MAKE) --no-print-directory image-check IMAGE_CHECK_ARGS="--keep .build/oci-check"
	$(IMAGE_TEST_RUN) --layout .build/oci-check --tag check
	$(test_passed)

test-fuzz: test-fuzz-build | test-release
	$(MAKE) --no-print-directory fuzz-smoke FUZZ_OPT=-Onone
	$(test_passed)

test-chaos: test-debug-build test-venv | test-fuzz
	$(CHAOS_QUICK)
	$(test_passed)

# The store's refusals that root never meets (root writes a read-only file anyway), so StoreOpenTests runs again as
# an unprivileged user (nobody, via setpriv, when run as root), from a copy of the test binary in a directory of its
# own (the checkout may sit where nobody can't enter). Fails unless refusesAReadOnlyFile ran and passed.
test-unprivileged:
	@dir=$$(mktemp -d); chmod 755 $$dir; cp .build/debug/prefect-pushPackageTests.xctest $$dir/; \
	  as=""; [ "$$(id -u)" = 0 ] && as="setpriv --reuid=65534 --regid=65534 --clear-groups"; \
	  out=$$($$as env HOME=$$dir $$dir/prefect-pushPackageTests.xctest --testing-library swift-testing \
	    --filter StoreOpenTests 2>&1); rc=$$?; rm -rf $$dir; \
	  echo "$$out" | grep -E "refusesAReadOnly|Test run with"; \
	  if [ $$rc -ne 0 ] || ! echo "$$out" | grep -q "refusesAReadOnlyFile() passed"; then \
	    echo "$$out" | tail -30; echo "test-unprivileged: StoreOpenTests did not pass as uid $$(id -u nobody)"; exit 1; fi

# No function or initializer in Sources over 60 lines (tools/long_functions.py lists any that are).
lint:
	$(PYTHON) tools/long_functions.py

# Every manifest in deploy/k8s (and, with kubectl, the kustomize output: deploy/k8s, with check/, and with check/ and
# check/candidate as `make apns-key` renders it) against the Kubernetes schemas, strictly (unknown fields are errors).
# A deliberately broken copy must fail too, so a validator that passes everything can't go unnoticed. Then
# tools/check-apns-key.py runs `make apns-key`'s script against a fake kubectl (a few seconds).
# The systemd unit as systemd reads it (systemd-analyze verify), any warning failing it. The copy checked starts
# /bin/true, since the binary is not installed here; everything else is the shipped unit's.
systemd-verify: deps-systemd
	@mkdir -p .build/systemd
	sed 's|^ExecStart=/usr/local/bin/prefect-push|ExecStart=/bin/true|' deploy/systemd/prefect-push.service \
	  > .build/systemd/prefect-push.service
	@out=$$(systemd-analyze verify .build/systemd/prefect-push.service 2>&1); \
	  if [ -n "$$out" ]; then echo "$$out"; echo "systemd-verify: deploy/systemd/prefect-push.service has problems"; exit 1; fi; \
	  echo "systemd unit valid"

k8s-validate: $(KUBERNETES_VALIDATE)
	@# The schemas, strictly; then tools/check-k8s.py: the manifests agree with each other and with BASE_PATH.
	@mkdir -p .build
	$(KUBERNETES_VALIDATE) --strict --quiet -k $(KUBERNETES_VERSION) \
	  $$(find deploy/k8s -name '*.yaml' ! -name kustomization.yaml | sort)
	@sed 's/containerPort: 8080/containerPort: "eighty"/' deploy/k8s/deployment.yaml > .build/k8s-broken.yaml
	@if $(KUBERNETES_VALIDATE) --strict --quiet -k $(KUBERNETES_VERSION) .build/k8s-broken.yaml >/dev/null 2>&1; then \
	  echo "kubernetes-validate accepted a broken manifest"; exit 1; fi
	@rendered=""; if command -v kubectl >/dev/null; then \
	  mkdir -p .build/k8s-check-overlay && \
	  printf '%s\n' 'apiVersion: kustomize.config.k8s.io/v1beta1' 'kind: Kustomization' 'resources: [../../deploy/k8s]' \
	    'components: [../../deploy/k8s/check]' > .build/k8s-check-overlay/kustomization.yaml && \
	  mkdir -p .build/k8s-candidate-overlay && \
	  printf '%s\n' 'apiVersion: kustomize.config.k8s.io/v1beta1' 'kind: Kustomization' 'resources: [../../deploy/k8s]' \
	    'components: [../../deploy/k8s/check, ../../deploy/k8s/check/candidate]' \
	    > .build/k8s-candidate-overlay/kustomization.yaml && \
	  kubectl kustomize deploy/k8s > .build/k8s-rendered.yaml && \
	  kubectl kustomize .build/k8s-check-overlay > .build/k8s-check-rendered.yaml && \
	  kubectl kustomize .build/k8s-candidate-overlay > .build/k8s-candidate-rendered.yaml && \
	  $(KUBERNETES_VALIDATE) --strict --quiet -k $(KUBERNETES_VERSION) .build/k8s-rendered.yaml \
	    .build/k8s-check-rendered.yaml .build/k8s-candidate-rendered.yaml || exit 1; \
	  echo "kustomize output valid (deploy/k8s, with the check/ Component, and with check/candidate too)"; \
	  rendered="--rendered .build/k8s-rendered.yaml .build/k8s-check-rendered.yaml \
	    --candidate .build/k8s-candidate-rendered.yaml"; \
	else echo "kubectl not found: kustomize output not rendered"; fi; \
	$(VENV)/bin/python tools/check-k8s.py --dir deploy/k8s --makefile Makefile $$rendered
	@# Each broken copy must fail tools/check-k8s.py (and must differ from the original: a stale edit fails too).
	@for m in 'prefect-push.env s|^BASE_PATH=.*|BASE_PATH=/relay|' \
	          'ingress.example.yaml s|path: /push$$|path: /relay|' \
	          'deployment.yaml s|path: /push/health$$|path: /push/healthz|' \
	          'networkpolicy.example.yaml s|port: 9747|port: 8080|' \
	          'secrets.example.yaml s|name: prefect-push-prefect-cloud|name: prefect-push-prefect|' \
	          'deployment.yaml s|minReadySeconds: .*|minReadySeconds: 30|' \
	          'prefect-push.env s|^HEALTH_STARTUP_SECONDS=.*|HEALTH_STARTUP_SECONDS=120|' \
	          'check/check-job.yaml s|value: /data/prefect-push.db|value: /tmp/prefect-push.db|' \
	          'deployment.yaml s|terminationMessagePolicy: FallbackToLogsOnError|terminationMessagePolicy: File|' \
	          'check/check-job.yaml s|mountPath: /run/secrets/apns$$|mountPath: /run/secrets/apns-key|' \
	          'deployment.yaml s|defaultMode: 0400|defaultMode: 0444|' \
	          'secrets.example.yaml s|^  AuthKey.p8: |  APNS_KEY: |'; do \
	  file=$${m%% *}; edit=$${m#* }; copy=.build/k8s-broken-dir; \
	  rm -rf $$copy && cp -r deploy/k8s $$copy && sed -i "$$edit" $$copy/$$file; \
	  if cmp -s deploy/k8s/$$file $$copy/$$file; then echo "k8s-validate: '$$m' changed nothing"; exit 1; fi; \
	  $(VENV)/bin/python tools/check-k8s.py --dir $$copy >/dev/null; rc=$$?; \
	  if [ $$rc -ne 1 ]; then echo "tools/check-k8s.py: exit $$rc for a broken copy ($$file: $$edit), not 1"; exit 1; fi; \
	done; echo "tools/check-k8s.py refuses each of 12 broken copies"
	@# make apns-key's steps against a fake kubectl: the key checked as a candidate before anything changes.
	$(VENV)/bin/python tools/check-apns-key.py
	@echo "manifests valid"

# deploy/prometheus: the alert rules are valid and pass their promtool unit tests (alerts.test.yaml), and every
# expression in the Grafana dashboard parses (tools/check-dashboard.py, which first makes sure promtool refuses a
# broken one). The scrape itself is PrometheusScrapeTests, in the test run.
prometheus-check: deps-prometheus
	promtool check rules deploy/prometheus/alerts.yaml
	promtool test rules deploy/prometheus/alerts.test.yaml
	$(PYTHON) tools/check-dashboard.py deploy/prometheus/dashboard.json
	@# Annotations, runbook anchors, a firing and a silent test per alert, the Alertmanager inhibit example.
	$(PYTHON) tools/check-alerts.py --dir deploy/prometheus --docs docs/operations.md
	@# Each broken copy must fail its check (and must differ from the original: a stale edit fails too).
	@for m in 'check-alerts alerts.yaml s|#prefectpushcrashlooping|#prefectpushcrashloop|' \
	          'check-alerts alerts.yaml s|started again {{ $$value }} times|started again several times|' \
	          'check-alerts alerts.yaml s|{{ $$labels.instance }} has answered /health|The relay has answered /health|' \
	          'check-alerts alertmanager-inhibit.example.yaml s|"PrefectPushStoreErrors"|"PrefectPushStoreError"|' \
	          'check-alerts alerts.test.yaml /eval_time: \(17\|50\)m/,/exp_alerts: \[\]/d' \
	          'promtool alerts.yaml s|\[30m\]) > 2|[30m]) > 1|' \
	          'promtool alerts.yaml s|)) >= 20|)) >= 0|'; do \
	  tool=$${m%% *}; rest=$${m#* }; file=$${rest%% *}; edit=$${rest#* }; copy=.build/prometheus-broken; \
	  rm -rf $$copy && mkdir -p .build && cp -r deploy/prometheus $$copy && sed -i "$$edit" $$copy/$$file; \
	  if cmp -s deploy/prometheus/$$file $$copy/$$file; then echo "prometheus-check: '$$m' changed nothing"; exit 1; fi; \
	  if [ $$tool = promtool ]; then promtool test rules $$copy/alerts.test.yaml >/dev/null 2>&1; rc=$$?; \
	    if [ $$rc -eq 0 ]; then echo "promtool's tests passed a broken copy ($$file: $$edit)"; exit 1; fi; \
	  else $(PYTHON) tools/check-alerts.py --dir $$copy --docs docs/operations.md >/dev/null; rc=$$?; \
	    if [ $$rc -ne 1 ]; then echo "check-alerts.py: exit $$rc, not 1, for a broken copy ($$file: $$edit)"; exit 1; fi; \
	  fi; \
	done; echo "tools/check-alerts.py refuses each of 5 broken copies, promtool's tests a changed crash-loop bound and a dropped minimum volume"

# Runs the relay. Without PREFECT_API_URL it starts a local Prefect server (127.0.0.1:$(PREFECT_PORT)) first and
# stops it when the relay exits.
run: deps build
	@set -euo pipefail; \
	if [ -z "$${PREFECT_API_URL:-}" ]; then \
	  home=$$(mktemp -d); \
	  echo "starting a local Prefect server on 127.0.0.1:$(PREFECT_PORT) (PREFECT_HOME=$$home)"; \
	  PREFECT_HOME=$$home $(PREFECT) server start --host 127.0.0.1 --port $(PREFECT_PORT) >$$home/server.log 2>&1 & \
	  server=$$!; trap "kill $$server 2>/dev/null; wait $$server 2>/dev/null; rm -rf $$home" EXIT; \
	  for i in $$(seq 1 120); do curl -fs http://127.0.0.1:$(PREFECT_PORT)/api/health >/dev/null && break; sleep 0.5; done; \
	  curl -fs http://127.0.0.1:$(PREFECT_PORT)/api/health >/dev/null || { echo "Prefect did not start; see $$home/server.log"; exit 1; }; \
	  export PREFECT_API_URL=http://127.0.0.1:$(PREFECT_PORT)/api; \
	  PORT=$${PORT:-$(RUN_PORT)} DB_PATH=$${DB_PATH:-$$home/prefect-push.db} $(BIN); \
	else \
	  PORT=$${PORT:-$(RUN_PORT)} $(BIN); \
	fi

# The relay end to end on embedded defaults: local Prefect, the relay, a fake APNs printing what a phone would get.
demo: deps
	$(SWIFT) build $(STRICT_FLAGS) --product prefect-push
	$(SWIFT) build $(STRICT_FLAGS) --product fake-apns
	tools/demo.sh

# Where the release binary's bytes go: relinks it with a linker map (only the link runs again) and sums the map by
# library and Swift module, by section kind and by archive member (tools/size-report.py). docs/benchmarks.md "Footprint".
size-report: build
	rm -f $(BIN) && $(SWIFT) build $(RELEASE_FLAGS) -Xlinker -Map=$(CURDIR)/.build/prefect-push.map --product prefect-push
	$(PYTHON) tools/size-report.py .build/prefect-push.map $(BIN)

# deploy/symbol-order.txt from two runs of an unstripped release build under valgrind's callgrind
# (tools/symbol-order.py: start-up and idle, then registrations and pauses); then `make build` links by it.
symbol-order: deps deps-valgrind
	$(MAKE) --no-print-directory build STRIP_FLAGS=
	mkdir -p .build/symbol-order && cp $(BIN) .build/symbol-order/prefect-push
	$(SWIFT) build $(RELEASE_FLAGS) --product fake-apns
	$(VENV)/bin/python tools/symbol-order.py .build/symbol-order/prefect-push deploy/symbol-order.txt
	$(MAKE) --no-print-directory build

deps-valgrind:
	$(call apt_install,valgrind)

# Push latency, APNs throughput next to h2load and aioapns, footprint, and a real Prefect server next to an
# Automation (bench/run.py). Release builds (the relay as `make build` makes it); 127.0.0.1 only; a few minutes.
# Prints a table, writes bench/results.json. BENCH_ARGS="--quick" for a smoke run, "--skip-real" without the
# Prefect server. Never part of `make test`.
bench: bench-build
	$(VENV)/bin/python bench/run.py $(BENCH_ARGS)

# The three release products the benchmark runs, without running it (for an A/B: copy the relay aside, change,
# build again, then BENCH_RELAY_BIN=<copy> and BENCH_ARGS="--only latency --latency-plan 1:300" for each).
bench-build: deps deps-bench build
	$(SWIFT) build $(RELEASE_FLAGS) --product fake-apns
	$(SWIFT) build $(RELEASE_FLAGS) --product prefect-push-bench

# The REST client comparison (docs/rest-client.md): HTTPPool against a libcurl-multi prototype on latency (a local
# stand-in over http and https, a real Prefect server, nghttpd for HTTP/2; bench/rest-client/run.py, ~5 minutes), and
# what linking libcurl adds to a static binary (bench/rest-client/size.sh, trimmed libcurl built from Debian's source).
# Never part of `make test`.
rest-client-bench: deps-apt $(PREFECT) release-inputs
	$(call apt_install,libcurl4-openssl-dev)
	$(PYTHON) bench/rest-client/run.py
	sh bench/rest-client/size.sh .build/rest-client $(STATIC_DIR)/openssl/lib

# Thousands of pauses and resumes against the scripted Prefect and the fake APNs (bench/soak.py), the relay's RSS,
# descriptors and store sampled as they go: fails if memory trends upwards after the warm-up (a least-squares slope of
# the heap in use, net of SQLite's page cache, over 0.5 KiB per pause), descriptors don't come back, the store outgrows its bounds or keeps a message without rows, or
# the relay crashes or hangs at its stop. Release builds; ~2 minutes for 10,000 pauses; writes bench/soak-results.json
# (`make docs-tables` puts it in docs/testing.md). `make test` runs SOAK_SMOKE_PAUSES of it, sampled every
# SOAK_SMOKE_EVERY (11 samples after the 2,500-pause warm-up). SOAK_ARGS for more options, e.g.
# "--relay-preload .build/planted/leak-on-write.so" (tools/planted/leak-on-write.c: a planted leak it must fail on).
SOAK_PAUSES ?= 10000
SOAK_SMOKE_PAUSES ?= 3000
SOAK_SMOKE_EVERY ?= 50
SOAK_ARGS ?=
soak: deps build
	$(SWIFT) build $(RELEASE_FLAGS) --product fake-apns
	$(VENV)/bin/python bench/soak.py --pauses $(SOAK_PAUSES) $(SOAK_ARGS)

# The "latest run" tables of docs/testing.md (chaos, soak) and docs/benchmarks.md (bench), written from the results
# files the last runs left (chaos/results.json, bench/soak-results.json, bench/results.json) and headed with the
# commit and date each ran on (tools/latest-run.py). DOCS_TABLES="--only soak" for some of them.
DOCS_TABLES ?=
docs-tables:
	$(PYTHON) tools/latest-run.py $(DOCS_TABLES)

# Fault injection (chaos/run.py): the relay against a real Prefect server through a TCP proxy that cuts, blackholes,
# answers 500 and holds some runs' reads, and a fake APNs that is killed, answers 503, sends GOAWAY or goes silent;
# kill -9 mid fan-out, a SQLite lock held 20 s, a full disk (tmpfs, as root), the database deleted. Prints missed and
# duplicate alerts per scenario, writes chaos/results.json, exits 1 if an alert was missed, a scenario's target was
# not met, or a relay or fake APNs ended in a way the fault doesn't explain (a crash, an exit, a hang at SIGTERM).
# 127.0.0.1 only; up to ~15 minutes (quick: ~3); a relay that recovers at once takes less.
# The binaries under test: CHAOS_RELAY_BIN, CHAOS_FAKE_APNS_BIN (default: the debug builds made here).
# CHAOS_ARGS="--only relay-kill,rest-500" for some scenarios.
chaos: deps-apt $(PREFECT)
	$(SWIFT) build $(STRICT_FLAGS) --product prefect-push
	$(SWIFT) build $(STRICT_FLAGS) --product fake-apns
	$(VENV)/bin/python chaos/run.py $(CHAOS_ARGS)

CHAOS_QUICK = $(VENV)/bin/python chaos/run.py --quick $(CHAOS_ARGS)
chaos-quick: deps-apt $(PREFECT)
	$(SWIFT) build $(STRICT_FLAGS) --product prefect-push
	$(SWIFT) build $(STRICT_FLAGS) --product fake-apns
	$(CHAOS_QUICK)

# The fault scenarios against the relay built with AddressSanitizer (.build/asan): the C edges (lws, nghttp2,
# OpenSSL, SQLite) under faults, where the pure-Swift fuzzers can't reach. A scenario fails on any sanitizer report
# or crash in the relay's log, or a relay that ended other than its scenario explains. CHAOS_ASAN_ARGS picks scenarios
# (default: all); `make test` runs the smoke below.
# relay-kill's window is 500 ms here, not the plain build's 50: over 10 kills mid fan-out (otherwise idle 2-core VM)
# the ASan relay sent again answers APNs had given 55-350 ms before the kill (the debug relay: 9-32 ms), none after
# the straggler round's 300 ms. 500 ms is above that lag, and below what a relay that keeps its answers until a
# fan-out ends sends again in the straggler round (answered 300 ms to 300 ms + the fan-out, ~750 ms under ASan, before
# the kill), nearly all of which 1000 ms let through. A relay writing answers ~300 ms late is caught only by
# chaos-quick's 50 ms.
CHAOS_ASAN_ARGS ?=
CHAOS_ASAN_SMOKE := --only events-blackhole,fd-exhaustion,relay-kill --quick
ASAN_BUILD = $(SWIFT) build --sanitize=address --scratch-path .build/asan --product prefect-push
CHAOS_ASAN = ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 LSAN_OPTIONS=suppressions=$(CURDIR)/Tests/lsan-suppressions.txt \
  CHAOS_RELAY_BIN=$(CURDIR)/.build/asan/debug/prefect-push \
  $(VENV)/bin/python chaos/run.py --out chaos/results-asan.json --durable-within-ms 500
chaos-asan: deps-apt $(PREFECT)
	$(ASAN_BUILD)
	$(SWIFT) build $(STRICT_FLAGS) --product fake-apns
	$(CHAOS_ASAN) $(CHAOS_ASAN_ARGS)

chaos-asan-smoke:
	$(MAKE) --no-print-directory chaos-asan CHAOS_ASAN_ARGS="$(CHAOS_ASAN_SMOKE)"

# aioapns, the Python APNs client the throughput is compared with (PyPI, into the project venv).
deps-bench: deps-python
	@$(VENV)/bin/python -c 'import aioapns' 2>/dev/null || \
	  $(VENV)/bin/pip install -q --disable-pip-version-check aioapns==$(AIOAPNS_VERSION)

# --- Fuzzing and sanitizers -------------------------------------------------------------------------------------
# libFuzzer harnesses (Fuzz/*Harness.swift) over the RelayCore sources plus cmark's markdown reader and jansson (the
# JSON harness's reference: JSONParser must read what jansson reads), built with `swiftc -sanitize=fuzzer,address`.
# `make fuzz` runs each for FUZZ_RUNS executions (default 10^6); `make fuzz-smoke` a few seconds each. Corpora grow in
# .build/fuzz/corpus/<harness>.
FUZZ_DIR     := .build/fuzz
FUZZ_RUNS    ?= 1000000
FUZZ_SMOKE_SECONDS ?= 5
FUZZ_HARNESSES := HTTP Events JSON Text Payload APNs APNsMachine Response Pool
# Inputs up to 8 KiB; payload inputs up to 2 KiB (escaping already takes them past 4096 bytes, and each execution
# then costs a quarter as much).
FUZZ_MAX_LEN_Payload := 2048
FUZZ_SOURCES := $(shell find Sources/RelayCore -name '*.swift') Tests/RelayTests/Support/Jansson.swift \
                Sources/Relay/Context/Markdown.swift Fuzz/Common.swift
# make test's smoke builds at -Onone (FUZZ_OPT=-Onone: ~27 s of a core against ~2.5 min at -O), into a binary of
# its own so `make fuzz` keeps the optimised one; a smoke of a few seconds per harness needs no speed.
FUZZ_OPT     ?= -O
FUZZ_FLAGS   := -sanitize=fuzzer,address -parse-as-library $(FUZZ_OPT) -g -module-name RelayCore -package-name prefect_push -swift-version 6 \
                -I Sources/CJansson -I Sources/CCmark -Xcc -I/usr/include -lm -suppress-warnings

# One executable for every harness (FUZZ_HARNESS picks one; Fuzz/Common.swift): each build compiles all of RelayCore
# under ASan and -O, ~2.5 min of a core here, so seven builds cost `make test` ~15 min of CPU where one costs ~3.
FUZZ_HARNESS_FILES := $(foreach h,$(FUZZ_HARNESSES),Fuzz/$(h)Harness.swift)
FUZZ_BIN     := $(FUZZ_DIR)/fuzz-relay$(if $(filter -Onone,$(FUZZ_OPT)),-onone)

fuzz-build: deps-apt $(FUZZ_BIN)

$(FUZZ_BIN): $(FUZZ_HARNESS_FILES) $(FUZZ_SOURCES)
	@mkdir -p $(foreach h,$(FUZZ_HARNESSES),$(FUZZ_DIR)/corpus/$(h))
	@echo "swiftc -sanitize=fuzzer,address ... Fuzz/*Harness.swift -o $@"
	@swiftc $(FUZZ_FLAGS) $(FUZZ_SOURCES) $(FUZZ_HARNESS_FILES) -o $@ 2>&1 | grep -v "Cannot export local symbol"; \
	  test $${PIPESTATUS[0]} -eq 0

# The Swift runtime's crash handler (its backtracer) can't run under a sanitizer (under ASan it reads the shadow gap):
# off for the recipes that run ASan, TSan and fuzzer builds, whose sanitizer or libFuzzer reports instead. Everything
# else keeps it, so a plain build that crashes says so in its log ("*** Program crashed: ..."), which `make chaos`
# looks for.
fuzz fuzz-smoke test-asan test-tsan chaos-asan chaos-asan-smoke: export SWIFT_BACKTRACE := enable=no

fuzz: fuzz-build
	@for h in $(FUZZ_HARNESSES); do \
	  echo "== fuzz-$$h: $(FUZZ_RUNS) runs"; \
	  max_len=8192; test $$h = Payload && max_len=$(FUZZ_MAX_LEN_Payload); \
	  FUZZ_HARNESS=$$h $(FUZZ_BIN) -runs=$(FUZZ_RUNS) -max_len=$$max_len -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
	    -artifact_prefix=$(FUZZ_DIR)/crash-$$h- $(FUZZ_DIR)/corpus/$$h Fuzz/seeds/$$h >$(FUZZ_DIR)/fuzz-$$h.log 2>&1; \
	  rc=$$?; grep -E "^(Done|stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb))" $(FUZZ_DIR)/fuzz-$$h.log; \
	  test $$rc -eq 0 || { tail -40 $(FUZZ_DIR)/fuzz-$$h.log; echo "fuzz-$$h failed"; exit 1; }; \
	done

fuzz-smoke: fuzz-build
	@for h in $(FUZZ_HARNESSES); do \
	  max_len=8192; test $$h = Payload && max_len=$(FUZZ_MAX_LEN_Payload); \
	  FUZZ_HARNESS=$$h $(FUZZ_BIN) -max_total_time=$(FUZZ_SMOKE_SECONDS) -max_len=$$max_len -timeout=10 \
	    -artifact_prefix=$(FUZZ_DIR)/crash-$$h- $(FUZZ_DIR)/corpus/$$h Fuzz/seeds/$$h >$(FUZZ_DIR)/smoke-$$h.log 2>&1 \
	    || { tail -30 $(FUZZ_DIR)/smoke-$$h.log; echo "fuzz-$$h failed"; exit 1; }; \
	  echo "fuzz-$$h: $$(grep -oE '#[0-9]+' $(FUZZ_DIR)/smoke-$$h.log | tail -1 | tr -d '#') runs, no crash"; \
	done

# The test suites under AddressSanitizer, then ThreadSanitizer, in their own build directories (the integration
# tests start the sanitized relay binary too). TSAN_FILTER/ASAN_FILTER narrow the run (a swift test --filter).
ASAN_FILTER ?=
TSAN_FILTER ?=
test-sanitize: test-asan test-tsan

test-asan: deps
	$(SWIFT) build --build-tests --sanitize=address --scratch-path .build/asan
	LSAN_OPTIONS=suppressions=$(CURDIR)/Tests/lsan-suppressions.txt PREFECT_BIN=$(CURDIR)/$(PREFECT) \
	  $(SWIFT) test --skip-build --sanitize=address --scratch-path .build/asan \
	  $(if $(ASAN_FILTER),--filter '$(ASAN_FILTER)')

test-tsan: deps
	$(SWIFT) build --build-tests --sanitize=thread --scratch-path .build/tsan
	TSAN_OPTIONS=halt_on_error=1 PREFECT_BIN=$(CURDIR)/$(PREFECT) $(SWIFT) test --skip-build --sanitize=thread \
	  --scratch-path .build/tsan $(if $(TSAN_FILTER),--filter '$(TSAN_FILTER)')

# 500 connections sending their heads a byte at a time for 45 s while /health is probed and a pause is announced
# (tools/slow-connections.py; about two minutes; not part of `make test`).
slow-connections: deps
	$(SWIFT) build --product prefect-push
	$(SWIFT) build --product fake-apns
	$(VENV)/bin/python tools/slow-connections.py $(SLOW_ARGS)

# 20,000 bad requests against the API (tools/bad-input.py): every answer the relay's JSON, no 5xx, devices intact,
# no request left without an answer (a close answers only the attacks past a limit), and a clean stop.
bad-input: deps
	$(SWIFT) build --product prefect-push
	$(VENV)/bin/python tools/bad-input.py $(BAD_INPUT_ARGS)

# --- Image and cluster ------------------------------------------------------------------------------------------
# The image is built without a container daemon or a base image: deploy/image.sh assembles a root file system
# (the binary, the glibc-family libraries ldd lists, CA bundle, passwd with user 65532, nsswitch.conf, /tmp, /data)
# and umoci packs it into an OCI layout. deploy/Dockerfile builds the same thing where Docker is at hand.
REGISTRY     ?= registry.example.com/prefect
IMAGE        ?= $(REGISTRY)/prefect-push
IMAGE_TAG    ?= $(shell git rev-parse --short=12 HEAD 2>/dev/null || echo dev)
# The image's org.opencontainers.image.source label: the repository's address (default: the origin remote, when it
# is an https URL; without credentials).
IMAGE_SOURCE ?= $(shell git remote get-url origin 2>/dev/null | sed -n 's|^https://\([^@/]*@\)\{0,1\}|https://|p' | sed 's|\.git$$||')
OCI          := .build/oci
IMAGE_ROOT   := .build/image-bundle
NAMESPACE    ?= prefect
KUBE_CONTEXT ?=
KUBECTL       = kubectl $(if $(KUBE_CONTEXT),--context $(KUBE_CONTEXT) )--namespace $(NAMESPACE)
OVERLAY      := .build/k8s-overlay
HEALTH_PORT  ?= 18080
# The path prefix the cluster's relay serves: deploy/k8s/prefect-push.env's BASE_PATH, its one source.
BASE_PATH_K8S := $(shell sed -n 's/^BASE_PATH=//p' deploy/k8s/prefect-push.env)

# OCI image layout in $(OCI), tag $(IMAGE_TAG); then unpacks it and runs --version inside the unpacked root, and
# recompresses the layer (deploy/image-compress.py): zstd -19 by default (containerd 1.5+, CRI-O, Podman, Docker 23+),
# IMAGE_COMPRESSION=gzip for gzip -9 that any runtime pulls. umoci's own gzip is checked first: umoci can't unpack zstd.
# Last, tools/check-image.py reads the layout back (digests, each layer whole tar, the SBOM); image-check does more.
IMAGE_COMPRESSION ?= zstd
image: build deps-image
	IMAGE_SOURCE='$(IMAGE_SOURCE)' deploy/image.sh $(BIN) $(OCI) $(IMAGE_TAG)
	@umount $(IMAGE_ROOT)/rootfs/dev $(IMAGE_ROOT)/rootfs/proc 2>/dev/null || true
	rm -rf --one-file-system $(IMAGE_ROOT) && umoci unpack --image $(OCI):$(IMAGE_TAG) $(IMAGE_ROOT) >/dev/null
	deploy/image-run.sh $(IMAGE_ROOT)/rootfs --version
	$(PYTHON) deploy/image-compress.py $(OCI) $(IMAGE_TAG) $(IMAGE_COMPRESSION)
	$(PYTHON) tools/check-image.py --no-schema $(OCI)
	@echo "image $(OCI):$(IMAGE_TAG): $$(du -sb $(OCI)/blobs | cut -f1) bytes compressed, $$(du -sb $(IMAGE_ROOT)/rootfs | cut -f1) unpacked"

# A docker-archive tarball, for `docker load` or `k3s ctr images import` on a node without a registry.
# Docker archives can't hold zstd layers, so this converts a copy of the layout to gzip first.
image-archive: image
	rm -rf $(OCI)-gzip && cp -r $(OCI) $(OCI)-gzip && $(PYTHON) deploy/image-compress.py $(OCI)-gzip $(IMAGE_TAG) gzip
	$(PYTHON) tools/check-image.py --no-schema $(OCI)-gzip
	skopeo copy --quiet oci:$(OCI)-gzip:$(IMAGE_TAG) docker-archive:.build/prefect-push-$(IMAGE_TAG).tar:$(IMAGE):$(IMAGE_TAG)
	@echo "wrote .build/prefect-push-$(IMAGE_TAG).tar"

# The image's checks (tools/check-image.py), from the release binary already built: two builds give the same manifest
# digest; every blob's digest and every layer's diff_id hold; each layer is whole tar (GNU tar and Python's tarfile
# list it without a word on stderr, and it ends with tar's end-of-archive blocks); its gzip copy (image-archive)
# passes too; the SBOM is CycloneDX 1.5 by its JSON schema (cyclonedx-python-lib, in a venv of its own) and names the
# binary in the image. The same root packed by umoci alone must fail the layer checks. About 40 s (zstd -19 twice);
# as root, like `make image` (the image's /data belongs to user 65532).
IMAGE_CHECK_VENV := .build/image-check-venv
.PHONY: image-check
image-check: deps-image
	@test -x $(BIN) || { echo "image-check: no $(BIN): make build first"; exit 1; }
	@test -x $(IMAGE_CHECK_VENV)/bin/python || $(PYTHON) -m venv $(IMAGE_CHECK_VENV)
	@$(IMAGE_CHECK_VENV)/bin/python -c 'import cyclonedx.validation.json, jsonschema' 2>/dev/null || \
	  $(IMAGE_CHECK_VENV)/bin/pip install -q --disable-pip-version-check 'cyclonedx-python-lib[json-validation]==11.12.0'
	IMAGE_SOURCE='$(IMAGE_SOURCE)' $(IMAGE_CHECK_VENV)/bin/python tools/check-image.py --rebuild $(BIN) \
	  --compression $(IMAGE_COMPRESSION) $(IMAGE_CHECK_ARGS)

# The image under podman (tools/image-test.py): the layout `make image` wrote, run with deploy/k8s's hardening (user
# 65532, read-only root, no capabilities, no-new-privileges, a named volume at /data) against a real Prefect server
# and the fake APNs on 127.0.0.1: check and --version --verbose (against the image's SBOM) inside it, a pause reaching
# APNs as an alert and a Live Activity start, podman stop within 1 s with exit 0, and a second container on the volume
# that keeps the device and sends nothing again. 31-55 s here, most of it Prefect's start. IMAGE_TEST_RUNTIME and
# IMAGE_TEST_ULIMITS override the podman flags it picks for this host (docs/testing.md); IMAGE_TEST_ARGS="--plant
# no-volume" (or forget-pauses, apns-host) runs it with a defect it must fail on. As root, like `make image`.
# `make test` runs it on the image image-check built and kept (--keep .build/oci-check), not on a third build.
PODMAN_PACKAGES := podman runc
IMAGE_TEST_ARGS ?=
IMAGE_TEST_RUN = $(VENV)/bin/python tools/image-test.py $(IMAGE_TEST_ARGS)
.PHONY: deps-podman image-test
deps-podman:
	$(call apt_install,$(PODMAN_PACKAGES))

image-test: image deps-podman $(PREFECT)
	$(SWIFT) build $(RELEASE_FLAGS) --product fake-apns
	$(IMAGE_TEST_RUN) --layout $(OCI) --tag $(IMAGE_TAG)

# Pushes the image to $(IMAGE):$(IMAGE_TAG) (credentials: `skopeo login $(REGISTRY)` or ~/.docker/config.json) and
# keeps its digest, so the cluster runs exactly what was pushed.
push: image
	skopeo copy --quiet --digestfile .build/image.digest oci:$(OCI):$(IMAGE_TAG) docker://$(IMAGE):$(IMAGE_TAG)
	@echo "pushed $(IMAGE):$(IMAGE_TAG)@$$(cat .build/image.digest)"

# Applies deploy/k8s through a generated overlay that pins the pushed image by digest and sets the namespace.
apply:
	@test -s .build/image.digest || { echo "no .build/image.digest: run make push first"; exit 1; }
	mkdir -p $(OVERLAY)
	printf '%s\n' 'apiVersion: kustomize.config.k8s.io/v1beta1' 'kind: Kustomization' \
	  'namespace: $(NAMESPACE)' 'resources: [../../deploy/k8s]' 'images:' '- name: prefect-push' \
	  '  newName: $(IMAGE)' "  digest: $$(cat .build/image.digest)" > $(OVERLAY)/kustomization.yaml
	$(KUBECTL) apply -k $(OVERLAY)

# `prefect-push check` with the configuration and image about to be applied, in a Job (deploy/k8s/check) beside the
# running relay: the Deployment's Recreate stops the old pod before the new one starts, so a wrong PREFECT_API_URL, a
# refused credential, an APNs key Apple rejects or a store the new release can't read is caught here, while the old
# relay still runs. Polls the Job up to CHECK_JOB_SECONDS (its own deadline is 120 s), prints its log, and fails
# unless it succeeded. Applies nothing else but the ConfigMap the Deployment will read and the volume claim.
CHECK_OVERLAY := .build/k8s-check
CHECK_JOB_SECONDS ?= 180
.PHONY: check-job
check-job:
	@test -s .build/image.digest || { echo "no .build/image.digest: run make push first"; exit 1; }
	mkdir -p $(CHECK_OVERLAY)
	printf '%s\n' 'apiVersion: kustomize.config.k8s.io/v1beta1' 'kind: Kustomization' 'namespace: $(NAMESPACE)' \
	  'resources: [../../deploy/k8s]' 'components: [../../deploy/k8s/check]' 'images:' '- name: prefect-push' \
	  '  newName: $(IMAGE)' "  digest: $$(cat .build/image.digest)" > $(CHECK_OVERLAY)/kustomization.yaml
	KUBECTL="$(KUBECTL)" deploy/check-job.sh $(CHECK_OVERLAY) $(CHECK_JOB_SECONDS) || \
	  { echo "nothing else applied, the old relay still runs"; exit 1; }

# Before a rollout whose store schema differs from the running relay's, an online backup of the store with the running
# relay's own `prefect-push backup` (its pod, its binary: the schema it can read back): one file on the volume beside
# DB_PATH, for `prefect-push restore` in the cluster, and one streamed here to $(BACKUP_DIR). The image's schema is
# `prefect-push schema` of the binary the image was built from; the store's is `status --json`'s "schema". No running
# relay (the first deploy): nothing to back up. A status that fails (the store unreadable): backed up all the same.
# Every step of a rollback: docs/operations.md "Upgrades".
BACKUP_DIR ?= .build/backups
.PHONY: backup-before-rollout
backup-before-rollout:
	@test -x $(BIN) || { echo "no $(BIN): make push builds it"; exit 1; }
	@new=$$($(BIN) schema); \
	if ! $(KUBECTL) get deployment/prefect-push >/dev/null 2>&1; then \
	  echo "no running relay (first deploy): nothing to back up"; exit 0; fi; \
	running=$$($(KUBECTL) exec deployment/prefect-push -- /usr/local/bin/prefect-push status --json \
	  | sed -n 's/.*"schema":\([0-9][0-9]*\).*/\1/p'); \
	if [ "$$running" = "$$new" ]; then echo "store schema $$running, image schema $$new: no migration, no backup"; exit 0; fi; \
	stamp=$$(date -u +%Y%m%dT%H%M%SZ); name=prefect-push-backup-$$stamp-schema$${running:-unknown}.db; \
	echo "store schema $${running:-unreadable}, image schema $$new: backing up the store before the rollout"; \
	$(KUBECTL) exec deployment/prefect-push -- /usr/local/bin/prefect-push backup /data/$$name || exit 1; \
	mkdir -p $(BACKUP_DIR); \
	$(KUBECTL) exec deployment/prefect-push -- /usr/local/bin/prefect-push backup - > $(BACKUP_DIR)/$$name || exit 1; \
	echo "backup: /data/$$name on volume claim prefect-push-data, and $(BACKUP_DIR)/$$name here"; \
	echo "to roll back: docs/operations.md \"Upgrades\" (prefect-push restore /data/$$name)"

# check (the tests), ship the committed source, check the new configuration in a Job before the rollout, back the
# store up when the new image's schema differs from the store's, wait for
# the rollout, then `prefect-push check` inside the new pod (its Prefect URL, credential, APNs key and egress to
# Apple, as the pod sees them) and $(BASE_PATH_K8S)/health. SKIP_TESTS=1 leaves out the tests. The rollout's bound
# covers the pod's start, minReadySeconds (90) and the start-up bound of /health (HEALTH_STARTUP_SECONDS, 60).
ROLLOUT_TIMEOUT ?= 330s
deploy:
	@echo "==> 1/8 the committed source only"
	@git diff --quiet HEAD || { echo "uncommitted changes: deploy ships the committed source; commit first"; exit 1; }
	@echo "==> 2/8 tests"
	$(if $(SKIP_TESTS),@echo "skipped (SKIP_TESTS)",$(MAKE) --no-print-directory test)
	@echo "==> 3/8 build the image and push it to $(IMAGE):$(IMAGE_TAG)"
	$(MAKE) --no-print-directory push
	@echo "==> 4/8 prefect-push check with the new image and configuration, beside the running relay"
	$(MAKE) --no-print-directory check-job
	@echo "==> 5/8 back up the store if the new image migrates it"
	$(MAKE) --no-print-directory backup-before-rollout
	@echo "==> 6/8 apply deploy/k8s to namespace $(NAMESPACE), image pinned by digest"
	$(MAKE) --no-print-directory apply
	@echo "==> 7/8 wait for the new pod, then check its configuration from inside it"
	$(KUBECTL) rollout status deployment/prefect-push --timeout=$(ROLLOUT_TIMEOUT)
	$(KUBECTL) exec deployment/prefect-push -- /usr/local/bin/prefect-push check
	@echo "==> 8/8 $(BASE_PATH_K8S)/health"
	$(MAKE) --no-print-directory health

# Creates or replaces the APNs Secret from the .p8 file, but only once `prefect-push check` has accepted the key in a
# Job (under the candidate Secret prefect-push-apns-candidate, mounted as the relay mounts its key, with the running
# relay's image); then restarts the relay to load it. A refused key changes nothing: its failed lines, exit 1.
# deploy/apns-key.sh has each step; docs/operations.md "Rotate the APNs key" when to revoke the old key.
#   make apns-key KEY=~/Downloads/AuthKey_XXXXXXXXXX.p8 KEY_ID=XXXXXXXXXX TEAM_ID=YYYYYYYYYY
apns-key:
	@KUBECTL="$(KUBECTL)" NAMESPACE=$(NAMESPACE) CHECK_JOB_SECONDS=$(CHECK_JOB_SECONDS) ROLLOUT_TIMEOUT=$(ROLLOUT_TIMEOUT) \
	  IMAGE_REF="$$(test -s .build/image.digest && echo $(IMAGE)@$$(cat .build/image.digest))" \
	  deploy/apns-key.sh "$(KEY)" "$(KEY_ID)" "$(TEAM_ID)"

# The Deployment, its pod, volume claim and /push/health.
status:
	$(KUBECTL) get deployment,pod,service,pvc -l app.kubernetes.io/name=prefect-push -o wide
	$(MAKE) --no-print-directory health

# GET /push/health through a short-lived port-forward to the Service; fails when it says "ok":false (503).
health:
	@$(KUBECTL) port-forward service/prefect-push $(HEALTH_PORT):80 >/dev/null & pf=$$!; \
	trap "kill $$pf 2>/dev/null" EXIT; \
	for i in $$(seq 1 50); do \
	  body=$$(curl -sS http://127.0.0.1:$(HEALTH_PORT)$(BASE_PATH_K8S)/health 2>/dev/null) && \
	    { echo "$$body"; echo "$$body" | grep -q '"ok":true'; exit $$?; }; sleep 0.2; done; \
	echo "no answer from $(BASE_PATH_K8S)/health"; exit 1

# The relay's log (logfmt, or JSON with LOG_FORMAT=json, on stderr). make logs ARGS=-f follows it.
logs:
	$(KUBECTL) logs deployment/prefect-push --tail=200 $(ARGS)

clean:
	rm -rf .build
