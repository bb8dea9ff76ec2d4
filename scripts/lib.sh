# shellcheck shell=bash
# Helpers shared by the scripts in this directory (sourced, not run).

# Prints a step banner.
banner() {
    printf '\n==== %s ====\n' "$*"
}

# Installs the Debian packages given as arguments that are not installed yet. Runs
# `apt-get update` at most once per CI run: the first call exports STAGEFS_APT_UPDATED so
# later calls (and child scripts) skip it.
apt_ensure() {
    local missing=() pkg
    for pkg in "$@"; do
        if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed'; then
            missing+=("$pkg")
        fi
    done
    if [ "${#missing[@]}" -eq 0 ]; then
        return 0
    fi
    if [ "$(id -u)" -ne 0 ]; then
        echo "error: need root to install: ${missing[*]}" >&2
        return 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    if [ -z "${STAGEFS_APT_UPDATED:-}" ]; then
        apt-get update -q
        export STAGEFS_APT_UPDATED=1
    fi
    echo "installing: ${missing[*]}"
    apt-get install -y -q "${missing[@]}"
}

# Installs cargo-fuzz with the host toolchain if `cargo fuzz` is missing.
ensure_cargo_fuzz() {
    if ! cargo fuzz --version >/dev/null 2>&1; then
        cargo install --locked cargo-fuzz
    fi
}
