# Entry points: `make run` (the main job on a bundled default) and `make test`
# (install dependencies, build, run every test). See README.md.
BUILD      ?= build
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 60
TSAN_BUILD ?= build-tsan
JOBS       ?= $(shell nproc)
CMAKE_ARGS ?=
PYTHON     ?= /usr/bin/python3
PREFIX     ?= /usr/local
# Real models the tests need (scripts/make_test_models.py writes them once).
TEST_MODELS ?= $(abspath $(BUILD))/test_models

.PHONY: all deps configure build install run test test-install test-c test-python test-models test-sanitize test-tsan \
        ci clean conformance conformance-update fuzz \
        bench-deps bench-gemm-threads bench-reorder bench-dispatch bench-models bench-dynamic bench-attention bench-compile bench-memplan bench-load \
        bench-kernels bench-torch bench-ops bench-sequences bench-quantize bench-int8 bench-lowprec bench-long-tail bench-cpu-ab \
        bench-memory bench-grouped bench-depthwise \
        bench-dist soak zoo
.PHONY: bench-create

all: build

deps:
	bash scripts/install-deps.sh

$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_ARGS)

configure: $(BUILD)/build.ninja

build: configure
	ninja -C $(BUILD) -j $(JOBS)

# Headers, libcge.so/.a, the CLI, docs, cge.pc and the CMake package under
# PREFIX (docs/quickstart.md); DESTDIR is honoured for staging.
install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

# The main job: compile the bundled small CNN (models/small_cnn.onnx, made by
# scripts/make_small_cnn.py) to an offline model, run it, time each run mode.
run: build
	./$(BUILD)/cge compile models/small_cnn.onnx -o $(BUILD)/small_cnn.cgm
	./$(BUILD)/cge run $(BUILD)/small_cnn.cgm
	@for mode in eager plan replay; do \
	  ./$(BUILD)/cge bench $(BUILD)/small_cnn.cgm --mode $$mode --iterations 200 --warmup 20 \
	    || exit 1; \
	done

test: deps build test-install test-c test-python conformance

# Install into a temporary prefix; build and run an example against it with
# pkg-config and with find_package(cge CONFIG).
test-install: build
	BUILD=$(BUILD) bash scripts/test-install.sh

# The tests require these models (a missing one fails them), so every test
# target that needs them makes them first; PyTorch exports them once.
test-models:
	$(PYTHON) scripts/make_test_models.py $(TEST_MODELS)

test-c: test-models
	CGE_MODEL_DIR=$(TEST_MODELS) ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

test-python: test-models
	CGE_LIBRARY=$(CURDIR)/$(BUILD)/libcge.so CGE_MODEL_DIR=$(TEST_MODELS) \
	  $(PYTHON) -m pytest -q -rs python/tests

# ONNX conformance: onnx 1.12's node test cases through cge.InferenceSession;
# fails if any case named in tests/onnx_conformance/passing.txt does not pass
# (and names it). Cases that newly pass are listed: `make conformance-update`
# adds them to the list (and drops any that stopped passing: review the diff).
CONFORMANCE_LIST = tests/onnx_conformance/passing.txt
conformance: build
	CGE_LIBRARY=$(CURDIR)/$(BUILD)/libcge.so $(PYTHON) tests/onnx_conformance/run.py \
	  --jobs $(JOBS) --passing $(CONFORMANCE_LIST)

conformance-update: build
	CGE_LIBRARY=$(CURDIR)/$(BUILD)/libcge.so $(PYTHON) tests/onnx_conformance/run.py \
	  --jobs $(JOBS) --passing $(CONFORMANCE_LIST) --update

# libFuzzer over the ONNX importer and the .cgm loader (clang, ASan+UBSan),
# each for a bounded time (FUZZ_SECONDS, FUZZ_MODEL_SECONDS). A crash leaves
# $(FUZZ_BUILD)/crash-*: add ONNX ones to tests/onnx/corpus/.
FUZZ_MODEL_SECONDS ?= 50
fuzz: deps
	cmake -S . -B $(FUZZ_BUILD) -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Debug \
	  -DCGE_FUZZ=ON -DCGE_BUILD_TESTS=OFF -DCGE_WERROR=OFF
	ninja -C $(FUZZ_BUILD) -j $(JOBS) fuzz_onnx_import fuzz_model_file cge_cli
	mkdir -p $(FUZZ_BUILD)/corpus $(FUZZ_BUILD)/model_corpus
	./$(FUZZ_BUILD)/fuzz_onnx_import -max_total_time=$(FUZZ_SECONDS) -timeout=10 \
	  -rss_limit_mb=2048 -artifact_prefix=$(FUZZ_BUILD)/ $(FUZZ_BUILD)/corpus tests/onnx/corpus
	./$(FUZZ_BUILD)/cge compile models/small_cnn.onnx -o $(FUZZ_BUILD)/model_corpus/small_cnn.cgm
	./$(FUZZ_BUILD)/cge compile models/small_cnn.onnx --opt-level 0 --streams 2 \
	  -o $(FUZZ_BUILD)/model_corpus/small_cnn_o0.cgm
	./$(FUZZ_BUILD)/fuzz_model_file -max_total_time=$(FUZZ_MODEL_SECONDS) -timeout=10 \
	  -rss_limit_mb=2048 -max_len=262144 -artifact_prefix=$(FUZZ_BUILD)/model- \
	  $(FUZZ_BUILD)/model_corpus

# Unit tests under AddressSanitizer + UndefinedBehaviorSanitizer (leaks included).
test-sanitize: deps test-models
	cmake -S . -B $(ASAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCGE_SANITIZE=address,undefined
	ninja -C $(ASAN_BUILD) -j $(JOBS)
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp UBSAN_OPTIONS=print_stacktrace=1 \
	  CGE_MODEL_DIR=$(TEST_MODELS) ctest --test-dir $(ASAN_BUILD) --output-on-failure -j $(JOBS) -L unit

# Runtime, session and model-file tests (damaged plans included) under ThreadSanitizer.
test-tsan: deps test-models
	cmake -S . -B $(TSAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCGE_SANITIZE=thread
	ninja -C $(TSAN_BUILD) -j $(JOBS)
	TSAN_OPTIONS=halt_on_error=1 CGE_MODEL_DIR=$(TEST_MODELS) ctest --test-dir $(TSAN_BUILD) --output-on-failure -L "runtime|session|model_file"

# Soak (not part of `make test`): several sessions of small generated models in
# SOAK_THREADS threads for SOAK_SECONDS, random shapes, plan/bucket/I/O-binding
# runs, timeouts and cancellations; every result checked, RSS growth bounded.
SOAK_SECONDS ?= 120
SOAK_THREADS ?= 6
soak: build
	CGE_LIBRARY=$(CURDIR)/$(BUILD)/libcge.so $(PYTHON) scripts/soak.py \
	  --seconds $(SOAK_SECONDS) --threads $(SOAK_THREADS)

# What CI runs: the README's test command, then the sanitizer builds.
ci: test test-sanitize test-tsan

# Benchmarks (bench/): cge beside its peers, as ratios. Not tests.
bench-deps:
	bash scripts/install-bench-deps.sh

# `cge quantize` on resnet18 and mobilenet_v2 (random weights, random
# calibration images, per-channel): the float and int8 files timed in ONNX
# Runtime and cge, ratios and the int8 files' error, then the same files in
# ONNX Runtime's QOperator form (com.microsoft QLinear*) in both runtimes
# (docs/quantization.md).
bench-quantize: bench-deps deps build test-models
	BUILD=$(abspath $(BUILD)) CGE_MODEL_DIR=$(TEST_MODELS) $(PYTHON) bench/quantize.py

bench-dispatch: bench-deps build
	BUILD=$(BUILD) $(PYTHON) bench/dispatch.py

bench-models: bench-deps deps build
	BUILD=$(abspath $(BUILD)) $(PYTHON) bench/models.py

# Peak RSS and session creation from .onnx, cge against ONNX Runtime in the
# same minute, one big model at a time (bench/memory.py; the models come from
# `make zoo`'s cache). MEMORY_MODELS: the models; MEMORY_BEFORE=LIB: a base
# branch's libcge.so measured too.
MEMORY_MODELS ?= alexnet vgg11 vit_b_16 convnext_tiny resnet50 regnet_y_32gf
MEMORY_BEFORE ?=
bench-memory: bench-deps build
	CGE_LIBRARY=$(CURDIR)/$(BUILD)/libcge.so $(PYTHON) bench/memory.py --cache $(ZOO_CACHE) \
	  $(if $(MEMORY_BEFORE),--before $(MEMORY_BEFORE)) $(MEMORY_MODELS)

# Models with symbolic dimensions (scripts/make_dynamic_models.py): the first run
# at each new shape and steady runs (resnet18 over batches, a TransformerEncoder
# over sequence lengths), and greedy decoding with a key/value cache (a GPT-like
# decoder), cge (default and plan modes) vs ONNX Runtime, as ratios, against
# the targets for compiling symbolic shapes once. BENCH_JSON=FILE keeps it all.
bench-dynamic: bench-deps deps build
	BUILD=$(abspath $(BUILD)) $(PYTHON) bench/dynamic.py

# The attention fusion A/B in one process (fuse_attention on and off), with
# ONNX Runtime on the same decoders in the same run (bench/attention.py).
bench-attention: bench-deps deps build
	BUILD=$(abspath $(BUILD)) $(PYTHON) bench/attention.py

# Quantized (QDQ) resnet18, mobilenet_v2, resnet50 and an encoder from PyTorch
# FX: cge int8 vs ONNX Runtime int8 vs cge float32, as ratios (bench/int8.py).
bench-int8: bench-deps deps build
	BUILD=$(abspath $(BUILD)) $(PYTHON) bench/int8.py
# Low precision: bf16 vs float32 on GEMM-heavy models (speed-up, relative
# error) and weight-only int4/int8 (MatMulNBits) decoding of a GPT-like
# decoder (bytes of weights per token, ms/token vs ONNX Runtime).
bench-lowprec: bench-deps deps build
	BUILD=$(abspath $(BUILD)) $(PYTHON) bench/lowprec.py
# Across processes (Open MPI on this host): a TransformerEncoder (d 512, 8
# layers) and the GPT-like decoder's blocks, one process x 2 threads vs two
# processes x 1 thread (--tp 2, --pp 2) vs ONNX Runtime; latency, tokens/s,
# bytes sent per run against the analytical minimum (docs/distributed.md).
bench-dist: bench-deps deps build
	BUILD=$(abspath $(BUILD)) $(PYTHON) bench/dist.py

# The long tail (issue 14): a small U-Net (ConvTranspose), a wav2vec-like Conv1d
# encoder (GroupNorm, GELU), convnext_tiny, lraspp_mobilenet_v3_large,
# efficientnet_b0, resnet18, mobilenet_v3_small (bench/long_tail.py writes them
# once; `bench/long_tail.py --make-only` prints their paths for bench-ops).
bench-long-tail: bench-deps deps build
	BUILD=$(abspath $(BUILD)) $(PYTHON) bench/long_tail.py

# One-thread CPU time per run of zoo models (cached by scripts/zoo.py), one or
# two cge libraries A/B next to ONNX Runtime, alternating: AB_LIBS="a.so b.so"
# (default this build's), AB_MODELS="audio_conv1d efficientnet_b0".
AB_LIBS ?= $(abspath $(BUILD))/libcge.so
AB_MODELS ?= audio_conv1d efficientnet_b0 mobilenet_v3_large
bench-cpu-ab: bench-deps deps build
	$(PYTHON) bench/cpu_ab.py $(foreach l,$(AB_LIBS),--lib $(l)) $(AB_MODELS)

# Session creation from .onnx: CPU time of cge's against ONNX Runtime's, a
# fresh process each, alternating, with the first run's CPU time
# (bench/create_cpu.py): CREATE_LIBS as AB_LIBS, CREATE_MODELS.
CREATE_LIBS ?= $(abspath $(BUILD))/libcge.so
CREATE_MODELS ?= audio_conv1d resnet18 resnet34 regnet_x_1_6gf regnet_y_1_6gf
bench-create: bench-deps deps build
	$(PYTHON) bench/create_cpu.py $(foreach l,$(CREATE_LIBS),--lib $(l)) $(CREATE_MODELS)

# PyTorch models through cge.torch.compile (replay) vs eager PyTorch vs ONNX Runtime.
bench-torch: bench-deps deps build
	BUILD=$(abspath $(BUILD)) $(PYTHON) bench/torch_models.py

# Time per op type for one model, cge (`cge profile`) next to ONNX Runtime's
# own profiler (enableProfiling), 2 threads: MODEL=path.onnx (default resnet18
# from scripts/make_test_models.py); BENCH_OPS_ARGS=--json for JSON.
MODEL ?=
BENCH_OPS_ARGS ?=
# Sequence models (one folded into tensors, one a run-time sequence) vs ONNX Runtime.
bench-sequences: bench-deps deps build
	BUILD=$(abspath $(BUILD)) $(PYTHON) bench/sequences.py

bench-ops: bench-deps deps build
	BUILD=$(abspath $(BUILD)) $(PYTHON) bench/ops.py $(MODEL) $(BENCH_OPS_ARGS)

# Offline models: .cgm load time vs ONNX Runtime's session creation and vs
# cge compiling from ONNX, as ratios.
bench-load: bench-deps build
	BUILD=$(abspath $(BUILD)) $(PYTHON) bench/load.py

# The cpu Reorder (plain <-> NHWC) before/after the AVX-512 tiles at the zoo's
# shapes (GB/s), then beside ONNX Runtime's Transpose (docs/guide.md).
bench-reorder: bench-deps build
	CGE_NUM_THREADS=2 ./$(BUILD)/bench_reorder 4
	CGE_NUM_THREADS=2 ./$(BUILD)/bench_reorder 1
	BUILD=$(abspath $(BUILD)) $(PYTHON) bench/reorder_ort.py

# Compiler: compile time of generated 1k/10k/100k-node graphs, per stage.
bench-compile: build
	./$(BUILD)/bench_compile

# cge's heavy kernels against oneDNN's primitives on the models' shapes
# (the measurements behind each kernel choice; docs/guide.md).
bench-kernels: build
	./$(BUILD)/bench_kernel_choices

# Grouped convolutions node by node (cge's grouped kernel, oneDNN's primitive,
# ONNX Runtime): the zoo's ResNeXt/RegNet exports in ZOO_CACHE, or GROUPED_MODELS.
GROUPED_MODELS ?=
bench-grouped: bench-deps build
	BUILD=$(abspath $(BUILD)) ZOO_CACHE=$(ZOO_CACHE) $(PYTHON) bench/grouped_conv.py $(GROUPED_MODELS)

# Channels-last depthwise convolutions at the zoo's shapes: cge's opt-in
# AVX-512 kernel (CGE_DW_NHWC=1) vs oneDNN's primitive vs ONNX Runtime, op time per
# run from each profiler; DW_ARGS e.g. "--threads 2 --filter mnasnet".
DW_ARGS ?=
bench-depthwise: bench-deps build
	BUILD=$(abspath $(BUILD)) $(PYTHON) bench/depthwise.py $(DW_ARGS)

# Memory plans against their lower bound; ONNX models in MEMPLAN_MODELS
# (e.g. from scripts/make_test_models.py) are measured too.
MEMPLAN_MODELS ?= $(wildcard $(BUILD)/models/*.onnx)
bench-memplan: build
	./$(BUILD)/bench_memplan $(MEMPLAN_MODELS)

# The float32 products of transformers at 1 and 2 threads (M = 1..128, the
# zoo's K x N), and q/k/v as three products against one (not a test).
bench-gemm-threads: build
	./$(BUILD)/bench_gemm_threads

# oneDNN's convolutions by activation layout (docs/guide.md, "Convolutions on AVX2 machines").
.PHONY: bench-conv-avx2
bench-conv-avx2: build
	OMP_WAIT_POLICY=passive ./$(BUILD)/bench_conv_avx2

# The model zoo (scripts/zoo.py, docs/zoo.md; not a test): torchvision 0.14's
# models and hand-built ones, random weights, exported once into ZOO_CACHE,
# through PyTorch, cge (ONNX), ONNX Runtime and cge.torch.compile; writes
# ZOO_REPORT. ZOO_TIER=large: the >1 GB models (external data); ZOO_FILTER=regex.
# Then scripts/zoo_guard.py lists the models that got worse than the committed
# docs/zoo_figures.md and writes the run's rows there (ZOO_NOTE: a note for
# their date column, e.g. "load 1.5").
ZOO_TIER   ?= default
ZOO_FILTER ?=
ZOO_CACHE  ?= /tmp/cge-zoo
ZOO_REPORT ?= $(abspath $(BUILD))/zoo/report.md
ZOO_NOTE   ?=
zoo: bench-deps build
	CGE_LIBRARY=$(CURDIR)/$(BUILD)/libcge.so $(PYTHON) scripts/zoo.py --tier $(ZOO_TIER) \
	  --filter '$(ZOO_FILTER)' --cache $(ZOO_CACHE) --report $(ZOO_REPORT) \
	  --json $(basename $(ZOO_REPORT)).json
	-$(PYTHON) scripts/zoo_guard.py --json $(basename $(ZOO_REPORT)).json --write \
	  --note '$(ZOO_NOTE)'

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD) $(FUZZ_BUILD)
