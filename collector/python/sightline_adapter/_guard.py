"""The adapter's one rule: nothing it does may reach the job. Every hook runs through `guarded`;
the first exception turns the whole adapter off (hooks removed, patches undone) with one line on
stderr, and the job runs on as if the adapter had never been there."""
import functools
import os
import sys
import time


class State:
    enabled = True
    undo = []          # callables that remove a hook or restore a patched function
    host_ns = 0        # time spent inside the adapter's hooks
    first_ns = 0       # ... until the second batch (the first pays for one-time set-up)
    batches = 0        # batches annotated
    device_copies = 0  # tensors copied from the device (asynchronously)
    late = 0           # batches whose counts were reported after their step


state = State()


def disable(why):
    """Turns the adapter off for good: one stderr line, every hook and patch undone."""
    if not state.enabled:
        return
    state.enabled = False
    for undo in reversed(state.undo):
        try:
            undo()
        except Exception:
            pass
    state.undo.clear()
    try:
        where = ""
        tb = getattr(why, "__traceback__", None)
        while tb is not None and tb.tb_next is not None:
            tb = tb.tb_next
        if tb is not None:
            where = f" at {os.path.basename(tb.tb_frame.f_code.co_filename)}:{tb.tb_lineno}"
        sys.stderr.write(f"sightline: Python adapter off after an error ({type(why).__name__}: {why}{where}); "
                         "the job runs on without it\n")
    except Exception:
        pass


def guarded(fn, timed=True):
    """fn, or None (and the adapter off) when it raises. KeyboardInterrupt and SystemExit are the
    job's own and pass through. `timed`: its time counts as the adapter's cost to the job's steps."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if not state.enabled:
            return None
        t0 = time.perf_counter_ns() if timed else 0
        try:
            return fn(*args, **kwargs)
        except Exception as e:
            disable(e)
            return None
        finally:
            if timed:
                state.host_ns += time.perf_counter_ns() - t0
    return wrapper


def summary():
    """What the adapter did, for SIGHTLINE_DEBUG=1."""
    later = (state.host_ns - state.first_ns) / 1e3 / (state.batches - 1) if state.batches > 1 else 0.0
    return (f"sightline: Python adapter: {state.batches} batches annotated ({state.late} reported after their step), "
            f"{state.device_copies} tensors copied from the device, {state.host_ns / 1e6:.1f} ms in its hooks "
            f"({state.first_ns / 1e6:.1f} ms up to the first batch, then {later:.0f} us a batch)")
