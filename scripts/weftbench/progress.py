# SPDX-License-Identifier: MIT
"""Progress on stderr: a status line per invocation (overwritten on a
terminal), lines that stay, and a line per step:

    [3/14] [spawn w=2] (about 40 s left)

the time left being the mean time per invocation so far times the
invocations the plan has left."""

import sys
import time
from typing import Callable, List, Optional, TextIO, Tuple


def format_left(seconds: Optional[float]) -> str:
    """"about N s left" under 2 minutes (N rounded to 5 s, at least 5),
    "about M min left" from there, or "time left unknown" (None: nothing
    measured yet)."""
    if seconds is None:
        return "time left unknown"
    if seconds < 120:
        return f"about {max(5, 5 * round(seconds / 5))} s left"
    return f"about {round(seconds / 60)} min left"


def estimate_left(elapsed: float, done: int, left: int) -> Optional[float]:
    """Seconds left for `left` more invocations at the mean of the `done`
    that took `elapsed` seconds; None before the first."""
    if done <= 0:
        return None
    return elapsed / done * max(left, 0)


def step_line(k: int, n: int, label: str, left_s: Optional[float]) -> str:
    return f"[{k}/{n}] {label} ({format_left(left_s)})"


class Progress:
    """stream: stderr unless told; clock: time.monotonic unless told."""

    def __init__(self, stream: Optional[TextIO] = None,
                 clock: Callable[[], float] = time.monotonic):
        self.out = stream or sys.stderr
        self.tty = self.out.isatty()
        self.width = 0
        self.clock = clock
        # the plan: (label, invocations) per step, in order
        self.steps: List[Tuple[str, int]] = []
        self.k = 0  # steps begun
        self.invocations = 0  # show() calls: one before each invocation
        self.t0 = clock()

    def show(self, msg: str):
        """The status line of the invocation about to run."""
        self.invocations += 1
        if self.tty:
            self.out.write("\r" + msg.ljust(self.width))
            self.width = len(msg)
        else:
            self.out.write(msg + "\n")
        self.out.flush()

    def say(self, msg: str):
        """A line that stays."""
        self.done()
        self.out.write(msg + "\n")
        self.out.flush()

    def done(self):
        if self.tty and self.width:
            self.out.write("\r" + " " * self.width + "\r")
            self.width = 0

    def plan(self, steps: List[Tuple[str, int]]):
        """The steps to come, each (its label, its invocations); the clock
        of the estimate starts here."""
        self.steps = list(steps)
        self.k = 0
        self.invocations = 0
        self.t0 = self.clock()

    def step(self, label: str):
        """The next step of the plan begins: its line, with the time left
        (this step included).  A step the plan does not name (skipped ones
        are passed over) is counted as the next."""
        labels = [s for s, _ in self.steps]
        if label in labels[self.k:]:
            self.k = labels.index(label, self.k) + 1
        else:
            self.k += 1
        left = sum(w for _, w in self.steps[self.k - 1:])
        left_s = estimate_left(self.clock() - self.t0, self.invocations, left)
        self.say(step_line(self.k, max(len(self.steps), self.k), label, left_s))
