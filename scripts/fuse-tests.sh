#!/usr/bin/env bash
# Real programs on a FUSE mount of a StageFS image (`stagefs mount`), then unmount,
# fsck and remount. Fails, never skips, when FUSE is unavailable. Run as root (CI) or
# as a user allowed to use fusermount3. Prints how long each program took.
#
#   sqlite   the sqlite3 shell creates a database and inserts rows in transactions;
#            after unmount, fsck and remount, `PRAGMA integrity_check` is ok and every
#            row is there
#   cp       `cp -r` of a source tree in, `diff -r` against the original, again after a
#            read-only remount
#   fio      fio with crc32c verification: at least 100,000 operations, no data error
#   cuts     a program runs while the simulated part loses power at the N-th program or
#            erase (clean and torn cuts); then fsck, remount, and everything the program
#            saw fsynced (or committed, for SQLite) is there
#
# Environment: FUSE_TESTS (space-separated subset of the above; default all).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD
# shellcheck source=scripts/lib.sh
source scripts/lib.sh

tests="${FUSE_TESTS:-sqlite cp fio cuts}"
for tool in fusermount3 sqlite3 fio python3 mountpoint; do
    command -v "$tool" >/dev/null || { echo "fuse-tests: $tool is missing" >&2; exit 1; }
done
[ -c /dev/fuse ] || { echo "fuse-tests: /dev/fuse is missing: FUSE is unavailable" >&2; exit 1; }

cargo build --release -q -p stagefs-cli
bin=$root/target/release/stagefs
work=$(mktemp -d)
mnt=$work/mnt
mkdir -p "$mnt"
pid=

cleanup() {
    if mountpoint -q "$mnt"; then fusermount3 -u "$mnt" || true; fi
    [ -n "$pid" ] && wait "$pid" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

# Mounts image $1 on $mnt with the extra arguments; waits until the kernel shows it.
up() {
    local img=$1
    shift
    "$bin" mount "$img" "$mnt" "$@" >>"$work/mount.log" 2>&1 &
    pid=$!
    for _ in $(seq 100); do
        if mountpoint -q "$mnt"; then return 0; fi
        if ! kill -0 "$pid" 2>/dev/null; then break; fi
        sleep 0.1
    done
    echo "fuse-tests: mounting $img failed:" >&2
    cat "$work/mount.log" >&2
    return 1
}

# Unmounts and waits for `stagefs mount` to save the image; fails if it failed.
down() {
    fusermount3 -u "$mnt"
    local rc=0
    wait "$pid" || rc=$?
    pid=
    tail -n 1 "$work/mount.log"
    return $rc
}

# fsck must report a clean image (0) or, after a cut, a recovered crash (1).
fsck_ok() {
    local rc=0
    # shellcheck disable=SC2086 # "$1" may carry --part
    "$bin" fsck $1 || rc=$?
    if [ "$rc" -gt "${2:-0}" ]; then
        echo "fuse-tests: fsck $1 exited $rc" >&2
        return 1
    fi
}

timed() {
    local label=$1 t0
    shift
    t0=$(date +%s.%N)
    "$@"
    printf 'fuse-tests: %s took %.1f s\n' "$label" "$(echo "$(date +%s.%N) - $t0" | bc)"
}

sqlite_test() {
    banner "sqlite3: a database in transactions, unmount, fsck, remount, integrity_check"
    local img=$work/sqlite.img sql=$work/load.sql
    "$bin" mkfs "$img" >/dev/null
    {
        echo "create table t(id integer primary key, tx integer, body text);"
        echo "create index t_tx on t(tx);"
        for tx in $(seq 1 40); do
            echo "begin;"
            for r in $(seq 1 50); do
                echo "insert into t(tx, body) values($tx, hex(randomblob($((r * 7)))));"
            done
            echo "update t set body = 'updated' where id % 17 = $((tx % 17));"
            echo "commit;"
        done
    } >"$sql"
    up "$img"
    timed "sqlite3 (40 transactions, 2,000 rows)" sqlite3 -bail "$mnt/test.db" <"$sql"
    down
    fsck_ok "$img"
    up "$img"
    local check
    check=$(sqlite3 "$mnt/test.db" "pragma integrity_check; select count(*), count(distinct tx) from t;")
    down
    echo "$check"
    [ "$check" = $'ok\n2000|40' ] || { echo "fuse-tests: sqlite check failed" >&2; return 1; }
}

cp_test() {
    banner "cp -r of a source tree in, diff -r, read-only remount, diff -r"
    local img=$work/cp.img src=$work/src
    mkdir -p "$src"
    # The project's sources (not build outputs): a few hundred files, deep paths.
    git -C "$root" ls-files -z | (cd "$root" && xargs -0 cp --parents -t "$src")
    "$bin" mkfs "$img" >/dev/null
    up "$img"
    timed "cp -r ($(find "$src" -type f | wc -l) files, $(du -sh "$src" | cut -f1))" cp -r "$src" "$mnt/src"
    timed "diff -r" diff -r "$src" "$mnt/src"
    down
    fsck_ok "$img"
    up "$img" -o ro
    timed "diff -r after a read-only remount" diff -r "$src" "$mnt/src"
    if touch "$mnt/src/new" 2>/dev/null; then
        echo "fuse-tests: a read-only mount accepted a write" >&2
        return 1
    fi
    down
}

fio_test() {
    banner "fio: random writes with crc32c verification, at least 100,000 operations"
    local img=$work/fio.img out=$work/fio.json
    "$bin" mkfs "$img" >/dev/null
    up "$img"
    timed "fio" fio --name=verify --directory="$mnt" --nrfiles=4 --size=16m \
        --rw=randwrite --bsrange=512-8k --io_size=400m --ioengine=psync --direct=1 \
        --verify=crc32c --verify_backlog=256 --verify_fatal=1 --fsync=64 \
        --randrepeat=1 --verify_state_save=0 --exitall_on_error --output-format=json --output="$out"
    local ops
    ops=$(python3 - "$out" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))["jobs"][0]
if j["error"]:
    sys.exit("fio error %d" % j["error"])
print(j["read"]["total_ios"] + j["write"]["total_ios"] + j["sync"]["total_ios"])
EOF
)
    echo "fio: $ops operations (writes, verifying reads, fsyncs), no verification error"
    [ "$ops" -ge 100000 ] || { echo "fuse-tests: fio ran only $ops operations" >&2; return 1; }
    down
    fsck_ok "$img"
}

# One cut run: load $1 (files or sqlite) on part $2 with the cut at $3 (N.KIND).
cut_run() {
    local load=$1 part=$2 cut=$3 img=$work/cut.img ledger=$work/ledger
    "$bin" --part "$part" mkfs "$img" >/dev/null
    : >"$ledger"
    up "$img" --part "$part" --cut-at "$cut"
    python3 "$root/scripts/fuse/cutload.py" "$load" "$mnt" "$ledger"
    down
    if ! tail -n 1 "$work/mount.log" | grep -q "power was cut"; then
        echo "fuse-tests: the load ended before the cut at $cut" >&2
        return 1
    fi
    fsck_ok "$img --part $part" 1
    up "$img" --part "$part"
    python3 "$root/scripts/fuse/cutload.py" "check-$load" "$mnt" "$ledger"
    down
    fsck_ok "$img --part $part"
}

cuts_test() {
    banner "power cuts inside the simulated part while programs run"
    local c
    # W25N01GV: cuts early in the life of the volume, in every shape.
    for c in 37.clean 211.prefix 500.some 1234.rand 2900.most; do
        timed "files on w25n01gv, cut at $c" cut_run files w25n01gv "$c"
    done
    for c in 90.clean 333.prefix 1500.rand; do
        timed "sqlite on w25n01gv, cut at $c" cut_run sqlite w25n01gv "$c"
    done
    # The small test part fills up, so these cuts land with garbage collection and
    # staging patches under way.
    for c in 3001.prefix 7777.rand; do
        CUTLOAD_FILES=24 timed "files on tiny, cut at $c" cut_run files tiny "$c"
    done
    timed "sqlite on tiny, cut at 4444.some" cut_run sqlite tiny 4444.some
}

for t in $tests; do
    "${t}_test"
done
echo "fuse-tests: all passed ($tests)"
