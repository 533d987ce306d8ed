"""Targets bigger than one device: load a model with accelerate's device map, split over devices or offloaded.

A *device map* says where each part of the model lives: a preset that accelerate computes from the free memory
("auto", "balanced", "balanced_low_0", "sequential"; GPUs first, then CPU memory, then disk), or an explicit
``{module name: device}`` with devices ``"cpu"``, ``"disk"``, ``"mps"``, a CUDA index ``0`` or ``"cuda:0"``.
``max_memory`` caps what a preset may put on each device (``{"cpu": "2GiB", 0: "20GiB"}``). Parts on ``"disk"``
are read from the checkpoint (or from ``offload_folder``) at every forward; on a machine with a GPU, parts on
``"cpu"`` are offloaded too: kept in CPU memory and copied to the GPU for each forward (accelerate's hooks).

The *main device* is where the forward's inputs and outputs live: the input embedding's device. The input
embedding and the LM head always stay resident there (a preset's map is adjusted to keep them; an explicit map that
offloads them is refused): the engine feeds token ids there, and the drafters read the target's embedding, its LM
head and its features (EAGLE / Medusa heads, the early-exit view) on that device. The KV cache needs nothing: each
layer's keys and values are allocated where that layer computes (:class:`specviz.core.kv.SlabCache` allocates from
the first keys it sees); :func:`cache_misplacements` checks it.

A placed model runs the default kernels on the eager path: the CPU speed-ups of :mod:`specviz.runtime.speed`, the start-up
tuning, torch.compile and CUDA graphs all assume weights that stay in place. Bad input raises
:class:`PlacementError`, a ValueError whose message is one sentence.
"""

from __future__ import annotations

import functools
import json
import logging
from pathlib import Path

import torch

from specviz.runtime.models import EMBEDDED, LoadedModel, ModelLoadError, Progress, ensure_embedded, model_name, token_id_count
from specviz.runtime.models.devices import _resolve_dtype
from specviz.runtime.models.loading import _eos_token_ids, _explain, _resolve_spec

PRESETS = ("auto", "balanced", "balanced_low_0", "sequential")
OFFLOAD_ONLY = "disk"


class PlacementError(ModelLoadError, ValueError):
    """A device map, a memory limit or an offload folder that cannot be used; the message is one sentence."""


# ------------------------------------------------------------------------------------------- reading inputs


def parse_device_map(text: str | dict | None) -> str | dict | None:
    """A device map from its text: a preset name, a JSON object, a ``.json`` file holding one, or
    ``module=device,module=device`` (``""`` or ``*`` as the module: the whole model). None or "" gives None (no
    placement). Devices are checked later (:func:`plan_device_map`). Raises PlacementError for unreadable text."""
    if text is None or isinstance(text, dict):
        return text
    text = str(text).strip()
    if not text:
        return None
    if text.lower() in PRESETS:
        return text.lower()
    if text.endswith(".json") and not text.startswith("{"):
        try:
            text = Path(text).expanduser().read_text(encoding="utf-8")
        except OSError as error:
            raise PlacementError(f"Cannot read the device map file {text!r}: {error.strerror or error}.") from None
    if text.startswith("{"):
        try:
            found = json.loads(text)
        except json.JSONDecodeError as error:
            raise PlacementError(f"The device map is not valid JSON ({error.msg} at character {error.pos}).") from None
        if not isinstance(found, dict) or not found:
            raise PlacementError("The device map must be a non-empty JSON object {module: device}.")
        return found
    pairs = [part.partition("=") for part in text.split(",") if part.strip()]
    if not pairs or any(not sep or not device.strip() for _, sep, device in pairs):
        raise PlacementError(f"Cannot read the device map {text!r}: use {', '.join(PRESETS)}, a JSON object or "
                             f"module=device pairs such as 'model.layers.0=cpu,model.layers.1=disk'.")
    return {("" if name.strip() == "*" else name.strip()): device.strip() for name, _, device in pairs}


def parse_max_memory(text: str | dict | None) -> dict | None:
    """Memory limits per device from ``cpu=2GiB,0=20GiB`` (or a dict): device -> bytes (int). Devices as in
    :func:`device_of`, sizes as accelerate reads them (``500MB``, ``2GiB``, a plain number of bytes). None or ""
    gives None. Raises PlacementError for an unknown device or an unreadable size."""
    if text is None or (isinstance(text, str) and not text.strip()):
        return None
    if isinstance(text, dict):
        pairs = list(text.items())
    else:
        parts = [part.partition("=") for part in str(text).split(",") if part.strip()]
        if not parts or any(not sep for _, sep, _ in parts):
            raise PlacementError(f"Cannot read the memory limits {text!r}: use device=size pairs such as "
                                 f"'cpu=2GiB,0=20GiB'.")
        pairs = [(name, size) for name, _, size in parts]
    limits = {}
    for name, size in pairs:
        device = device_of(name)
        if device == OFFLOAD_ONLY:
            raise PlacementError("The disk has no memory limit: give limits for 'cpu' or a GPU.")
        limits[device] = _size(size)
    return limits


def _size(size) -> int:
    from accelerate.utils import convert_file_size_to_int

    try:
        value = convert_file_size_to_int(size.strip() if isinstance(size, str) else size)
    except (ValueError, TypeError, AttributeError):
        value = -1
    if not isinstance(value, int) or value < 0:
        raise PlacementError(f"Cannot read {size!r} as a memory size: write it like 500MB, 2GiB or 1073741824.")
    return value


def device_of(name) -> str | int:
    """A device of a device map in accelerate's spelling ("cpu", "disk", "mps" or a CUDA index), checked to exist
    on this machine. Raises PlacementError for an unknown name or a device this machine lacks."""
    text = str(name).strip().lower()
    if text in ("cpu", OFFLOAD_ONLY):
        return text
    if text == "mps":
        if not torch.backends.mps.is_available():
            raise PlacementError("The device map names 'mps', but Apple's Metal backend is not available here.")
        return text
    index = text.removeprefix("cuda").removeprefix(":") if text.startswith("cuda") else text
    if index == "" and text == "cuda":
        index = "0"
    if not index.isdigit():
        raise PlacementError(f"Unknown device {name!r} in the device map or memory limits: use 'cpu', 'disk', "
                             f"'mps', a GPU index such as 0 or 'cuda:0'.")
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if int(index) >= count:
        raise PlacementError(f"The device map names GPU {index} ({name!r}), but this machine has "
                             f"{count or 'no'} usable CUDA GPU{'s' if count != 1 else ''}.")
    return int(index)


# ------------------------------------------------------------------------------------------------ planning


def skeleton_of(source: str, dtype: torch.dtype, trust_remote_code: bool = False) -> torch.nn.Module:
    """The model at ``source`` (a folder or hub id) without weights (on "meta"): its module names and sizes."""
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(source, trust_remote_code=trust_remote_code)
    with torch.device("meta"):
        return AutoModelForCausalLM.from_config(config, dtype=dtype, trust_remote_code=trust_remote_code)


def main_device(device_map: dict) -> str | int:
    """Where accelerate runs the offloaded parts of ``device_map`` (its lowest GPU, else "mps", else "cpu")."""
    computing = {d for d in device_map.values() if d not in ("cpu", OFFLOAD_ONLY)}
    gpus = sorted(d for d in computing if isinstance(d, int))
    return gpus[0] if gpus else ("mps" if "mps" in computing else "cpu")


def _main_of(wanted: str | dict, limits: dict | None) -> str | int:
    """The main device a map or a preset (within ``limits``, else every device accelerate sees) will have."""
    if isinstance(wanted, dict):
        return main_device({name: device_of(device) for name, device in wanted.items()})
    from accelerate.utils import get_max_memory

    return main_device({d: d for d in (limits or get_max_memory())})


def offloaded_devices(device_map: dict) -> tuple[str, ...]:
    """The devices of ``device_map`` whose parts are streamed to the main device at every forward."""
    return (OFFLOAD_ONLY,) if main_device(device_map) in ("cpu", "mps") else ("cpu", OFFLOAD_ONLY)


def plan_device_map(skeleton: torch.nn.Module, device_map: str | dict, max_memory: dict | None = None,
                    dtype: torch.dtype = torch.float32) -> dict:
    """The explicit ``{module name: device}`` map a load will use: a preset computed by accelerate within
    ``max_memory`` (bytes per device) and adjusted to keep the input embedding and the LM head on the main device;
    an explicit map checked (known modules, every weight covered, existing devices, the embedding and the LM head
    on one computing device). Raises PlacementError (one sentence) when the map cannot be used."""
    if isinstance(device_map, str):
        plan = _preset_map(skeleton, device_map, max_memory, dtype)
    else:
        plan = {name: device_of(device) for name, device in device_map.items()}
        _check_names(skeleton, plan)
        plan = _flatten(plan, skeleton)
    _check_resident(skeleton, plan)
    return plan


def _preset_map(skeleton, preset: str, max_memory: dict | None, dtype: torch.dtype) -> dict:
    from accelerate import infer_auto_device_map
    from accelerate.utils import get_balanced_memory, get_max_memory

    if preset not in PRESETS:
        raise PlacementError(f"Unknown device map {preset!r}: use {', '.join(PRESETS)} or an explicit map.")
    limits = get_max_memory(dict(max_memory) if max_memory else None)
    no_split = list(getattr(skeleton, "_no_split_modules", None) or [])
    if preset.startswith("balanced") and sum(isinstance(d, int) for d in limits) > 1:
        limits = get_balanced_memory(skeleton, limits, no_split_module_classes=no_split, dtype=dtype,
                                     low_zero=preset == "balanced_low_0")
    pinned = _pinned_bytes(skeleton)
    main = main_device({d: d for d in limits})
    if limits.get(main, 0) < pinned:
        raise PlacementError(f"The memory limit for {_named(main)} ({_mb(limits.get(main, 0))}) is too small for "
                             f"anything: the input embedding and the LM head alone take {_mb(pinned)} there.")
    plan = infer_auto_device_map(skeleton, max_memory=limits, no_split_module_classes=no_split, dtype=dtype)
    for name in _resident_names(skeleton):
        plan = _pin(plan, name, main, skeleton)
    return plan


def _resident_names(skeleton) -> list[str]:
    """The module names of the input embedding and the LM head (one name when they are the same module)."""
    wanted = [skeleton.get_input_embeddings(), skeleton.get_output_embeddings()]
    names = [name for name, module in skeleton.named_modules() if any(module is w for w in wanted if w is not None)]
    return list(dict.fromkeys(names))


def _pinned_bytes(skeleton) -> int:
    """Bytes of the input embedding and the LM head (a tied weight counted once)."""
    tensors = {id(p): p for name in _resident_names(skeleton) for p in skeleton.get_submodule(name).parameters()}
    return sum(p.numel() * p.element_size() for p in tensors.values())


def _covering(plan: dict, name: str) -> str | None:
    """The key of ``plan`` that places module ``name`` (the longest prefix), or None."""
    keys = [k for k in plan if k == "" or name == k or name.startswith(k + ".")]
    return max(keys, key=len) if keys else None


def _pin(plan: dict, name: str, device, skeleton) -> dict:
    """``plan`` with module ``name`` on ``device`` (a coarser key covering it is split, see :func:`_flatten`)."""
    if (key := _covering(plan, name)) is not None and plan[key] == device:
        return plan
    return _flatten({**plan, name: device}, skeleton)


def _flatten(plan: dict, skeleton) -> dict:
    """``plan`` without nested keys, which accelerate cannot dispatch: a key with keys below it is replaced by its
    child modules (each on its device unless a key names it), until no key lies inside another; same placement."""
    plan = dict(plan)
    while (outer := next((a for a in plan if any(b != a and (a == "" or b.startswith(a + ".")) for b in plan)),
                         None)) is not None:
        held = plan.pop(outer)
        parent = skeleton.get_submodule(outer) if outer else skeleton
        own = next((n for n, _ in parent.named_parameters(recurse=False)), None)
        if own is not None:
            raise PlacementError(f"The device map places parts of {outer or 'the model'} apart, but {own!r} belongs "
                                 f"to it directly: map it as one piece.")
        for child, _ in parent.named_children():
            plan.setdefault(f"{outer}.{child}" if outer else child, held)
    return plan


def _check_names(skeleton, plan: dict) -> None:
    modules = dict(skeleton.named_modules())
    unknown = [name for name in plan if name not in modules]
    if unknown:
        raise PlacementError(f"The device map names {unknown[0]!r}, which is not a module of this model (e.g. "
                             f"{_example_names(skeleton)}).")
    uncovered = [name for name, _ in skeleton.named_parameters() if _covering(plan, name) is None]
    if uncovered:
        raise PlacementError(f"The device map places no device for {uncovered[0]!r} (and {len(uncovered) - 1} "
                             f"more weights): map every module, or use '' for the rest.")


def _example_names(skeleton) -> str:
    names = [n for n, _ in skeleton.named_children()]
    inner = getattr(skeleton, "base_model_prefix", "model")
    if inner in names:
        names += [f"{inner}.{n}" for n, _ in skeleton.get_submodule(inner).named_children()][:3]
    return ", ".join(repr(n) for n in names[:5])


def _check_resident(skeleton, plan: dict) -> None:
    offloaded = offloaded_devices(plan)
    places = {name: plan[_covering(plan, name)] for name in _resident_names(skeleton)}
    for name, device in places.items():
        if device in offloaded:
            raise PlacementError(f"The device map offloads {name} to {_named(device)}: keep the input embedding and "
                                 f"the LM head on a device that computes ({_named(main_device(plan))}), since every "
                                 f"forward and the drafters read them.")
    if len(set(places.values())) > 1:
        raise PlacementError(f"The device map splits the input embedding and the LM head over "
                             f"{' and '.join(_named(d) for d in places.values())}: put them on one device.")


def _named(device) -> str:
    return f"cuda:{device}" if isinstance(device, int) else str(device)


def _mb(size: int) -> str:
    return f"{size / 2**20:,.1f} MiB"


# ------------------------------------------------------------------------------------------------- loading


def load_placed(spec: str = EMBEDDED, *, device_map: str | dict = "auto", max_memory: str | dict | None = None,
                offload_folder: str | Path | None = None, dtype: torch.dtype | str | None = None,
                trust_remote_code: bool = False, progress: Progress | None = None) -> LoadedModel:
    """Load the causal LM ``spec`` (as :func:`specviz.runtime.models.load_model` names it) placed by ``device_map``.

    Args:
        spec: "embedded" (its converted transformers folder is what gets placed), a folder or a cached hub id.
        device_map: a preset, an explicit map or its text (:func:`parse_device_map`).
        max_memory: limits per device for a preset (:func:`parse_max_memory`), e.g. ``{"cpu": "2GiB"}``.
        offload_folder: where accelerate may write offloaded weights; needed whenever a part goes to "disk".
        dtype: as :func:`specviz.runtime.models.load_model` (None: bfloat16 when the main device is a GPU, else float32).
        trust_remote_code: run a repository's own model code.

    Returns:
        A :class:`LoadedModel` on the eager path whose ``device`` is the main device; not cached (a fresh load).

    Raises:
        PlacementError: a map, limit or folder that cannot be used (before any weight is read).
        ModelLoadError: the model cannot be found or loaded.
    """
    canonical, kind = _resolve_spec(spec)
    source = str(ensure_embedded(progress)) if kind == "embedded" else canonical
    wanted = parse_device_map(device_map) or "auto"
    limits = parse_max_memory(max_memory)
    dtype = _resolve_dtype(dtype, torch.device(_named(_main_of(wanted, limits))))
    plan = plan_device_map(skeleton_of(source, dtype, trust_remote_code), wanted, limits, dtype)
    folder = _offload_folder(plan, offload_folder)
    _say(progress, f"Loading {model_name(spec)} placed: {placement_summary(plan)}...")
    try:
        model = _placed_model(source, plan, folder, dtype, trust_remote_code)
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(source, trust_remote_code=trust_remote_code)
    except ModelLoadError:
        raise
    except Exception as error:
        raise _explain(canonical, kind, error) from error
    return _loaded(model, tokenizer, canonical, kind, dtype, plan)


def _offload_folder(plan: dict, folder: str | Path | None) -> str | None:
    if OFFLOAD_ONLY not in plan.values():
        return str(folder) if folder else None
    if not folder:
        parts = [name or "the model" for name, device in plan.items() if device == OFFLOAD_ONLY]
        raise PlacementError(f"The device map puts {len(parts)} part(s) on disk (e.g. {parts[0]}), which needs an "
                             f"offload folder (--offload-folder DIR); or raise the memory limits.")
    try:
        Path(folder).expanduser().mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise PlacementError(f"Cannot use {str(folder)!r} as the offload folder: {error.strerror or error}.") from None
    return str(Path(folder).expanduser())


def _placed_model(source: str, plan: dict, folder: str | None, dtype: torch.dtype, trust_remote_code: bool):
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as hf_logging

    quiet, accelerate_log = hf_logging.get_verbosity(), logging.getLogger("accelerate.big_modeling")
    hf_logging.set_verbosity_error()  # accelerate's "some parameters are on the meta device" is the point here
    level = accelerate_log.level
    accelerate_log.setLevel(logging.ERROR)
    try:
        model = AutoModelForCausalLM.from_pretrained(source, device_map=plan, offload_folder=folder, dtype=dtype,
                                                     trust_remote_code=trust_remote_code, attn_implementation="sdpa")
    finally:
        hf_logging.set_verbosity(quiet)
        accelerate_log.setLevel(level)
    model.eval()
    model.requires_grad_(False)
    model._specviz_device_map = dict(plan)
    return model


def _loaded(model, tokenizer, canonical: str, kind: str, dtype: torch.dtype, plan: dict) -> LoadedModel:
    device = model.get_input_embeddings().weight.device
    if device.type == "meta":  # unreachable after _check_resident; a guard against a model that moves it
        raise PlacementError("The input embedding ended up offloaded; keep it on a device that computes.")
    text_config = model.config.get_text_config()
    head = model.get_output_embeddings()
    where = {"embedded": "embedded, ", "local": "local, "}.get(kind, "")
    return LoadedModel(
        model=model, tokenizer=tokenizer, spec=canonical, dtype=dtype, device=device,
        label=f"{model_name(canonical if kind != 'embedded' else EMBEDDED)} ({where}"
              f"{str(dtype).removeprefix('torch.')}, {placement_summary(plan)})",
        eos_token_ids=_eos_token_ids(model, tokenizer),
        num_layers=int(getattr(text_config, "num_hidden_layers", 0) or getattr(text_config, "n_layer", 0)),
        vocab_size=int(head.weight.shape[0]) if head is not None else int(text_config.vocab_size),
        param_bytes=sum(p.numel() * p.element_size() for p in model.parameters()),
        num_token_ids=token_id_count(tokenizer), path="eager")


def placement_summary(plan: dict) -> str:
    """The map in a few words: "device map: 2 parts on cpu, 30 on disk (streamed)"."""
    counts: dict[str, int] = {}
    for device in plan.values():
        counts[_named(device)] = counts.get(_named(device), 0) + 1
    offloaded = {_named(d) for d in offloaded_devices(plan)}
    parts = [f"{n} on {d}{' (streamed)' if d in offloaded else ''}" for d, n in counts.items()]
    return "device map: " + ", ".join(parts)


def _say(progress: Progress | None, message: str) -> None:
    if progress is not None:
        progress(message)


# ---------------------------------------------------------------------------------- the engine's side of it


def execution_device(module: torch.nn.Module) -> torch.device:
    """Where ``module`` computes: its accelerate hook's execution device, else its first weight's device."""
    hook = getattr(module, "_hf_hook", None)
    hooks = getattr(hook, "hooks", None) or ([hook] if hook is not None else [])
    for each in hooks:
        found = getattr(each, "execution_device", None)
        if found is not None:
            return torch.device(found if not isinstance(found, int) else f"cuda:{found}")
    return next(module.parameters()).device


def decoder_layers(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The decoder layers of a ``*ForCausalLM`` (``model.model.layers``), in order."""
    return list(model.get_decoder().layers)


def cache_misplacements(model: torch.nn.Module, cache) -> list[str]:
    """One line per layer whose cached keys or values are not on the device that layer computes on ([] when all
    are; layers not written yet are skipped). ``cache``: a :class:`specviz.core.kv.SlabCache`."""
    wrong = []
    for index, (layer, entry) in enumerate(zip(decoder_layers(model), cache.layers)):
        if not getattr(entry, "is_initialized", False):
            continue
        where = execution_device(layer)
        if entry.keys.device != where or entry.values.device != where:
            wrong.append(f"layer {index}: keys on {entry.keys.device}, values on {entry.values.device}, "
                         f"computes on {where}")
    return wrong


def rehook_view(view: torch.nn.Module) -> torch.nn.Module:
    """Re-attach accelerate's hooks to a shallow copy of a placed model and of its inner model (the early-exit
    view of :mod:`specviz.drafters.early_exit`), so the copies run their own forward. A copied hook still calls the
    original module's forward: the view of a placed target would run every layer. Returns ``view``."""
    for module in (view, getattr(view, "model", None)):
        bound = module.__dict__.get("forward") if module is not None else None
        if not isinstance(bound, functools.partial) or not bound.args or bound.args[0] is module:
            continue
        from accelerate.hooks import add_hook_to_module

        del module.__dict__["forward"]
        module.__dict__.pop("_old_forward", None)
        add_hook_to_module(module, module._hf_hook)
    return view


# ---------------------------------------------------------------------------------------- the command line


def add_placement_flags(parser) -> None:
    """``--device-map``, ``--max-memory`` and ``--offload-folder`` on an argparse parser (generate, bench)."""
    group = parser.add_argument_group("placement (accelerate's device map: a target bigger than one device)")
    group.add_argument("--device-map", default=None, metavar="MAP",
                       help=f"place the target over devices: {', '.join(PRESETS)}, a JSON object or file, or "
                            f"module=device pairs (devices cpu, disk, 0, cuda:1, mps); runs eagerly with the default "
                            f"kernels (replaces --device)")
    group.add_argument("--max-memory", default=None, metavar="DEV=SIZE,...",
                       help="limits for a preset map, e.g. cpu=2GiB or 0=20GiB,cpu=64GiB; what does not fit goes "
                            "to the next device, then to disk")
    group.add_argument("--offload-folder", default=None, metavar="DIR",
                       help="where weights placed on disk may be written (needed when any part goes to disk)")


def placement_requested(args) -> bool:
    """Whether the command line asked for a placed target (any of the placement flags)."""
    return any(getattr(args, name, None) for name in ("device_map", "max_memory", "offload_folder"))


def load_placed_target(args, log: Progress) -> LoadedModel:
    """The CLI's target loaded with the placement flags (``--dtype`` too). Raises PlacementError when ``--compile``
    or ``--path graphs`` is asked for as well (a placed model runs eagerly), or for a bad map, limit or folder."""
    if getattr(args, "compile", False) or getattr(args, "path", "auto") == "graphs":
        raise PlacementError("A placed target (--device-map) runs eagerly: drop --compile and --path graphs.")
    if getattr(args, "device", "auto") not in ("auto", None):
        log(f"note: --device {args.device} is replaced by the device map")
    target = load_placed(args.target, device_map=args.device_map or "auto", max_memory=args.max_memory,
                         offload_folder=args.offload_folder, dtype=getattr(args, "dtype", "auto"), progress=log)
    log(f"placed: {target.label}; main device {target.device}; forward: eager (default kernels)")
    return target
