"""A job's own per-step timer without a synchronisation inside the loop (tests/gpu/mlp_job.py,
calibration_job.py): a CUDA event recorded at each step boundary, read once after the loop, so each
step is timed on the GPU's clock, back to back; on the CPU, the host's clock."""
import time

import torch


class StepTimer:
    def __init__(self, cuda):
        self.cuda = cuda
        self.marks = []

    def mark(self):
        if self.cuda:
            e = torch.cuda.Event(enable_timing=True)
            e.record()
            self.marks.append(e)
        else:
            self.marks.append(time.perf_counter())

    def step_ms(self):
        """Each step's time in ms, from one mark to the next (synchronises once, at the end)."""
        if self.cuda:
            torch.cuda.synchronize()
            return [self.marks[i].elapsed_time(self.marks[i + 1]) for i in range(len(self.marks) - 1)]
        return [(self.marks[i + 1] - self.marks[i]) * 1e3 for i in range(len(self.marks) - 1)]
