# SPDX-License-Identifier: MIT
# weft.py: gdb support for the weft coroutine runtime.
#
# Commands:
#
#   info weft-coroutines
#       One line per live coroutine: its id, state, the worker running it
#       (or that ran it last), the gdb thread of that worker when the
#       coroutine is on a CPU right now, its entry function and its name
#       (weft_set_name).  '*' marks the coroutine the selected thread runs.
#
#   weft-bt ID [BT-OPTIONS...]
#       The backtrace of coroutine ID, unwound from the context it saved
#       when it last switched out (parked, yielded, runnable again).  Extra
#       arguments go to `backtrace` (e.g. `weft-bt 4 full`, `weft-bt 4 3`).
#       A coroutine that is running has no saved context: its frames are
#       those of its worker's thread, which the command names.
#
# Loading it:
#
#   In a build tree:   (gdb) source tools/gdb/weft.py
#   Installed:         meson installs it as
#       <prefix>/<datadir>/gdb/auto-load/<prefix>/<libdir>/libweft.so.<version>-gdb.py
#   which gdb loads with libweft.so when that auto-load directory is one of
#   its `auto-load scripts-directory` entries and is trusted.  With
#   prefix=/usr that is gdb's default; for another prefix (/usr/local by
#   default), in ~/.gdbinit:
#       add-auto-load-scripts-directory /usr/local/share/gdb/auto-load
#       add-auto-load-safe-path /usr/local/share/gdb/auto-load
#
# How it finds coroutines: lib/stack.c keeps every allocated stack on the
# list `pool.all` (struct weft__stack, lib/stack.h).  A coroutine's control
# block (struct weft_co, lib/coro.h) lives in its stack's payload, the
# WEFT__STACK_PAYLOAD bytes just below the stack header; the stack holds a
# live coroutine iff co->stack points back at it (the payload is zeroed when
# a stack is allocated and co->stack cleared when a coroutine is freed).
#
# How weft-bt unwinds: a switched-out coroutine is nothing but co->sp, the
# frame weft__ctx_switch pushed (lib/switch_x86_64.S, lib/switch_aarch64.S):
# its callee-saved registers and the address it returns to.  Registers
# cannot be written in a core file, and writing a live thread's registers is
# intrusive, so weft-bt writes none: it arms a Python unwinder that claims
# the selected thread's innermost frame and reports the coroutine's saved
# registers as that frame's caller's.  gdb's own unwinders then walk the
# coroutine's stack down to weft__ctx_entry, the outermost frame.  A frame
# filter hides the thread's frames, and the levels are renumbered so the
# coroutine's innermost frame is #0.  It works on live processes and cores.
#
# Requires gdb 10 or later (gdb.lookup_static_symbols) built with Python 3,
# and libweft's debug information (struct weft_co, the static `pool`).

import contextlib
import itertools
import re

import gdb
import gdb.unwinder

# The fallback when the debug information lacks the enumerator (stack.h).
WEFT__STACK_PAYLOAD = 256

# co->join of a coroutine that has finished and not been joined yet
# (WEFT__COMPLETION_SET, lib/park.h).
JOIN_DONE = 2

# enum weft__co_state (lib/park.h), the low byte of co->park_word, in case
# the debug information does not have the enumeration.
CO_STATES = {
    1: "runnable",
    2: "running",
    3: "yielding",
    4: "parking",
    5: "parked",
    6: "notified",
    7: "exiting",
}
CO_RUNNING = 2

# The most stacks walked: a corrupt list must not hang gdb.
MAX_STACKS = 1 << 22

# How deep below the selected thread's frames the coroutine's first frame
# may be found (inline frames at the thread's innermost pc add a few).
MAX_THREAD_FRAMES = 64


# ------------------------------------------------------------ the layout


class SavedFrame:
    """What weft__ctx_switch leaves at co->sp on one architecture.

    regs: register name -> index of the 8-byte word holding its value;
    pc_slot: the word holding the address the switch returns to;
    size: bytes popped by the switch back (the resumed sp is co->sp + size).
    """

    def __init__(self, sp_reg, pc_reg, regs, pc_slot, size):
        self.sp_reg = sp_reg
        self.pc_reg = pc_reg
        self.regs = regs
        self.pc_slot = pc_slot
        self.size = size


# switch_x86_64.S: 0: MXCSR/x87 CW, 8: r15, 16: r14, 24: r13, 32: r12,
# 40: rbx, 48: rbp, 56: return address (popped into rcx and jumped to).
X86_64 = SavedFrame(
    "rsp",
    "rip",
    {"r15": 1, "r14": 2, "r13": 3, "r12": 4, "rbx": 5, "rbp": 6},
    pc_slot=7,
    size=64,
)

# switch_aarch64.S: 0: x19 x20 ... 64: x27 x28, 80: x29 x30 (the switch
# returns to x30), 96..159: d8-d15, 160: FPCR, 168: padding.
AARCH64 = SavedFrame(
    "sp",
    "pc",
    dict([("x%d" % (19 + i), i) for i in range(10)] + [("x29", 10), ("x30", 11)]),
    pc_slot=11,
    size=176,
)


def saved_frame_layout():
    """The SavedFrame of the selected frame's architecture."""
    name = gdb.selected_frame().architecture().name()
    if "x86-64" in name:
        return X86_64
    if name.startswith("aarch64"):
        return AARCH64
    raise gdb.GdbError("weft: unsupported architecture %s" % name)


def u64_type():
    """A 64-bit unsigned type: register values must have the register's size."""
    for name in ("uint64_t", "unsigned long"):
        try:
            t = gdb.lookup_type(name)
        except gdb.error:
            continue
        if t.sizeof == 8:
            return t
    return gdb.selected_frame().architecture().integer_type(64, False)


# ------------------------------------------------------- the coroutines


def stack_pools():
    """Every copy of lib/stack.c's static `pool` (gdb.Value), by address.

    There is one per copy of libweft in the process (a shared library and a
    static one may both be there); other objfiles' statics named `pool` are
    told apart by their type, which must have the list head `all`.
    """
    try:
        symbols = gdb.lookup_static_symbols("pool")
    except AttributeError:  # gdb < 10
        symbols = [gdb.lookup_static_symbol("pool")]
    pools = {}
    for sym in symbols:
        if sym is None or not is_stack_pool(sym):
            continue
        value = sym.value()
        pools[int(value.address)] = value
    if not pools:
        try:
            value = gdb.parse_and_eval("'stack.c'::pool")
            pools[int(value.address)] = value
        except gdb.error:
            pass
    return list(pools.values())


def is_stack_pool(sym):
    """True if sym is stack.c's pool: a struct whose `all` heads the list."""
    t = sym.type.strip_typedefs()
    if t.code != gdb.TYPE_CODE_STRUCT:
        return False
    names = [f.name for f in t.fields()]
    return "all" in names and "all_lock" in names


def stack_payload_size():
    """WEFT__STACK_PAYLOAD from the debug information, else its known value."""
    try:
        return int(gdb.parse_and_eval("WEFT__STACK_PAYLOAD"))
    except gdb.error:
        return WEFT__STACK_PAYLOAD


def all_stacks(pool):
    """Yields each struct weft__stack * on pool.all, guarding against a
    corrupt list (a cycle, unreadable memory)."""
    seen = set()
    s = pool["all"]
    while int(s) != 0:
        if len(seen) == MAX_STACKS:
            gdb.write("weft: warning: stopped after %d stacks\n" % MAX_STACKS)
            return
        if int(s) in seen:
            gdb.write("weft: warning: the stack list loops at 0x%x\n" % int(s))
            return
        seen.add(int(s))
        yield s
        try:
            s = s["all_next"]
        except gdb.MemoryError:
            gdb.write("weft: warning: unreadable stack header at 0x%x\n" % int(s))
            return


NO_WEFT = "weft: no stack pool found (is libweft loaded, with its debug information?)"


def live_coroutines():
    """Every live coroutine, as a struct weft_co * value, sorted by id."""
    pools = stack_pools()
    try:
        co_ptr = gdb.lookup_type("struct weft_co").pointer()
    except gdb.error:
        pools = []
    if not pools:
        raise gdb.GdbError(NO_WEFT)
    char_ptr = gdb.lookup_type("char").pointer()
    payload = stack_payload_size()
    found = []
    for pool in pools:
        for s in all_stacks(pool):
            co = (s.cast(char_ptr) - payload).cast(co_ptr)
            try:
                if int(co["stack"]) == int(s):
                    found.append(co)
            except gdb.MemoryError:
                continue
    found.sort(key=lambda co: int(co["id"]))
    return found


def find_coroutine(co_id):
    """The live coroutine with that id, or None."""
    for co in live_coroutines():
        if int(co["id"]) == co_id:
            return co
    return None


def state_names():
    """enum weft__co_state's values -> short names ("parked")."""
    try:
        t = gdb.lookup_type("enum weft__co_state")
    except gdb.error:
        return CO_STATES
    return dict((f.enumval, f.name.replace("CO_", "", 1).lower()) for f in t.fields())


def co_state(co):
    """The state byte of co's park word (lib/park.h: park_state)."""
    return int(co["park_word"]) & 0xFF


def co_worker(co):
    """co's worker (struct weft__worker *), or None if it never ran."""
    w = co["worker"]
    return w if int(w) != 0 else None


def co_on_cpu(co):
    """True if co is running, or still switching in or out: its saved
    context is then not (or no longer) what its registers hold."""
    w = co_worker(co)
    on_worker = w is not None and int(w["current"]) == int(co)
    return on_worker or co_state(co) == CO_RUNNING


def co_name(co):
    """co's weft_set_name name ("" if none)."""
    try:
        return co["name"].string(length=int(co["name"].type.sizeof)).split("\0")[0]
    except (gdb.error, UnicodeDecodeError):
        return "?"


def worker_thread(worker):
    """The gdb.InferiorThread of a worker, matched by its pthread_t, or None
    (gdb knows thread handles only through libthread_db)."""
    inferior = gdb.selected_inferior()
    try:
        field = worker["thread"]
        want = bytes(inferior.read_memory(field.address, field.type.sizeof))
    except (gdb.error, gdb.MemoryError):
        return None
    for thread in inferior.threads():
        try:
            if bytes(thread.handle()) == want:
                return thread
        except (gdb.error, RuntimeError, AttributeError, TypeError):
            continue
    return None


def on_stack(co, sp):
    """True if the address sp lies in co's stack."""
    stack = co["stack"]
    return int(stack["lo"]) <= sp < int(stack)


def thread_on_stack(co):
    """The thread whose stack pointer lies in co's stack, or None: the
    fallback where gdb has no thread handles (qemu, some cores)."""
    original = gdb.selected_thread()
    if original is None:
        return None
    level = frame_level(gdb.selected_frame())
    try:
        for thread in gdb.selected_inferior().threads():
            try:
                thread.switch()
                if on_stack(co, int(gdb.parse_and_eval("$sp"))):
                    return thread
            except gdb.error:
                continue  # a running thread (non-stop mode)
    finally:
        original.switch()
        select_frame_at(level)
    return None


def co_thread(co):
    """The gdb thread running co, or None (co not on a CPU, or not found)."""
    if not co_on_cpu(co):
        return None
    w = co_worker(co)
    return (w is not None and worker_thread(w)) or thread_on_stack(co)


def symbol_at(addr):
    """The name of the function at addr ("foo", "foo + 12"), else hex."""
    try:
        block = gdb.block_for_pc(addr)
    except (gdb.error, RuntimeError):
        block = None
    function = None
    while block is not None and not block.is_static and not block.is_global:
        if block.function is not None:
            function = block.function  # the outermost: not an inlined callee
        block = block.superblock
    if function is not None and int(function.value().address) == addr:
        return function.name
    try:
        out = gdb.execute("info symbol 0x%x" % addr, to_string=True)
    except gdb.error:
        out = ""
    if out and not out.startswith("No symbol"):
        return out.split(" in section ")[0].strip()
    return "0x%x" % addr


# ------------------------------------------------ viewing a saved context


class FrameId:
    """The frame id the unwinder gives the frame it claims."""

    def __init__(self, sp, pc):
        self.sp = sp
        self.pc = pc


class CoroutineView:
    """A coroutine's saved context, grafted below the selected thread's
    innermost frame by CoroutineUnwinder."""

    def __init__(self, co, layout):
        u64 = u64_type()
        self.layout = layout
        self.saved_sp = int(co["sp"])
        words = gdb.Value(self.saved_sp).cast(u64.pointer())
        self.caller_regs = dict((r, words[i]) for r, i in layout.regs.items())
        self.resume_sp = self.saved_sp + layout.size
        self.resume_pc = int(words[layout.pc_slot])
        self.caller_regs[layout.sp_reg] = gdb.Value(self.resume_sp).cast(u64)
        self.caller_regs[layout.pc_reg] = words[layout.pc_slot]
        frame = gdb.newest_frame()
        self.thread = gdb.selected_thread().ptid
        self.thread_sp = int(frame.read_register(layout.sp_reg))
        self.thread_pc = int(frame.pc())
        # The claimed frame's id must be inner to (below) its caller's, the
        # coroutine's first frame, whichever stack the thread is on.
        self.frame_id = FrameId(gdb.Value(self.saved_sp).cast(u64),
                                frame.read_register(layout.pc_reg))

    def claims(self, pending_frame):
        """True for the selected thread's innermost real (not inline) frame."""
        if gdb.selected_thread().ptid != self.thread:
            return False
        sp = int(pending_frame.read_register(self.layout.sp_reg))
        pc = int(pending_frame.read_register(self.layout.pc_reg))
        return sp == self.thread_sp and pc == self.thread_pc


class CoroutineUnwinder(gdb.unwinder.Unwinder):
    """Unwinds the claimed frame into the armed coroutine's saved context;
    does nothing while no view is armed."""

    def __init__(self):
        super().__init__("weft-coroutine")
        self.view = None

    def __call__(self, pending_frame):
        view = self.view
        if view is None or not view.claims(pending_frame):
            return None
        info = pending_frame.create_unwind_info(view.frame_id)
        for reg, value in view.caller_regs.items():
            info.add_saved_register(reg, value)
        return info


class SkipFrames:
    """A frame filter hiding the selected thread's frames above the
    coroutine's during weft-bt (disabled otherwise)."""

    def __init__(self):
        self.name = "weft-bt"
        self.priority = 1000
        self.enabled = False
        self.skip = 0

    def filter(self, frames):
        return itertools.islice(frames, self.skip, None)


UNWINDER = CoroutineUnwinder()
SKIP_FILTER = SkipFrames()


def frame_level(frame):
    """frame's level, counted from the innermost frame."""
    level = 0
    f = gdb.newest_frame()
    while f is not None and f != frame:
        f = f.older()
        level += 1
    return level


def select_frame_at(level):
    """Selects the frame at that level (quietly, unlike the frame command),
    or the outermost if there are fewer."""
    frame = gdb.newest_frame()
    for _ in range(level):
        older = frame.older()
        if older is None:
            break
        frame = older
    frame.select()


def coroutine_first_frame(view):
    """The level of the coroutine's innermost frame under the armed view."""
    f = gdb.newest_frame()
    for level in range(MAX_THREAD_FRAMES):
        if f is None:
            break
        if f.pc() == view.resume_pc and int(f.read_register(view.layout.sp_reg)) == view.resume_sp:
            return level
        f = f.older()
    raise gdb.GdbError("weft-bt: could not unwind into the coroutine's saved context")


@contextlib.contextmanager
def coroutine_frames(co):
    """While active, the selected thread's backtrace continues into co's
    saved context; yields the level of co's innermost frame.  Restores the
    frames and the selected frame on the way out, whatever happens."""
    selected = frame_level(gdb.selected_frame())
    UNWINDER.view = CoroutineView(co, saved_frame_layout())
    gdb.invalidate_cached_frames()
    try:
        yield coroutine_first_frame(UNWINDER.view)
    finally:
        UNWINDER.view = None
        SKIP_FILTER.enabled = False
        gdb.invalidate_cached_frames()
        select_frame_at(selected)


def renumber(text, skip):
    """Shifts the `#N` frame levels at line starts of a backtrace by -skip."""

    def shift(m):
        return "#%-2d " % (int(m.group(1)) - skip)

    return re.sub(r"^#(\d+)\s+", shift, text, flags=re.M)


def coroutine_backtrace(co, bt_args):
    """The text of `backtrace bt_args` inside co's saved context."""
    with coroutine_frames(co) as skip:
        SKIP_FILTER.skip = skip
        SKIP_FILTER.enabled = True
        text = gdb.execute(("backtrace " + bt_args).strip(), to_string=True)
    return renumber(text, skip)


# ------------------------------------------------------------- commands


def describe_state(co, names):
    """co's state as a word, "finished" for one that returned unjoined."""
    state = co_state(co)
    name = names.get(state, "state %d" % state)
    if name == "exiting" and not co_on_cpu(co) and int(co["join"]) == JOIN_DONE:
        return "finished"
    return name


def coroutine_row(co, names, current):
    """The cells of one line of info weft-coroutines."""
    w = co_worker(co)
    thread = co_thread(co)
    return [
        "*" if int(co) == current else " ",
        str(int(co["id"])),
        describe_state(co, names),
        str(int(w["index"])) if w is not None else "-",
        str(thread.num) if thread is not None else "-",
        symbol_at(int(co["fn"])),
        co_name(co),
    ]


def format_table(rows):
    """Left-aligned columns (the id right-aligned), no trailing blanks."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for r in rows:
        cells = [r[0], r[1].rjust(widths[1])]
        cells += [c.ljust(widths[i]) for i, c in enumerate(r) if i >= 2]
        lines.append(" ".join(cells).rstrip())
    return "\n".join(lines) + "\n"


class InfoCoroutines(gdb.Command):
    """List the live weft coroutines.

Usage: info weft-coroutines

One line per coroutine that has been spawned and not yet joined or freed:
its id (weft_co_id), its state (runnable, running, yielding, parking,
parked, notified, exiting, finished), the index of the worker running it or
that ran it last, the gdb thread of that worker while the coroutine is on a
CPU, its entry function and its weft_set_name name.  '*' marks the
coroutine that the selected thread is running.  See weft-bt."""

    def __init__(self):
        super().__init__("info weft-coroutines", gdb.COMMAND_STATUS)

    def invoke(self, arg, from_tty):
        if arg.strip():
            raise gdb.GdbError("info weft-coroutines takes no arguments")
        cos = live_coroutines()
        if not cos:
            gdb.write("No live weft coroutines.\n")
            return
        names = state_names()
        selected = gdb.selected_thread()
        current = next((int(co) for co in cos if co_thread(co) == selected), 0)
        header = [" ", "Id", "State", "Worker", "Thread", "Entry", "Name"]
        gdb.write(format_table([header] + [coroutine_row(co, names, current) for co in cos]))


class CoroutineBacktrace(gdb.Command):
    """Print the backtrace of a parked weft coroutine.

Usage: weft-bt ID [BT-OPTIONS...]

ID is the coroutine's id, as info weft-coroutines lists it.  The backtrace
is unwound from the context the coroutine saved when it last switched out
(parked, yielded, or runnable again), whatever thread it last ran on; it
ends at weft__ctx_entry, the first frame of every coroutine.  BT-OPTIONS go
to `backtrace` (full, a frame count, -frame-arguments all, ...).
A coroutine on a CPU has no saved context: weft-bt names the gdb thread of
its worker, whose backtrace (thread N, then bt) is the coroutine's.
Works on live processes and core files; no register is written."""

    def __init__(self):
        super().__init__("weft-bt", gdb.COMMAND_STACK)

    def invoke(self, arg, from_tty):
        co_id, bt_args = parse_bt_args(arg)
        co = find_coroutine(co_id)
        if co is None:
            raise gdb.GdbError("weft-bt: no live coroutine has id %d%s" % (co_id, SEE_LIST))
        if co_on_cpu(co):
            gdb.write(running_message(co))
            return
        if not_started(co):
            entry = symbol_at(int(co["fn"]))
            gdb.write("Coroutine %d has not started yet: it will begin in %s.\n" % (co_id, entry))
            return
        gdb.write(coroutine_backtrace(co, bt_args))


def not_started(co):
    """True if co has never run: its saved frame, forged by weft__ctx_make,
    returns to the very start of the trampoline weft__ctx_entry."""
    layout = saved_frame_layout()
    pc = int(co["sp"].cast(u64_type().pointer())[layout.pc_slot])
    try:
        return pc == int(gdb.parse_and_eval("(unsigned long) &weft__ctx_entry"))
    except gdb.error:
        # gdb may show the minimal symbol Go-demangled, as weft.ctx_entry
        return symbol_at(pc) in ("weft__ctx_entry", "weft.ctx_entry")


SEE_LIST = " (see info weft-coroutines)"


def parse_bt_args(arg):
    """(id, the rest) from weft-bt's arguments."""
    argv = gdb.string_to_argv(arg)
    if not argv:
        raise gdb.GdbError("usage: weft-bt ID [BT-OPTIONS...]")
    try:
        co_id = int(argv[0], 0)
    except ValueError:
        raise gdb.GdbError("weft-bt: %r is not a coroutine id%s" % (argv[0], SEE_LIST)) from None
    return co_id, arg.strip()[len(argv[0]):].strip()


def running_message(co):
    """What weft-bt says of a coroutine that is on a CPU."""
    w = co_worker(co)
    where = "on worker %d" % int(w["index"]) if w is not None else "on no known worker"
    thread = co_thread(co)
    if thread is None:
        hint = "its frames are those of that worker's thread (not found among gdb's threads)"
    else:
        hint = "its frames are those of gdb thread {0}: `thread {0}` then `bt`".format(thread.num)
    co_id = int(co["id"])
    return "Coroutine %d is running %s, so it has no saved context;\n%s.\n" % (co_id, where, hint)


def register():
    """Registers the commands, the unwinder and the frame filter (again, if
    the script is loaded twice: the newest copy wins)."""
    InfoCoroutines()
    CoroutineBacktrace()
    gdb.unwinder.register_unwinder(None, UNWINDER, replace=True)
    gdb.frame_filters[SKIP_FILTER.name] = SKIP_FILTER


register()
