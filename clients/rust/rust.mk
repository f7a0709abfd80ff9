# The Rust client (clients/rust), included by the top-level Makefile.
#
# Cargo builds into a target directory outside the clone, shared by every
# clone on the machine and by the Rust end-to-end tests in cmd/mink
# (rust_client_e2e_test.go), so that a fresh clone does not rebuild every
# dependency. Builds use at most two jobs: the machine is shared.

CARGO            ?= cargo
RUST_DIR         := clients/rust
CARGO_JOBS       ?= 2
export CARGO_TARGET_DIR ?= $(HOME)/.cache/mink/cargo-target

.PHONY: test-rust lint-rust

# Unit tests (routing, leader cache, schema mapping, key and row encodings
# against the Go test vectors) and the doc tests, then the examples that
# the end-to-end tests run against real `mink server` processes (those run
# with cmd/mink in `make test`).
test-rust:
	cd $(RUST_DIR) && $(CARGO) test --release -j$(CARGO_JOBS)
	cd $(RUST_DIR) && $(CARGO) build --release -j$(CARGO_JOBS) --examples

lint-rust:
	cd $(RUST_DIR) && $(CARGO) fmt --check
	cd $(RUST_DIR) && $(CARGO) clippy --release -j$(CARGO_JOBS) --all-targets -- -D warnings
