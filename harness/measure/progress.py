"""Progress on the terminal: one line per measured chunk, with elapsed time and an ETA."""

import time
from collections.abc import Callable
from typing import Any


def fmt_seconds(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 60}:{seconds % 60:02d}"


def fmt_ns(ns: float) -> str:
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if ns >= scale:
            return f"{ns / scale:.3g} {unit}"
    return f"{ns:.0f} ns"


class Progress:
    def __init__(self, todo: list[tuple[int, Any]], report: Callable[[str], None] = print):
        self.todo = list(todo)  # (round, state) pairs, in order
        self.report = report
        self.done = 0
        self.started = time.monotonic()
        self.chunk_seconds: dict[str, float] = {}  # cell id -> seconds of its last chunk

    def eta(self) -> str:
        remaining = self.todo[self.done:]
        if not self.chunk_seconds:
            return "?"
        mean = sum(self.chunk_seconds.values()) / len(self.chunk_seconds)
        seconds = sum(self.chunk_seconds.get(state.cell.id, mean)
                      for _, state in remaining if state.open)
        return fmt_seconds(seconds)

    def skip(self) -> None:
        self.done += 1

    def advance(self, cell_id: str, r: int, seconds: float, times: list[int] | None,
                final: dict[str, Any] | None) -> None:
        self.done += 1
        if times:
            self.chunk_seconds[cell_id] = seconds
        median = fmt_ns(sorted(times)[len(times) // 2]) if times else (final or {}).get("status", "-")
        elapsed = fmt_seconds(time.monotonic() - self.started)
        self.report(f"[{self.done:>3}/{len(self.todo)}  {elapsed} elapsed, ETA {self.eta()}]"
                    f"  round {r + 1}  {cell_id:<36} median {median}")
