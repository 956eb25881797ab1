# healthgate — the two commands: `make run` and `make test`.
# Both install what is missing (Debian packages, with sudo when not root), then build.

SWIFT      ?= $(shell command -v swift 2>/dev/null || echo /opt/swift/usr/bin/swift)
CONFIG     ?=
# What building and running need: the compiler's helpers and the C libraries healthgate links.
RUN_PKGS   := pkg-config g++ libmicrohttpd-dev libgnutls28-dev libssl-dev libyaml-dev libsimdjson-dev zlib1g-dev libdeflate-dev libcurl4-openssl-dev libqrencode-dev libsqlite3-dev libmosquitto-dev libpq-dev librabbitmq-dev libwebsockets-dev
# What the tests add: the real servers they start (never left running or enabled) and the tools
# they drive healthgate with.
TEST_PKGS  := curl openssl zbar-tools chromium influxdb victoria-metrics python3-venv mosquitto mosquitto-clients postgresql rabbitmq-server debootstrap $(DEB_BUILD_PKGS)
# What `make deb` needs to pack the binary: dpkg-shlibdeps, strip, the man page's generator.
DEB_BUILD_PKGS := dpkg-dev binutils python3
# The Debian services those packages start and enable when installed.
TEST_DAEMONS := influxdb victoria-metrics mosquitto postgresql rabbitmq-server
DEB_PKGS   := $(RUN_PKGS)
SUDO       := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
BIN        := .build/release/healthgate
# The toolchain's shared Swift runtime: what the r12 check compares the linked-in runtime with.
SWIFT_RUNTIME = $(wildcard $(dir $(realpath $(SWIFT)))../lib/swift/linux/libswiftCore.so)
PYVENV     := .build/pyvenv
# Home Assistant for the discovery test: outside the clone, made once per machine (~3 min).
HA_VENV    ?= $(HOME)/.cache/healthgate/ha-2024.3.3

.PHONY: run test test-deps deb test-deb test-asan test-release-asan test-tsan sanitized soak bench build deps pyclients homeassistant format check-format clean install uninstall fuzz

## Install the Debian packages that are missing (only those). A service a package starts and
## enables on install (a test server) is stopped and disabled again: the tests start their own.
deps:
	@missing=""; for p in $(DEB_PKGS); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing || exit 1; \
	  if [ -d /run/systemd/system ]; then for d in $(TEST_DAEMONS); do \
	    case " $$missing " in *" $$d "*) $(SUDO) systemctl disable --now -q $$d 2>/dev/null || true;; esac; done; \
	    case " $$missing " in *" rabbitmq-server "*) $(SUDO) systemctl disable --now -q epmd.socket epmd.service 2>/dev/null || true;; esac; fi; \
	fi
	@test -x "$(SWIFT)" || { echo "Swift 6 is needed (https://swift.org/install); not found as 'swift' or /opt/swift/usr/bin/swift"; exit 1; }

## What the tests, the benchmarks and the fuzzers need beside what running does.
test-deps:
	@$(MAKE) --no-print-directory deps DEB_PKGS="$(RUN_PKGS) $(TEST_PKGS) $(EXTRA_PKGS)"

## The code's layout, by the toolchain's swift-format and .swift-format: `make format` rewrites
## the files in place; `make check-format` (the first step of `make test`, so CI) fails on any
## file that `make format` would change, naming the file, line and what to change.
FORMAT_PATHS := Sources Tests Plugins Package.swift
format:
	$(SWIFT) format format --configuration .swift-format --in-place --recursive --parallel $(FORMAT_PATHS)
check-format:
	$(SWIFT) format lint --configuration .swift-format --strict --recursive --parallel $(FORMAT_PATHS)

## The release binary, with the Swift runtime linked in (--static-swift-stdlib): it runs on a
## machine without Swift, and is the one `make deb` packs.
build: deps
	$(SWIFT) build -c release --static-swift-stdlib --product healthgate

## Build and start the gateway on the embedded default (or CONFIG=file.yaml).
run: build
	$(BIN) serve $(if $(CONFIG),--config $(CONFIG),)

## The official InfluxDB client libraries (PyPI) that a test drives the influx receiver with,
## and schemathesis, which a test runs against the read API's OpenAPI document, in a venv of
## their own (installed when missing).
pyclients: test-deps
	@$(PYVENV)/bin/python -c "import influxdb_client, influxdb, schemathesis" 2>/dev/null || { \
	  echo "installing influxdb-client, influxdb and schemathesis into $(PYVENV)"; \
	  python3 -m venv $(PYVENV) && $(PYVENV)/bin/pip install -q influxdb-client influxdb schemathesis; }

## Home Assistant 2024.3.3 (PyPI) and its integrations' requirements, for the test where a real
## Home Assistant consumes healthgate's MQTT discovery (installed when missing).
homeassistant: test-deps
	@sh Tests/HomeAssistant/install.sh $(HA_VENV)

## Build and run every test (unit, live HTTP against `healthgate serve`, crash tests, real
## brokers, databases and Home Assistant).
## The tests' data dirs, servers and journals go into a directory of this run's own (TMPDIR),
## removed afterwards whatever the outcome: runs after runs do not fill /tmp. It is 0755 so that
## PostgreSQL, started as the postgres user when the tests run as root, can reach its own dirs.
## Tests/run.sh gives the run a deadline (TEST_TIMEOUT, 900 s by default): past it, it says which tests
## were still running and where they waited, and fails.
test: check-format test-deps pyclients homeassistant
	$(SWIFT) build -c release --static-swift-stdlib --product healthgate
	@tmp=$$(mktemp -d /tmp/healthgate-test.XXXXXX) && chmod 755 $$tmp && \
	HEALTHGATE_BIN=$(CURDIR)/$(BIN) HEALTHGATE_PYTHON=$(CURDIR)/$(PYVENV)/bin/python HEALTHGATE_HA_VENV=$(HA_VENV) \
	  TMPDIR=$$tmp bash Tests/run.sh $(SWIFT); status=$$?; rm -rf $$tmp; exit $$status
	@$(MAKE) --no-print-directory test-deb NO_BUILD=1
	python3 Tests/Release/swifterror-tailcalls.py $(BIN) $(SWIFT_RUNTIME)
	$(MAKE) --no-print-directory test-asan SAN_TESTS="$(SAN_IN_MAKE_TEST)" SAN_SERVE=debug
	$(MAKE) --no-print-directory test-release-asan

## The tests under a sanitizer: `make test-asan` (AddressSanitizer) and `make test-tsan`
## (ThreadSanitizer), built in .build/asan and .build/tsan, serve built with it too (release, so
## the largest bodies go through in time). Every report, the test process's and each serve's,
## goes to a file of the run (log_path) and fails the run, printed. LeakSanitizer is off (the
## Swift runtime keeps its caches to the end); what is not ours is suppressed in
## Tests/Sanitizers/, each with why. SAN_TESTS='--filter X' runs some; `make test` runs the suites
## that hold our parsers, codecs, journal, transforms and the sinks' C clients in-process under
## ASan (SAN_IN_MAKE_TEST), with a debug serve (built with the tests, no second build).
SAN_IN_MAKE_TEST := --filter '(FastJSONTests|YAMLConfigTests|HealthgateCoreTests|PipelineTests|CanonicalCodecTests|RecordTests|Syncky|OtherReceiversTests|IngestReceiverTests|HealthSyncReceiverTests|HostileStringsTests|TransformTests|StatefulTransformTests|FuzzCorpusTests|ConfigTests|HAStateBookTests|SinkComplianceTests)'
SAN_TESTS ?=
SAN_SERVE ?= release
## debug, or release: the tests and serve built as they ship (-c release, whole-module optimized;
## -enable-testing for the tests' @testable imports).
SAN_CONFIG ?= debug
SAN_BUILD = $(if $(filter release,$(SAN_CONFIG)),-c release -Xswiftc -enable-testing,)
## `make test-release-asan`: the suites of our own unsafe code (codecs, journal, drainers, the crash-loop
## guard, transforms, every sink's encoders and indexes, the point index's generated record sets) built
## with -c release under AddressSanitizer, in `make test`: the optimized code tested as it ships.
RELEASE_SAN_TESTS := --filter '(FastJSONTests|HealthgateCoreTests|PipelineTests|CanonicalCodecTests|RecordTests|TransformTests|HostileStringsTests|FuzzCorpusTests|SinkComplianceTests|HAStateBookTests|PointIndexStressTests|InfluxDBSinkTests|CrashLoopGuardTests|SynckyNativeTests)'
test-release-asan:
	@$(MAKE) --no-print-directory sanitized SAN=address SAN_DIR=asan-release SAN_CONFIG=release SAN_SERVE=release \
	  SAN_ENV=ASAN_OPTIONS SAN_OPTIONS='$(ASAN_OPTIONS_RUN)' SAN_TESTS="$(RELEASE_SAN_TESTS)"
ASAN_OPTIONS_RUN = detect_leaks=0:suppressions=$(CURDIR)/Tests/Sanitizers/asan.supp
TSAN_OPTIONS_RUN = suppressions=$(CURDIR)/Tests/Sanitizers/tsan.supp:halt_on_error=0
test-asan:
	@$(MAKE) --no-print-directory sanitized SAN=address SAN_DIR=asan SAN_ENV=ASAN_OPTIONS SAN_OPTIONS='$(ASAN_OPTIONS_RUN)'
test-tsan:
	@$(MAKE) --no-print-directory sanitized SAN=thread SAN_DIR=tsan SAN_ENV=TSAN_OPTIONS SAN_OPTIONS='$(TSAN_OPTIONS_RUN)'
sanitized: test-deps pyclients homeassistant
	$(SWIFT) build $(SAN_BUILD) --build-tests --scratch-path .build/$(SAN_DIR) --sanitize $(SAN)
	$(if $(and $(filter release,$(SAN_SERVE)),$(filter debug,$(SAN_CONFIG))),$(SWIFT) build -c release --scratch-path .build/$(SAN_DIR) --sanitize $(SAN) --product healthgate)
	@tmp=$$(mktemp -d /tmp/healthgate-test.XXXXXX) && chmod 755 $$tmp && \
	$(SAN_ENV)="$(SAN_OPTIONS):log_path=$$tmp/sanitizer-report" HEALTHGATE_SANITIZER=$(SAN) \
	HEALTHGATE_BIN=$(CURDIR)/.build/$(SAN_DIR)/$(SAN_SERVE)/healthgate HEALTHGATE_TESTSERVE_BIN=$(CURDIR)/.build/$(SAN_DIR)/$(SAN_CONFIG)/healthgate-testserve \
	HEALTHGATE_PYTHON=$(CURDIR)/$(PYVENV)/bin/python HEALTHGATE_HA_VENV=$(HA_VENV) \
	TEST_BUILD_OPTIONS="$(SAN_BUILD) --scratch-path .build/$(SAN_DIR) --sanitize $(SAN)" \
	  TMPDIR=$$tmp bash Tests/run.sh $(SWIFT) --skip-build $(SAN_TESTS); status=$$?; \
	reports=$$(ls $$tmp/sanitizer-report.* 2>/dev/null); \
	if [ -n "$$reports" ]; then echo "=== $(SAN) sanitizer reports:"; cat $$reports | head -300; status=1; fi; \
	rm -rf $$tmp; exit $$status

## The benchmark suite (Sources/Bench/Suite.swift): every sink (file, InfluxDB, PostgreSQL, MQTT,
## each a real server on loopback) x bodies of 10 KB, 100 KB and 1 MB x 1, 8 and 64 senders, each
## beside its server's own ceiling measured in the same run; prints one markdown table (and writes
## it to .build/bench-table.md), with the machine and the targets met. BENCH_README=1 puts the table
## into docs/benchmarks.md; BENCH_ARGS narrows it (--sinks file,mqtt --bodies 100KB --senders 8 --seconds 5).
## One run by hand: .build/release/healthgate-bench [--influx|--mqtt|--postgres] [--connections N] ...
## FLUENT_BIT=/path/to/fluent-bit adds ingest side by side with it under wrk (Sources/Bench/SideBySide.swift).
BENCH_ARGS ?=
FLUENT_BIT ?=
bench: build
	@$(MAKE) --no-print-directory test-deps EXTRA_PKGS=wrk
	$(SWIFT) build -c release --product healthgate-bench
	.build/release/healthgate-bench --healthgate $(BIN) --suite --table .build/bench-table.md \
	  $(if $(BENCH_README),--readme docs/benchmarks.md) $(if $(FLUENT_BIT),--fluent-bit $(FLUENT_BIT)) $(BENCH_ARGS)

## An hour (SOAK_SECONDS) of mixed traffic from several senders into the file, influxdb and mqtt
## sinks while influxd and mosquitto go down and come back and healthgate is restarted; checks that
## RSS and open descriptors stay flat and that every acknowledged sample arrived (Sources/Bench/Soak.swift).
## Not in CI.
SOAK_SECONDS ?= 3600
soak: build test-deps
	$(SWIFT) build -c release --product healthgate-bench
	.build/release/healthgate-bench --healthgate $(BIN) --soak $(SOAK_SECONDS)

## Fuzzing: every parser a stranger reaches (Sources/Fuzz/Targets), under libFuzzer and
## AddressSanitizer, each target for FUZZ_SECONDS from its committed corpus (Tests/Fuzz/corpus);
## fails on any finding and says where its reproducer is (Tests/Fuzz/run.sh). Not part of `make test`,
## which runs the corpora and the findings through the same targets without libFuzzer.
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?= syncky-native syncky-csv syncky-influx influx hae ingest healthsync headers config
## swiftc keeps only the last -sanitize= flag and SwiftPM passes its two in either order: the
## combined -Xswiftc flag comes after them (SwiftPM's own are kept for its fuzzer link and C targets).
fuzz: test-deps
	$(SWIFT) build --scratch-path .build/fuzz --sanitize fuzzer --sanitize address -Xswiftc -sanitize=fuzzer,address -Xswiftc -DFUZZING --product healthgate-fuzz
	bash Tests/Fuzz/run.sh .build/fuzz/debug/healthgate-fuzz $(FUZZ_SECONDS) $(FUZZ_TARGETS)

## Install where a Debian admin expects it: the binary in $(PREFIX)/bin, the systemd unit in
## $(PREFIX)/lib/systemd/system (pointing at that binary), the example config and the contrib
## files in $(PREFIX)/share/healthgate, the system user healthgate (sysusers.d) and /etc/healthgate
## (root:healthgate 0750) for your config, never overwritten.
## DESTDIR is honoured (packaging, tests); NO_BUILD=1 installs the release binary as it is.
PREFIX     ?= /usr/local
DESTDIR    ?=
UNITDIR    ?= $(PREFIX)/lib/systemd/system
SHAREDIR   := $(PREFIX)/share/healthgate
# The user the unit runs as and the group that may read /etc/healthgate (tests use their own).
SERVICE_USER  ?= healthgate
SERVICE_GROUP ?= healthgate
install: $(if $(NO_BUILD),,build)
	@test -x $(BIN) || { echo "no $(BIN): run make build first"; exit 1; }
	install -D -m 0755 $(BIN) $(DESTDIR)$(PREFIX)/bin/healthgate
	install -d -m 0755 $(DESTDIR)$(UNITDIR)
	sed 's|^ExecStart=/usr/local/bin/healthgate |ExecStart=$(PREFIX)/bin/healthgate |' contrib/systemd/healthgate.service \
	  > $(DESTDIR)$(UNITDIR)/healthgate.service && chmod 0644 $(DESTDIR)$(UNITDIR)/healthgate.service
	install -D -m 0644 config.example.yaml $(DESTDIR)$(SHAREDIR)/config.example.yaml
	for f in contrib/configs/*.yaml contrib/caddy/Caddyfile contrib/grafana/*.json; do \
	  install -D -m 0644 $$f $(DESTDIR)$(SHAREDIR)/$$f; done
	install -D -m 0644 contrib/systemd/healthgate.sysusers $(DESTDIR)$(PREFIX)/lib/sysusers.d/healthgate.conf
	@if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" = 0 ] && ! getent passwd $(SERVICE_USER) >/dev/null; then \
	  echo "making the system user $(SERVICE_USER)"; systemd-sysusers $(PREFIX)/lib/sysusers.d/healthgate.conf; fi
	install -d -m 0750 $(DESTDIR)/etc/healthgate
	@if [ "$$(id -u)" = 0 ] && getent group $(SERVICE_GROUP) >/dev/null; then chgrp $(SERVICE_GROUP) $(DESTDIR)/etc/healthgate; \
	else echo "note: /etc/healthgate is not in the group $(SERVICE_GROUP): the service cannot read it until it is (chgrp $(SERVICE_GROUP))"; fi

## The Debian package: healthgate_<version>_<arch>.deb in DEB_OUT (packaging/deb/build.sh): the
## release binary, its Depends: from dpkg-shlibdeps, the systemd unit and its user, the docs and
## contrib files, a man page and bash completion made from the commands' own help.
DEB_VERSION ?= $(shell sed -n 's/.*static let version = "\(.*\)"/\1/p' Sources/HealthgateCore/Version.swift)
DEB_OUT     ?= .build/deb
deb: $(if $(NO_BUILD),,build)
	@$(MAKE) --no-print-directory deps DEB_PKGS="$(RUN_PKGS) $(DEB_BUILD_PKGS)"
	@sh packaging/deb/build.sh $(BIN) $(DEB_VERSION) $(DEB_OUT)

## The package tested for real (Tests/Deb/run.sh): installed by apt in a fresh Debian 12 root
## made by debootstrap, checked, serving a Syncky delivery, upgraded to a newer build, removed
## and purged. Part of `make test`; needs root (sudo otherwise) and Debian's mirror.
test-deb: $(if $(NO_BUILD),,build)
	@$(MAKE) --no-print-directory test-deps
	@sh packaging/deb/build.sh $(BIN) $(DEB_VERSION) $(DEB_OUT)/old > /dev/null
	@sh packaging/deb/build.sh $(BIN) $(DEB_VERSION)+1 $(DEB_OUT)/new > /dev/null
	$(SUDO) bash Tests/Deb/run.sh $(DEB_OUT)/old/healthgate_$(DEB_VERSION)_*.deb $(DEB_OUT)/new/healthgate_$(DEB_VERSION)+1_*.deb

## Remove what `make install` put in place (not /etc/healthgate, which holds your config).
uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/healthgate $(DESTDIR)$(UNITDIR)/healthgate.service $(DESTDIR)$(PREFIX)/lib/sysusers.d/healthgate.conf
	rm -rf $(DESTDIR)$(SHAREDIR)
	-rmdir $(DESTDIR)/etc/healthgate 2>/dev/null

clean:
	rm -rf .build
