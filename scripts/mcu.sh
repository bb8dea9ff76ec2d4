#!/usr/bin/env bash
# Cortex-M check: builds the no_std library crates for thumbv6m and thumbv7em without std
# or alloc, builds the board firmware (RP2040 and STM32F4 with a W25N01GV) and the QEMU
# firmware (boards/qemu-m4), prints the size of each and runs the QEMU one; fails if any
# build fails or the QEMU firmware reports a failed check. Then builds each library crate
# with its defmt feature, and the examples' no_std logic (examples/), for thumbv7em.
#
# Uses Debian's Rust (1.96, /usr/bin) with RUSTC_BOOTSTRAP=1 and -Zbuild-std=core, as in
# shared/recipes/mcu-qemu.md, and installs what it needs (needs root on a fresh machine).
#
# Environment: QEMU_TIMEOUT (seconds, default 300).
set -euo pipefail

# Library crates built for the MCU targets, as `name` or `name:feature,feature` (built with
# --no-default-features plus those features). nand-hal must build; the others are built
# when crates/<name>/Cargo.toml exists.
NO_STD_CRATES=("nand-hal:sim,spi,ecc" "paragc" "oftl" "stagefs-core")
REQUIRED_CRATES=("nand-hal")
TARGETS=(thumbv6m-none-eabi thumbv7em-none-eabihf)
FIRMWARE=boards/qemu-m4
FIRMWARE_TARGET=thumbv7em-none-eabihf
# Firmware for real boards, as `directory:target`: built and sized, not run (the demo
# they run, boards/app, runs under QEMU in $FIRMWARE over the SPI chip model).
BOARDS=("boards/rp2040-w25n01gv:thumbv6m-none-eabi" "boards/stm32f4-w25n01gv:thumbv7em-none-eabihf")

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
# shellcheck source=scripts/lib.sh
source scripts/lib.sh

apt_ensure rustc-web cargo-web rust-web-src qemu-system-arm binutils-arm-none-eabi

# Debian's toolchain, not the rustup proxies; a separate target dir keeps the host cache.
export RUSTC_BOOTSTRAP=1 RUSTC=/usr/bin/rustc RUSTDOC=/usr/bin/rustdoc
CARGO=/usr/bin/cargo
TARGET_DIR="$ROOT/target/mcu"
BUILD=("$CARGO" build --release -Zbuild-std=core --target-dir "$TARGET_DIR")
"$CARGO" --version
"$RUSTC" --version

is_required() {
    local r
    for r in "${REQUIRED_CRATES[@]}"; do
        [ "$r" = "$1" ] && return 0
    done
    return 1
}

for entry in "${NO_STD_CRATES[@]}"; do
    name="${entry%%:*}"
    features=""
    [ "$entry" != "$name" ] && features="${entry#*:}"
    if [ ! -f "crates/$name/Cargo.toml" ]; then
        if is_required "$name"; then
            echo "error: crates/$name/Cargo.toml is missing" >&2
            exit 1
        fi
        echo "skip $name: crates/$name/Cargo.toml does not exist"
        continue
    fi
    for target in "${TARGETS[@]}"; do
        echo "-- $name (features: ${features:-none}) for $target, core only"
        "${BUILD[@]}" --target "$target" -p "$name" --no-default-features ${features:+--features "$features"}
    done
done

for entry in "${BOARDS[@]}"; do
    dir="${entry%%:*}"
    target="${entry#*:}"
    echo "-- $dir for $target"
    (cd "$dir" && "${BUILD[@]}" --target "$target")
    echo "-- code and static RAM of $dir (release, $target)"
    arm-none-eabi-size "$TARGET_DIR/$target/release/$(basename "$dir")"
done

echo "-- $FIRMWARE for $FIRMWARE_TARGET"
(cd "$FIRMWARE" && "${BUILD[@]}" --target "$FIRMWARE_TARGET")
elf="$TARGET_DIR/$FIRMWARE_TARGET/release/$(basename "$FIRMWARE")"

echo "-- code and static RAM of $FIRMWARE (release, thumbv7em)"
arm-none-eabi-size "$elf"

echo "-- running $FIRMWARE under QEMU (mps2-an386, Cortex-M4)"
status=0
timeout "${QEMU_TIMEOUT:-300}" qemu-system-arm -cpu cortex-m4 -machine mps2-an386 -nographic \
    -semihosting-config enable=on,target=native -kernel "$elf" </dev/null || status=$?
case "$status" in
    0) echo "firmware: all checks passed" ;;
    124) echo "error: firmware timed out after ${QEMU_TIMEOUT:-300} s" >&2; exit 1 ;;
    *) echo "error: firmware exited with status $status" >&2; exit 1 ;;
esac

# ---- defmt features and the examples' no_std logic, for thumbv7em ----
# Each library crate with its `defmt` feature (defmt::Format for the public types and
# errors): a library build links nothing, so no global logger is needed. DEFMT_LOG=debug
# keeps the crates' defmt messages in the build, so their formats and arguments are
# checked too (without it defmt drops every level below error at compile time).
DEFMT_CRATES=("nand-hal:defmt,sim,spi,ecc,async" "paragc:defmt" "oftl:defmt" "stagefs-core:defmt")
for entry in "${DEFMT_CRATES[@]}"; do
    name="${entry%%:*}"
    echo "-- $name (features: ${entry#*:}) for thumbv7em-none-eabihf, core only, DEFMT_LOG=debug"
    DEFMT_LOG=debug "${BUILD[@]}" --target thumbv7em-none-eabihf -p "$name" \
        --no-default-features --features "${entry#*:}"
done
# The examples (examples/): their logic is a no_std library; the host programs that run
# it on the simulator are std-only (scripts/examples.sh runs them).
for features in "" defmt; do
    echo "-- stagefs-examples (features: ${features:-none}) for thumbv7em-none-eabihf, core only"
    "${BUILD[@]}" --target thumbv7em-none-eabihf -p stagefs-examples --no-default-features \
        ${features:+--features "$features"}
done
