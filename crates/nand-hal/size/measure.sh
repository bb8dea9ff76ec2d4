#!/usr/bin/env bash
# Builds the size binaries for thumbv7em-none-eabihf with Debian's Rust (as
# scripts/mcu.sh does) at opt-level s and z, LTO, and prints each one's .text and the
# driver's share: minus the baseline harness (dummy bus, delay and block_on; 0.2 KiB).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
export RUSTC_BOOTSTRAP=1 RUSTC=/usr/bin/rustc RUSTDOC=/usr/bin/rustdoc
TARGET_DIR="$(cd ../../.. && pwd)/target/mcu-size"
for opt in s z; do
    CARGO_PROFILE_RELEASE_OPT_LEVEL=$opt /usr/bin/cargo build --release -Zbuild-std=core \
        --target-dir "$TARGET_DIR" --bins -q
    dir="$TARGET_DIR/thumbv7em-none-eabihf/release"
    base=$(arm-none-eabi-size -A "$dir/baseline" | awk '$1==".text"{print $2}')
    echo "opt-level $opt (baseline harness .text $base B)"
    for bin in blocking async async_blockon; do
        text=$(arm-none-eabi-size -A "$dir/$bin" | awk '$1==".text"{print $2}')
        rodata=$(arm-none-eabi-size -A "$dir/$bin" | awk '$1==".rodata"{print $2}')
        printf '  %-14s .text %6d B  driver %6d B  .rodata %5d B\n' "$bin" "$text" $((text - base)) "${rodata:-0}"
    done
done
