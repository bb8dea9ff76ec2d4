#!/usr/bin/env bash
# Runs every cargo-fuzz target in fuzz/ for FUZZ_SECONDS seconds each (default 30) and
# fails if any of them finds a crash, leak, timeout or out-of-memory (all targets run
# regardless). Installs cargo-fuzz if missing.
#
# Usage: scripts/fuzz.sh [target...]   (default: every target `cargo fuzz list` shows)
# Environment: FUZZ_SECONDS, FUZZ_JOBS (parallel fuzzing processes per target, default 1).
#
# Seeds under fuzz/seeds/<target>/ and dictionaries under fuzz/dicts/<target>.dict are used
# when present; new inputs go to fuzz/corpus/<target>/ (not committed) and crashes to
# fuzz/artifacts/<target>/. Reproduce a crash with
#   RUSTC_BOOTSTRAP=1 cargo fuzz run <target> fuzz/artifacts/<target>/<file>
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
# shellcheck source=scripts/lib.sh
source scripts/lib.sh

SECONDS_PER_TARGET="${FUZZ_SECONDS:-30}"
JOBS="${FUZZ_JOBS:-1}"

ensure_cargo_fuzz
# cargo-fuzz passes nightly-only flags (sanitizers); the stable toolchain accepts them with
# RUSTC_BOOTSTRAP, as in shared/recipes/mcu-qemu.md.
export RUSTC_BOOTSTRAP=1

cd fuzz
if [ "$#" -gt 0 ]; then
    targets=("$@")
else
    mapfile -t targets < <(cargo fuzz list)
fi

logs="$(mktemp -d)"
echo "-- build fuzz targets"
cargo fuzz build
failed=()
for t in "${targets[@]}"; do
    echo "-- fuzz $t for ${SECONDS_PER_TARGET} s"
    mkdir -p "corpus/$t"
    corpora=("corpus/$t")
    [ -d "seeds/$t" ] && corpora+=("seeds/$t")
    flags=(-max_total_time="$SECONDS_PER_TARGET" -print_final_stats=1)
    [ -f "dicts/$t.dict" ] && flags+=(-dict="dicts/$t.dict")
    [ "$JOBS" -gt 1 ] && flags+=(-jobs="$JOBS" -workers="$JOBS")
    if cargo fuzz run "$t" "${corpora[@]}" -- "${flags[@]}" 2>"$logs/$t.log"; then
        grep -E '^stat::number_of_executed_units|^stat::peak_rss_mb|^Done ' "$logs/$t.log" || true
    else
        # The panic (or sanitizer / libFuzzer error) with its stack; the failing input
        # and the command to replay it were printed above by cargo-fuzz.
        grep -m 1 -A 40 -E 'panicked at|==[0-9]+== ?ERROR' "$logs/$t.log" >&2 ||
            tail -n 40 "$logs/$t.log" >&2
        echo "error: fuzz target $t failed; the input is in fuzz/artifacts/$t/" >&2
        failed+=("$t")
    fi
done
if [ "${#failed[@]}" -gt 0 ]; then
    echo "fuzz: ${#failed[@]} of ${#targets[@]} targets failed: ${failed[*]}" >&2
    exit 1
fi
echo "fuzz: ${#targets[@]} targets ran ${SECONDS_PER_TARGET} s each without a failure"
