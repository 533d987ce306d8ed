"""The operator's placement of the app's targets: accelerate's device map from the environment.

An operator whose target does not fit one device sets ``SPECVIZ_DEVICE_MAP`` (a preset such as ``auto``, a JSON
object or file, or ``module=device`` pairs, as ``--device-map`` reads them), and optionally ``SPECVIZ_MAX_MEMORY``
(``cpu=2GiB,0=20GiB``) and ``SPECVIZ_OFFLOAD_FOLDER`` (needed when a part goes to disk). Any of the three turns
placement on (the map defaults to ``auto``), as the CLI's flags do. :func:`app.device.load_target` then loads every
target through :func:`specviz.runtime.placement.load_placed` (kept here, :data:`KEEP` placements at most: a placed load is
not shared through :func:`specviz.runtime.models.load_model`'s cache) and skips the start-up tuning, torch.compile and CUDA
graphs, which assume weights that stay in place. The target's label names the placement ("device map: 4 on cpu,
30 on disk (streamed)"), and every tab's status shows that label. A map that cannot be used raises
:class:`specviz.runtime.placement.PlacementError` (one sentence), which the tabs show as any load failure.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass

log = logging.getLogger("specviz.app")

ENV_DEVICE_MAP = "SPECVIZ_DEVICE_MAP"
ENV_MAX_MEMORY = "SPECVIZ_MAX_MEMORY"
ENV_OFFLOAD_FOLDER = "SPECVIZ_OFFLOAD_FOLDER"
KEEP = 2  # placed targets kept loaded (least recently used dropped first)


@dataclass(frozen=True)
class Placement:
    """The operator's placement, as text: the device map (a preset, JSON, a .json file or module=device pairs),
    the memory limits per device ("" for none) and the offload folder ("" for none)."""

    device_map: str
    max_memory: str = ""
    offload_folder: str = ""

    def describe(self) -> str:
        """The placement in one line, for the log."""
        parts = [f"device map {self.device_map}"]
        parts += [f"max memory {self.max_memory}"] if self.max_memory else []
        parts += [f"offload folder {self.offload_folder}"] if self.offload_folder else []
        return "placed by accelerate: " + ", ".join(parts)


def operator_placement(env: Mapping[str, str] | None = None) -> Placement | None:
    """The placement the operator set (:data:`ENV_DEVICE_MAP`, :data:`ENV_MAX_MEMORY`, :data:`ENV_OFFLOAD_FOLDER`;
    ``env``: the process environment when None), or None when none of them is set. The values are read (and a bad
    one refused, in one sentence) when a target loads."""
    env = os.environ if env is None else env
    found = {name: env.get(name, "").strip() for name in (ENV_DEVICE_MAP, ENV_MAX_MEMORY, ENV_OFFLOAD_FOLDER)}
    if not any(found.values()):
        return None
    return Placement(found[ENV_DEVICE_MAP] or "auto", found[ENV_MAX_MEMORY], found[ENV_OFFLOAD_FOLDER])


_LOADED: OrderedDict[tuple, object] = OrderedDict()
_LOCK = threading.Lock()  # one placed load at a time (they run under the device lock anyway)


def load_operator_placed(spec: str, placement: Placement, dtype: str | None = None, progress=None):
    """The target ``spec`` placed as ``placement`` says (:func:`specviz.runtime.placement.load_placed`, in ``dtype``; None
    for the main device's default), loaded once and kept (at most :data:`KEEP`). Returns a
    :class:`specviz.runtime.models.LoadedModel` on the eager path. Raises PlacementError for a map, limit or folder that
    cannot be used, ModelLoadError for a model that cannot be loaded."""
    from specviz.runtime.placement import load_placed

    key = (spec, placement, dtype)
    with _LOCK:
        if key in _LOADED:
            _LOADED.move_to_end(key)
            return _LOADED[key]
        loaded = load_placed(spec, device_map=placement.device_map, max_memory=placement.max_memory or None,
                             offload_folder=placement.offload_folder or None, dtype=dtype, progress=progress)
        _LOADED[key] = loaded
        while len(_LOADED) > KEEP:
            _LOADED.popitem(last=False)
    log.info("%s: %s; main device %s; forward: eager (default kernels, no tuning)", loaded.label,
             placement.describe(), loaded.device)
    return loaded


def forget_placed() -> None:
    """Drop every placed target kept here (tests; an operator's change of placement within one process)."""
    with _LOCK:
        _LOADED.clear()
