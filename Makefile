# gapmirror builds static (CGO_ENABLED=0) with containers/image's pure-Go
# OpenPGP and without the storage and docker-daemon transports. EXTRA_TAGS adds
# to them: gapmirror_gcs for serve on Google Cloud Storage (docs/serve.md).
EXTRA_TAGS ?=
TAGS    := containers_image_openpgp containers_image_storage_stub containers_image_docker_daemon_stub
TAGS    += $(EXTRA_TAGS)
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse HEAD 2>/dev/null)
# The commit's date, not the clock's, so that a rebuild is byte-identical.
DATE    ?= $(shell TZ=UTC git log -1 --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ 2>/dev/null | sed 's/^$$/unknown/' || echo unknown)
LDFLAGS := -s -w -X main.version=$(VERSION) -X main.commit=$(COMMIT) -X main.buildDate=$(DATE)
GO      := CGO_ENABLED=0 go
BIN     := bin/gapmirror
# The release's two executables (companion/companion.go): gapmirror without
# the registry server and Helm's engine (half the memory at start), and
# gapmirror-full, the whole program, which gapmirror runs for serve and to
# render charts.
LEAN    := gapmirror_lean

.PHONY: build test test-long fuzz demo bench bench-scale bench-mixed bench-wan bench-referrers bench-serve-s3 lint clean opm dist exports

build:
	$(GO) build -tags "$(TAGS) $(LEAN)" -trimpath -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/gapmirror
	$(GO) build -tags "$(TAGS)" -trimpath -ldflags "$(LDFLAGS)" -o $(BIN)-full ./cmd/gapmirror

# Release archives: dist/gapmirror-<version>-<os>-<arch>.tar.gz (the two
# static executables, README and docs) and dist/SHA256SUMS for `sha256sum -c`.
DIST_PLATFORMS := linux/amd64 linux/arm64 darwin/arm64
dist:
	rm -rf dist && mkdir -p dist
	set -e; for p in $(DIST_PLATFORMS); do \
		os=$${p%/*}; arch=$${p#*/}; name=gapmirror-$(VERSION)-$$os-$$arch; \
		mkdir -p dist/$$name; \
		GOOS=$$os GOARCH=$$arch $(GO) build -tags "$(TAGS) $(LEAN)" -trimpath -ldflags "$(LDFLAGS)" -o dist/$$name/gapmirror ./cmd/gapmirror; \
		GOOS=$$os GOARCH=$$arch $(GO) build -tags "$(TAGS)" -trimpath -ldflags "$(LDFLAGS)" -o dist/$$name/gapmirror-full ./cmd/gapmirror; \
		cp -r README.md docs dist/$$name/; \
		TZ=UTC tar -C dist --sort=name --owner=0 --group=0 --numeric-owner --mtime='$(DATE)' -cf - $$name | gzip -n > dist/$$name.tar.gz; \
		rm -rf dist/$$name; \
	done
	cd dist && sha256sum *.tar.gz > SHA256SUMS && sha256sum -c SHA256SUMS

# The test suite: unit tests and end-to-end runs against in-process registries on 127.0.0.1.
# The end-to-end tests mostly wait on their registries, so those safe to run
# together do (t.Parallel), 8 at a time; the rest run alone first.
test:
	@test -d ../shared/realdata || echo "note: ../shared/realdata is absent (shared workspace data, not in the repository): the tests on real catalogs and update channels skip; go test -v -run Real ./... names them"
	$(GO) test -tags "$(TAGS)" -count=1 -parallel 8 -timeout 15m ./...

# Scenarios that take minutes (tokens expiring mid-run), opted in.
test-long:
	GAPMIRROR_LONG_TESTS=1 $(GO) test -tags "$(TAGS)" -count=1 -timeout 30m -run 'TestExpiringTokens$$' ./cmd/gapmirror

# Native Go fuzzing of every parser of user and archive input, FUZZTIME per
# target, FUZZMINTIME for minimizing each new input. CI gives both as counts
# (FUZZTIME=20000x): a duration races the coordinator's own deadline on a
# loaded machine and fails with "context deadline exceeded" having found
# nothing (golang/go#51484). A crasher is saved under the package's
# testdata/fuzz/<target>; commit it, and make test replays it from then on.
FUZZTIME ?= 10m
FUZZMINTIME ?= 10s
FUZZ_TARGETS := \
	./imageset:FuzzParseImageSetConfiguration \
	./imageset:FuzzParseDeleteImageSetConfiguration \
	./imageset:FuzzUnmarshalSet \
	./archive:FuzzDecodeIndex \
	./archive:FuzzReadChunk \
	./imageset/catalog:FuzzLoadFS \
	./imageset/release:FuzzParseGraph \
	./imageset/release:FuzzSignature \
	./registryapi:FuzzAuthFiles
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; fn=$${t##*:}; echo "fuzzing $$fn in $$pkg for $(FUZZTIME)"; \
		$(GO) test -tags "$(TAGS)" -run '^$$' -fuzz "^$$fn$$" -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINTIME) $$pkg; \
	done

# Runs the three trips end to end on built-in example images, no internet needed.
demo: build
	$(GO) run -tags "$(TAGS)" ./internal/demo -gapmirror $(BIN)

# Throughput and rerun figures next to baselines measured in the same run.
bench: build
	$(GO) run -tags "$(TAGS)" ./bench -gapmirror $(BIN)

# Scenario D alone: 1,000 then 10,000 images through every trip (about 15 minutes on 2 cores).
bench-scale: build
	$(GO) run -tags "$(TAGS)" ./bench -gapmirror $(BIN) -scale 10000 -scale-only

# Scenario E alone: the issue's mixed workload of 735 images (operators from the real
# catalogs in ../shared/realdata, releases, additional images), 2 to 3 minutes on 2 quiet cores.
# MIRROR_STORAGE=memory keeps the mirror registries' storage in memory (docs/benchmarks.md, "Under a WAN").
MIRROR_STORAGE ?= disk
bench-mixed: build
	$(GO) run -tags "$(TAGS)" ./bench -gapmirror $(BIN) -mixed-only -mirror-storage $(MIRROR_STORAGE)

# Scenario E with its upstream behind a WAN of 40 ms per request and 200 Mbit/s shared, for
# the trips that read it (and skopeo): each trip's floors under it, and mirror-to-disk from a
# registries.conf insecure source next to the same with --src-tls-verify=false.
bench-wan: build
	$(GO) run -tags "$(TAGS)" ./bench -gapmirror $(BIN) -mixed-only -wan 40ms:200mbit -mirror-storage $(MIRROR_STORAGE)

# Scenario R alone: what OCI referrers cost upstream and at the mirror (under a minute).
bench-referrers: build
	$(GO) run -tags "$(TAGS)" ./bench -gapmirror $(BIN) -referrers 200

# Scenario F alone: disk-to-mirror into serve on the filesystem vs two replicas on
# S3-compatible object storage (gofakes3) with Redis, same run, as a ratio (under a minute).
bench-serve-s3: build
	$(GO) run -tags "$(TAGS)" ./bench -gapmirror $(BIN) -serve-s3 -images 20 -size 128MiB

# opm, the reference FBC implementation, as a test oracle and benchmark baseline.
# Built once from the separate module tools/opm (its own go.mod and go.sum,
# nothing in gapmirror's); make rebuilds it only when that module changes.
# About 4 minutes cold on 2 cores, seconds with a warm build cache.
OPM         := bin/opm
OPM_VERSION := v1.65.0
# What each package exports and who uses it (tools/exports, its own module): bin/exports.md.
exports:
	@mkdir -p bin
	cd tools/exports && $(GO) run . -dir ../.. -report ../../bin/exports.md
	@echo "bin/exports.md"

opm: $(OPM)

$(OPM): tools/opm/go.mod tools/opm/go.sum tools/opm/tools.go
	@grep -q 'operator-registry $(OPM_VERSION)$$' tools/opm/go.mod || { echo "tools/opm/go.mod does not pin operator-registry $(OPM_VERSION)"; exit 1; }
	cd tools/opm && $(GO) build -tags containers_image_openpgp -trimpath \
		-ldflags "-s -w -X github.com/operator-framework/operator-registry/cmd/opm/version.opmVersion=$(OPM_VERSION)" \
		-o $(CURDIR)/$(OPM).tmp github.com/operator-framework/operator-registry/cmd/opm
	mv $(OPM).tmp $(OPM)

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet -tags "$(TAGS)" ./...
	$(GO) vet -tags "$(TAGS) $(LEAN)" ./cmd/gapmirror ./companion ./imageset/helm ./sections

clean:
	rm -rf bin dist
