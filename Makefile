# twin — one Makefile; everything builds under $(BUILD).
#   make            build build/twin (+ libtwin_cuda.so, the cuda backend twin dlopens, when CUDA
#                   is found, + libtwinprof.so when CUPTI is)
#   make demo       set up, build, run the main job on a built-in example
#   make test       set up, build, run every test (ends with "N passed, N failed")
#   make SAN=1 ...  AddressSanitizer + UndefinedBehaviorSanitizer build under build/san
#   make bench      benchmarks (figures in docs/BENCHMARKS.md)
#   make deps       install missing Debian packages (as root), else print the apt-get line
# Optional parts are detected: CUDA_HOME (default /usr/local/cuda) with NCCL, cuBLAS, CUPTI
# (NCCL_HOME, CUBLAS_HOME, CUPTI_HOME override where they live); MPI via mpicc; OpenBLAS.

SAN ?= 0
ifeq ($(SAN),1)
BUILD ?= build/san
SANFLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
else
BUILD ?= build
SANFLAGS :=
endif

CC ?= cc
OPT ?= -O2 -g
WARN := -Wall -Wextra -Wshadow -Wno-unused-parameter -Wno-missing-field-initializers
ifeq ($(CI),true)
WARN += -Werror
endif
ifneq ($(WERROR),)
WARN += -Werror
endif
CFLAGS_ALL := -std=c11 -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE $(OPT) $(WARN) $(SANFLAGS) \
	-MMD -MP -I. -DTWIN_SOURCE_DIR='"$(CURDIR)"' $(CFLAGS)
LDLIBS_ALL := -lcjson -lsqlite3 -lm -lpthread -ldl
LDFLAGS_ALL := $(SANFLAGS) $(LDFLAGS)

# ---- optional features ---------------------------------------------------------------------
CUDA_HOME ?= /usr/local/cuda
NCCL_HOME ?= $(CUDA_HOME)
CUBLAS_HOME ?= $(CUDA_HOME)
CUPTI_HOME ?= $(CUDA_HOME)
NVCC ?= $(CUDA_HOME)/bin/nvcc
# exec/cuda/*.cu: A100, H100/H200 code, plus PTX for newer GPUs (B200) to JIT
NVCC_ARCH ?= -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 \
	-gencode arch=compute_90,code=compute_90
HAVE_CUDA := $(shell test -f $(CUDA_HOME)/include/cuda_runtime.h && \
	test -f $(NCCL_HOME)/include/nccl.h && test -f $(CUBLAS_HOME)/include/cublas_v2.h && echo 1)
HAVE_CUPTI := $(shell test -f $(CUPTI_HOME)/include/cupti.h && test "$(HAVE_CUDA)" = 1 && echo 1)
MPICC_BIN := $(shell command -v mpicc 2>/dev/null)
HAVE_MPI := $(if $(MPICC_BIN),1,)
HAVE_BLAS := $(shell pkg-config --exists openblas 2>/dev/null && echo 1)

FEATURES :=
ifeq ($(HAVE_MPI),1)
MPI_LDLIBS := $(shell mpicc --showme:link)
CFLAGS_ALL += -DTWIN_HAVE_MPI $(shell mpicc --showme:compile)
LDLIBS_ALL += $(MPI_LDLIBS)
FEATURES += mpi
endif
ifeq ($(HAVE_BLAS),1)
CFLAGS_ALL += -DTWIN_HAVE_BLAS $(shell pkg-config --cflags openblas)
LDLIBS_ALL += $(shell pkg-config --libs openblas)
FEATURES += blas
endif
CUDA_LIBDIRS := $(sort $(CUDA_HOME)/lib64 $(NCCL_HOME)/lib $(NCCL_HOME)/lib64 $(CUBLAS_HOME)/lib \
	$(CUBLAS_HOME)/lib64 $(CUPTI_HOME)/lib $(CUPTI_HOME)/lib64)
CUDA_LIBDIRS := $(foreach d,$(CUDA_LIBDIRS),$(wildcard $(d)))
# CUDA: only libtwin_cuda.so links the CUDA libraries (twin dlopens it for --backend cuda), so
# twin starts without them; TWIN_HAVE_CUDA says that this build makes the library.
ifeq ($(HAVE_CUDA),1)
CUDA_INC := -I$(CUDA_HOME)/include -I$(NCCL_HOME)/include -I$(CUBLAS_HOME)/include -I$(CUPTI_HOME)/include
CUDA_LD := $(foreach d,$(CUDA_LIBDIRS),-L$(d) -Wl,-rpath,$(d))
CUDA_LDLIBS := -lcudart -lcublas -lcublasLt -lnccl -lstdc++
CFLAGS_ALL += -DTWIN_HAVE_CUDA
FEATURES += cuda
ifeq ($(HAVE_CUPTI),1)
CFLAGS_ALL += -DTWIN_HAVE_CUPTI
CUDA_LDLIBS += -lcupti
FEATURES += cupti
endif
endif
CFLAGS_ALL += -DTWIN_FEATURES='"$(strip $(FEATURES))"'

# ---- sources ---------------------------------------------------------------------------------
# Each module's .c files are picked up by wildcard; the CUDA-only parts live in exec/cuda/
# (libtwin_cuda.so) and profile/inject/ (libtwinprof.so) and build only with CUDA.
LIB_SRCS := $(wildcard core/*.c sim/*.c profile/*.c reports/*.c exec/*.c)
ifeq ($(HAVE_CUDA),1)
CUDA_SRCS := $(wildcard exec/cuda/*.c)
CU_SRCS := $(wildcard exec/cuda/*.cu)
CUDA_LIB := $(BUILD)/libtwin_cuda.so
CUDA_EXPORTS := $(BUILD)/obj/pic/exports.opts
endif
CLI_SRCS := $(wildcard cli/*.c)
LIB_OBJS := $(LIB_SRCS:%.c=$(BUILD)/obj/%.o)
CUDA_OBJS := $(CUDA_SRCS:%.c=$(BUILD)/obj/pic/%.o) $(CU_SRCS:%.cu=$(BUILD)/obj/pic/%.cu.o)
CLI_OBJS := $(CLI_SRCS:%.c=$(BUILD)/obj/%.o)
TEST_SRCS := $(wildcard tests/unit/test_*.c)
TEST_BINS := $(TEST_SRCS:tests/unit/%.c=$(BUILD)/tests/%)
BENCH_SRCS := $(wildcard tests/bench/bench_*.c)
BENCH_BINS := $(BENCH_SRCS:tests/bench/%.c=$(BUILD)/bench/%)
INJECT_SRCS := $(wildcard profile/inject/*.c)
INJECT_LIB := $(if $(and $(HAVE_CUPTI),$(INJECT_SRCS)),$(BUILD)/libtwinprof.so,)

.PHONY: all deps demo test bench clean fuzz test-valgrind
all: $(BUILD)/twin $(CUDA_LIB) $(INJECT_LIB)

$(BUILD)/libtwin.a: $(LIB_OBJS)
	@mkdir -p $(@D)
	rm -f $@ && ar rcs $@ $^

# twin exports the functions of libtwin.a that libtwin_cuda.so calls (and only those), and
# `make build/twin` also makes the library, so that the two always come from one build.
$(BUILD)/twin: $(CLI_OBJS) $(BUILD)/libtwin.a $(CUDA_EXPORTS) | $(CUDA_LIB)
	$(CC) $(LDFLAGS_ALL) -o $@ $(CLI_OBJS) $(if $(CUDA_EXPORTS),@$(CUDA_EXPORTS)) \
		$(BUILD)/libtwin.a $(LDLIBS_ALL)

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_ALL) -c -o $@ $<

# ---- the cuda backend: libtwin_cuda.so -------------------------------------------------------
# Position-independent objects, hidden symbols but the entry (twin_cuda_module); undefined
# references to twin's own functions resolve against the twin binary when it dlopens the library.
$(BUILD)/obj/pic/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_ALL) $(CUDA_INC) -fPIC -fvisibility=hidden -c -o $@ $<

$(BUILD)/obj/pic/%.cu.o: %.cu
	@mkdir -p $(@D)
	$(NVCC) -O2 -std=c++17 $(NVCC_ARCH) -Xcompiler -fPIC,-fvisibility=hidden -I. $(CUDA_INC) \
		-c -o $@ $<

$(CUDA_LIB): $(CUDA_OBJS)
	$(CC) $(LDFLAGS_ALL) -shared -o $@ $(CUDA_OBJS) $(CUDA_LD) $(CUDA_LDLIBS) $(MPI_LDLIBS) \
		-lm -lpthread

# Linker options (gcc @file) for twin: each function of libtwin.a that the library calls is
# pulled from the archive and exported.
$(CUDA_EXPORTS): $(CUDA_OBJS) $(BUILD)/libtwin.a
	nm -u $(CUDA_OBJS) | awk 'NF == 2 { print $$2 }' | sort -u >$@.undef
	nm -g --defined-only $(BUILD)/libtwin.a | awk 'NF == 3 { print $$3 }' | sort -u | \
		comm -12 $@.undef - | sed 's/.*/-Wl,--require-defined=&,--export-dynamic-symbol=&/' >$@
	rm -f $@.undef

# A unit test that loads libtwin_cuda.so is linked as twin is.
$(BUILD)/tests/test_exec_cudalib: TEST_LDFLAGS = $(if $(CUDA_EXPORTS),@$(CUDA_EXPORTS))
$(BUILD)/tests/test_exec_cudalib: $(CUDA_EXPORTS) | $(CUDA_LIB)

$(BUILD)/tests/%: tests/unit/%.c $(BUILD)/libtwin.a $(wildcard tests/unit/*.h)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_ALL) $(LDFLAGS_ALL) -o $@ $< $(TEST_LDFLAGS) $(BUILD)/libtwin.a $(LDLIBS_ALL)

# Fuzz targets built with a plain main() that replays tests/fuzz/regress/TARGET/* (make test).
FUZZREG_BINS := $(patsubst tests/fuzz/%.c,$(BUILD)/fuzzreg/%,$(wildcard tests/fuzz/fuzz_*.c))
$(BUILD)/fuzzreg/fuzz_validate: FUZZ_EXTRA = $(BUILD)/obj/cli/opts.o $(BUILD)/obj/cli/cmd_validate.o
$(BUILD)/fuzzreg/%: tests/fuzz/%.c tests/fuzz/replay.c $(BUILD)/libtwin.a $(CLI_OBJS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_ALL) $(LDFLAGS_ALL) -o $@ $< tests/fuzz/replay.c $(FUZZ_EXTRA) $(BUILD)/libtwin.a $(LDLIBS_ALL)

$(BUILD)/bench/%: tests/bench/%.c $(BUILD)/libtwin.a
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_ALL) $(LDFLAGS_ALL) -o $@ $< $(BUILD)/libtwin.a $(LDLIBS_ALL)

# The injection library: CUPTI activity tracing inside any CUDA program.
# It carries its own position-independent copy of the store and the trace code (hidden
# symbols, so it never clashes with the program it is loaded into) and links only CUPTI and
# SQLite; never sanitizer-instrumented, since it is loaded into programs that are not.
INJECT_DEPS := core/trace.c core/tw.c profile/store.c profile/analyze.c profile/classify.c
INJECT_CFLAGS := $(filter-out -fsanitize=% -fno-sanitize-recover=% -MMD -MP,$(CFLAGS_ALL)) $(CUDA_INC)
$(BUILD)/libtwinprof.so: $(INJECT_SRCS) $(INJECT_DEPS) core/trace.h profile/profile.h
	@mkdir -p $(@D)
	$(CC) $(INJECT_CFLAGS) -fPIC -shared -fvisibility=hidden -o $@ $(INJECT_SRCS) \
		$(INJECT_DEPS) $(LDFLAGS) $(CUDA_LD) -lcupti -lsqlite3 -lm -lpthread -Wl,--no-undefined

# ---- set-up ----------------------------------------------------------------------------------
DEB_PKGS := build-essential pkg-config libcjson-dev libsqlite3-dev sqlite3 gnuplot-nox \
	libopenmpi-dev openmpi-bin libopenblas-dev python3 valgrind clang libclang-rt-14-dev
deps:
	@missing=""; for p in $(DEB_PKGS); do \
		dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -z "$$missing" ]; then echo "deps: all Debian packages present"; \
	elif [ "$$(id -u)" = 0 ]; then echo "deps: installing$$missing"; \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing) \
		|| { echo "deps: apt-get failed"; exit 1; }; \
	else echo "deps: missing packages; run: sudo apt-get install -y$$missing"; exit 1; fi

demo: deps
	@$(MAKE) --no-print-directory all
	@sh examples/demo.sh $(BUILD)/twin

test: deps
	@$(MAKE) --no-print-directory all $(TEST_BINS) $(FUZZREG_BINS)
	@sh tests/run.sh $(BUILD)

bench: deps
	@$(MAKE) --no-print-directory all $(BENCH_BINS)
	@sh tests/bench/run.sh $(BUILD)

clean:
	rm -rf build

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)

# ---- hardening -------------------------------------------------------------------------------
# make test-valgrind: the CLI end-to-end tests and the bad-input corpus with every twin call
# under valgrind memcheck (any leak or invalid access in twin's code fails the call). Checks
# that start MPI are skipped (TWIN_TEST_NO_MPI): Open MPI itself is not valgrind-clean. valgrind
# is called by its full path: some tests run twin with PATH emptied. No suppressions: twin links
# no CUDA library, and without a driver it never loads libtwin_cuda.so (whose cuBLAS trips a
# known valgrind false positive in ld.so).
VG_WRAP := $(BUILD)/valgrind/twin
test-valgrind: deps
	@$(MAKE) --no-print-directory all
	@mkdir -p $(dir $(VG_WRAP))
	@printf '#!/bin/sh\nexec $(shell command -v valgrind) -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite,indirect "$(CURDIR)/$(BUILD)/twin" "$$@"\n' >$(VG_WRAP)
	@chmod +x $(VG_WRAP)
	@TWIN=$(CURDIR)/$(VG_WRAP) TWIN_TEST_NO_MPI=1 ONLY=cli sh tests/run.sh $(BUILD)

# make fuzz: every libFuzzer target under tests/fuzz/ for FUZZ_SECONDS each (clang, ASan+UBSan).
# Seeds come from examples/, topologies/, tests/fixtures and tests/fuzz/seeds/; crashes land in
# build/fuzz/crashes/ and make fuzz fails.
FUZZ_SECONDS ?= 60
FUZZ_CC ?= clang
FUZZ_BUILD := build/fuzz
FUZZ_SRCS := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BINS := $(FUZZ_SRCS:tests/fuzz/%.c=$(FUZZ_BUILD)/%)
FUZZ_LIB_SRCS := $(wildcard core/*.c profile/*.c sim/*.c)
FUZZ_CFLAGS := -std=c11 -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -O1 -g -I. \
	-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -DTWIN_FUZZ \
	-DTWIN_SOURCE_DIR='"$(CURDIR)"' -DTWIN_FEATURES='""'
# fuzz_validate drives the validate subcommand itself, so it also links cli/ (without main)
FUZZ_CLI_SRCS := cli/opts.c cli/cmd_validate.c
$(FUZZ_BUILD)/fuzz_validate: FUZZ_EXTRA = $(FUZZ_CLI_SRCS)
$(FUZZ_BUILD)/fuzz_validate: $(FUZZ_CLI_SRCS)
$(FUZZ_BUILD)/%: tests/fuzz/%.c $(FUZZ_LIB_SRCS) $(wildcard core/*.h profile/*.h sim/*.h cli/*.h)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -o $@ $< $(FUZZ_LIB_SRCS) $(FUZZ_EXTRA) -lcjson -lsqlite3 -lm -lpthread
fuzz: deps
	@$(MAKE) --no-print-directory $(FUZZ_BINS)
	@sh tests/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS)
