"""The rule registry: one line per rule family module, each module exposing ``RULES``."""

from __future__ import annotations

import importlib
from functools import lru_cache
from typing import Dict, Tuple, Type

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
)

# Codes the engine itself reports; they are not rules (no visitor) but can be selected/ignored.
ENGINE_CODES = {
    "TL001": ("syntax-error", "The file could not be parsed."),
    "TL002": ("unreadable-file", "The file could not be read or decoded."),
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


def known_codes() -> Tuple[str, ...]:
    return tuple(sorted(set(ENGINE_CODES) | set(rules_by_code())))


def code_for(code_or_name: str):
    """Normalise a code or kebab-case rule name to a code, or None."""
    if code_or_name in ENGINE_CODES or code_or_name in rules_by_code():
        return code_or_name
    for code, (name, _) in ENGINE_CODES.items():
        if name == code_or_name:
            return code
    for rule in all_rules():
        if rule.name == code_or_name:
            return rule.code
    return None


def name_for(code: str) -> str:
    if code in ENGINE_CODES:
        return ENGINE_CODES[code][0]
    return rules_by_code()[code].name
