# `make test` and `make bench` are the project's contract (README.md).
# Each first installs what the build needs on Debian/Ubuntu, then runs.

SHELL := /bin/bash
CARGO ?= cargo

.PHONY: test bench deps lecture fuzz clean

deps:
	@if ! command -v clang >/dev/null 2>&1 || ! ls /usr/lib/llvm-*/lib/libclang*.so* >/dev/null 2>&1; then \
		if command -v apt-get >/dev/null 2>&1; then \
			echo "installing clang and libclang-dev (RocksDB's build needs them)"; \
			SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
			$$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq clang libclang-dev; \
		else \
			echo "error: RocksDB's build needs clang and libclang; install them with your package manager" >&2; exit 1; \
		fi; \
	fi
	@command -v $(CARGO) >/dev/null || { echo "error: a Rust toolchain (cargo) is required" >&2; exit 1; }
	@$(CARGO) fmt --version >/dev/null 2>&1 || rustup component add rustfmt
	@$(CARGO) clippy --version >/dev/null 2>&1 || rustup component add clippy

test: deps
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	$(CARGO) test --workspace

bench: deps
	$(CARGO) run --release -p bloomlsm-bench --bin bloomlsm-bench -- $(BENCH_ARGS)

lecture:
	$(CARGO) run --release -p bloomlsm-filter --example lecture

FUZZ_SECONDS ?= 60
fuzz:
	@command -v cargo-fuzz >/dev/null || $(CARGO) install cargo-fuzz
	for t in filter_from_bytes; do (cd filter/fuzz && $(CARGO) +nightly fuzz run $$t -- -max_total_time=$(FUZZ_SECONDS)); done
	for t in table_open block_decode; do (cd sstable/fuzz && $(CARGO) +nightly fuzz run $$t -- -max_total_time=$(FUZZ_SECONDS)); done
	for t in wal_replay manifest_decode db_model; do (cd engine/fuzz && $(CARGO) +nightly fuzz run $$t -- -max_total_time=$(FUZZ_SECONDS)); done

clean:
	$(CARGO) clean
