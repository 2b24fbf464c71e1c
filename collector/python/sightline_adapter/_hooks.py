"""Where the adapter meets the job, once torch is imported:
- the outermost model: found by a global forward pre-hook at the first training forward of a
  module with submodules whose inputs hold tokens (input_ids or inputs_embeds), then watched by
  hooks of its own (the global hooks are removed, so the job's other modules keep PyTorch's fast
  path);
- each training batch entering it: counted on the host (tensors already there), or copied to the
  host asynchronously and counted when the copy has landed (docs/adapter.md);
- the DataLoader iterator: each wait for the next batch inside a `sightline.dataloader next`
  range;
- the optimizer step and the interpreter's exit: moments to report batches whose copies landed."""
import atexit
import itertools
import os
import sys

import torch
from torch.autograd.profiler import record_function

from . import _facts
from ._guard import guarded, state, summary
from ._pending import DeviceCopy, Pending

# Outermost module calls that hold no training batch (evaluation first, or an inference job)
# before the search stops: until then every module call pays for two global hooks.
GIVE_UP_AFTER = 1000

TENSOR_KEYS = {
    "mask": ("attention_mask",),
    "labels": ("labels",),
    "position_ids": ("position_ids",),
    "cu_seqlens": ("cu_seq_lens_q", "cu_seq_lens_k", "cu_seqlens"),
    "seq_idx": ("seq_idx",),
}


def _emit(text):
    with record_function(text):
        pass


def _tokens(args, kwargs):
    """(rows, columns, the token tensor, its name) of a model call's batch, or None."""
    if args and not kwargs and isinstance(args[0], dict):
        kwargs, args = args[0], args[1:]  # model(batch)
    t = kwargs.get("input_ids")
    if t is None and args and isinstance(args[0], torch.Tensor) and not args[0].is_floating_point():
        t = args[0]
    if isinstance(t, torch.Tensor) and t.dim() in (1, 2) and not t.is_floating_point() and t.dtype != torch.bool:
        return (1, t.shape[0], t, "input_ids") if t.dim() == 1 else (t.shape[0], t.shape[1], t, "input_ids")
    e = kwargs.get("inputs_embeds")
    if isinstance(e, torch.Tensor) and e.dim() == 3:
        return e.shape[0], e.shape[1], e, "inputs_embeds"
    return None


def _batch_tensors(kwargs, token_tensor, with_ids):
    """The tensors the counts come from (small integer tensors; never a 4-D mask)."""
    out = {}
    for role, names in TENSOR_KEYS.items():
        for n in names:
            t = kwargs.get(n)
            if isinstance(t, torch.Tensor) and t.dim() <= 3 and not (role == "mask" and t.dim() != 2):
                out[role] = t
                break
    if with_ids and not any(k in out for k in ("cu_seqlens", "seq_idx", "position_ids")):
        out["input_ids"] = token_tensor
    return out


def _host_arrays(tensors):
    arrays = {}
    for role, t in tensors.items():
        if t.dtype == torch.bfloat16 or t.requires_grad:
            return None  # not a mask or index tensor the adapter knows how to read
        arrays[role] = t.numpy()
    return arrays


def _is_compiling():
    compiler = getattr(torch, "compiler", None)
    return bool(compiler and hasattr(compiler, "is_compiling") and compiler.is_compiling())


class Batches:
    """Counts each training batch entering a watched model and annotates it."""

    def __init__(self):
        self.ids = itertools.count(1)
        self.pending = Pending()
        self.defer = os.environ.get("SIGHTLINE_ADAPTER_DEFER") == "1"
        self.stack = ()
        self.eos = ()

    def on_batch(self, module, args, kwargs):
        if not torch.is_grad_enabled() or _is_compiling():
            return
        found = _tokens(args, kwargs)
        if found is None:
            return
        rows, columns, tok, _ = found
        if args and not kwargs and isinstance(args[0], dict):
            kwargs = args[0]
        tensors = _batch_tensors(kwargs, tok, bool(self.eos))
        on_host = all(t.device.type == "cpu" for t in tensors.values()) and tok.device.type == "cpu"
        batch_id = next(self.ids)
        if batch_id == 2:
            state.first_ns = state.host_ns
        state.batches += 1
        if on_host and not self.defer:
            arrays = _host_arrays(tensors)
            if arrays is not None:
                _emit(_facts.annotation(self._read(rows, columns, arrays), batch_id=batch_id, stack=self.stack))
        elif tok.device.type == "cuda" or self.defer:
            if tok.device.type == "cuda" and torch.cuda.is_current_stream_capturing():
                return
            copy = DeviceCopy(tensors) if not self.defer else _HostCopy(tensors, batch_id)
            state.device_copies += len([t for t in tensors.values() if t.device.type != "cpu"])
            _emit(_facts.annotation(padded=rows * columns, batch_id=batch_id, stack=self.stack, late=True))
            self.pending.add(copy, guarded(lambda host: self._report_late(rows, columns, host, batch_id)))
        self.poll()

    def _read(self, rows, columns, arrays):
        return _facts.read_batch(rows, columns, mask=arrays.get("mask"), labels=arrays.get("labels"),
                                 position_ids=arrays.get("position_ids"), cu_seqlens=arrays.get("cu_seqlens"),
                                 seq_idx=arrays.get("seq_idx"), input_ids=arrays.get("input_ids"), eos_ids=self.eos)

    def _report_late(self, rows, columns, host, batch_id):
        arrays = _host_arrays(host)
        if arrays is None:
            return
        state.late += 1
        _emit(_facts.annotation(self._read(rows, columns, arrays), batch_id=batch_id, cont=True))

    def poll(self, wait=False):
        self.pending.poll(wait)


class _HostCopy:
    """SIGHTLINE_ADAPTER_DEFER=1 (for testing the late path without a GPU): host batches go the
    way GPU batches do, their counts reported once the next batch has entered the model."""

    def __init__(self, tensors, batch_id):
        self.host = {k: t.clone() for k, t in tensors.items()}
        self.batch_id = batch_id

    def ready(self):
        return state.batches > self.batch_id

    def wait(self):
        pass


class Models:
    """Finds the outermost model of the training step and hooks it (and nothing else)."""

    def __init__(self, batches):
        self.batches = batches
        self.depth = 0
        self.looked = 0
        self.handles = []
        mod = torch.nn.modules.module
        self.handles.append(mod.register_module_forward_pre_hook(guarded(self._global_pre)))
        self.handles.append(mod.register_module_forward_hook(guarded(self._global_post), always_call=True))
        state.undo.append(self._stop)

    def _stop(self):
        for h in self.handles:
            h.remove()
        self.handles.clear()

    def _global_pre(self, module, args):
        if self.depth == 0:
            kwargs = _caller_kwargs(module)
            # A model has layers: a lone embedding called on token ids is not the step's model.
            if torch.is_grad_enabled() and next(module.children(), None) is not None and _tokens(args, kwargs) is not None:
                self._stop()  # found: the job's other modules get PyTorch's fast path back
                self._adopt(module)
                self.batches.on_batch(module, args, kwargs)
                return
            self.looked += 1
            if self.looked >= GIVE_UP_AFTER:
                self._stop()
                return
        self.depth += 1

    def _global_post(self, module, args, output):
        self.depth = max(0, self.depth - 1)

    def _adopt(self, module):
        self.batches.stack = _stack_of(module)
        self.batches.eos = _eos_ids(module)
        calls = [0]

        def pre(m, args, kwargs):
            calls[0] += 1
            if calls[0] == 1:
                self.batches.on_batch(m, args, kwargs)

        def post(m, args, output):
            calls[0] = max(0, calls[0] - 1)

        hp = module.register_forward_pre_hook(guarded(pre), with_kwargs=True)
        hf = module.register_forward_hook(guarded(post), always_call=True)
        state.undo.append(hp.remove)
        state.undo.append(hf.remove)
        # This call's own pre-hook list was taken before `pre` existed; its post-hook runs.
        calls[0] = 1


def _caller_kwargs(module):
    """The keyword arguments of the module call being made (a global pre-hook sees only the
    positional ones): from Module._call_impl's frame."""
    f = sys._getframe(1)
    for _ in range(8):
        if f is None:
            break
        loc = f.f_locals
        if loc.get("self") is module and isinstance(loc.get("kwargs"), dict):
            return loc["kwargs"]
        f = f.f_back
    return {}


def _stack_of(module):
    """Which of transformers, its Trainer and TRL drive this model (annotation flags)."""
    flags = []
    mu = sys.modules.get("transformers.modeling_utils")
    base = getattr(mu, "PreTrainedModel", None)
    inner = [module, getattr(module, "module", None), getattr(module, "base_model", None)]
    if base is not None and any(isinstance(m, base) for m in inner if m is not None):
        flags.append("transformers")
    trainer_mod = sys.modules.get("transformers.trainer")
    trainer_cls = getattr(trainer_mod, "Trainer", None)
    f = sys._getframe(1)
    while f is not None and trainer_cls is not None:
        owner = f.f_locals.get("self")
        if isinstance(owner, trainer_cls):
            flags.append("hf_trainer")
            if type(owner).__module__.split(".")[0] == "trl":
                flags.append("trl")
            break
        f = f.f_back
    return tuple(flags)


def _eos_ids(module):
    """The model's end-of-sequence token ids (transformers configs), to recognise documents
    joined by EOS in one row."""
    for m in (module, getattr(module, "module", None)):
        cfg = getattr(m, "config", None)
        eos = getattr(cfg, "eos_token_id", None)
        if isinstance(eos, int):
            return (eos,)
        if isinstance(eos, (list, tuple)) and all(isinstance(x, int) for x in eos):
            return tuple(eos)
    return ()


def _patch_dataloader(batches):
    from torch.utils.data import dataloader
    it = dataloader._BaseDataLoaderIter
    original = it.__next__
    enter = guarded(lambda: record_function("sightline.dataloader next").__enter__())
    leave = guarded(lambda rf: rf.__exit__(None, None, None) if rf is not None else None)
    after = guarded(batches.poll)

    def __next__(self):
        if not state.enabled:
            return original(self)
        rf = enter()
        try:
            return original(self)
        finally:
            leave(rf)
            after()

    __next__.__wrapped__ = original
    it.__next__ = __next__
    state.undo.append(lambda: setattr(it, "__next__", original))


def start():
    """Called once torch is imported."""
    batches = Batches()
    Models(batches)
    _patch_dataloader(batches)
    from torch.optim.optimizer import register_optimizer_step_post_hook
    h = register_optimizer_step_post_hook(guarded(lambda opt, args, kwargs: batches.poll()))
    state.undo.append(h.remove)
    atexit.register(guarded(lambda: _at_exit(batches), timed=False))


def _at_exit(batches):
    batches.poll(wait=True)
    if os.environ.get("SIGHTLINE_DEBUG") == "1":
        sys.stderr.write(summary() + "\n")

