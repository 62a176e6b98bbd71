# The README's commands. Everything the tests need is installed by scripts/testbed.
GO ?= go

.PHONY: build test demo testbed-up testbed-down bench

build:
	$(GO) build -o bin/aegis ./cmd/aegis

# Brings up the real testbed, then gofmt, go vet and go test -race ./... (integration tests included).
test:
	scripts/test

# Runs the main job end to end on the testbed: pass, repair and halt on real requests.
demo: build
	scripts/demo

testbed-up:
	scripts/testbed up

testbed-down:
	scripts/testbed down

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...
