"""What a conversion did: converted keys, dropped keys, and changes of meaning worth a word."""

from __future__ import annotations

from typing import Any


class Report:
    """Collected while converting; printed in the log line, the file header and ``--diff``."""

    def __init__(self, toolbox: str = "mmdet") -> None:
        self.toolbox = toolbox  # whose rules made it (a key of _toolbox.TOOLBOXES)
        self.converted: list[tuple[str, str]] = []  # (2.x key, 3.x key)
        self.dropped: list[tuple[str, str]] = []  # (2.x key, why)
        self.notes: list[str] = []
        self.differences: list[str] = []  # where 3.x's code gives other results than 2.x's (also notes)

    def moved(self, old: str, new: str) -> None:
        if (old, new) not in self.converted:
            self.converted.append((old, new))

    def drop(self, key: str, why: str) -> None:
        if all(k != key for k, _ in self.dropped):
            self.dropped.append((key, why))

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    def differs(self, text: str) -> None:
        """A note the user must see when the config loads: 3.x's code computes something else."""
        self.note(text)
        if text not in self.differences:
            self.differences.append(text)

    def as_dict(self) -> dict[str, Any]:
        return {"converted": list(self.converted), "dropped": list(self.dropped), "notes": list(self.notes)}

    def summary(self) -> str:
        return f"{len(self.converted)} key(s) converted, {len(self.dropped)} dropped" + (
            f", {len(self.notes)} note(s)" if self.notes else ""
        )

    def lines(self) -> list[str]:
        out = [f"converted: {old} -> {new}" for old, new in self.converted]
        out += [f"dropped:   {key} ({why})" for key, why in self.dropped]
        out += [f"note:      {text}" for text in self.notes]
        return out
