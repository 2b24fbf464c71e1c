#pragma once
// The libtorch bridge (libsightline_torch.so, collector/torch/) records PyTorch's ops. It is loaded
// once libtorch is in the process: from __libc_start_main for a program linked with it, from the
// CUDA injection entry point, and by a watcher thread for a Python job that loads torch later.

namespace sightline::collector {

// Loads the bridge if libtorch is loaded and the bridge is not yet (SIGHTLINE_TORCH=0: never).
void maybeLoadTorchBridge();
// Starts the watcher thread: every 50 ms until the bridge is loaded or the collector stops.
void watchForTorch();

} // namespace sightline::collector
