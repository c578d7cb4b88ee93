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
               libyaml-dev lua-cjson lua-cjson-dev lua-busted libedit-dev

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

$(BUILD_DIR)/CMakeCache.txt:
	$(CMAKE) -S . -B $(BUILD_DIR) -DCMAKE_INSTALL_PREFIX=$(PREFIX)

configure: deps $(BUILD_DIR)/CMakeCache.txt

build: configure
	$(CMAKE) --build $(BUILD_DIR) -j $(JOBS)

demo: build
	$(BUILD_DIR)/ndplan info --model llama3.1-70b
	@echo
	$(BUILD_DIR)/ndplan estimate --model llama3.1-70b --device-type h100 --devices 64 \
	  --global-batch-size 512 --seq-len 8192 --tp 8 --pp 4 --sp --zero 1 --recompute selective

test: build
	$(CTEST) --test-dir $(BUILD_DIR) --output-on-failure -j $(JOBS)

test-sanitize: deps
	$(CMAKE) -S . -B $(SANITIZE_DIR) -DNDPLAN_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug
	$(CMAKE) --build $(SANITIZE_DIR) -j $(JOBS)
	ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  $(CTEST) --test-dir $(SANITIZE_DIR) --output-on-failure -j $(JOBS)

# Speed figures (benchmarks, not tests): estimates per second per core.
bench: build
	$(BUILD_DIR)/ndplan spec/bench/estimate_bench.lua

install: build
	$(CMAKE) --install $(BUILD_DIR)

clean:
	rm -rf $(BUILD_DIR) $(SANITIZE_DIR)
