#pragma once
// A development instrument, compiled in only where SIGHTLINE_GDN_PHASE_CLOCK is defined (CMake
// option of that name; tests/gpu/gdn_phase_clock.sh): each block's thread 0 notes the cycles of
// every phase of the gated delta rule's kernels (from the barrier before it, or the block's start,
// to the barrier after it: the phase's slowest warp, with whatever the SM's other block did
// meanwhile), and the host sums them by kernel and phase, printing at exit how a block's time
// splits. Each instrumented launch is followed by a stream synchronisation, so its timings are
// for the shares, not for the kernels' speed.
#if defined(SIGHTLINE_GDN_PHASE_CLOCK) && defined(__CUDACC__)
#include <cstdio>
#include <map>
#include <string>
#include <vector>

namespace sightline::gdn::phase_clock {

constexpr int kBlocks = 16384, kPhases = 96; // blocks and phases noted a launch (beyond: not noted)
constexpr int kLines = 1024;                 // source lines summed over (a kernel's phases in a loop)
static __device__ unsigned gCycles[kBlocks * kPhases];
static __device__ int gLines[kPhases];
static __device__ unsigned long long gLineCycles[kLines];

__host__ __device__ inline long long start() {
#if defined(__CUDA_ARCH__)
    return clock64();
#else
    return 0;
#endif
}

// After a phase's barrier: thread 0 notes the cycles since `mark` as phase `no` of its block, and
// the caller's line (`line`: where the phase was written) from the first block; and adds them to
// the line's sum, which holds every phase, the passes' hundreds in their loops too.
__device__ inline void note(int tid, long long& mark, int& no, int line) {
    if (tid == 0) {
        const long long now = clock64();
        const unsigned block = (blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
        if (block < unsigned(kBlocks) && no < kPhases) {
            gCycles[block * kPhases + no] = unsigned(now - mark);
            if (block == 0) gLines[no] = line;
        }
        if (line >= 0 && line < kLines) atomicAdd(&gLineCycles[line], static_cast<unsigned long long>(now - mark));
        mark = now;
    }
    ++no;
}

// Per kernel name: the launches seen and, per phase, the sum over launches of the mean cycles
// over the blocks that noted it; printed to stderr at exit.
struct Tally {
    struct Kernel {
        int launches = 0;
        std::vector<double> cycles;
        std::vector<int> lines;
        std::map<int, double> by_line; // the sum over launches of a block's mean cycles at each line
    };
    std::map<std::string, Kernel> kernels;
    ~Tally() {
        for (const auto& [name, k] : kernels) {
            double all = 0.0, lines = 0.0; // the phase table's (its first kPhases) and every note's, by line
            for (double c : k.cycles) all += c / k.launches;
            for (const auto& [line, c] : k.by_line) lines += c / k.launches;
            std::fprintf(stderr, "phase clock: %s, %d launches, %.0f cycles a block (%.0f in its first %d phases)\n", name.c_str(), k.launches, lines,
                         all, kPhases);
            for (size_t i = 0; i < k.cycles.size(); ++i) {
                const double c = k.cycles[i] / k.launches;
                std::fprintf(stderr, "phase clock: %s %3zu line %4d %9.0f cycles %5.1f%%\n", name.c_str(), i, k.lines[i], c, 100.0 * c / all);
            }
            for (const auto& [line, c] : k.by_line)
                std::fprintf(stderr, "phase clock: %s by line %4d %9.0f cycles %5.1f%%\n", name.c_str(), line, c / k.launches, 100.0 * c / k.launches / lines);
        }
    }
};

inline Tally& tally() {
    static Tally t;
    return t;
}

// Before a launch: the noted cycles zeroed (a phase a block did not reach stays 0, not counted).
inline void reset(cudaStream_t stream) {
    void* at = nullptr;
    if (cudaGetSymbolAddress(&at, gCycles) == cudaSuccess) cudaMemsetAsync(at, 0, sizeof(gCycles), stream);
    if (cudaGetSymbolAddress(&at, gLineCycles) == cudaSuccess) cudaMemsetAsync(at, 0, sizeof(gLineCycles), stream);
}

// After a launch of `name` over `blocks` blocks: waits for it and adds its phases to the tally.
inline void collect(const char* name, unsigned blocks, cudaStream_t stream) {
    if (cudaStreamSynchronize(stream) != cudaSuccess) return;
    std::vector<unsigned> cycles(size_t(kBlocks) * kPhases);
    std::vector<int> lines(kPhases);
    if (cudaMemcpyFromSymbol(cycles.data(), gCycles, sizeof(gCycles)) != cudaSuccess) return;
    if (cudaMemcpyFromSymbol(lines.data(), gLines, sizeof(gLines)) != cudaSuccess) return;
    std::vector<unsigned long long> by_line(kLines);
    if (cudaMemcpyFromSymbol(by_line.data(), gLineCycles, sizeof(gLineCycles)) != cudaSuccess) return;
    Tally::Kernel& k = tally().kernels[name];
    for (int line = 0; line < kLines; ++line)
        if (by_line[line] != 0 && blocks > 0) k.by_line[line] += double(by_line[line]) / blocks;
    const unsigned noted = blocks < unsigned(kBlocks) ? blocks : unsigned(kBlocks);
    for (int ph = 0; ph < kPhases; ++ph) {
        double sum = 0.0;
        int count = 0;
        for (unsigned b = 0; b < noted; ++b) {
            const unsigned c = cycles[size_t(b) * kPhases + ph];
            if (c != 0) sum += c, ++count;
        }
        if (count == 0) break;
        if (k.cycles.size() <= size_t(ph)) k.cycles.resize(ph + 1, 0.0), k.lines.resize(ph + 1, 0);
        k.cycles[ph] += sum / count;
        k.lines[ph] = lines[ph];
    }
    ++k.launches;
}

} // namespace sightline::gdn::phase_clock
#endif
