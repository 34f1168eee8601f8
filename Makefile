# gangq — hand-written Makefile. `make run` and `make test` are the two commands.
# Sources are discovered per module: add a .c file to a module folder and it is built.

CC      ?= cc
PKGS    := libcurl libcjson sqlite3 yaml-0.1 zlib cmocka
CFLAGS_BASE := -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -Wshadow -Wformat=2 -g -MMD -MP \
               -iquote . -iquote common -iquote api -iquote controller -iquote controller/scheduler \
               -iquote controller/kube -iquote controller/sim -iquote controller/plugin -iquote store
OPT     ?= -O2
# Recursive (=) so they are read after scripts/deps.sh has installed what was missing.
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   = $(shell pkg-config --libs libcurl libcjson sqlite3 yaml-0.1 zlib openssl 2>/dev/null) -lev -lm
CFLAGS  = $(CFLAGS_BASE) $(OPT) $(PKG_CFLAGS) $(EXTRA_CFLAGS)
LDFLAGS += $(EXTRA_LDFLAGS)

BUILD   ?= build
LIB_SRC := $(wildcard common/*.c api/*.c store/*.c controller/scheduler/*.c \
             controller/kube/*.c controller/sim/*.c controller/plugin/*.c controller/*.c)
LIB_SRC := $(filter-out controller/main.c,$(LIB_SRC))
LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/%.o)
UNIT_SRC := $(wildcard tests/unit/test_*.c)
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)
TOOL_SRC := $(wildcard tests/tools/*.c)
TOOL_BIN := $(TOOL_SRC:tests/tools/%.c=$(BUILD)/tools/%)

.SECONDARY:
.PHONY: all deps deps-build run test unit asan integration fuzz image-test bench clean install
all: deps $(BUILD)/gangq $(UNIT_BIN) $(TOOL_BIN)

deps: deps-build
	@scripts/deps.sh

deps-build:
	@scripts/deps.sh build

$(BUILD)/%.o: %.c | deps-build
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/libgangq.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/gangq: $(BUILD)/controller/main.o $(BUILD)/libgangq.a
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(PKG_LIBS)

$(BUILD)/tests/%: $(BUILD)/tests/unit/%.o $(BUILD)/libgangq.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(PKG_LIBS) -lcmocka

$(BUILD)/tools/%: $(BUILD)/tests/tools/%.o $(BUILD)/libgangq.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(PKG_LIBS)

# gangq and the kubectl plugin (`kubectl gangq`: a kubectl-gangq symlink to gangq).
PREFIX  ?= /usr/local
install: $(BUILD)/gangq
	install -d $(DESTDIR)$(PREFIX)/bin
	install -m 0755 $(BUILD)/gangq $(DESTDIR)$(PREFIX)/bin/gangq
	ln -sf gangq $(DESTDIR)$(PREFIX)/bin/kubectl-gangq

# The main job: simulate the sample cluster and trace, print the report.
run: all
	$(BUILD)/gangq simulate examples/sim/cluster.yaml examples/sim/trace.yaml --out $(BUILD)/run

unit: all
	@tests/run-unit.sh $(BUILD)

asan:
	@$(MAKE) --no-print-directory BUILD=build-asan OPT=-O1 \
	  EXTRA_CFLAGS="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all" \
	  EXTRA_LDFLAGS="-fsanitize=address,undefined" all
	@ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  tests/run-unit.sh build-asan

fuzz: deps
	@tests/fuzz/run.sh

integration: all
	@tests/k8s/run.sh $(BUILD)

# The controller image: build deploy/Dockerfile with buildah on a Debian 12 base bootstrapped
# by mmdebstrap (cached in ~/.cache/gangq/) and run its controller against the test API server.
# buildah and mmdebstrap are installed first (scripts/deps.sh image; apt-get, as root).
image-test:
	@scripts/deps.sh image
	@deploy/test-image.sh

# Every suite: unit tests, the same under ASan+UBSan, fuzz smoke, the integration tests
# against a real kube-apiserver + etcd, then the image test (its tools installed as for
# image-test; it needs root for rootful buildah: run by another user it prints
# `image-test: SKIPPED (reason: not root ...)`).
test: all
	@tests/run-unit.sh $(BUILD)
	@$(MAKE) --no-print-directory asan
	@$(MAKE) --no-print-directory fuzz
	@$(MAKE) --no-print-directory integration
	@scripts/deps.sh image
	@deploy/test-image.sh --skip-if-missing

# Benchmarks (not tests): the core's cycle, the store, the pod cache's memory, the openb
# FGD replay, kubectl apply of 1,000 GPUJobs and the controller's RSS with 10,000 pods
# against the real API server.
# The openb trace folder (csv of Alibaba's cluster-trace-gpu-v2023 plus the paper's
# published means, fgd_unallocated_at_arrived100.csv); override with OPENB_TRACES=DIR.
OPENB_TRACES ?= ../shared/traces/openb

bench: all
	$(BUILD)/gangq bench sched
	$(BUILD)/gangq bench store
	$(BUILD)/gangq bench cache
	$(BUILD)/gangq bench reconcile
	$(BUILD)/gangq simulate --openb all --seeds 42-51 --traces $(OPENB_TRACES)
	GQ_TEST_TIMEOUT=900 tests/k8s/run.sh $(BUILD) bench_apply
	GQ_TEST_TIMEOUT=900 tests/k8s/run.sh $(BUILD) bench_cache_rss
# Kueue's baseline scheduler benchmark (15,000 GPUJobs; BENCH_SCALE=0.1 for a quick run) and
# streaming throughput against kube-scheduler (built once by tests/k8s/build-scheduler.sh).
	GQ_TEST_TIMEOUT=2700 tests/k8s/run.sh $(BUILD) bench_kueue
	GQ_TEST_TIMEOUT=1800 tests/k8s/run.sh $(BUILD) bench_stream
# knavigator's gang-scheduling burst (53 jobs of 1-32 whole nodes on 32 nodes; about 5 minutes).
	GQ_TEST_TIMEOUT=900 tests/k8s/run.sh $(BUILD) bench_gang
# knavigator's backfill burst (340 CPU-only jobs of 3 sizes on 10 nodes; about 10 minutes).
	GQ_TEST_TIMEOUT=1200 tests/k8s/run.sh $(BUILD) bench_backfill

clean:
	rm -rf build build-asan build-fuzz

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
