"""Recording files: a classroom :class:`~specviz.analysis.stepper.Recording` as a small versioned JSON document
(gzip-compressed on disk), so a run can be stepped through with no model work. The built-in walkthroughs ship as
such files (``assets/recordings/<walkthrough id>.json.gz``); any run can be saved and opened again.

The document (format version :data:`VERSION`)::

    {"format": "specviz-recording", "version": 1,
     "meta": {"title": ..., "walkthrough": ..., "settings": {...}, "target": ..., "created_by": "specviz 0.1.0"},
     "greedy": true, "drafter_name": "n-gram", "deterministic": true, "prompt_tokens": 87,
     "token_texts": {"<token id>": "<decoded text>", ...},
     "events": [{<PassEvent fields>}, ...],            # the prefill first; fields left out take their defaults
     "rejections": {"<event index>": {<Distributions fields>}, ...},
     "processing": "repetition penalty 1.3"}         # only when the run had generation settings off their defaults

Compatibility: a reader opens every file whose version is at most its own :data:`VERSION`. An event field missing
from a file (an older writer, or a field left at its default) takes its default or is derived from the others
(e.g. ``accept_mask`` from ``num_accepted``); only ``index``, ``kind`` and ``emitted_ids`` are required. Fields a
reader does not know are ignored. Adding an optional field to :class:`~specviz.core.events.PassEvent` therefore
needs no new version, only a reader in :data:`EVENT_READERS`; bump :data:`VERSION` when a change would make an older
reader misread a file.

Opening is safe for files from strangers: the size is capped before and after decompression
(:data:`MAX_FILE_BYTES`, :data:`MAX_JSON_BYTES`), every value is type-checked, the events must be consistent with
one another, and the stepper walks every step once before the recording is handed out. Every failure is a
:class:`RecordingError` whose message is one sentence. No Gradio here.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import math
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from specviz import __version__
from specviz.analysis.stepper import Distributions, Recording, Stepper
from specviz.core.events import LookaheadRecord, PassEvent, PositionDetail, Timings, TreeRecord

FORMAT = "specviz-recording"
VERSION = 1
MAX_FILE_BYTES = 1 << 20  # on disk (gzip or plain JSON): a 64-token classroom run is a few kB
MAX_JSON_BYTES = 8 << 20  # after decompression
MAX_EVENTS = 4096
MAX_LIST = 4096  # items in any one list of an event (token ids, details, tree nodes)
MAX_TOKEN_TEXTS = 65536
SUFFIX = ".json.gz"


class RecordingError(ValueError):
    """A file that cannot be opened as a recording. The message is one sentence, fit to show a visitor."""


@dataclass(frozen=True)
class RecordingFile:
    """An opened recording and what the file says about it (``meta``: title, walkthrough id, settings, target)."""

    recording: Recording
    meta: Mapping[str, Any] = field(default_factory=dict)


# ------------------------------------------------------------------------------------------------- writing


def _plain(value):
    """JSON-ready: dataclasses as dicts (fields that are None by default left out when None), tuples as lists."""
    if dataclasses.is_dataclass(value):
        out = {}
        for f in dataclasses.fields(value):
            item = getattr(value, f.name)
            if item is not None or f.default is not None:
                out[f.name] = _plain(item)
        return out
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    return value


def to_dict(recording: Recording, meta: Mapping[str, Any] | None = None) -> dict:
    """The recording as a JSON-ready document (see the module docstring)."""
    return {
        "format": FORMAT, "version": VERSION,
        "meta": {"created_by": f"specviz {__version__}", **dict(meta or {})},
        "greedy": bool(recording.greedy), "drafter_name": recording.drafter_name,
        "deterministic": bool(recording.deterministic), "prompt_tokens": int(recording.prompt_tokens),
        "token_texts": {str(int(t)): text for t, text in sorted(recording.token_texts.items())},
        "events": [_plain(e) for e in recording.events],
        "rejections": {str(i): _plain(d) for i, d in sorted(recording.rejections.items())},
        **({"processing": recording.processing} if recording.processing else {}),  # absent: no penalties
    }


def dumps(recording: Recording, meta: Mapping[str, Any] | None = None) -> bytes:
    """The gzip-compressed JSON document (reproducible bytes for the same recording: no timestamp in the gzip)."""
    text = json.dumps(to_dict(recording, meta), ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return gzip.compress(text.encode("utf-8"), compresslevel=9, mtime=0)


def save(path: str | Path, recording: Recording, meta: Mapping[str, Any] | None = None) -> Path:
    """Write :func:`dumps` to ``path``; returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(dumps(recording, meta))
    return path


# ------------------------------------------------------------------------------------------------- reading: values


class _Bad(Exception):
    """A value of the wrong shape; the reader adds where it was."""


def _int(value, low: int = 0, high: int = 2 ** 31 - 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise _Bad(f"must be a whole number from {low} to {high}")
    return value


def _float(value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise _Bad("must be a finite number")
    return float(value)


def _prob(value) -> float:
    value = _float(value)
    if not -1e-6 <= value <= 1 + 1e-6:
        raise _Bad("must be a probability between 0 and 1")
    return value


def _str(value, most: int = 100_000) -> str:
    if not isinstance(value, str) or len(value) > most:
        raise _Bad("must be text")
    return value


def _bool(value) -> bool:
    if not isinstance(value, bool):
        raise _Bad("must be true or false")
    return value


def _list(value, item: Callable, most: int = MAX_LIST) -> tuple:
    if not isinstance(value, list) or len(value) > most:
        raise _Bad(f"must be a list of at most {most} items")
    return tuple(item(v) for v in value)


def _ids(value) -> tuple[int, ...]:
    return _list(value, _int)


def _choice(*allowed: str) -> Callable[[Any], str]:
    def read(value) -> str:
        if value not in allowed:
            raise _Bad(f"must be one of {', '.join(allowed)}")
        return value
    return read


def _optional(read: Callable) -> Callable:
    def read_optional(value):
        return None if value is None else read(value)
    read_optional.optional = True
    return read_optional


def _fields(readers: Mapping[str, Callable], value: dict) -> dict:
    """The known fields of ``value`` read (an error names the field)."""
    out = {}
    for name, read in readers.items():
        if name in value:
            try:
                out[name] = read(value[name])
            except _Bad as bad:
                raise _Bad(f"{name} {bad}") from None
    return out


def _object(cls, readers: Mapping[str, Callable], value):
    """A dataclass from a dict: known fields read (missing ones keep their defaults), unknown ones ignored."""
    if not isinstance(value, dict):
        raise _Bad("is not an object")
    kwargs = _fields(readers, value)
    for f in dataclasses.fields(cls):  # a field that may be None and has no default: missing means None
        if f.name not in kwargs and getattr(readers.get(f.name), "optional", False):
            kwargs[f.name] = None
    missing = [f.name for f in dataclasses.fields(cls) if f.name not in kwargs and
               f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    if missing:
        raise _Bad(f"lacks {', '.join(missing)}")
    return cls(**kwargs)


_DETAIL = {"target_prob": _prob, "draft_prob": _prob, "uniform": _optional(_prob), "target_top_id": _int,
           "judged": _bool}
_TIMINGS = {"draft_ms": _float, "verify_ms": _float, "other_ms": _float}
_TREE = {"tokens": _ids, "parents": lambda v: _list(v, lambda p: _int(p, -1)), "path": _ids, "shown": _ids,
         "copied": _ids}
_LOOKAHEAD = {"levels": lambda v: _list(v, _ids), "new_level": _ids, "candidates": lambda v: _list(v, _ids),
              "winner": _optional(_int), "accepted": _int, "pool_size": _int, "added": _int}

EVENT_READERS: dict[str, Callable] = {
    "run": _choice("speculative", "baseline"), "index": _int, "kind": _choice("prefill", "pass"), "k": _int,
    "draft_ids": _ids, "accept_mask": lambda v: _list(v, _bool), "num_accepted": _int,
    "next_id": _optional(_int), "next_kind": _choice("recovered", "bonus", "target"), "emitted_ids": _ids,
    "details": lambda v: _list(v, lambda d: _object(PositionDetail, _DETAIL, d)),
    "text_delta": _str, "timings": lambda v: _object(Timings, _TIMINGS, v), "t_end_ms": _float,
    "num_generated": _int, "target_cache_len": _optional(_int), "draft_cache_len": _optional(_int),
    "finish_reason": _optional(_choice("eos", "length", "stop")), "near_tie_gap": _optional(_float),
    "next_k": _optional(_int), "draft_source": _optional(lambda v: _str(v, 40)),
    "tree": _optional(lambda v: _object(TreeRecord, _TREE, v)), "notice": _optional(_str),
    "expected_gain": _optional(_float), "row": _int,
    "lookahead": _optional(lambda v: _object(LookaheadRecord, _LOOKAHEAD, v)),
    "resplit": lambda v: _list(v, _bool), "compiling": _bool, "forward_path": _optional(lambda v: _str(v, 400)),
}
"""How each :class:`PassEvent` field is read from a file (a field added to PassEvent needs one here)."""

_DISTRIBUTIONS = {"position": _int, "token_ids": _ids, "target": lambda v: _list(v, _prob),
                  "draft": lambda v: _list(v, _prob), "residual": _optional(lambda v: _list(v, _prob)),
                  "drafted_id": _int, "chosen_id": _int, "draft_known": _bool}


# ------------------------------------------------------------------------------------------------- reading: events


def _event(value, generated_before: int) -> PassEvent:
    """One event; fields an older file lacks take their defaults or are derived from the others."""
    if not isinstance(value, dict):
        raise _Bad("is not an object")
    known = _fields(EVENT_READERS, value)
    for f in dataclasses.fields(PassEvent):  # a field without a reader yet: plain JSON scalars pass through
        if f.name not in EVENT_READERS and isinstance(value.get(f.name), (str, int, float, bool)):
            known[f.name] = value[f.name]
    missing = [name for name in ("index", "kind", "emitted_ids") if name not in known]
    if missing:
        raise _Bad(f"lacks {', '.join(missing)}")
    draft, emitted = known.setdefault("draft_ids", ()), known["emitted_ids"]
    n = known.setdefault("num_accepted", sum(known.get("accept_mask", ())))
    known.setdefault("accept_mask", tuple(i < n for i in range(len(draft))))
    known.setdefault("k", len(draft))
    known.setdefault("next_id", emitted[n] if len(emitted) > n else None)
    known.setdefault("next_kind", "target" if not draft else "bonus" if n >= len(draft) else "recovered")
    known.setdefault("num_generated", generated_before + len(emitted))
    for name, default in (("run", "speculative"), ("details", ()), ("text_delta", ""), ("timings", Timings()),
                          ("t_end_ms", 0.0)):
        known.setdefault(name, default)
    return PassEvent(**known)


def _check_event(event: PassEvent, greedy: bool) -> None:
    """The event's parts agree with one another (what the stepper relies on)."""
    m, n = len(event.draft_ids), event.num_accepted
    if n > m:
        raise _Bad(f"accepts {n} of {m} drafted tokens")
    if len(event.accept_mask) != m or any(event.accept_mask[n:]) or not all(event.accept_mask[:n]):
        raise _Bad("has an accept_mask that does not match num_accepted")
    if m and len(event.details) != m:
        raise _Bad(f"has {len(event.details)} position details for {m} drafted tokens")
    if len(event.emitted_ids) > n + 1:
        raise _Bad(f"emits {len(event.emitted_ids)} tokens after accepting {n}")
    if not greedy and any(d.uniform is None for d in event.details[:min(n + 1, m)]):
        raise _Bad("lacks the uniform number u of a judged position (sampling)")


def _distributions(value, event: PassEvent) -> Distributions:
    """A rejection's distributions: equal lengths, the drafted and the chosen token among those shown."""
    dist = _object(Distributions, _DISTRIBUTIONS, value)
    size = len(dist.token_ids)
    if size == 0 or len(dist.target) != size or len(dist.draft) != size or (
            dist.residual is not None and len(dist.residual) != size):
        raise _Bad("has token and probability lists of different lengths")
    if dist.drafted_id not in dist.token_ids or dist.chosen_id not in dist.token_ids:
        raise _Bad("does not list its drafted and chosen tokens")
    if not event.draft_ids:
        raise _Bad("belongs to a pass without a draft")
    return dist


# ------------------------------------------------------------------------------------------------- reading: a file


def _header(data) -> None:
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise RecordingError("This file is not a specviz recording.")
    version = data.get("version")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise RecordingError("This recording has no valid format version.")
    if version > VERSION:
        raise RecordingError(f"This recording was written by a newer specviz (format version {version}; this one "
                             f"opens versions up to {VERSION}).")


def _where(what: str, read: Callable, *args):
    """``read(*args)``, turning a shape error into a RecordingError that says where it was."""
    try:
        return read(*args)
    except _Bad as bad:
        text = str(bad)
        verb = text.split(" ", 1)[0] in ("lacks", "is", "has", "accepts", "emits", "does", "belongs")
        raise RecordingError(f"{what} of the recording is malformed: {'it ' if verb else ''}{text}.") from None


def _events(items, greedy: bool) -> tuple[PassEvent, ...]:
    if not isinstance(items, list) or not items:
        raise RecordingError("The recording has no events.")
    if len(items) > MAX_EVENTS:
        raise RecordingError(f"The recording has {len(items)} events; at most {MAX_EVENTS} can be opened.")
    events, generated = [], 0
    for i, item in enumerate(items):
        event = _where(f"Event {i}", _event, item, generated)
        _where(f"Event {i}", _check_event, event, greedy)
        generated = event.num_generated
        events.append(event)
    return tuple(events)


def _texts(value) -> dict[int, str]:
    if not isinstance(value, dict) or len(value) > MAX_TOKEN_TEXTS:
        raise RecordingError("The recording's token_texts is not a table of token texts.")
    texts = {}
    for key, text in value.items():
        if not (isinstance(key, str) and key.isdigit() and isinstance(text, str) and len(text) <= 1000):
            raise RecordingError("The recording's token_texts holds an entry that is not a token id and its text.")
        texts[int(key)] = text
    return texts


def _rejections(value, events: tuple[PassEvent, ...]) -> dict[int, Distributions]:
    if not isinstance(value, dict):
        raise RecordingError("The recording's rejections is not a table of distributions.")
    out = {}
    for key, item in value.items():
        if not (isinstance(key, str) and key.isdigit() and int(key) < len(events)):
            raise RecordingError(f"The recording has distributions for an event it lacks ({key!r}).")
        out[int(key)] = _where(f"The rejection at event {key}", _distributions, item, events[int(key)])
    return out


def _scalar(data: dict, name: str, read: Callable, default):
    if name not in data:
        return default
    return _where(f"The field {name}", lambda: _fields({name: read}, data)[name])


def from_dict(data) -> RecordingFile:
    """The recording in a document (see the module docstring); raises :class:`RecordingError`."""
    _header(data)
    greedy = _scalar(data, "greedy", _bool, None)
    if greedy is None:
        raise RecordingError("The recording does not say whether it was greedy (the field greedy).")
    events = _events(data.get("events"), greedy)
    meta = data.get("meta", {})
    recording = Recording(
        events, greedy, drafter_name=_scalar(data, "drafter_name", lambda v: _str(v, 200), "drafter"),
        deterministic=_scalar(data, "deterministic", _bool, False),
        token_texts=_texts(data.get("token_texts", {})),
        prompt_tokens=_scalar(data, "prompt_tokens", _int, 0),
        rejections=_rejections(data.get("rejections", {}), events),
        processing=_scalar(data, "processing", lambda v: _str(v, 500), ""))
    _walk(recording)
    return RecordingFile(recording, dict(meta) if isinstance(meta, dict) else {})


def _walk(recording: Recording) -> None:
    """Every step of the recording can be shown (table, caption, progress, chart data)."""
    stepper = Stepper(recording)
    for i, step in enumerate(stepper.steps):
        try:
            stepper.table_rows(step)
            stepper.caption(step)
            stepper.progress(step)
            stepper.distributions(step)
        except Exception as error:  # noqa: BLE001 - a stranger's file: any failure is a sentence
            raise RecordingError(f"The recording cannot be shown at step {i + 1} ({type(error).__name__}: "
                                 f"{error}).") from None


def _megabytes(size: int) -> str:
    return f"{size / 2 ** 20:.1f}".rstrip("0").rstrip(".") + " MB"


def too_big(size: int) -> str:
    """The sentence that refuses a file of ``size`` bytes."""
    return f"The file is {_megabytes(size)}; a recording file may be at most {_megabytes(MAX_FILE_BYTES)}."


def _gunzip(raw: bytes) -> bytes:
    inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    try:
        out = inflater.decompress(raw, MAX_JSON_BYTES + 1)
    except zlib.error:
        raise RecordingError("The file looks gzip-compressed but cannot be decompressed.") from None
    if len(out) > MAX_JSON_BYTES or inflater.unconsumed_tail:
        raise RecordingError(f"Uncompressed, the file is over {_megabytes(MAX_JSON_BYTES)}; a recording may be at "
                             "most that.")
    return out


def _no_constant(name: str):
    raise ValueError(f"{name} is not a number a recording may hold")


def loads(raw: bytes) -> RecordingFile:
    """Open a recording from a file's bytes (gzip-compressed or plain JSON); raises :class:`RecordingError`."""
    if len(raw) > MAX_FILE_BYTES:
        raise RecordingError(too_big(len(raw)))
    text = _gunzip(raw) if raw[:2] == b"\x1f\x8b" else raw
    try:
        data = json.loads(text.decode("utf-8"), parse_constant=_no_constant)
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise RecordingError("The file is not a specviz recording (it is not JSON, nor gzip-compressed JSON).") \
            from None
    return from_dict(data)


def load(path: str | Path) -> RecordingFile:
    """Open a recording file; its size is checked before it is read. Raises :class:`RecordingError`."""
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise RecordingError(too_big(size))
        with path.open("rb") as handle:
            raw = handle.read(MAX_FILE_BYTES + 1)
    except OSError:
        raise RecordingError("The recording file cannot be read.") from None
    return loads(raw)


def token_ids(recording: Recording) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """(drafted ids, emitted ids) per event: what two greedy recordings of one walkthrough share exactly."""
    return [(tuple(e.draft_ids), tuple(e.emitted_ids)) for e in recording.events]
