# The two commands: `make demo` and `make test` (see README.md).
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all build deps demo test fuzz-short fuzz bench accuracy diagnosis-accuracy format lint clean

all: build

deps:
	@bash scripts/install-deps.sh

$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) -G Ninja $(CMAKE_FLAGS)

build: $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

# Installs what is missing, builds, builds the demo store build/demo.db from the bundled real
# accounting (scripts/demo-store.sh), prints the GPU cluster's report, writes report.html, then
# serves the dashboard with an agent watching live jobs until Ctrl-C (scripts/demo.sh; without
# a terminal for 60 s, RIGHTSIZE_DEMO_SECONDS=N to choose). `make demo DEMO_DB=postgresql://…` builds
# and serves the same demo in a PostgreSQL database.
demo: deps
	@$(MAKE) --no-print-directory build
	@bash scripts/demo.sh $(BUILD)/rightsize $(DEMO_DB)

test: deps
	@$(MAKE) --no-print-directory build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)
	@$(MAKE) --no-print-directory fuzz-short

# Every libFuzzer target (test/fuzz/) with ASan and UBSan for FUZZ_RUNS executions each, in its
# own clang build tree (FUZZ_BUILD); fails on any crash, leak or sanitizer report.
FUZZ_BUILD ?= build-fuzz
FUZZ_RUNS ?= 5000
fuzz-short: deps
	@bash scripts/fuzz.sh -b $(FUZZ_BUILD) $(FUZZ_RUNS)

# The long campaign: 10 million executions per target, niced (docs/reliability.md).
fuzz: deps
	@bash bench/fuzz.sh $(or $(RUNS),10000000)

bench: deps
	@$(MAKE) --no-print-directory build
	@bash bench/run.sh $(BUILD)

# Replays every public trace and usage file with `rightsize eval` (build/accuracy/*.json) and
# writes docs/accuracy.md. TRACES=dir overrides the traces folder.
accuracy: deps $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS) --target rightsize
	@RS=$(BUILD)/rightsize OUT=$(BUILD)/accuracy bash scripts/accuracy.sh $(TRACES)

# Diagnoses the labelled failure corpus and writes the table in docs/diagnosis.md.
diagnosis-accuracy: deps $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS) --target rightsize
	python3 scripts/diagnosis_accuracy.py $(BUILD)/rightsize test/data/failures --write docs/diagnosis.md --no-learned

format:
	clang-format -i $$(git ls-files '*.cc' '*.h')

lint: $(BUILD)/build.ninja
	clang-tidy -p $(BUILD) --quiet $$(git ls-files 'src/*.cc')

clean:
	rm -rf $(BUILD) $(FUZZ_BUILD)
