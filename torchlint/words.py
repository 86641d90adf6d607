"""Word lists the heuristics share, in one place (no libcst here: the project summaries use them
in processes that never import it)."""

from __future__ import annotations

import re

# An `if` on these runs on few iterations: `if step % log_every == 0`, `if verbose:`,
# `if self.control.should_save:` / `should_evaluate` (the HF Trainer's periodic checkpoints and evals).
PERIODIC_WORDS = frozenset({"log", "logging", "logger", "verbose", "debug", "print", "display", "report", "plot",
                            "plots", "plotting", "visualize", "vis", "save", "checkpoint", "evaluate", "freq",
                            "frequency", "every", "interval"})
STEP_WORDS = frozenset({"step", "steps", "iter", "iteration", "it", "i", "idx", "batch", "epoch",
                        "cnt", "count", "counter"})  # `cnt == 0`: a one-off step
ONE_OFF_WORDS = frozenset({"last", "first", "final"})  # last_batch, is_first_step
# Names of evaluation code, and of training code.
EVAL_WORDS = frozenset({"eval", "evaluate", "evaluation", "val", "valid", "validate", "validation",
                        "test", "predict", "prediction", "inference", "infer"})
TRAIN_WORDS = frozenset({"train", "training", "finetune", "fit", "pretrain"})

# Framework hooks that run once per step: Lightning's LightningModule/Callback and the
# Hugging Face Trainer's overridable steps. A method of these names in a class with a base class.
TRAIN_STEP_HOOKS = frozenset({
    "training_step", "on_train_batch_start", "on_train_batch_end", "on_before_backward",
    "on_after_backward", "on_before_optimizer_step", "on_before_zero_grad", "compute_loss",
})
EVAL_STEP_HOOKS = frozenset({
    "validation_step", "test_step", "predict_step", "prediction_step", "on_validation_batch_start",
    "on_validation_batch_end", "on_test_batch_end", "on_predict_batch_end",
})
# An `if` on these guards the optimizer step of gradient accumulation: `if step_is_accumulating`,
# `if (i + 1) % accum_iter == 0` (the modulo alone says so too).
ACCUMULATION_WORDS = frozenset({"accum", "accumulate", "accumulation", "accumulating", "accumulated", "sync"})
# Names of code that needs autograd even while evaluating: adversarial attacks, saliency.
GRAD_NEEDING_WORDS = frozenset({"autograd", "gradient", "gradients", "grads", "saliency", "attribution",
                                "attack", "adversarial", "pgd", "fgsm", "gradcam", "cam"})
# The last word of a name that holds a model: `model`, `self.net`, `text_encoder`.
MODEL_WORDS = frozenset({"model", "net", "network", "classifier", "encoder", "decoder", "backbone", "module"})
# Names that speak of the distributed mode or of a rank's share: `args.distributed`, `world_size`,
# `local_rank`, `dist.is_initialized()`, `num_replicas`.
DISTRIBUTED_WORDS = frozenset({"distributed", "ddp", "dist", "world", "rank", "ranks", "replicas", "ngpus",
                               "multiprocessing", "initialized", "shard", "shards", "horovod", "hvd"})
# Names of timing and benchmarking code: a device sync there is the measurement.
TIMING_WORDS = frozenset({"time", "timer", "timing", "timed", "timeit", "perf", "counter", "monotonic", "clock",
                          "tic", "toc", "elapsed", "stopwatch", "duration", "latency", "throughput", "fps",
                          "speed", "bench", "benchmark", "benchmarking", "measure", "profile", "profiler",
                          "profiling", "record"})
# Iterators that wrap a loader and log each iteration's time: `metric_logger.log_every(loader, ...)`
# (torchvision references, DETR, DeiT, MAE, DINO): a sync in their loop makes the logged time right.
TIMED_ITERATOR_WORDS = TIMING_WORDS | frozenset({"log", "logger", "logging", "meter"})
# Names of code that runs once, at set-up or load time: `__init__`, `__setstate__`, `load_state_dict`.
SETUP_WORDS = frozenset({"init", "setstate", "setup", "load", "restore", "build", "create", "configure",
                         "register", "convert", "prepare", "reset"})
# Names a device is usually held in: `device`, `self.device`, `args.device`, `rank`, `local_rank`.
DEVICE_NAME_WORDS = frozenset({"dev", "rank", "local_rank", "gpu", "gpu_id"})
# Words of a memory setting: `if args.empty_unused_memory_level >= 1:`, `if cfg.release_cache:`.
MEMORY_WORDS = frozenset({"empty", "cache", "memory", "mem", "unused", "release"})
# Code that speaks of running out of memory (`if "out of memory" in str(e):`).
OOM_TEXT = re.compile(r"out of memory|outofmemory|out_of_memory|\boom\b|reduce_batch_size", re.IGNORECASE)
# Words of a debugging switch: `if debug:`, `if args.detect_anomaly:`, `os.environ.get("TORCH_DEBUG")`.
DEBUG_WORDS = frozenset({"debug", "debugging", "anomaly", "sanity", "nan", "profile", "profiling", "profiler",
                         "trace", "tracing"})
DEBUG_TEXT = re.compile(r"debug|anomaly|profil|sanity", re.IGNORECASE)
# Names of code whose purpose is a debugging or profiling tool: `class AutogradProfiler`,
# `def enable_debug_mode`, `profiling_tracer.py`.
TOOL_NAME_WORDS = frozenset({"debug", "debugging", "anomaly", "profile", "profiler", "profiling"})
# Functions named to run once per training step (besides `*_step`, `*_forward`, `*_loss`).
PER_STEP_NAMES = frozenset({"forward", "step", "train_batch", "train_on_batch"})
