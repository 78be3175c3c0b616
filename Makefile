# meshtrain: the two commands a newcomer types are `make demo` and `make test`.
# Each installs missing Debian packages, configures and builds first.
# (A cluster without root builds with CMake alone: see README, "Building on a cluster".)
BUILD ?= build
JOBS  ?= $(shell nproc)
NP    ?= 8
FUZZ_SECONDS ?= 60
RUNS  ?= 1800
SEED  ?= 1
FUZZ_KINDS := token_file model_json system_json csv public_runs checkpoint_metadata
.PHONY: deps build audit test demo bench sanitize fuzz fuzz-build mutation clean

deps:
	@scripts/install-deps

# Developer builds are for this machine: -march=native, warnings as errors.
build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DMESHTRAIN_NATIVE=ON -DMESHTRAIN_WERROR=ON >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

# Every Debian package the build uses must be one scripts/install-deps installs.
audit: build
	@scripts/audit-deps $(BUILD)

# The tests include short seeded libFuzzer runs: clang and libFuzzer are
# installed for them (scripts/install-deps --fuzz).
test: build audit
	@scripts/install-deps --fuzz
	@$(MAKE) --no-print-directory fuzz-build
	cd $(BUILD) && ctest --output-on-failure -j 1

demo: build
	@scripts/demo

bench: build
	@scripts/install-deps --bench
	@scripts/bench

# The unit tests (and the short mutation run) built with AddressSanitizer
# and UndefinedBehaviorSanitizer. (Host code only: the sanitizers do not
# instrument GPU kernels, so this build leaves the CUDA backend out.)
# allocator_may_return_null: an allocation too large to serve fails as
# without the sanitizer (the tests check its one-line message).
sanitize: deps
	@cmake -S . -B $(BUILD)-asan -DCMAKE_BUILD_TYPE=Release -DMESHTRAIN_SANITIZE=ON -DMESHTRAIN_CUDA=OFF >/dev/null
	@ASAN_OPTIONS=detect_leaks=0 cmake --build $(BUILD)-asan -j $(JOBS)
	cd $(BUILD)-asan && ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --output-on-failure -j 1 -L 'unit|fuzz'

# libFuzzer over each reader of untrusted input for FUZZ_SECONDS each
# (clang, ASan + UBSan), from the committed corpus and regressions; new
# inputs go to $(BUILD)-fuzz/corpus, findings to $(BUILD)-fuzz/crash-*.
fuzz: deps
	@scripts/install-deps --fuzz
	@$(MAKE) --no-print-directory fuzz-build
	@for k in $(FUZZ_KINDS); do mkdir -p $(BUILD)-fuzz/corpus/$$k; \
	  $(BUILD)-fuzz/fuzz/fuzz_$$k -max_total_time=$(FUZZ_SECONDS) \
	    -artifact_prefix=$(BUILD)-fuzz/crash-$$k- $(BUILD)-fuzz/corpus/$$k fuzz/corpus/$$k fuzz/regressions/$$k \
	    || exit 1; done

# The libFuzzer targets (whose short seeded runs make test includes), when
# clang and libFuzzer are installed; otherwise those tests say they are skipped.
fuzz-build:
	@if command -v clang++ >/dev/null && ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1; then \
	  cmake -S . -B $(BUILD)-fuzz -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=Release -DMESHTRAIN_FUZZ=ON \
	    -DMESHTRAIN_CUDA=OFF >/dev/null && \
	  cmake --build $(BUILD)-fuzz -j $(JOBS) --target $(addprefix fuzz_,$(FUZZ_KINDS)); \
	else echo "fuzz-build: clang or libFuzzer absent (scripts/install-deps --fuzz): the libFuzzer tests are skipped"; fi

# The long seeded mutation run: RUNS runs of the binary on mutated inputs.
mutation: build
	$(BUILD)/fuzz/mutation_run --corpus fuzz/corpus --regressions fuzz/regressions --seed $(SEED) \
	  --in-process 20000 --binary $(BUILD)/meshtrain --runs $(RUNS) --jobs 2 --keep $(BUILD)/mutation-defects

clean:
	rm -rf $(BUILD) $(BUILD)-asan $(BUILD)-fuzz
