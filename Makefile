# meshtrain: the two commands a newcomer types are `make demo` and `make test`.
# Each installs missing Debian packages, configures and builds first.
BUILD ?= build
JOBS  ?= $(shell nproc)
NP    ?= 8
.PHONY: deps build test demo bench clean

deps:
	@scripts/install-deps

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

test: build
	cd $(BUILD) && ctest --output-on-failure -j 1

demo: build
	@scripts/demo

bench: build
	@scripts/install-deps --bench
	@scripts/bench

clean:
	rm -rf $(BUILD)
