"""Batches whose tensors live on the GPU: their tensors are copied to pinned host memory with
non-blocking copies on the job's stream and an event recorded after them; the counts are read
once the event has completed (polled, never waited on inside a step), and reported then as the
continuation of the batch's first annotation (same id)."""
import collections

import torch

MAX_PENDING = 256  # batches whose copies have not completed; beyond this the oldest are dropped


class DeviceCopy:
    """Host copies of a batch's tensors, valid once `ready()`."""

    def __init__(self, tensors):
        self.host = {}
        streams = {}
        for name, t in tensors.items():
            if t.device.type == "cpu":
                self.host[name] = t
                continue
            h = torch.empty(t.shape, dtype=t.dtype, pin_memory=True)
            h.copy_(t, non_blocking=True)
            self.host[name] = h
            streams[t.device] = torch.cuda.current_stream(t.device)
        self.events = []
        for stream in streams.values():
            e = torch.cuda.Event()
            e.record(stream)
            self.events.append(e)

    def ready(self):
        return all(e.query() for e in self.events)

    def wait(self):
        for e in self.events:
            e.synchronize()


class Pending:
    """Copies in flight, oldest first, each with what to do once it is ready."""

    def __init__(self):
        self.queue = collections.deque()

    def add(self, copy, on_ready):
        if len(self.queue) >= MAX_PENDING:
            self.queue.popleft()
        self.queue.append((copy, on_ready))

    def poll(self, wait=False):
        """Reports every copy that has completed, in order; with wait=True (at exit) waits for all."""
        while self.queue:
            copy, on_ready = self.queue[0]
            if wait:
                copy.wait()
            elif not copy.ready():
                return
            self.queue.popleft()
            on_ready(copy.host)
