#!/usr/bin/env bash
# The project's test command (README, .ci/run): every crate of the host workspace with all
# features, in the `test` profile (opt-level 2, debug assertions on). Extra arguments go to
# `cargo test`, e.g. `scripts/test.sh -p nand-hal` or `scripts/test.sh -- --nocapture`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
exec cargo test --workspace --all-features "$@"
