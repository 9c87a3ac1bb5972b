# `make test` and `make bench` are the project's contract (README.md).
# Each first installs what the build needs on Debian/Ubuntu, then runs.

SHELL := /bin/bash
CARGO ?= cargo

.PHONY: test bench bench-direct bench-scale bench-plots deps lecture fuzz clean

deps:
	@if ! command -v clang >/dev/null 2>&1 || ! command -v clang++ >/dev/null 2>&1 || ! ls /usr/lib/llvm-*/lib/libclang*.so* >/dev/null 2>&1; then \
		if command -v apt-get >/dev/null 2>&1; then \
			echo "installing clang and libclang-dev (RocksDB's build needs them; clang++ compiles its C++, .cargo/config.toml)"; \
			SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
			$$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq clang libclang-dev; \
		else \
			echo "error: RocksDB's build needs clang, clang++ and libclang; install them with your package manager" >&2; exit 1; \
		fi; \
	fi
	@command -v $(CARGO) >/dev/null || { echo "error: a Rust toolchain (cargo) is required" >&2; exit 1; }
	@$(CARGO) fmt --version >/dev/null 2>&1 || rustup component add rustfmt
	@$(CARGO) clippy --version >/dev/null 2>&1 || rustup component add clippy

test: deps
	$(CARGO) fmt --all --check
	# The fuzz crates are outside the workspace: checked one by one.
	for d in filter sstable engine; do $(CARGO) fmt --check --manifest-path $$d/fuzz/Cargo.toml || exit 1; done
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --no-deps -p bloomlsm -p bloomlsm-filter -p bloomlsm-sstable
	$(CARGO) test --workspace --no-run
	# Two streams at once, so both cores stay busy while one test binary
	# runs its last slow tests: the test binaries named a-e (the engine's
	# integration suite among them; their output kept and shown when they
	# end) beside the rest (the engine's unit tests, the system suite). Both
	# select `--workspace`, as the build above did, so neither recompiles
	# (a `-p` would unify dependencies' features differently); the two
	# globs are complements, so together they are every test `cargo test
	# --workspace` runs, and the status is both's.
	@log=$$(mktemp); \
	$(CARGO) test --workspace --no-fail-fast --test '[a-e]*' > $$log 2>&1 & second=$$!; \
	status=0; \
	$(CARGO) test --workspace --no-fail-fast --lib --bins --test '[!a-e]*' || status=1; \
	$(CARGO) test --workspace --no-fail-fast --doc || status=1; \
	wait $$second || status=1; \
	echo "--- the test binaries named a-e:"; cat $$log; rm -f $$log; \
	if [ $$status -ne 0 ]; then echo "error: some tests failed (above)" >&2; fi; \
	exit $$status

bench: deps
	$(CARGO) run --release -p bloomlsm-bench --bin bloomlsm-bench -- --threads 1,2,4 $(BENCH_ARGS)

# The same workloads with table reads bypassing the page cache on both
# engines (O_DIRECT), so block reads are device reads; fewer operations,
# since each one waits for the device.
bench-direct: deps
	$(CARGO) run --release -p bloomlsm-bench --bin bloomlsm-bench -- --direct-io --threads 1,2,4 --ops 200000 --out target/bench-report-direct $(BENCH_ARGS)

# How every figure grows with the store: fill, readrandom, readmissing and
# the crawler at each size on both engines, direct I/O, one process per
# point. Hours at the largest size; progress and time left on stderr.
SCALE ?= 1000000,10000000,50000000
bench-scale: deps
	$(CARGO) run --release -p bloomlsm-bench --bin bloomlsm-bench -- --scale $(SCALE) --engines bloomlsm,rocksdb --direct-io --ops 200000 --out target/bench-scale $(BENCH_ARGS)

# PNG renderings of the plots of the last runs, to look at.
bench-plots:
	for d in target/bench-report target/bench-report-direct target/bench-scale; do [ -d $$d ] && sh benches/render-plots.sh $$d || true; done

lecture:
	$(CARGO) run --release -p bloomlsm-filter --example lecture

FUZZ_SECONDS ?= 60
# db_model under AddressSanitizer (which checks the arena's and the
# skiplist's unsafe code) runs about a tenth of the cases it runs without:
# FUZZ_DB_MODEL_SANITIZER=none for long campaigns, beside a shorter
# AddressSanitizer run.
FUZZ_DB_MODEL_SANITIZER ?= address
fuzz:
	@command -v cargo-fuzz >/dev/null || $(CARGO) install cargo-fuzz
	# Seeds made by the writers: filters, tables, WALs and manifests.
	$(CARGO) run -q -p bloomlsm --example fuzz_seeds -- .
	for t in filter_from_bytes filter_resealed ribbon_from_bytes ribbon_build; do (cd filter/fuzz && $(CARGO) +nightly fuzz run $$t -- -max_total_time=$(FUZZ_SECONDS)); done
	for t in table_open table_open_at table_resealed block_decode; do (cd sstable/fuzz && $(CARGO) +nightly fuzz run $$t -- -max_total_time=$(FUZZ_SECONDS)); done
	for t in wal_replay wal_resealed manifest_decode manifest_resealed; do (cd engine/fuzz && $(CARGO) +nightly fuzz run $$t -- -max_total_time=$(FUZZ_SECONDS)); done
	# Long inputs from the start: a short one builds no deep tree.
	cd engine/fuzz && $(CARGO) +nightly fuzz run -s $(FUZZ_DB_MODEL_SANITIZER) db_model -- -max_total_time=$(FUZZ_SECONDS) -len_control=0 -max_len=8192

clean:
	$(CARGO) clean
