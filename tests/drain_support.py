"""Drain a Gradio handler generator as the browser would, for the tests of the app's tabs: each message the handler
yields is a tuple with one entry per output component (in the order of the tab's ``OUTPUTS`` names); an entry is a
plain value, or an update dict (``"__type__": "update"``) that carries a new value under ``"value"`` or, without
one, leaves the component's value as it was."""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def is_update(value) -> bool:
    """Whether one entry of a message is an update dict (``gr.update(...)``, ``gr.skip()``), not a plain value."""
    return isinstance(value, dict) and value.get("__type__") == "update"


def settled(out: Sequence, names: Sequence[str]) -> dict:
    """The values one message gives its components, by name: an update's value unwrapped, an update without a value
    left out (the component keeps its value). ``names`` are the tab's output names, in message order; extra entries
    on either side are ignored."""
    shown: dict = {}
    for name, value in zip(names, out):
        if is_update(value):
            if "value" not in value:
                continue
            value = value["value"]
        shown[name] = value
    return shown


def last_values(gen: Iterable[Sequence], names: Sequence[str], *, every: bool = False, sized: bool = False,
                counted: bool = False) -> dict:
    """Run a handler generator to its end: each output's last real value, by its name in ``names``.

    ``every``: also every value an output took, in order, under ``"all_" + name``. ``sized``: assert that each
    message has one entry per name. ``counted``: the number of messages under ``"updates"``.
    Raises AssertionError where ``sized`` and a message has another length."""
    last: dict = {"updates": 0} if counted else {}
    for out in gen:
        if sized:
            assert len(out) == len(names)
        if counted:
            last["updates"] += 1
        for name, value in settled(out, names).items():
            last[name] = value
            if every:
                last.setdefault("all_" + name, []).append(value)
    return last


def last_output(gen: Iterable[Sequence]) -> Sequence:
    """The last message a handler generator yields, as it is (updates not unwrapped), after running it to its end.
    Raises IndexError where it yields nothing."""
    return list(gen)[-1]


def live_field(out: Sequence, name: str):
    """The entry of a Live tab message ``out`` for the output ``name`` (one of :data:`app.live.OUTPUTS`), as it is.
    Raises ValueError for a name the Live tab does not have."""
    from app import live

    return out[live.OUTPUTS.index(name)]
