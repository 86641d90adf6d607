"""The rule registry: one line per rule family module, each module exposing ``RULES``."""

from __future__ import annotations

import importlib
from functools import lru_cache
from typing import TYPE_CHECKING, Dict, FrozenSet, Tuple, Type

if TYPE_CHECKING:  # pragma: no cover - imported with the rule modules (it imports libcst)
    from torchlint.rules.base import Rule

RULE_MODULES = (
    "torchlint.rules.parallel",
    "torchlint.rules.host_sync",
    "torchlint.rules.memory",
    "torchlint.rules.debug",
    "torchlint.rules.dataloader",
    "torchlint.rules.device",
    "torchlint.rules.batchnorm",
    "torchlint.rules.zero_grad",
    "torchlint.rules.compat",
    "torchlint.rules.training",
    "torchlint.rules.amp",
    "torchlint.rules.losses",
    "torchlint.rules.loading",
    "torchlint.rules.transfer",
    "torchlint.rules.pageable",
    "torchlint.rules.distributed",
)

# Codes the engine itself reports; they are not rules (no visitor) but can be selected/ignored.
ENGINE_CODES = {
    "TL001": ("syntax-error", "The file could not be parsed."),
    "TL002": ("unreadable-file", "The file could not be read or decoded."),
    "TL003": ("too-complex", "The file is nested too deeply or too large to analyse."),
    "TL004": ("unused-noqa", "A `# noqa` code that suppresses nothing, or names no rule."),
}


@lru_cache(maxsize=None)
def all_rules() -> Tuple[Type[Rule], ...]:
    rules = []
    for module_name in RULE_MODULES:
        rules.extend(importlib.import_module(module_name).RULES)
    return tuple(sorted(rules, key=lambda r: r.code))


@lru_cache(maxsize=None)
def rules_by_code() -> Dict[str, Type[Rule]]:
    return {rule.code: rule for rule in all_rules()}


_REGISTRY: Dict[Tuple[str, ...], Dict[str, list]] = {}


def _registry() -> Dict[str, list]:
    """code -> [name, preview] of every registered rule. Selecting codes needs only this, so it
    comes from a snapshot while the rules are not imported: a fully cached run then never
    imports the rules or libcst."""
    if rules_by_code.cache_info().currsize or not all(m.startswith("torchlint.rules.") for m in RULE_MODULES):
        return _build_registry()
    registry = _REGISTRY.get(RULE_MODULES)
    if registry is None:
        registry = _REGISTRY[RULE_MODULES] = registry_snapshot(RULE_MODULES)
    return registry


def _build_registry() -> Dict[str, list]:
    return {code: [rule.name, rule.preview] for code, rule in rules_by_code().items()}


def registry_snapshot(modules: Tuple[str, ...]) -> Dict[str, list]:
    """``_build_registry()`` (which imports every rule, and so libcst), remembered as
    ``registry-<key>.json`` in the user's cache folder (``installation.user_cache_dir``) under
    the code signature: a warm run can validate ``--select`` and fingerprint the settings
    without importing a single rule. Nothing is written inside the installed package; where the
    cache folder cannot be written the registry is just built each time."""
    import hashlib
    import json
    import os

    from torchlint.installation import code_signature, user_cache_dir

    folder = user_cache_dir()
    key = hashlib.blake2b(f"{code_signature()}:{','.join(modules)}".encode(), digest_size=12).hexdigest()
    name = f"registry-{key}.json"
    path = os.path.join(folder, name)
    try:
        with open(path, encoding="utf-8") as fh:
            names = json.load(fh)
        if isinstance(names, dict) and names and all(
            isinstance(v, list) and len(v) == 2 and isinstance(v[0], str) and isinstance(v[1], bool)
            for v in names.values()
        ):
            return names
    except (OSError, ValueError):
        pass
    names = _build_registry()
    try:
        from torchlint.atomic import atomic_write_text

        os.makedirs(folder, exist_ok=True)
        atomic_write_text(path, json.dumps(names, sort_keys=True))
        _forget_old_snapshots(folder, name)
    except OSError:
        pass
    return names


#: Snapshots of other code (an earlier edit, another installation) are removed this long after
#: they were written: installations sharing the folder do not delete each other's.
SNAPSHOT_MAX_AGE_S = 7 * 24 * 3600


def _forget_old_snapshots(folder: str, keep: str) -> None:
    import os
    import time

    limit = time.time() - SNAPSHOT_MAX_AGE_S
    for other in os.listdir(folder):
        path = os.path.join(folder, other)
        if other.startswith("registry-") and other.endswith(".json") and other != keep:
            try:
                if os.stat(path).st_mtime < limit:
                    os.unlink(path)
            except OSError:
                pass


def rule_names() -> Dict[str, str]:
    """code -> name of every registered rule."""
    return {code: entry[0] for code, entry in _registry().items()}


def preview_codes() -> FrozenSet[str]:
    """Codes of the rules in preview: they run only in preview mode."""
    return frozenset(code for code, entry in _registry().items() if entry[1])


def known_codes() -> Tuple[str, ...]:
    return tuple(sorted(set(ENGINE_CODES) | set(rule_names())))


def code_for(code_or_name: str):
    """Normalise a code or kebab-case rule name to a code, or None."""
    names = rule_names()
    if code_or_name in ENGINE_CODES or code_or_name in names:
        return code_or_name
    for code, (name, _) in ENGINE_CODES.items():
        if name == code_or_name:
            return code
    for code, name in names.items():
        if name == code_or_name:
            return code
    return None


def name_for(code: str) -> str:
    if code in ENGINE_CODES:
        return ENGINE_CODES[code][0]
    return rule_names()[code]
