# SPDX-License-Identifier: MIT
"""The file rows (issue 48): CONC readers of 4 KiB blocks at random
block-aligned offsets of one 64 MiB file, for a fixed time, from the page
cache (file-cache-4k) and with O_DIRECT (file-direct-4k), at two
concurrencies.  Beside weft under WEFT_IO=uring (the workers' rings) and
WEFT_IO=epoll (the offload pool): fio's io_uring engine at the same queue
depth (the limit), Go (os.File.ReadAt from goroutines) and Tokio (read_at in
spawn_blocking, which is tokio::fs's hop).  Every program runs at 1 worker
(GOMAXPROCS, Tokio's worker threads; fio is one thread), unpinned.

The file lives in the build directory (BUILD/bench/file-4k.dat), on the
disk the build is on: O_DIRECT needs a file system that takes it (tmpfs
does not), which the runner checks with an O_DIRECT open first.  Each
block starts with its index, which the programs check."""

import dataclasses
import json
import os
import shutil
import struct
import subprocess
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

from .fmt import fmt_mr, fmt_ratio, fmt_sig, target_cell
from .peers import Ctx, Peer, Skip
from .progress import Progress
from .runs import interleave, run_cmd
from .stats import med_range, pair_ratios

FILE_GROUP = "file"
FILE_MIB = 64
BLOCK = 4096
FILE_WORKERS = 1
CONCS = (64, 256)
# seconds of the timed window (after a 0.5 s warm-up) per invocation
FILE_SECONDS = {False: 3.0, True: 1.0}
SUBJECT = "weft-uring"
IMPLS = ("weft-uring", "weft-epoll", "fio", "go", "tokio")


@dataclasses.dataclass
class FileBench:
    name: str  # the RESULT name (file-cache-4k, file-direct-4k)
    conc: int
    direct: bool
    group: str = FILE_GROUP

    @property
    def label(self) -> str:
        return f"{self.name} x{self.conc}"

    @property
    def title(self) -> str:
        where = "O_DIRECT" if self.direct else "the page cache"
        return (f"{self.conc} readers x 4 KiB random reads of a {FILE_MIB} "
                f"MiB file from {where}")


FILE_BENCHES: List[FileBench] = [
    FileBench(n, c, n == "file-direct-4k")
    for n in ("file-cache-4k", "file-direct-4k") for c in CONCS]

# The targets: (row, peer, at least this ratio of weft-uring's
# reads/s to the peer's)
TARGETS = [("file-direct-4k", "fio", 0.9),
           ("file-cache-4k", "tokio", 2.0),
           ("file-cache-4k", "go", 2.0)]


@dataclasses.dataclass
class Impl:
    """One program of the file rows (a peer, weft under one backend, fio)."""
    name: str
    cmd: Callable[[FileBench, Path, float], List[str]]
    env: Dict[str, str] = dataclasses.field(default_factory=dict)


def file_rows(args) -> List[FileBench]:
    return [b for b in FILE_BENCHES
            if b.group in args.only or b.name in args.only]


def make_file(path: Path) -> None:
    """FILE_MIB MiB of blocks, each starting with its index (kept across
    invocations when its size is right)."""
    size = FILE_MIB << 20
    if path.exists() and path.stat().st_size == size:
        return
    pad = bytes(BLOCK - 8)
    with open(path, "wb") as f:
        for i in range(size // BLOCK):
            f.write(struct.pack("<Q", i) + pad)


def direct_refused(path: Path) -> Optional[str]:
    """Why O_DIRECT cannot be had on path's file system, or None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    except OSError as e:
        return f"O_DIRECT open of {path}: {e.strerror}"
    os.close(fd)
    return None


def into_cache(path: Path) -> None:
    with open(path, "rb") as f:
        while f.read(1 << 20):
            pass


def fio_cmd(fb: FileBench, path: Path, seconds: float) -> List[str]:
    return ["fio", "--name=file", f"--filename={path}", "--ioengine=io_uring",
            f"--direct={int(fb.direct)}", "--rw=randread", f"--bs={BLOCK}",
            f"--iodepth={fb.conc}", "--time_based", f"--runtime={seconds:g}",
            "--ramp_time=0.5", "--norandommap", "--randrepeat=0",
            "--invalidate=0", "--output-format=json"]


def run_fio(fb: FileBench, path: Path, seconds: float, timeout: float
            ) -> dict:
    """fio's run as a record like run_cmd's: ns (its runtime), ops (its
    reads), cpu_ns (its usr + sys CPU over the runtime)."""
    cmd = fio_cmd(fb, path, seconds)
    rec = {"peer": "fio", "cmd": cmd}
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, timeout=timeout)
        job = json.loads(p.stdout)["jobs"][0]
    except subprocess.TimeoutExpired:
        rec.update(ok=False, error=f"timed out after {timeout:.0f} s")
        return rec
    except (ValueError, KeyError, IndexError):
        rec.update(ok=False, error=f"fio: exit status {p.returncode}: "
                   f"{(p.stderr or '').strip()[-200:]}")
        return rec
    ns = job["job_runtime"] * 1e6
    ops = job["read"]["total_ios"]
    cpu = (job["usr_cpu"] + job["sys_cpu"]) / 100 * ns
    rec.update(ok=job.get("error", 0) == 0 and ops > 0, ns=int(ns), ops=ops,
               extra={"cpu_ns": str(int(cpu))})
    if not rec["ok"]:
        rec["error"] = f"fio error {job.get('error')}"
    return rec


def find_impls(ctx: Ctx, peers: List[Peer]) -> Tuple[List[Impl], List[str]]:
    """The programs that can run, and "name: why" for those that cannot."""
    impls, absent = [], []
    weft = ctx.build_dir / "bench" / "file-bench"
    if not os.access(weft, os.X_OK):
        raise Skip(f"{weft} not built (meson compile -C {ctx.build_dir})")
    for backend in ("uring", "epoll"):
        impls.append(Impl(f"weft-{backend}", lambda fb, path, s: [
            str(weft), fb.name, str(FILE_WORKERS), str(path), str(fb.conc),
            f"{s:g}"], {"WEFT_IO": backend}))
    if shutil.which("fio"):
        impls.append(Impl("fio", fio_cmd))
    else:
        absent.append("fio: not found (apt-get install -y fio)")
    built = {p.name: p for p in peers}
    for name in ("go", "tokio"):
        p = built.get(name)
        if p is None or p.program is None:
            absent.append(f"{name}: its peer was not built")
            continue
        impls.append(Impl(name, lambda fb, path, s, prog=p.program: [
            str(prog), "file-read", fb.name, str(FILE_WORKERS), str(path),
            str(fb.conc), f"{s:g}"]))
    return impls, absent


def run_impl(impl: Impl, fb: FileBench, path: Path, quick: bool,
             timeout: float) -> dict:
    seconds = FILE_SECONDS[quick]
    if not fb.direct:
        into_cache(path)
    if impl.name == "fio":
        return run_fio(fb, path, seconds, timeout)
    env = dict(os.environ)
    env.update(impl.env)
    return run_cmd(impl.name, impl.cmd(fb, path, seconds), fb.name,
                   FILE_WORKERS, timeout, env)


def iops(rec: dict) -> Optional[float]:
    return rec["ops"] * 1e9 / rec["ns"] if rec.get("ns") else None


def cpu_us_per_read(rec: dict) -> Optional[float]:
    cpu = float((rec.get("extra") or {}).get("cpu_ns", -1))
    return cpu / rec["ops"] / 1e3 if cpu >= 0 and rec.get("ops") else None


def summarize_file(fb: FileBench, runs: Dict[str, List[dict]],
                   impls: List[Impl], absent: List[str]) -> dict:
    """Per program the median (min-max) reads/s and CPU µs per read; per
    other program the run-by-run ratios of weft-uring's to its; the
    issue's targets of this row."""
    s = {"bench": fb.name, "label": fb.label, "conc": fb.conc,
         "unit": "reads/s", "impls": {}, "ratios": {}, "absent": absent}
    for im in impls:
        recs = runs.get(im.name, [])
        good = [r for r in recs if r["ok"]]
        s["impls"][im.name] = {
            "rate": med_range([x for x in map(iops, good) if x]),
            "cpu_us": med_range([x for x in map(cpu_us_per_read, good)
                                 if x is not None]),
            "failed": sum(1 for r in recs if not r["ok"])}
    if any(im.name == SUBJECT for im in impls):
        rates = pair_ratios(runs, impls, iops, SUBJECT)
        cpus = pair_ratios(runs, impls, cpu_us_per_read, SUBJECT)
        s["ratios"] = {m: {"rate": rates[m], "cpu": cpus[m]} for m in rates}
    s["targets"] = []
    for row, peer, bound in TARGETS:
        if row != fb.name:
            continue
        r = (s["ratios"].get(peer) or {}).get("rate")
        x = r["median"] if r else None
        s["targets"].append({"what": f"{SUBJECT}/{peer} reads/s >= {bound:g}",
                             "ratio": x,
                             "met": None if x is None else x >= bound})
    return s


def file_table_rows(summary: List[dict]):
    """The file rows' table: reads/s and CPU per read of every program,
    weft-uring's ratios to each other's, the targets."""
    head = ["row"] + [f"{m} reads/s median (min–max)" for m in IMPLS]
    head += [f"{m} CPU µs/read" for m in IMPLS]
    others = IMPLS[1:]
    head += [f"{SUBJECT}/{m} reads/s" for m in others]
    head += [f"{SUBJECT}/{m} CPU per read" for m in others]
    head += ["targets (issue 48)", "notes"]
    rows = []
    for s in summary:
        ms = s["impls"]
        row = [s["label"]]
        row += [fmt_mr((ms.get(m) or {}).get("rate"),
                       (ms.get(m) or {}).get("failed", 0)) for m in IMPLS]
        row += [fmt_sig(c["median"]) if c else "—" for c in
                ((ms.get(m) or {}).get("cpu_us") for m in IMPLS)]
        row += [fmt_ratio((s["ratios"].get(m) or {}).get("rate"))
                for m in others]
        row += [fmt_ratio((s["ratios"].get(m) or {}).get("cpu"))
                for m in others]
        row += [target_cell(s["targets"]), "; ".join(s["absent"]) or "—"]
        rows.append(row)
    return head, rows


def file_footnote(args) -> str:
    return (f"CONC readers (x64, x256) of 4 KiB blocks at random offsets of "
            f"a {FILE_MIB} MiB file in the build directory, for "
            f"{FILE_SECONDS[args.quick]:g} s after 0.5 s of warm-up, at 1 "
            f"worker, unpinned; the page-cache rows read the file into the "
            f"cache first.  weft: bench/file-bench.c, weft_pread from CONC "
            f"coroutines, WEFT_IO=uring (a try with RWF_NOWAIT on the worker, "
            f"then the worker's ring) and WEFT_IO=epoll (the same try, then "
            f"the offload pool); fio: --ioengine=io_uring --iodepth=CONC, one "
            f"thread (the limit); Go: os.File.ReadAt from CONC goroutines, "
            f"GOMAXPROCS=1; Tokio: FileExt::read_at inside spawn_blocking "
            f"from CONC tasks, 1 worker thread (tokio::fs's own hop, without "
            f"its File's seek and buffer copy).  CPU µs/read: the process's "
            f"user + system time over the window (every thread, helpers and "
            f"io_uring's kernel workers included; fio's usr_cpu + sys_cpu) "
            f"per read.  Ratios: medians of run-by-run ratios, "
            f"{SUBJECT} over the other (reads/s: higher is {SUBJECT} faster; "
            f"CPU: lower is {SUBJECT} cheaper).  "
            f"{args.runs if not args.quick else 1} run(s) per program and "
            f"row, interleaved.")


def file_steps(args) -> List[Tuple[str, int]]:
    n = 1 if args.quick else args.runs
    return [(f"[{fb.label}]", n * len(IMPLS)) for fb in file_rows(args)]


def run_files(args, peers: List[Peer], ctx: Ctx, prog: Progress,
              failures: List[str]):
    """Every selected file row: (points, summary)."""
    rows = file_rows(args)
    if not rows:
        return [], []
    try:
        impls, absent = find_impls(ctx, peers)
    except Skip as e:
        print(f"bench.py: skipped the file rows: {e}")
        return [], []
    for a in absent:
        print(f"bench.py: file: skipped {a}")
    path = ctx.out_dir / "file-4k.dat"
    make_file(path)
    no_direct = direct_refused(path)
    if no_direct:
        print(f"bench.py: file: skipped the O_DIRECT rows: {no_direct}")
    fargs = type(args)(**vars(args))
    fargs.runs = fargs.peer_runs = 1 if args.quick else args.runs
    points, summary = [], []
    for fb in rows:
        if fb.direct and no_direct:
            continue
        tag = f"[{fb.label}]"
        prog.step(tag)
        runs = interleave(impls, fargs, tag, prog, failures,
                          lambda im: run_impl(im, fb, path, args.quick,
                                              args.timeout))
        points.append({"bench": fb.name, "conc": fb.conc, "runs": runs})
        summary.append(summarize_file(fb, runs, impls, absent))
    return points, summary
