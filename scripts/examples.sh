#!/usr/bin/env bash
# Runs the examples' host programs (examples/src/bin) on the simulated W25N01GV. Each
# checks what its example promises, power cuts included, and exits non-zero if a check
# fails; this script fails if any does. A few seconds in all.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

cargo build --release -q -p stagefs-examples --bins
status=0
for bin in data-logger settings-store firmware-update; do
    echo "-- $bin"
    "target/release/$bin" || status=1
done
exit "$status"
