# aiqos — plain GNU Makefile, out-of-tree build in build/.
#   make                  build/bin/aiqos (plugin), aiqos-agent, aiqosctl
#   make test             everything CI runs (installs deps first)
#   make SANITIZE=address,undefined test
#   make lint / fmt / bench-cni / demo / clean

BUILD   ?= build
CC      ?= cc
PKGS_PLUGIN := libnl-3.0 libnl-route-3.0 libcjson
PKG_CONFIG  ?= pkg-config

CSTD    := -std=gnu11
WARN    := -Wall -Wextra -Wformat=2 -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
           -Wpointer-arith -Wcast-qual -Wwrite-strings -Wundef -Wvla -Wno-unused-parameter \
           -Wimplicit-fallthrough -Wnull-dereference
HARDEN  := -fstack-protector-strong -D_FORTIFY_SOURCE=2 -fPIE
OPT     ?= -O2 -g
ifeq ($(CI),true)
WARN    += -Werror
endif
ifneq ($(SANITIZE),)
OPT     := -O1 -g -fno-omit-frame-pointer -fsanitize=$(SANITIZE) -fno-sanitize-recover=all
LDSAN   := -fsanitize=$(SANITIZE)
HARDEN  := $(filter-out -D_FORTIFY_SOURCE=2,$(HARDEN))
endif
# Coverage for libFuzzer in every object of a `make fuzz` build (clang).
ifeq ($(FUZZING),1)
OPT     += -fsanitize=fuzzer-no-link
endif

PKG_CFLAGS := $(shell $(PKG_CONFIG) --cflags $(PKGS_PLUGIN) 2>/dev/null)
PLUGIN_LIBS := $(shell $(PKG_CONFIG) --libs $(PKGS_PLUGIN) 2>/dev/null)
# The agent adds these; only agent objects and agent binaries/tests use them.
PKGS_AGENT := libcurl libsystemd yaml-0.1 libmicrohttpd
AGENT_CFLAGS := $(shell $(PKG_CONFIG) --cflags $(PKGS_AGENT) 2>/dev/null)
AGENT_LIBS := $(shell $(PKG_CONFIG) --libs $(PKGS_AGENT) 2>/dev/null)

CFLAGS  ?=
CFLAGS  += $(CSTD) $(WARN) $(HARDEN) $(OPT) -MMD -MP -Ishared $(PKG_CFLAGS)
LDFLAGS += -pie -Wl,-z,relro,-z,now -Wl,--as-needed $(LDSAN)

SHARED_SRC := $(sort $(wildcard shared/*.c shared/tc/*.c))
# The BPF programs: restricted C, one file per program (shared/bpf/NAME.bpf.c),
# compiled for the BPF target and embedded in the binaries as libbpf
# skeletons ($(BUILD)/gen/NAME.skel.h, included by shared/bpf_NAME.c's
# loader); libbpf is linked statically, and only into what loads them (the
# agent, its tests), never the plugin.
BPF_SRC    := $(sort $(wildcard shared/bpf/*.bpf.c))
BPF_SKELS  := $(patsubst shared/bpf/%.bpf.c,$(BUILD)/gen/%.skel.h,$(BPF_SRC))
BPF_CLANG  ?= clang
BPFTOOL    ?= $(shell command -v bpftool 2>/dev/null || echo /usr/sbin/bpftool)
BPF_CFLAGS := -g -O2 -target bpf -mcpu=v2 -Wall -Wextra -Wno-unused-parameter \
              -I/usr/include/$(shell gcc -dumpmachine 2>/dev/null) -Ishared/bpf
ifeq ($(CI),true)
BPF_CFLAGS += -Werror
endif
BPF_LIBS   := -Wl,-Bstatic -lbpf -Wl,-Bdynamic -lelf -lz
CNI_SRC    := $(sort $(wildcard cni/*.c))
AGENT_SRC  := $(sort $(wildcard agent/*.c agent/*/*.c))
CTL_SRC    := $(filter agent/ctl/%,$(AGENT_SRC))
UNIT_SRC   := $(sort $(wildcard test/unit/test_*.c))
UNIT_HELPER_SRC := $(filter-out $(UNIT_SRC),$(wildcard test/unit/*.c))

obj = $(patsubst %.c,$(BUILD)/obj/%.o,$(1))

LIB        := $(BUILD)/lib/libaiqos.a
PLUGIN     := $(BUILD)/bin/aiqos
AGENT_BIN  := $(BUILD)/bin/aiqos-agent
CTL        := $(BUILD)/bin/aiqosctl
LOADGEN    := $(BUILD)/bench/loadgen
STANDIN    := $(BUILD)/test/cilium-standin
UNIT_BINS  := $(patsubst test/unit/%.c,$(BUILD)/test/%,$(UNIT_SRC))
# agent objects linked into unit tests (everything but the programs' main files)
AGENT_LIB_OBJ := $(call obj,$(filter-out agent/main.c $(CTL_SRC),$(AGENT_SRC)) cni/conf.c)

.SECONDARY:
.PHONY: standin all deps test test-unit test-integration test-kernel lint fmt fmt-check clean bench-cni bench demo bench-lab bench-linerate
all: $(PLUGIN) $(AGENT_BIN) $(CTL) $(LOADGEN) $(STANDIN)

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/bpf/%.bpf.o: shared/bpf/%.bpf.c $(wildcard shared/bpf/*.h)
	@mkdir -p $(dir $@)
	$(BPF_CLANG) $(BPF_CFLAGS) -c $< -o $@

$(BUILD)/gen/%.skel.h: $(BUILD)/bpf/%.bpf.o
	@mkdir -p $(dir $@)
	$(BPFTOOL) gen skeleton $< name $*_bpf > $@.tmp
	mv $@.tmp $@

# the loaders include their program's skeleton
$(BUILD)/obj/shared/bpf_%.o: CFLAGS += -isystem $(BUILD)/gen
$(BUILD)/obj/shared/bpf_cls.o: $(BUILD)/gen/cls.skel.h $(BUILD)/gen/dcls.skel.h
$(BUILD)/obj/shared/bpf_gate.o: $(BUILD)/gen/gate.skel.h

$(LIB): $(call obj,$(SHARED_SRC))
	@mkdir -p $(dir $@)
	rm -f $@
	ar rcs $@ $^

# The plugin is exec'd once per pod event: libnl-3 is linked in statically
# when its archive is installed (one shared object less to map and relocate
# at every start; libnl-route is not used by the plugin). PIE, RELRO and
# BIND_NOW stay (measured: lazy binding would save < 1%).
# cJSON is linked in statically too, from an archive hack/build-cjson.sh
# builds from Debian's source of the installed libcjson-dev: the runtime
# exec's the plugin on the node, which need not have libcjson1 (kind's node
# image has not; every ADD and DEL failed there). test/integration/
# test_plugin_static.py checks the plugin needs nothing but libc.
NL_STATIC_LIB := $(wildcard $(shell $(PKG_CONFIG) --variable=libdir libnl-3.0 2>/dev/null)/libnl-3.a)
CJSON_A := $(BUILD)/cjson/libcjson.a
ifneq ($(NL_STATIC_LIB),)
PLUGIN_LINK_LIBS := -Wl,-Bstatic -lnl-3 -Wl,-Bdynamic $(filter-out -lnl-3 -lnl-route-3 -lcjson,$(PLUGIN_LIBS)) $(CJSON_A) -lpthread
else
PLUGIN_LINK_LIBS := $(filter-out -lcjson,$(PLUGIN_LIBS)) $(CJSON_A)
endif

# Rebuilt when the installed cJSON header changes (a libcjson-dev upgrade).
$(CJSON_A): $(wildcard /usr/include/cjson/cJSON.h) hack/build-cjson.sh
	@mkdir -p $(dir $@)
	lib=$$(hack/build-cjson.sh --print-lib) && cp "$$lib" $@.tmp && mv $@.tmp $@

$(PLUGIN): $(call obj,$(CNI_SRC)) $(LIB) $(CJSON_A)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(call obj,$(CNI_SRC)) $(LIB) $(PLUGIN_LINK_LIBS)

# Agent objects and agent unit tests need the agent's libraries. The
# test_agent_% rule has a shorter stem than $(BUILD)/test/%, so make picks it.
$(BUILD)/obj/agent/%.o $(BUILD)/obj/test/unit/test_agent_%.o: CFLAGS += -Iagent $(AGENT_CFLAGS)
$(BUILD)/test/test_agent_%: $(BUILD)/obj/test/unit/test_agent_%.o $(call obj,$(UNIT_HELPER_SRC)) $(AGENT_LIB_OBJ) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(AGENT_LIBS) $(PLUGIN_LIBS) $(BPF_LIBS)

# aiqos-agent, the node agent: every agent object but aiqosctl's, with the
# agent's libraries (libcurl, libsystemd, libyaml, libmicrohttpd).
AGENT_BIN_OBJ := $(call obj,$(filter-out $(CTL_SRC),$(AGENT_SRC)) cni/conf.c) # install checks --plugin-conf with the plugin's parser
$(AGENT_BIN): $(AGENT_BIN_OBJ) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(AGENT_BIN_OBJ) $(LIB) $(AGENT_LIBS) $(PLUGIN_LIBS) $(BPF_LIBS)

# aiqosctl, the CLI: lean, only the agent objects it uses (no libcurl,
# libsystemd, libmicrohttpd). Its test runs the binary.
CTL_OBJ := $(call obj,$(CTL_SRC) agent/version.c agent/config.c agent/kube/decode.c agent/doctor.c agent/install/chain.c \
                      agent/node/uplink.c agent/node/datapath.c agent/pod_want.c cni/conf.c)
$(CTL): $(CTL_OBJ) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(CTL_OBJ) $(LIB) $(PLUGIN_LIBS) $(BPF_LIBS) $(shell $(PKG_CONFIG) --libs yaml-0.1 2>/dev/null)

# The commit the programs print after their version (agent/version.c:
# "0.2.0-dev+1a2b3c4"): git's short hash of this tree, empty without git (a
# tarball, also one unpacked inside another repository);
# `make AIQOS_COMMIT=...` sets it (the image build passes it in). version.o
# is rebuilt when it changes (the stamp is rewritten only then).
AIQOS_COMMIT ?= $(shell [ "$$(git -C $(CURDIR) rev-parse --show-toplevel 2>/dev/null)" = "$(CURDIR)" ] && \
                         git -C $(CURDIR) rev-parse --short HEAD)
$(BUILD)/commit: FORCE
	@mkdir -p $(dir $@)
	@echo '$(AIQOS_COMMIT)' | cmp -s - $@ || echo '$(AIQOS_COMMIT)' > $@
$(BUILD)/obj/agent/version.o: $(BUILD)/commit
$(BUILD)/obj/agent/version.o: CFLAGS += -DAIQOS_COMMIT='"$(AIQOS_COMMIT)"'
.PHONY: FORCE
FORCE:
$(BUILD)/test/test_agent_aiqosctl: | $(CTL)

$(BUILD)/test/%: $(BUILD)/obj/test/unit/%.o $(call obj,$(UNIT_HELPER_SRC)) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(PLUGIN_LIBS) $(BPF_LIBS)

# Unit tests of the plugin (test_cni_*) also link its objects, all but main.o
# (main() is alone there). Shorter stem: GNU make prefers this rule.
CNI_TEST_OBJ := $(filter-out $(BUILD)/obj/cni/main.o,$(call obj,$(CNI_SRC)))
$(BUILD)/test/test_cni_%: $(BUILD)/obj/test/unit/test_cni_%.o $(CNI_TEST_OBJ) $(call obj,$(UNIT_HELPER_SRC)) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(PLUGIN_LIBS)

# Helpers of the full-kernel suite (test/kernel/*.c), run inside the VM of
# hack/test-kernel.sh; linked with the library, without the unit harness.
KERNEL_SRC  := $(sort $(wildcard test/kernel/*.c))
KERNEL_BINS := $(patsubst test/kernel/%.c,$(BUILD)/kernel/%,$(KERNEL_SRC))
$(BUILD)/kernel/%: $(BUILD)/obj/test/kernel/%.o $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(PLUGIN_LIBS) $(BPF_LIBS)

deps:
	@bash hack/install-deps.sh

# The one test command (README). Installs what it needs, builds, runs every
# suite and ends with "N passed, N failed[, N skipped]".
test: deps
	$(MAKE) all $(UNIT_BINS) $(KERNEL_BINS)
	$(MAKE) --no-print-directory -j$$(nproc 2>/dev/null || echo 2) asan-build fuzz-build
	@bash test/run.sh $(BUILD)

test-unit: all $(UNIT_BINS)
	@bash test/run.sh --only unit $(BUILD)

test-integration: all asan-build
	@bash test/run.sh --only integration $(BUILD)

# The fault soak: 30 minutes of pod churn, agent SIGKILLs, API
# stand-in and real kube-apiserver (+ etcd) restarts, a full state dir and
# hand-made uplink changes on two lab nodes, then convergence and leak checks (test/integration/test_soak.py; its
# 3-minute version is part of the integration suite of `make test`).
# AIQOS_SOAK_SECONDS overrides the duration; the figures land in
# $(BUILD)/soak-report.json.
.PHONY: soak
soak: all
	AIQOS_BUILD=$(abspath $(BUILD)) AIQOS_SOAK_SECONDS=$${AIQOS_SOAK_SECONDS:-1800} /usr/bin/python3 -m pytest -q -s \
		-p no:cacheprovider test/integration/test_soak.py

# The kind-less node e2e: real kubelet + containerd + runc + the
# control plane in namespaces of their own, the DaemonSet from manifests/,
# test/e2e/assert.py (hack/e2e-node.sh; also the "e2e" suite of `make test`).
.PHONY: e2e
e2e: all
	@bash test/run.sh --only e2e $(BUILD)

# kind for real, offline (not part of `make test`; root, Debian 12): Debian's
# Docker engine with its data under /var/cache/aiqos/kind, kind and every
# image of a kind node built here (no registry), a control plane + worker
# cluster with kindnet, then with Flannel (VXLAN), hack/kind-e2e.sh on each
# (hack/kind-ci.sh; docs/install/kind.md). Ends with "kind-e2e: N passed, N failed".
.PHONY: kind-e2e
kind-e2e: all
	@bash hack/kind-ci.sh $(BUILD)

# Debian's stock kernel in qemu (TCG): the fq/fq_codel/pedit/DCTCP paths the
# CI kernel lacks (hack/test-kernel.sh; also the "kernel" suite of `make test`).
test-kernel: all $(BUILD)/test/test_nl $(BUILD)/test/test_apply $(BUILD)/test/test_bpf $(KERNEL_BINS)
	@bash hack/test-kernel.sh $(BUILD)

bench-cni: all
	@bash test/bench/cni-latency.sh $(BUILD)

# The agent's benchmarks (P2/P3/P5 of docs/benchmarks.md, root): API event -> kernel
# latency against an independent tc monitor, RSS and CPU with 250 pods, the
# first reconcile and a restart's adoption.
bench-agent: all
	/usr/bin/python3 test/bench/agent_bench.py --json $(BUILD)/bench-agent.json

# The lab: open-loop load generator, `make demo` (README's first
# command), `make bench` (every benchmark, regenerates docs/benchmarks.md),
# `make bench-lab` (only the network outcome arms). Root; see hack/lab.sh.
# The Cilium stand-in (test/coexist/cilium_standin.c): tcx programs at the
# tail of a device's hooks returning TC_ACT_OK, and a one-shot deletion of
# its legacy tc filters; for the coexistence tests and the bench (root).
$(BUILD)/bpf/cilium_standin.bpf.o: test/coexist/cilium_standin.bpf.c
	@mkdir -p $(dir $@)
	$(BPF_CLANG) $(BPF_CFLAGS) -c $< -o $@
$(BUILD)/obj/test/coexist/cilium_standin.o: CFLAGS += -isystem $(BUILD)/gen
$(BUILD)/obj/test/coexist/cilium_standin.o: $(BUILD)/gen/cilium_standin.skel.h
$(STANDIN): $(BUILD)/obj/test/coexist/cilium_standin.o $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(PLUGIN_LIBS) $(BPF_LIBS)
standin: $(STANDIN)

$(LOADGEN): $(BUILD)/obj/test/bench/loadgen.o
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ -lm

demo: deps
	@$(MAKE) --no-print-directory all
	@bash hack/lab.sh demo $(BUILD)

bench: deps
	@$(MAKE) --no-print-directory all
	@bash hack/lab.sh bench $(BUILD)

bench-lab: all
	@bash hack/lab.sh bench-lab $(BUILD)

# P6 line rate: a 4-queue veth uplink without a bottleneck,
# default vs each aiqos mode, with and without uplinkRate 400gbit (root).
bench-linerate: all
	/usr/bin/python3 test/bench/linerate.py --build $(BUILD) --sysctl-arms --json $(BUILD)/bench-linerate.json

# ---- Hardening: sanitizer build and fuzzing ----
# asan-build: everything and the unit tests with ASan+UBSan in ASAN_BUILD;
# `make test` runs the unit and plugin integration suites against it too.
ASAN_BUILD ?= $(BUILD)-asan
.PHONY: asan-build unit-bins fuzz fuzz-build fuzz-bins
unit-bins: $(UNIT_BINS)
asan-build:
	$(MAKE) --no-print-directory BUILD=$(ASAN_BUILD) SANITIZE=address,undefined all unit-bins

# make fuzz: the libFuzzer targets test/fuzz/fuzz_<name>.c, built with clang,
# ASan+UBSan in FUZZ_BUILD, each run FUZZ_SECONDS from its seed corpus with
# its dictionary after replaying its regression inputs (test/fuzz/run.sh);
# fails on any crash, leak, timeout or broken property.
FUZZ_SRC     := $(sort $(wildcard test/fuzz/fuzz_*.c))
FUZZ_BINS    := $(patsubst test/fuzz/%.c,$(BUILD)/fuzz/%,$(FUZZ_SRC))
FUZZ_BUILD   ?= $(BUILD)-fuzz
FUZZ_SECONDS ?= 60
FUZZ_CC      ?= clang
$(BUILD)/obj/test/fuzz/%.o: CFLAGS += -Iagent $(AGENT_CFLAGS)
$(BUILD)/fuzz/fuzz_%: $(BUILD)/obj/test/fuzz/fuzz_%.o $(CNI_TEST_OBJ) $(AGENT_LIB_OBJ) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -fsanitize=fuzzer -o $@ $^ $(AGENT_LIBS) $(PLUGIN_LIBS) $(BPF_LIBS)
fuzz-bins: $(FUZZ_BINS)
fuzz-build:
	$(MAKE) --no-print-directory BUILD=$(FUZZ_BUILD) CC=$(FUZZ_CC) SANITIZE=address,undefined FUZZING=1 fuzz-bins
fuzz: deps fuzz-build
	@bash test/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS)

# make lint: clang-format, cppcheck and clang-tidy over every C file of the
# tree (headers through the files that include them, and clang-format on
# them directly), shellcheck over the scripts. One target per file and tool,
# stamped in $(BUILD)/lint/ (re-run when the file, any header or a config
# changes), run LINT_JOBS at a time. The `lint` suite of test/run.sh runs
# the four parts (test/lint.sh). cppcheck's memleak check is off: it does
# not follow __attribute__((cleanup)) (_cleanup_free_ and friends, the tree's
# way to own memory), so it reports every early return of such a variable;
# leaks are caught by LeakSanitizer in the unit-asan and integration-asan
# suites instead.
LINT_DIRS := shared shared/tc shared/bpf cni agent $(patsubst %/,%,$(sort $(dir $(wildcard agent/*/*.c agent/*/*.h)))) \
             test/unit test/fuzz test/bench test/kernel test/e2e
LINT_SRC  := $(filter-out %.bpf.c,$(sort $(foreach d,$(LINT_DIRS),$(wildcard $(d)/*.c))))
LINT_HDR  := $(sort $(foreach d,$(LINT_DIRS),$(wildcard $(d)/*.h)))
LINT_C    := $(LINT_SRC) $(LINT_HDR) $(BPF_SRC)
LINT_SH   := $(wildcard hack/*.sh hack/lib/*.sh test/*.sh test/bench/*.sh test/kernel/*.sh test/fuzz/*.sh test/e2e/*.sh .ci/run)
LINT_JOBS ?= $(shell nproc 2>/dev/null || echo 2)
LINT_FLAGS := $(CSTD) -Ishared -Iagent -isystem $(BUILD)/gen $(PKG_CFLAGS) $(AGENT_CFLAGS)
LINT_DEPS := $(LINT_HDR) .clang-tidy test/.clang-tidy Makefile
CPPCHECK_STAMPS := $(patsubst %,$(BUILD)/lint/%.cppcheck,$(LINT_SRC))
TIDY_STAMPS     := $(patsubst %,$(BUILD)/lint/%.tidy,$(LINT_SRC) $(BPF_SRC))
.PHONY: lint-cppcheck lint-tidy lint-sh lint-c
lint: fmt-check
	@$(MAKE) --no-print-directory -j$(LINT_JOBS) lint-c lint-sh
lint-c: lint-cppcheck lint-tidy
lint-cppcheck: $(CPPCHECK_STAMPS)
lint-tidy: $(TIDY_STAMPS)
$(BUILD)/lint/%.c.cppcheck: %.c $(LINT_DEPS)
	@mkdir -p $(dir $@)
	cppcheck --quiet --error-exitcode=1 --enable=warning,portability --inline-suppr \
		--suppress=missingIncludeSystem --suppress=varFuncNullUB --suppress=memleak -Ishared -Iagent $<
	@touch $@
$(BUILD)/lint/%.c.tidy: %.c $(LINT_DEPS)
	@mkdir -p $(dir $@)
	clang-tidy --quiet $< -- $(LINT_FLAGS)
	@touch $@
$(BUILD)/lint/shared/bpf_cls.c.tidy $(BUILD)/lint/shared/bpf_gate.c.tidy: $(BPF_SKELS)
# The BPF programs: clang-tidy with the BPF target's flags. cppcheck is not
# run on them: it does not know the BPF target (the helpers' declarations in
# bpf_helper_defs.h are function pointers to fixed ids, SEC() places code in
# sections), and reports those as errors.
$(BUILD)/lint/%.bpf.c.tidy: %.bpf.c $(LINT_DEPS)
	@mkdir -p $(dir $@)
	clang-tidy --quiet $< -- $(BPF_CFLAGS)
	@touch $@
lint-sh:
	shellcheck -S warning $(LINT_SH)

# The Helm chart carries copies of manifests/admission and manifests/monitoring
# (no symlinks: a packaged chart is self-contained); test/helm checks they
# are identical to the sources.
CHART_FILES := manifests/helm/aiqos/files
.PHONY: chart-files
chart-files:
	mkdir -p $(CHART_FILES)/admission $(CHART_FILES)/monitoring
	cp manifests/admission/validatingadmissionpolicy.yaml manifests/admission/validatingadmissionpolicybinding.yaml \
		$(CHART_FILES)/admission/
	cp manifests/monitoring/prometheusrule.yaml manifests/monitoring/grafana-dashboard.json $(CHART_FILES)/monitoring/

fmt:
	clang-format -i $(LINT_C)

fmt-check:
	@clang-format --dry-run --Werror $(LINT_C)

clean:
	rm -rf $(BUILD)

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
