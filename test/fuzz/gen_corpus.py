#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Writes the seed inputs of test/fuzz/corpus/ (the encoding: README.md).

    test/fuzz/gen_corpus.py [DIR]      default: test/fuzz/corpus next to this file
"""
import os
import sys

# opcodes (enum op in fuzz_api.c)
(YIELD, SPAWN, JOIN, DETACH, CANCEL, SLEEP, SEND, RECV, CLOSE, SELECT, LOCK, TRYLOCK,
 UNLOCK, CWAIT, CSIGNAL, CBCAST, WGADD, WGDONE, WGWAIT, WRITE, READ, WAIT, FDCLOSE,
 LSET, LGET, MISUSE, NAME, QUERY, SEND2, RECV2, OFFLOAD, IO2) = range(32)

# deadline bytes (low bits of the last argument)
INF, PAST, NOW, D20US, D100US, D500US, D2MS, D50US = range(8)
FAR = 7 | 8          # INT64_MAX - 1 s (actors only)
NEVER = 7 | 8 | 16   # INT64_MAX
THREAD = 6           # "who" of the plain thread


def header(workers=2, actors=2, thread=False, mode=0, bad_init=False, keys_limit=False,
           caps=(2, 0, 1), eszs=(8, 8, 16), grace=1, sock=0, bad_variant=0, big_stack=False, weft_main=False, leave_unjoined=False):
    cap_code = {0: 0, 1: 1, 2: 2, 4: 3}
    esz_code = {8: 0, 0: 1, 16: 2, 40: 3}
    h0 = (workers - 1) | (actors - 1) << 1 | int(thread) << 3 | mode << 4 | \
        int(bad_init) << 6 | int(keys_limit) << 7
    h1 = sum(cap_code[c] << (2 * i) for i, c in enumerate(caps)) | grace << 6
    h2 = sum(esz_code[e] << (2 * i) for i, e in enumerate(eszs)) | sock << 6
    h3 = bad_variant | int(big_stack) << 2 | int(weft_main) << 3 | int(leave_unjoined) << 4
    return bytes([h0, h1, h2, h3])


def insn(who, op, a=0, b=0):
    return bytes([who << 5 | op, a & 255, b & 255])


def io(fd, lenidx=0, extra=0):
    """The first argument of an I/O op: fd index 0..5, length index 0..7."""
    a = extra | lenidx << 3
    while a % 6 != fd:
        a += 1
        assert (a >> 3) & 7 == lenidx or extra, "fd/length clash"
    return a


SEEDS = {}

# Buffered channels: two senders, one receiver, a close, a drain at the end.
SEEDS["chan-buffered"] = header(actors=3, caps=(4, 2, 1), eszs=(8, 16, 40), grace=2) + b"".join([
    insn(0, SEND, 0, D100US), insn(1, SEND, 0, D100US), insn(0, SEND, 1, D500US),
    insn(2, RECV, 0, D500US), insn(2, RECV, 1, D500US), insn(0, SEND, 0, INF),
    insn(1, SEND, 2, D2MS), insn(2, RECV, 2, D2MS), insn(1, CLOSE, 0),
    insn(0, SEND, 0, D50US), insn(2, RECV, 0, PAST), insn(2, RECV, 0, NOW),
])

# Rendezvous and signal-only channels, select with several cases.
SEEDS["chan-rendezvous-select"] = header(actors=3, caps=(0, 0, 2), eszs=(8, 0, 16), grace=2) + b"".join([
    insn(0, SEND, 0, D500US), insn(1, RECV, 0, D500US), insn(2, SELECT, 3, D500US),
    insn(0, SELECT, 7, D2MS), insn(1, SELECT, 5, INF), insn(2, SEND, 1, D100US | 64),
    insn(0, RECV, 1, D100US), insn(1, SEND2, 2, PAST), insn(2, RECV2, 2, D50US | 64),
    insn(0, CLOSE, 2), insn(1, SELECT, 1, D20US),
])

# Mutexes and condition variables.
SEEDS["mutex-cond"] = header(actors=3, grace=2) + b"".join([
    insn(0, LOCK, 0), insn(1, LOCK, 0), insn(2, TRYLOCK, 0), insn(0, CWAIT, 0, D500US),
    insn(2, CSIGNAL, 0), insn(1, CWAIT, 0, INF), insn(0, UNLOCK, 0), insn(2, CBCAST, 0),
    insn(1, UNLOCK, 0), insn(2, LOCK, 0), insn(2, LOCK, 0), insn(2, LOCK, 2),
    insn(2, UNLOCK, 1), insn(0, LOCK, 1), insn(0, LOCK, 2), insn(0, CWAIT, 4, D100US),
])

# Wait groups: adds, dones, a negative count, waits with and without deadlines.
SEEDS["waitgroup"] = header(actors=3, grace=2) + b"".join([
    insn(0, WGADD, 0 | 1 << 1), insn(1, WGWAIT, 0, D2MS), insn(2, WGWAIT, 0, INF),
    insn(0, WGDONE, 0), insn(0, WGDONE, 0), insn(0, WGDONE, 0), insn(1, WGADD, 1 | 6 << 1),
    insn(2, WGADD, 1 | 7 << 1), insn(1, WGWAIT, 1, PAST), insn(0, WGADD, 0 | 2 << 1),
])

# Children: spawn (bodies of 2-3 instructions), join, detach, cancel.
SEEDS["spawn-join-cancel"] = header(actors=2, grace=3) + b"".join([
    insn(0, SPAWN, 2), insn(0, SLEEP, 0, D500US), insn(0, SEND, 0, D2MS), insn(0, YIELD),
    insn(0, SPAWN, 1, 0x80), insn(0, SLEEP, 0, D2MS), insn(0, RECV, 0, D2MS),
    insn(0, SPAWN, 0), insn(0, WGWAIT, 0, D2MS), insn(0, CANCEL, 2), insn(0, JOIN, 0),
    insn(0, JOIN, 2), insn(1, CANCEL, 0x20), insn(1, SLEEP, 0, INF), insn(0, DETACH, 1),
    insn(1, CANCEL, 0x30), insn(1, RECV, 0, INF),
])

# Socket pairs and a pipe: writes, reads, waits, a close while a reader waits.
SEEDS["io-socketpair"] = header(actors=3, grace=3, sock=1) + b"".join([
    insn(0, WRITE, io(0, 4), D500US), insn(1, READ, io(1, 5), D2MS),
    insn(1, WRITE, io(1, 7), D2MS), insn(0, READ, io(0, 3), D500US),
    insn(2, WRITE, io(3, 7), D500US), insn(0, READ, io(2, 7), INF),
    insn(2, WAIT, io(2, 3), D100US), insn(1, WRITE, io(5, 4), D500US),
    insn(2, READ, io(4, 5), D500US), insn(1, READ, io(5, 1), PAST),
    insn(2, WAIT, io(4, 1), D20US), insn(0, IO2, io(3, 2), 0x80 | D100US),
])

SEEDS["io-close-while-waiting"] = header(actors=2, grace=2) + b"".join([
    insn(0, READ, io(0, 3), INF), insn(1, SLEEP, 0, D100US), insn(1, FDCLOSE, 0xc0 | 0),
    insn(1, READ, io(0, 3), D100US), insn(1, WRITE, io(1, 3), D100US),
    insn(1, FDCLOSE, 0xc0 | 0), insn(0, WAIT, io(1, 1), D100US),
    insn(1, FDCLOSE, 0xc0 | 5 | 6 * 4), insn(0, READ, io(4, 2), D100US),
])

# Coroutine-local keys (destructors, the 4-pass chain), names, queries.
SEEDS["locals-names"] = header(actors=2, grace=2, leave_unjoined=True) + b"".join([
    insn(0, LSET, 0, 1), insn(0, LSET, 2, 4 | 3), insn(0, LGET, 0), insn(0, YIELD),
    insn(0, LGET, 2), insn(0, NAME, 2), insn(0, QUERY), insn(1, LSET, 1, 2),
    insn(1, LSET, 1, 0), insn(1, LGET, 1), insn(1, NAME, 3), insn(1, SPAWN, 1),
    insn(1, LSET, 2, 4 | 2), insn(1, LSET, 0, 3), insn(0, NAME, 0), insn(1, QUERY),
    insn(1, SPAWN, 0), insn(1, LSET, 0, 2),   # slot 1: left to weft_shutdown
])

# The plain thread: channel traffic, wait groups, spawn/join from a thread, EPERM probes.
SEEDS["plain-thread"] = header(actors=2, thread=True, caps=(1, 0, 2), grace=2) + b"".join([
    insn(THREAD, SEND, 0, INF), insn(0, RECV, 0, D2MS), insn(THREAD, RECV, 1, D500US),
    insn(1, SEND, 1, D500US), insn(THREAD, SPAWN, 1), insn(THREAD, SLEEP, 0, D100US),
    insn(THREAD, JOIN, 0), insn(THREAD, LOCK, 0), insn(THREAD, READ, 3),
    insn(THREAD, WAIT, 4, 2), insn(THREAD, FDCLOSE, 5), insn(THREAD, LSET, 6),
    insn(THREAD, QUERY, 7), insn(THREAD, WGADD, 0 | 0 << 1), insn(THREAD, WGWAIT, 0, D100US),
    insn(1, WGDONE, 0), insn(THREAD, CSIGNAL, 1), insn(THREAD, SELECT, 3, INF),
])

# Every misuse the header gives an errno for.
SEEDS["misuse"] = header(actors=1, grace=2, eszs=(8, 0, 16)) + b"".join(
    insn(0, MISUSE, k, k * 37) for k in range(20) if k != 17)  # 17: regressions/

# Sleeps: past, now, short, far in the future (ended by cancel).
SEEDS["sleep-deadlines"] = header(actors=2, workers=1, grace=2, weft_main=True) + b"".join([
    insn(0, SLEEP, 0, PAST), insn(0, SLEEP, 0, PAST | 8), insn(0, SLEEP, 0, NOW),
    insn(0, SLEEP, 0, D20US), insn(0, SLEEP, 0, D500US), insn(1, SLEEP, 0, FAR),
    insn(0, SLEEP, 0, D2MS), insn(0, RECV, 0, NEVER),
])

# Teardown variants: close-then-cancel, cancel-only-stragglers; key limit, bad init.
SEEDS["teardown-keys-init"] = header(actors=4, mode=3, bad_init=True, keys_limit=True,
                                     bad_variant=1, big_stack=True, grace=1) + b"".join([
    insn(0, RECV, 0, INF), insn(1, LOCK, 0), insn(2, LOCK, 0), insn(3, WGADD, 0 | 0 << 1),
    insn(3, WGWAIT, 0, INF), insn(1, CWAIT, 2, INF), insn(0, SEND, 1, INF),
])

# weft_offload (nop, sleep, channel traffic from the helper, plain-thread calls),
# weft_stats_get from a coroutine and from the thread.
SEEDS["offload-stats"] = header(actors=3, thread=True, grace=3, caps=(2, 0, 1)) + b"".join([
    insn(0, OFFLOAD, 0), insn(1, OFFLOAD, 1, 5), insn(2, OFFLOAD, 2 | 0 << 2, 8 | 6),
    insn(0, OFFLOAD, 2 | 0 << 2, 4), insn(1, OFFLOAD, 3, 1), insn(2, QUERY, 1),
    insn(THREAD, OFFLOAD, 1, 3), insn(THREAD, QUERY, 1), insn(0, OFFLOAD, 0xf0),
    insn(1, CANCEL, 0x30), insn(1, OFFLOAD, 0), insn(2, OFFLOAD, 2 | 1 << 2, 8 | 7),
    insn(0, RECV, 1, D2MS), insn(2, QUERY, 3),
])

# One worker, everything at once.
SEEDS["mixed-one-worker"] = header(workers=1, actors=4, thread=True, mode=1, grace=2,
                                   caps=(0, 1, 4), eszs=(40, 16, 8), sock=2) + b"".join([
    insn(0, SPAWN, 2), insn(0, SEND, 0, D500US), insn(0, LOCK, 1), insn(1, RECV, 0, D2MS),
    insn(2, SELECT, 6, D500US), insn(3, WRITE, io(1, 6), D2MS), insn(0, READ, io(0, 6), D2MS),
    insn(THREAD, SEND, 2, D500US), insn(1, LOCK, 1), insn(2, CWAIT, 2, D100US),
    insn(3, WGADD, 1 | 1 << 1), insn(0, WGDONE, 1), insn(1, UNLOCK, 1), insn(0, UNLOCK, 1),
    insn(2, LSET, 2, 4 | 3), insn(THREAD, RECV, 1, INF), insn(3, SEND2, 1, D50US),
])


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "corpus")
    os.makedirs(out, exist_ok=True)
    for name, data in SEEDS.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
    print(f"wrote {len(SEEDS)} seeds to {out}")


if __name__ == "__main__":
    main()
