"""TL5xx: GPU memory management."""

from __future__ import annotations

from torchlint import _cst as cst

from torchlint.context import FixSpec
from torchlint.fixbuilders import statement_removal_edits
from torchlint.heuristics import in_oom_handler, is_per_step_function, under_memory_switch
from torchlint.imports import dotted_name
from torchlint.loops import calls_gradient_step, is_training_loop, runs_every_step, under_periodic_guard
from torchlint.rules.base import Rule
from torchlint.syntax import enclosing_function, enclosing_loops
from torchlint.torch_api import EMPTY_CACHE_FUNCTIONS


class EmptyCache(Rule):
    """Flags `torch.cuda.empty_cache()` in a training loop or in a function that runs every step
    (`forward`, `step`, `training_step`, any `*_step`).

    The caching allocator keeps freed blocks to hand them out again without a `cudaMalloc`;
    `empty_cache()` returns them to the driver, so the next step pays for fresh allocations (and
    `cudaFree` synchronises the device). It never gives the *same* process more memory: the
    allocator already frees its cache and retries before raising out-of-memory. Calls in an
    out-of-memory `except` handler, under a periodic guard (`if step % 1000 == 0:`) or a memory
    setting (`if args.empty_unused_memory_level >= 1:`), in loops
    that are not training loops (`for name in model_names:`), and in setup code stay silent.
    """

    code = "TL501"
    name = "empty-cache"
    summary = "`torch.cuda.empty_cache()` runs every step, forcing the allocator to re-allocate from the driver."
    message = "`torch.cuda.empty_cache()` runs every step; remove it"
    hint = (
        "It hands the allocator's cached blocks back to the driver, so the next step must allocate "
        "them again (slow, and it synchronises); the allocator already frees its cache before "
        "reporting out of memory."
    )
    _template = "`{name}()` runs every step; remove it"
    _hint = (
        "Called {where}, it hands the allocator's cached blocks back to the driver, so the next step "
        "must allocate them again (slow, and it synchronises); the allocator already frees its cache "
        "before reporting out of memory."
    )
    requires = (("empty_cache",),)
    ast_candidate = staticmethod(lambda index: index.called("empty_cache"))
    uses_project = True
    fix_applicability = "unsafe"

    def visit_Call(self, node: cst.Call) -> None:
        name = self.ctx.resolve_call(node)
        if name not in EMPTY_CACHE_FUNCTIONS:
            name = self._module_chosen_at_run_time(node)
        if name is None or in_oom_handler(self.ctx):
            return
        loop = next((l for l in enclosing_loops(self.ctx) if is_training_loop(self.ctx, l)), None)
        func = enclosing_function(self.ctx)
        if loop is not None:
            where = "inside a training loop" if calls_gradient_step(self.ctx, loop) else "inside a loop over a data loader"
            scope = loop
        elif (why := runs_every_step(self.ctx, kinds=("train", "eval"))) is not None:
            scope, where = func, f"in `{func.name.value}`, which runs every step ({why}),"
        elif is_per_step_function(func):  # the call graph says nothing: go by its name
            scope, where = func, f"in `{func.name.value}`, which runs every step,"
        else:
            return
        if under_periodic_guard(self.ctx, scope, node) or under_memory_switch(self.ctx, scope, node):
            return
        edits = statement_removal_edits(self.ctx, node)
        fix = FixSpec("unsafe", f"Remove the `{name}()` call", edits) if edits else None
        self.report(node, self._template.format(name=name), fix, hint=self._hint.format(where=where.rstrip(",")))


    def _module_chosen_at_run_time(self, node: cst.Call):
        """``device_module.empty_cache()`` where the whole-file model knows ``device_module`` is
        bound only to ``getattr(torch, device_type, torch.cuda)`` (peft's scripts): the call as
        spelt, or None."""
        func = node.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "empty_cache"):
            return None
        module = dotted_name(func.value)
        if module is None or module not in self.ctx.model.accelerator_modules():
            return None
        return f"{module}.empty_cache"


RULES = [EmptyCache]
