# A thin wrapper around CMake, in the spirit of Neovim's top-level Makefile.
#   make demo     install missing Debian packages, build, run the main job on the default example
#   make test     the same set-up, then every test through ctest
#   make test-sanitize   the tests again, built with AddressSanitizer + UBSan
#   make bench    print speed figures
#   make install  cmake --install (PREFIX=/usr/local by default)
BUILD_DIR    ?= build
SANITIZE_DIR ?= build-sanitize
PREFIX       ?= /usr/local
CMAKE        ?= cmake
CTEST        ?= ctest
JOBS         ?= $(shell nproc 2>/dev/null || echo 2)

# Everything ndplan needs, from Debian 12's archive. lua5.4 is listed in the same install as
# lua-busted so apt does not pull in lua5.2 to satisfy busted's "lua" dependency.
DEB_PACKAGES = cmake make gcc pkg-config lua5.4 liblua5.4-dev lua-lpeg lua-lpeg-dev \
               libyaml-dev lua-cjson lua-cjson-dev lua-busted libedit-dev help2man

.PHONY: all deps configure build demo test test-sanitize install bench clean

all: build

# Installs what is missing with apt-get when root; otherwise prints the one line to run.
deps:
	@missing=""; \
	for p in $(DEB_PACKAGES); do \
	  dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'install ok installed' \
	    || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "installing Debian packages:$$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	  else \
	    echo "ndplan needs these Debian packages; run this, then make again:"; \
	    echo "  sudo apt-get install -y$$missing"; \
	    exit 1; \
	  fi; \
	fi

# deps is order-only: under `make -j` it must finish (pkg-config, lua5.4-dev in place) before
# CMake configures, not run beside it.
$(BUILD_DIR)/CMakeCache.txt: | deps
	$(CMAKE) -S . -B $(BUILD_DIR) -DCMAKE_INSTALL_PREFIX=$(PREFIX)

configure: deps $(BUILD_DIR)/CMakeCache.txt

build: configure
	$(CMAKE) --build $(BUILD_DIR) -j $(JOBS)

# The build goes to a log (its last lines on failure); then three commands, each echoed as you
# would type it, and what their output shows.
DEMO = $(BUILD_DIR)/ndplan
demo: deps
	@echo "building $(DEMO) (log: $(BUILD_DIR)/build.log) ..."
	@mkdir -p $(BUILD_DIR); \
	  { [ -f $(BUILD_DIR)/CMakeCache.txt ] || $(CMAKE) -S . -B $(BUILD_DIR) -DCMAKE_INSTALL_PREFIX=$(PREFIX); } \
	    > $(BUILD_DIR)/build.log 2>&1 && $(CMAKE) --build $(BUILD_DIR) -j $(JOBS) >> $(BUILD_DIR)/build.log 2>&1 \
	  || { tail -30 $(BUILD_DIR)/build.log; echo "build failed: see $(BUILD_DIR)/build.log"; exit 1; }
	@echo
	@echo '$$ $(DEMO) info --model llama3.1-70b'
	@$(DEMO) info --model llama3.1-70b
	@echo
	@echo '$$ $(DEMO) estimate -m llama3.1-70b -A h100 -d 64 -b 512 --seq-len 8192 --tp 8 --pp 4 --sp --zero 1 --recompute selective'
	@$(DEMO) estimate --model llama3.1-70b --device-type h100 --devices 64 \
	  --global-batch-size 512 --seq-len 8192 --tp 8 --pp 4 --sp --zero 1 --recompute selective
	@echo
	@echo '$$ $(DEMO) search -m llama3.1-70b -A h100 -d 64 -b 512 --seq-len 8192 --recompute auto --top 10'
	@$(DEMO) search --model llama3.1-70b --device-type h100 --devices 64 \
	  --global-batch-size 512 --seq-len 8192 --recompute auto --top 10
	@echo
	@echo "What this shows: Llama-3.1-70B's layers and parameters (info); one strategy on 64 H100"
	@echo "(TP 8 x PP 4 x DP 2, sequence parallel, ZeRO-1, selective recompute) priced with its"
	@echo "memory per pipeline stage against the 79.6 GiB budget and its step-time parts (estimate);"
	@echo "and the 10 fastest strategies that fit, out of every one tried, with why the rest were"
	@echo "refused (search). Try next:"
	@printf '  %-32s # %s\n' "$(DEMO) search ... -o out/" "out/report.html: charts and tables" \
	  "$(DEMO) --help" "every command (COMMAND --help for each)" \
	  "$(DEMO)" "the Lua REPL: help() lists its topics" \
	  "make install" "ndplan on your PATH (PREFIX=$(PREFIX))"

# ctest lists a spec file that skipped tests (SKIP_RETURN_CODE) as "Skipped"; test_summary.sh
# then names each skipped test and why.
test: build
	@status=0; $(CTEST) --test-dir $(BUILD_DIR) --output-on-failure -j $(JOBS) || status=$$?; \
	  sh spec/support/test_summary.sh $(BUILD_DIR); exit $$status

test-sanitize: deps
	$(CMAKE) -S . -B $(SANITIZE_DIR) -DNDPLAN_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug
	$(CMAKE) --build $(SANITIZE_DIR) -j $(JOBS)
	@status=0; ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  $(CTEST) --test-dir $(SANITIZE_DIR) --output-on-failure -j $(JOBS) || status=$$?; \
	  sh spec/support/test_summary.sh $(SANITIZE_DIR); exit $$status

# Speed figures (benchmarks, not tests): estimates per second per core; the search against
# issue 18's targets (BENCH_ARGS=exhaustive: also with every bound off, the figures before),
# beside -j 2 a cache line's round trip between two processors (spec/bench/pingpong.c);
# search -o DIR against the search alone.
bench: build
	$(BUILD_DIR)/ndplan spec/bench/estimate_bench.lua
	NDPLAN_PINGPONG=$(BUILD_DIR)/spec/bench_pingpong $(BUILD_DIR)/ndplan spec/bench/search_bench.lua $(BENCH_ARGS)
	$(BUILD_DIR)/ndplan spec/bench/output_bench.lua

install: build
	$(CMAKE) --install $(BUILD_DIR)

clean:
	rm -rf $(BUILD_DIR) $(SANITIZE_DIR)

# libFuzzer harnesses (spec/fuzz/): clang builds them in FUZZ_DIR; each runs FUZZ_SECONDS on a
# fresh copy of its seed corpus (spec/fuzz/corpus stays as committed). Any crash, sanitizer report
# or timeout fails the target; the input is left in $(FUZZ_DIR)/artifacts.
FUZZ_DIR      ?= build-fuzz
FUZZ_SECONDS  ?= 10
FUZZERS        = fuzz_estimate fuzz_yaml fuzz_hfconfig fuzz_grammar fuzz_policy
FUZZ_PACKAGES  = clang libclang-rt-14-dev

.PHONY: deps-fuzz fuzz

deps-fuzz:
	$(MAKE) --no-print-directory deps DEB_PACKAGES="$(DEB_PACKAGES) $(FUZZ_PACKAGES)"

fuzz: deps-fuzz
	CC=clang $(CMAKE) -S . -B $(FUZZ_DIR) -DNDPLAN_FUZZ=ON -DBUILD_TESTING=OFF
	$(CMAKE) --build $(FUZZ_DIR) --target fuzzers -j $(JOBS)
	@set -e; mkdir -p $(FUZZ_DIR)/artifacts; \
	for f in $(FUZZERS); do \
	  rm -rf $(FUZZ_DIR)/corpus/$$f; mkdir -p $(FUZZ_DIR)/corpus/$$f; \
	  cp spec/fuzz/corpus/$$f/* $(FUZZ_DIR)/corpus/$$f/; \
	  dict=; if [ -f spec/fuzz/$$f.dict ]; then dict=-dict=spec/fuzz/$$f.dict; fi; \
	  echo "fuzz: $$f for $(FUZZ_SECONDS) s"; \
	  if ! $(FUZZ_DIR)/spec/fuzz/$$f $$dict -max_total_time=$(FUZZ_SECONDS) -timeout=10 \
	       -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix=$(FUZZ_DIR)/artifacts/$$f- \
	       $(FUZZ_DIR)/corpus/$$f > $(FUZZ_DIR)/$$f.log 2>&1; then \
	    tail -60 $(FUZZ_DIR)/$$f.log; \
	    echo "fuzz: $$f failed; input in $(FUZZ_DIR)/artifacts, log $(FUZZ_DIR)/$$f.log"; \
	    exit 1; \
	  fi; \
	  grep -E '^(Done|stat::number_of_executed_units|stat::peak_rss_mb)' $(FUZZ_DIR)/$$f.log; \
	done

# Chromium, for the spec that renders report.html headless to PNG (spec/cli/report_spec.lua
# skips that test, with a message, where no chromium is installed).
BROWSER_PACKAGES = chromium

.PHONY: deps-browser

deps-browser:
	$(MAKE) --no-print-directory deps DEB_PACKAGES="$(DEB_PACKAGES) $(BROWSER_PACKAGES)"

# A search (threads, policies off), an estimate with per-layer recompute and a recompute
# plan under valgrind memcheck: any error or leak fails the target.
VALGRIND = valgrind --error-exitcode=9 --leak-check=full \
           --show-leak-kinds=definite,indirect,possible \
           --errors-for-leak-kinds=definite,indirect,possible -q

.PHONY: deps-valgrind valgrind

deps-valgrind:
	$(MAKE) --no-print-directory deps DEB_PACKAGES="$(DEB_PACKAGES) valgrind"

valgrind: deps-valgrind build
	$(VALGRIND) $(BUILD_DIR)/ndplan search -m llama3.1-8b -A h100 -d 16 -b 64 --seq-len 4096 \
	  -j 2 --recompute auto --top 3 -o $(BUILD_DIR)/valgrind-out --export all > /dev/null
	$(VALGRIND) $(BUILD_DIR)/ndplan estimate -m deepseek-v3 -A h800 -d 2048 -b 15360 \
	  --seq-len 4096 --pp 16 --ep 64 --zero 1 --recompute per_layer -M 58GB --layout balanced > /dev/null
	$(VALGRIND) $(BUILD_DIR)/ndplan recompute -m llama3.1-8b -A h100 -d 8 -b 64 --seq-len 8192 \
	  --tp 2 --pp 4 --mbs 2 -M 40GiB --steps 3 > /dev/null
	@echo "valgrind: no errors, no leaks"
