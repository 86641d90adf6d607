"""The application layer: one module per ``torchlint`` command (``check``, ``fix``, ``rule``,
``clean``, ``server``) above the engine. ``torchlint.cli`` dispatches to them; nothing below this
package imports it. ``usage`` (exit codes, usage errors, the argument parser) imports nothing of
torchlint, so that every command and only commands share it."""
