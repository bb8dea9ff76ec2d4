#!/usr/bin/env python3
"""Loads that run on a FUSE-mounted StageFS image while the simulated part may lose
power, and the checks after the remount.

Each load writes a host-side ledger (outside the mount) of what the file system
acknowledged as durable: a line is added only after fsync (or an SQLite COMMIT)
returned. After the cut, the remount must hold everything in the ledger.

  cutload.py files  MNT LEDGER   small files (CUTLOAD_FILES of them, default 300)
                                 rewritten in turn, each fsynced, plus one log file
                                 appended with an fsync per record
  cutload.py sqlite MNT LEDGER   SQLite transactions, one committed id per line
  cutload.py check-files  MNT LEDGER
  cutload.py check-sqlite MNT LEDGER
"""
import hashlib
import os
import sqlite3
import sys


def content(i):
    # Sizes from 1 byte to ~9 KiB: inline files, partial pages and whole pages.
    n = 1 + (i * 977) % 9000
    return hashlib.sha256(str(i).encode()).digest() * (n // 32 + 1)


def record(i):
    return ("record %06d %s\n" % (i, "x" * (i % 90))).encode()


# Distinct files the load rewrites in turn (fewer on small parts).
NFILES = int(os.environ.get("CUTLOAD_FILES", "300"))


def files(mnt, ledger):
    os.makedirs(os.path.join(mnt, "d"), exist_ok=True)
    with open(ledger, "a") as led:
        log = os.open(os.path.join(mnt, "log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        try:
            for i in range(100000):
                p = os.path.join(mnt, "d", "f%05d" % (i % NFILES))
                with open(p, "wb") as f:
                    f.write(content(i)[: 1 + (i * 977) % 9000])
                    f.flush()
                    os.fsync(f.fileno())
                led.write("file %s %d\n" % (p[len(mnt):], i))
                os.write(log, record(i))
                os.fsync(log)
                led.write("log %d\n" % i)
                led.flush()
        except OSError as e:
            print("files: stopped at %d: %s" % (i, e))
            return
        finally:
            try:
                os.close(log)
            except OSError:
                pass
    print("files: ran to the end without a cut")


def check_files(mnt, ledger):
    latest = {}
    logged = -1
    for line in open(ledger):
        kind, *rest = line.split()
        if kind == "file":
            latest[rest[0]] = int(rest[1])
        else:
            logged = int(rest[0])
    bad = 0
    for path, i in latest.items():
        want = content(i)[: 1 + (i * 977) % 9000]
        try:
            got = open(mnt + path, "rb").read()
        except OSError as e:
            print("MISSING %s (fsynced as version %d): %s" % (path, i, e))
            bad += 1
            continue
        # The next version (opened with O_TRUNC, written, not yet fsynced) may have
        # landed too, whole or in part: POSIX leaves that open.
        nxt = content(i + NFILES)[: 1 + ((i + NFILES) * 977) % 9000]
        if got != want and not nxt.startswith(got):
            print("WRONG %s: %d bytes, fsynced version %d has %d" % (path, len(got), i, len(want)))
            bad += 1
    log = open(os.path.join(mnt, "log"), "rb").read() if logged >= 0 else b""
    want = b"".join(record(i) for i in range(logged + 1))
    if not log.startswith(want):
        print("LOG: %d bytes, the %d fsynced records need %d" % (len(log), logged + 1, len(want)))
        bad += 1
    print("check-files: %d files, %d log records fsynced; %d wrong" % (len(latest), logged + 1, bad))
    return bad == 0


def sqlite_load(mnt, ledger):
    db = sqlite3.connect(os.path.join(mnt, "t.db"), isolation_level=None)
    db.execute("pragma synchronous=full")
    db.execute("create table if not exists t(tx integer, k integer, v blob)")
    with open(ledger, "a") as led:
        try:
            for tx in range(100000):
                db.execute("begin")
                for k in range(1 + tx % 7):
                    db.execute("insert into t values(?,?,?)", (tx, k, os.urandom(40 + 13 * k)))
                if tx % 5 == 4:
                    db.execute("delete from t where tx=?", (tx - 3,))
                db.execute("commit")
                led.write("%d\n" % tx)
                led.flush()
        except sqlite3.Error as e:
            print("sqlite: stopped at transaction %d: %s" % (tx, e))
            return
    print("sqlite: ran to the end without a cut")


def check_sqlite(mnt, ledger):
    done = [int(x) for x in open(ledger)]
    db = sqlite3.connect(os.path.join(mnt, "t.db"))
    ok = db.execute("pragma integrity_check").fetchone()[0]
    bad = 0 if ok == "ok" else 1
    if bad:
        print("integrity_check: %s" % ok)
    have = dict(db.execute("select tx, count(*) from t group by tx").fetchall())
    committed = set(done)
    last = done[-1] if done else -1
    for tx in done:
        full = 1 + tx % 7
        deleter = tx + 3 if (tx + 3) % 5 == 4 else None
        if deleter in committed:
            allowed = {0}
        elif deleter == last + 1:
            # The transaction under way at the cut may have committed.
            allowed = {0, full}
        else:
            allowed = {full}
        if have.get(tx, 0) not in allowed:
            print("tx %d: %d rows, committed %s" % (tx, have.get(tx, 0), sorted(allowed)))
            bad += 1
    print("check-sqlite: integrity %s, %d committed transactions; %d wrong" % (ok, len(done), bad))
    return bad == 0


if __name__ == "__main__":
    cmd, mnt, ledger = sys.argv[1:4]
    if cmd == "files":
        files(mnt, ledger)
    elif cmd == "sqlite":
        sqlite_load(mnt, ledger)
    elif cmd == "check-files":
        sys.exit(0 if check_files(mnt, ledger) else 1)
    elif cmd == "check-sqlite":
        sys.exit(0 if check_sqlite(mnt, ledger) else 1)
    else:
        sys.exit("unknown command " + cmd)
