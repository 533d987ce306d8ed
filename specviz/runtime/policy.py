"""Operator settings: what visitors of the web app may ask for, read from environment variables.

=================================  ==============================================  ==============================
variable                           meaning                                         default: local / public
=================================  ==============================================  ==============================
``SPECVIZ_PUBLIC``                 1: restricted defaults (a public deployment);   on when ``SPACE_ID`` is set
                                   0: local defaults                               (a Hugging Face Space)
``SPECVIZ_ALLOW_REMOTE_CODE``      1: run Python code shipped in model             off / off (web app and CLI)
                                   repositories (``trust_remote_code``)
``SPECVIZ_ALLOWED_MODELS``         comma list of hub ids and/or ``embedded``;      any / ``embedded`` and the
                                   ``*`` wildcards (``org/*``); ``*`` = any        SmolLM2-135M/360M-Instruct ids
``SPECVIZ_ALLOW_LOCAL_PATHS``      1: visitors may load server folders as models   on / off
``SPECVIZ_MAX_NEW_TOKENS``         upper bound of "max new tokens" per run         1024 / 512
``SPECVIZ_MAX_PROMPT_TOKENS``      longer prompts keep only their last N tokens    none (the context window) /
                                   (0 = only the context window limits it)         2048
``SPECVIZ_ALLOW_UPLOADS``          1: visitors may open recording files they       on / off
                                   upload (Classroom tab; downloads stay on)
=================================  ==============================================  ==============================

The model restrictions (allowed ids, local paths) apply to the web app only: the command line is a local
user's own tool. Remote code is off everywhere unless ``SPECVIZ_ALLOW_REMOTE_CODE`` is on. The target named by
``SPECVIZ_TARGET`` (the app's default, chosen by the operator) is always allowed. An unreadable value is
logged and replaced by the restricted choice (booleans) or the default (numbers).

No Gradio here: the app calls :func:`current_policy` once per request and :meth:`Policy.check_model` for each
model a visitor names (one place: ``app.inputs.check_models``).
"""

from __future__ import annotations

import fnmatch
import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("specviz.runtime.policy")

EMBEDDED = "embedded"
PUBLIC_MODELS = ("embedded", "HuggingFaceTB/SmolLM2-135M-Instruct", "HuggingFaceTB/SmolLM2-360M-Instruct")
"""The models a public deployment allows by default: the embedded model and its family (one vocabulary)."""

DEFAULT_MAX_NEW_TOKENS = 1024
PUBLIC_MAX_NEW_TOKENS = 512
PUBLIC_MAX_PROMPT_TOKENS = 2048

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*$")
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


class PolicyError(ValueError):
    """A visitor asked for something the operator's settings forbid; the message names the setting."""


def _flag(env: Mapping[str, str], name: str, default: bool, safe: bool) -> bool:
    text = env.get(name, "").strip().lower()
    if not text:
        return default
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    log.warning("%s=%r is neither 1/true/yes/on nor 0/false/no/off: using %s", name, text, int(safe))
    return safe


def _count(env: Mapping[str, str], name: str, default: int | None) -> int | None:
    text = env.get(name, "").strip()
    if not text:
        return default
    try:
        value = int(text)
    except ValueError:
        log.warning("%s=%r is not a whole number: using %s", name, text, default)
        return default
    if value < 0:
        log.warning("%s=%r is negative: using %s", name, text, default)
        return default
    return value


def is_public(env: Mapping[str, str] | None = None) -> bool:
    """Whether the restricted (public) defaults apply: ``SPECVIZ_PUBLIC``, else whether ``SPACE_ID`` is set."""
    env = os.environ if env is None else env
    return _flag(env, "SPECVIZ_PUBLIC", default=bool(env.get("SPACE_ID", "").strip()), safe=True)


def remote_code_allowed(env: Mapping[str, str] | None = None) -> bool:
    """``SPECVIZ_ALLOW_REMOTE_CODE`` (default off): may model repositories' own Python code run?"""
    return _flag(os.environ if env is None else env, "SPECVIZ_ALLOW_REMOTE_CODE", default=False, safe=False)


def looks_like_hub_id(spec: str) -> bool:
    """``org/name`` with no path tricks (what :mod:`specviz.runtime.models` treats as a hub id)."""
    return bool(_HUB_ID.match(spec)) and ".." not in spec


@dataclass(frozen=True)
class Policy:
    """The operator's settings for one request (see the module docstring)."""

    public: bool = False
    allow_remote_code: bool = False
    allow_local_paths: bool = True
    allowed_models: tuple[str, ...] | None = None  # None: any model id
    max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS
    max_prompt_tokens: int | None = None  # None: only the target's context window limits the prompt
    default_target: str | None = None  # SPECVIZ_TARGET: always allowed
    allow_uploads: bool = True  # SPECVIZ_ALLOW_UPLOADS: visitors may open recording files they upload

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Policy:
        """The policy the environment variables describe."""
        env = os.environ if env is None else env
        public = is_public(env)
        models_text = env.get("SPECVIZ_ALLOWED_MODELS", "").strip()
        if models_text:
            items = tuple(dict.fromkeys(m.strip() for m in models_text.split(",") if m.strip()))
            allowed = None if "*" in items else items
        else:
            allowed = PUBLIC_MODELS if public else None
        max_new = _count(env, "SPECVIZ_MAX_NEW_TOKENS", PUBLIC_MAX_NEW_TOKENS if public else DEFAULT_MAX_NEW_TOKENS)
        max_prompt = _count(env, "SPECVIZ_MAX_PROMPT_TOKENS", PUBLIC_MAX_PROMPT_TOKENS if public else None)
        return cls(
            public=public,
            allow_remote_code=remote_code_allowed(env),
            allow_local_paths=_flag(env, "SPECVIZ_ALLOW_LOCAL_PATHS", default=not public, safe=False),
            allowed_models=allowed,
            max_new_tokens=max(1, max_new or 1),
            max_prompt_tokens=max_prompt or None,
            default_target=env.get("SPECVIZ_TARGET", "").strip() or None,
            allow_uploads=_flag(env, "SPECVIZ_ALLOW_UPLOADS", default=not public, safe=False),
        )

    def allows_id(self, spec: str) -> bool:
        """Whether ``spec`` ("embedded" or a hub id) is on the allow-list (case-insensitive, ``*`` wildcards)."""
        if self.allowed_models is None:
            return True
        if self.default_target and spec.lower() == self.default_target.lower():
            return True
        return any(fnmatch.fnmatchcase(spec.lower(), pattern.lower()) for pattern in self.allowed_models)

    def check_model(self, spec: str, role: str = "target") -> str:
        """Return ``spec`` stripped if a visitor may load it as ``role`` ("target", "draft model"); raise
        :class:`PolicyError` naming the setting otherwise. Decided from the text alone (plus whether a
        hub-shaped name is also a folder here), so a refused local path is never looked at."""
        text = spec.strip()
        is_default = bool(self.default_target) and text == self.default_target
        if text.lower() == EMBEDDED or looks_like_hub_id(text):
            if not self.allow_local_paths and text.lower() != EMBEDDED and not is_default and Path(text).exists():
                raise PolicyError(f"The {role} {text!r} names a folder on this server, and loading local folders "
                                  f"is disabled here (SPECVIZ_ALLOW_LOCAL_PATHS).")
            if not self.allows_id(text):
                raise PolicyError(f"The {role} {text!r} is not allowed on this server; allowed: "
                                  f"{', '.join(self.allowed_models or ())} (SPECVIZ_ALLOWED_MODELS).")
            return text
        if is_default:
            return text
        if not self.allow_local_paths:
            raise PolicyError(f"Loading a local folder as the {role} is disabled on this server "
                              f"(SPECVIZ_ALLOW_LOCAL_PATHS); use a hub id"
                              + (f" such as {self.allowed_models[0]!r}." if self.allowed_models else "."))
        return text

    def describe(self) -> str:
        """One line for the server log."""
        models = "any" if self.allowed_models is None else ", ".join(self.allowed_models)
        prompt = self.max_prompt_tokens or "context window"
        return (f"{'public' if self.public else 'local'} policy: models {models}; local folders "
                f"{'on' if self.allow_local_paths else 'off'}; remote code {'on' if self.allow_remote_code else 'off'}"
                f"; max new tokens {self.max_new_tokens}; max prompt tokens {prompt}; recording uploads "
                f"{'on' if self.allow_uploads else 'off'}")


def current_policy() -> Policy:
    """The policy of the current environment (read afresh on every call: cheap, and tests can change it)."""
    return Policy.from_env()
