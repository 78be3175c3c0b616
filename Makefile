# meshtrain: the two commands a newcomer types are `make demo` and `make test`.
# Each installs missing Debian packages, configures and builds first.
# (A cluster without root builds with CMake alone: see README, "Building on a cluster".)
BUILD ?= build
JOBS  ?= $(shell nproc)
NP    ?= 8
.PHONY: deps build audit test demo bench clean

deps:
	@scripts/install-deps

# Developer builds are for this machine: -march=native.
build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DMESHTRAIN_NATIVE=ON >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

# Every Debian package the build uses must be one scripts/install-deps installs.
audit: build
	@scripts/audit-deps $(BUILD)

test: build audit
	cd $(BUILD) && ctest --output-on-failure -j 1

demo: build
	@scripts/demo

bench: build
	@scripts/install-deps --bench
	@scripts/bench

clean:
	rm -rf $(BUILD)
