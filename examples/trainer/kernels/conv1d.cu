// The Gated DeltaNet's causal depthwise conv1d with SiLU, over tokens [tokens, channels]
// (channel-last, as the projection writes them), restarting at every sequence boundary: a tap
// contributes only when its token is in the same sequence (seq_idx) as the output's. The backward
// recomputes the pre-activation and sums the weight gradient over token tiles.
//
// The kernels are bound by memory. A thread takes V adjacent channels (V = 4: one 8- or 16-byte
// access a token, where the shape allows; else V = 1) down a tile of tokens and keeps the last K
// inputs (and, backward, the last K output gradients) in registers, so that every element is read
// once a tile plus a K - 1 token halo. Its loads go through shared memory as cp.async copies
// issued kConvStages - 1 tokens ahead: loads into registers that far ahead would share the few
// scoreboards a warp has, and the first use would wait for all of them. Which taps count is worked
// out once a tile, as a bit mask a token. Every sum keeps the order of the one-channel-a-thread
// form these replace (taps ascending from 0, tokens ascending within a tile, tiles in order), and
// SiLU is computed to the same bits as common.cuh's: the results do not depend on V.
#include "common.cuh"
#include "ops.h"

namespace sightline::kernels {

constexpr int kConvThreads = 128; // channel groups a block
constexpr int kConvTile = 64;     // tokens a block
constexpr int kConvStages = 8;    // shared-memory slots a thread's copies rotate through
constexpr int kConvMaxTaps = 4;   // K is 2 .. 4

// V elements of T as one machine word, so that a pack is one load or store (a plain copy of Pack
// can come out as several narrow stores).
template <int Bytes>
struct PackWord;
template <>
struct PackWord<2> { using type = unsigned short; };
template <>
struct PackWord<4> { using type = unsigned; };
template <>
struct PackWord<8> { using type = uint2; };
template <>
struct PackWord<16> { using type = uint4; };
template <typename T, int V>
using Bits = typename PackWord<sizeof(T) * V>::type;

template <typename T, int V>
__device__ __forceinline__ Bits<T, V> loadBits(const T* __restrict__ p) { return *reinterpret_cast<const Bits<T, V>*>(p); }

template <typename T, int V>
__device__ __forceinline__ void unpack(const Bits<T, V>& bits, float (&out)[V]) {
    const Pack<T, V>& pk = reinterpret_cast<const Pack<T, V>&>(bits);
#pragma unroll
    for (int k = 0; k < V; ++k) out[k] = toFloat(pk.v[k]);
}

__device__ __forceinline__ unsigned wordOf(float v) { return __float_as_uint(v); }
__device__ __forceinline__ unsigned wordOf(__nv_bfloat16 v) { return __bfloat16_as_ushort(v); }

// Converts V values to T and stores them as one word, built by hand and stored with __stwb (a
// plain store of a Pack, or of a uint4, comes out of the unrolled loops as V narrow stores).
template <typename T, int V>
__device__ __forceinline__ void storeBits(T* __restrict__ p, const float (&in)[V]) {
    constexpr int kPer = int(4 / sizeof(T)), kWords = (V + kPer - 1) / kPer; // elements a 32-bit word
    unsigned w[kWords];
#pragma unroll
    for (int j = 0; j < kWords; ++j) {
        w[j] = 0;
#pragma unroll
        for (int e = 0; e < kPer && j * kPer + e < V; ++e) w[j] |= wordOf(fromFloat<T>(in[j * kPer + e])) << (16 * e);
    }
    if constexpr (sizeof(T) * V == 16) __stwb(reinterpret_cast<uint4*>(p), make_uint4(w[0], w[1], w[2], w[3]));
    else if constexpr (sizeof(T) * V == 8) __stwb(reinterpret_cast<uint2*>(p), make_uint2(w[0], w[1]));
    else if constexpr (sizeof(T) * V == 4) __stwb(reinterpret_cast<unsigned*>(p), w[0]);
    else __stwb(reinterpret_cast<unsigned short*>(p), static_cast<unsigned short>(w[0]));
}

// A copy of Bytes from global to shared memory that lands while the thread computes; 2 bytes (one
// bf16 channel, which cp.async cannot copy) is a plain load and store.
template <int Bytes>
__device__ __forceinline__ void copyAsync(void* dst, const void* src) {
    const unsigned s = unsigned(__cvta_generic_to_shared(dst));
    if constexpr (Bytes == 16) asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(src)
                                            : "memory");
    else if constexpr (Bytes == 8) asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" ::"r"(s), "l"(src)
                                                : "memory");
    else if constexpr (Bytes == 4) asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(s), "l"(src)
                                                : "memory");
    else *static_cast<unsigned short*>(dst) = *static_cast<const unsigned short*>(src);
}
__device__ __forceinline__ void commitCopies() { asm volatile("cp.async.commit_group;\n" ::
                                                                  : "memory"); }
// Waits until at most the thread's N newest groups of copies are in flight.
template <int N>
__device__ __forceinline__ void waitCopies() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)
                                                            : "memory"); }

// One token's inputs for a thread's channels, as loaded (dy only in the backward).
template <typename T, int V>
struct TokenIn {
    Bits<T, V> x, dy;
};

// A thread's tokens, copied into its own shared-memory slots (kConvThreads apart, so a warp's
// reads are conflict-free) kConvStages - 1 tokens before their use; one commit group a token. The
// pointers run down the tokens and stop at the last one to fetch: fetches past it copy that one
// again, so that none needs a condition.
template <bool kGrad, typename T, int V>
struct TokenStream {
    Bits<T, V>* xs;
    Bits<T, V>* dys;
    const T* x;
    const T* dy;
    int64_t channels;
    int left = 0; // tokens after the one the pointers are at
    int slot = 0; // the slot of the next token to take

    __device__ __forceinline__ void fetch(int into) {
        copyAsync<sizeof(Bits<T, V>)>(xs + into * kConvThreads, x);
        if (kGrad) copyAsync<sizeof(Bits<T, V>)>(dys + into * kConvThreads, dy);
        commitCopies();
        if (left > 0) {
            --left, x += channels;
            if (kGrad) dy += channels;
        }
    }
    // Starts at token t0 with `count` (at least 1) tokens to fetch.
    __device__ __forceinline__ void start(int64_t t0, int count, int64_t c0) {
        x += t0 * channels + c0, left = count - 1;
        if (kGrad) dy += t0 * channels + c0;
#pragma unroll
        for (int k = 0; k + 1 < kConvStages; ++k) fetch(k);
    }
    // The next token's inputs. First fetches the token kConvStages - 1 after it into the slot that
    // the last take emptied (whose contents the thread has already used).
    __device__ __forceinline__ TokenIn<T, V> take() {
        fetch((slot + kConvStages - 1) % kConvStages);
        waitCopies<kConvStages - 1>();
        TokenIn<T, V> in{};
        in.x = xs[slot * kConvThreads];
        if (kGrad) in.dy = dys[slot * kConvThreads];
        slot = (slot + 1) % kConvStages;
        return in;
    }
};

// Which taps of token u count, as bits: bit j - 1 (j = 1 .. K - 1) when token u - j is in u's
// sequence (the conv's tap K - 1 - j), and bit K - 1 + i (i = 0 .. K - 2) when token u - i, the
// output that token u - K + 1 reaches through tap i, is in that token's sequence. Tokens before 0
// or from `tokens` on are in none. Tap K - 1 (token u itself) always counts.
template <int K>
__device__ __forceinline__ int tapMask(const int* __restrict__ seq, int64_t u, int64_t tokens) {
    const auto same = [&](int64_t a, int64_t b) { return a >= 0 && b >= 0 && a < tokens && b < tokens && seq[a] == seq[b]; };
    int mask = 0;
#pragma unroll
    for (int j = 1; j < K; ++j) mask |= int(same(u - j, u)) << (j - 1);
#pragma unroll
    for (int i = 0; i + 1 < K; ++i) mask |= int(same(u - i, u - K + 1)) << (K - 1 + i);
    return mask;
}

// The masks of tokens t0 .. t0 + count - 1, one a thread, for the whole block.
template <int K>
__device__ __forceinline__ void fillTapMasks(int* masks, const int* __restrict__ seq, int64_t t0, int count, int64_t tokens) {
    for (int k = threadIdx.x; k < count; k += kConvThreads) masks[k] = tapMask<K>(seq, t0 + k, tokens);
    __syncthreads();
}

// Runs body(i, j, inputs of token t0 + i) for i in [0, n), U tokens an iteration: j = i mod U is a
// constant in the unrolled loop, and so is every register-window slot that the body picks by it.
template <int U, typename Stream, typename Body>
__device__ __forceinline__ void forTokens(Stream& stream, int n, Body&& body) {
    for (int base = 0; base < n; base += U) {
#pragma unroll
        for (int j = 0; j < U; ++j) {
            if (base + j >= n) break;
            body(base + j, j, stream.take());
        }
    }
}

// sigmoid(x) of V values, the same bits as common.cuh's sigmoidf, 1 / (1 + __expf(-x)), in fewer
// instructions. __expf's care for results below 2^-126 is left out (1 + e^-x rounds to 1 either
// way); the division is the compiler's fast path for a correctly rounded reciprocal (an
// approximation and one Newton step), written out so that V of them need no branch, while d = 1 +
// e^-x is below 2^126; else (x below about -87, or NaN) all V go through the division itself.
template <int V>
__device__ __forceinline__ void sigmoids(const float (&x)[V], float (&s)[V]) {
    float d[V];
    bool fast = true;
#pragma unroll
    for (int v = 0; v < V; ++v) {
        float e;
        asm("ex2.approx.ftz.f32 %0, %1;"
            : "=f"(e)
            : "f"(x[v] * -1.4426950408889634f));
        d[v] = 1.0f + e;
        fast = fast && d[v] < 0x1p126f;
    }
    if (fast) {
#pragma unroll
        for (int v = 0; v < V; ++v) {
            float r;
            asm("rcp.approx.ftz.f32 %0, %1;"
                : "=f"(r)
                : "f"(d[v]));
            s[v] = fmaf(r, -fmaf(d[v], r, -1.0f), r);
        }
    } else {
#pragma unroll
        for (int v = 0; v < V; ++v) s[v] = 1.0f / d[v];
    }
}

// The inputs of a thread's last K tokens as a ring: at step j of the token loop (a multiple of K
// steps an iteration) the current token is in slot j mod K and the one m before it in slot
// ago<K>(j, m).
template <int K, int V>
struct ConvWindow {
    float x[K][V];
};

template <int K>
__device__ __forceinline__ constexpr int ago(int j, int m) { return ((j - m) % K + K) % K; }

// Fills the slots of the K - 1 tokens before t0 (the halo of the tile that starts there) for a loop
// that starts with step 0: token t0 - m goes to slot K - m (0 before token 0; no tap reads it).
template <typename T, int K, int V>
__device__ __forceinline__ void loadHalo(ConvWindow<K, V>& win, const T* __restrict__ x, int64_t t0, int64_t channels, int64_t c0) {
#pragma unroll
    for (int m = 1; m < K; ++m) {
#pragma unroll
        for (int v = 0; v < V; ++v) win.x[K - m][v] = 0.0f;
        if (t0 - m >= 0) unpack<T, V>(loadBits<T, V>(x + (t0 - m) * channels + c0), win.x[K - m]);
    }
}

// w[i][v] = weight[c0 + v][i]: the V * K taps of a thread's channels are adjacent, read as K packs.
template <typename T, int K, int V>
__device__ __forceinline__ void loadTaps(const T* __restrict__ weight, int64_t c0, float (&w)[K][V]) {
    float flat[K][V];
#pragma unroll
    for (int j = 0; j < K; ++j) loadPack<V>(weight + c0 * K + j * V, flat[j]);
#pragma unroll
    for (int e = 0; e < K * V; ++e) w[e % K][e / K] = flat[e / V][e % V];
}

// Tokens an iteration of the token loops: a multiple of K, so that window slots are constants.
template <int K>
constexpr int kConvUnroll = K == 3 ? 6 : 4;

// pre-activation of step j's token: sum over taps i of w[i] * x[K - 1 - i tokens before] within its sequence
template <int K, int V>
__device__ __forceinline__ void preActivation(const ConvWindow<K, V>& win, const float (&w)[K][V], int j, int mask, float (&pre)[V]) {
#pragma unroll
    for (int v = 0; v < V; ++v) pre[v] = 0;
#pragma unroll
    for (int i = 0; i < K; ++i) {
        if (i == K - 1 || (mask >> (K - 2 - i)) & 1) {
#pragma unroll
            for (int v = 0; v < V; ++v) pre[v] += w[i][v] * win.x[ago<K>(j, K - 1 - i)][v];
        }
    }
}

template <typename T, int K, int V>
__global__ void __launch_bounds__(kConvThreads) causal_conv1d_silu_fwd_kernel(const T* __restrict__ x, const T* __restrict__ weight,
                                                                              const int* __restrict__ seq, T* __restrict__ y,
                                                                              int64_t tokens, int64_t channels) {
    __shared__ Bits<T, V> xs[kConvStages * kConvThreads];
    __shared__ int masks[kConvTile];
    const int64_t c0 = (int64_t(blockIdx.x) * kConvThreads + threadIdx.x) * V, t0 = int64_t(blockIdx.y) * kConvTile;
    const int n = int(min(tokens - t0, int64_t(kConvTile)));
    const bool active = c0 < channels;
    TokenStream<false, T, V> stream{xs + threadIdx.x, nullptr, x, nullptr, channels};
    float w[K][V];
    ConvWindow<K, V> win;
    if (active) {
        stream.start(t0, n, c0);
        loadTaps<T, K, V>(weight, c0, w);
        loadHalo<T, K, V>(win, x, t0, channels, c0);
    }
    fillTapMasks<K>(masks, seq, t0, n, tokens);
    if (!active) return;
    T* out = y + t0 * channels + c0;
    forTokens<kConvUnroll<K>>(stream, n, [&](int i, int j, const TokenIn<T, V>& in) {
        unpack<T, V>(in.x, win.x[j % K]);
        float pre[V], sg[V];
        preActivation<K, V>(win, w, j, masks[i], pre);
        sigmoids<V>(pre, sg);
#pragma unroll
        for (int v = 0; v < V; ++v) pre[v] *= sg[v]; // siluf
        storeBits<T, V>(out, pre);
        out += channels;
    });
}

// A backward thread's registers: its taps, its input window, dpre of the window's tokens (a ring
// with the window's slots) and its weight-gradient sums.
template <int K, int V>
struct ConvGrad {
    float w[K][V], ring[K][V], dw[K][V];
    ConvWindow<K, V> win;
};

// dpre of step j's token: dy silu'(pre), silu' as common.cuh's siluGrad computes it.
template <typename T, int K, int V>
__device__ __forceinline__ void outputGrad(ConvGrad<K, V>& g, int j, int mask, const TokenIn<T, V>& in) {
    float d[V], pre[V], sg[V];
    unpack<T, V>(in.dy, d);
    preActivation<K, V>(g.win, g.w, j, mask, pre);
    sigmoids<V>(pre, sg);
#pragma unroll
    for (int v = 0; v < V; ++v) g.ring[j % K][v] = d[v] * (sg[v] * (1.0f + pre[v] * (1.0f - sg[v])));
}

// dw[i] += dpre x[K - 1 - i tokens before] of step j's token, over the taps within its sequence.
template <int K, int V>
__device__ __forceinline__ void addWeightGrad(ConvGrad<K, V>& g, int j, int mask) {
#pragma unroll
    for (int i = 0; i < K; ++i) {
        if (i == K - 1 || (mask >> (K - 2 - i)) & 1) {
#pragma unroll
            for (int v = 0; v < V; ++v) g.dw[i][v] += g.ring[j % K][v] * g.win.x[ago<K>(j, K - 1 - i)][v];
        }
    }
}

// dx of the token s K - 1 before step j's, whose K output tokens are all in the ring now: sum over
// taps i of w[i] dpre[s + K - 1 - i], over the output tokens in s's sequence.
template <int K, int V>
__device__ __forceinline__ void inputGrad(const ConvGrad<K, V>& g, int j, int mask, float (&acc)[V]) {
#pragma unroll
    for (int v = 0; v < V; ++v) acc[v] = 0;
#pragma unroll
    for (int i = 0; i < K; ++i) {
        if (i == K - 1 || (mask >> (K - 1 + i)) & 1) {
#pragma unroll
            for (int v = 0; v < V; ++v) acc[v] += g.w[i][v] * g.ring[ago<K>(j, i)][v];
        }
    }
}

// dw_partial[tile][c][i] of a thread's V channels: V * K adjacent floats, in packs of up to 4.
template <int K, int V>
__device__ __forceinline__ void storeWeightGrad(float* __restrict__ p, const float (&dw)[K][V]) {
    constexpr int kN = K * V, kP = kN % 4 == 0 ? 4 : (kN % 2 == 0 ? 2 : 1);
#pragma unroll
    for (int j = 0; j < kN / kP; ++j) {
        float pk[kP];
#pragma unroll
        for (int e = 0; e < kP; ++e) pk[e] = dw[(j * kP + e) % K][(j * kP + e) / K];
        storeBits<float, kP>(p + j * kP, pk);
    }
}

// Token i of the tile: dpre (0 past the end), its weight gradient while in the tile, then dx of
// token i - K + 1. dpre of the K - 1 tokens after the tile is recomputed (it belongs to the next
// tile's weight gradient, not this one's).
template <typename T, int K, int V>
__global__ void __launch_bounds__(kConvThreads) causal_conv1d_silu_bwd_kernel(const T* __restrict__ dy, const T* __restrict__ x,
                                                                              const T* __restrict__ weight, const int* __restrict__ seq,
                                                                              T* __restrict__ dx, float* __restrict__ dw_partial,
                                                                              int64_t tokens, int64_t channels) {
    __shared__ Bits<T, V> xs[kConvStages * kConvThreads], dys[kConvStages * kConvThreads];
    __shared__ int masks[kConvTile + kConvMaxTaps - 1];
    const int64_t c0 = (int64_t(blockIdx.x) * kConvThreads + threadIdx.x) * V, t0 = int64_t(blockIdx.y) * kConvTile;
    const int n = int(min(tokens - t0, int64_t(kConvTile))), loaded = int(min(tokens - t0, int64_t(kConvTile + K - 1)));
    const bool active = c0 < channels;
    TokenStream<true, T, V> stream{xs + threadIdx.x, dys + threadIdx.x, x, dy, channels};
    ConvGrad<K, V> g;
    if (active) {
        stream.start(t0, loaded, c0);
        loadTaps<T, K, V>(weight, c0, g.w);
        loadHalo<T, K, V>(g.win, x, t0, channels, c0);
    }
    fillTapMasks<K>(masks, seq, t0, n + K - 1, tokens);
    if (!active) return;
#pragma unroll
    for (int i = 0; i < K; ++i) {
#pragma unroll
        for (int v = 0; v < V; ++v) g.ring[i][v] = g.dw[i][v] = 0.0f;
    }
    T* out = dx + t0 * channels + c0;
    forTokens<kConvUnroll<K>>(stream, n + K - 1, [&](int i, int j, const TokenIn<T, V>& in) {
        const int mask = masks[i];
        if (i < loaded) {
            unpack<T, V>(in.x, g.win.x[j % K]);
            outputGrad<T, K, V>(g, j, mask, in);
            if (i < n) addWeightGrad<K, V>(g, j, mask);
        } else {
#pragma unroll
            for (int v = 0; v < V; ++v) g.ring[j % K][v] = 0.0f;
        }
        if (i >= K - 1) {
            float acc[V];
            inputGrad<K, V>(g, j, mask, acc);
            storeBits<T, V>(out, acc);
            out += channels;
        }
    });
    storeWeightGrad<K, V>(dw_partial + (int64_t(blockIdx.y) * channels + c0) * K, g.dw);
}

// Each tile's partial sums added in tile order; the loads of several tiles in flight at once.
template <typename T>
__global__ void conv_weight_grad_sum_kernel(const float* __restrict__ partial, int tiles, int64_t n, T* __restrict__ dw) {
    const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float sum = 0;
#pragma unroll 8
    for (int b = 0; b < tiles; ++b) sum += partial[int64_t(b) * n + i];
    dw[i] = fromFloat<T>(sum);
}

namespace {

void checkConv(const at::Tensor& x, const at::Tensor& w, const at::Tensor& seq) {
    checkCuda(x, "causal_conv1d: x");
    TORCH_CHECK(x.dim() == 2, "causal_conv1d: x must be [tokens, channels]");
    TORCH_CHECK(w.dim() == 2 && w.size(0) == x.size(1) && w.size(1) >= 2 && w.size(1) <= 4 && w.scalar_type() == x.scalar_type(),
                "causal_conv1d: weight must be [channels, 2..4] of x's dtype");
    TORCH_CHECK(seq.scalar_type() == at::kInt && seq.dim() == 1 && seq.size(0) == x.size(0),
                "causal_conv1d: seq_idx must be int32 [tokens]");
}

template <typename F>
void withTaps(int64_t k, F&& f) {
    if (k == 2) f(std::integral_constant<int, 2>{});
    else if (k == 3) f(std::integral_constant<int, 3>{});
    else f(std::integral_constant<int, 4>{});
}

// The channels a thread takes: 4 (8 bytes of bf16, 16 of fp32; withAlignedPack, common.cuh), else 1.
// (8 channels of bf16 measured no faster forward and slower backward on an H200: twice the
// registers, half the blocks a multiprocessor.)
constexpr int kConvPack = 4;

dim3 convGrid(int64_t tokens, int64_t channels, int pack) {
    const int64_t groups = channels / pack;
    return dim3(unsigned((groups + kConvThreads - 1) / kConvThreads), unsigned((tokens + kConvTile - 1) / kConvTile));
}

} // namespace

at::Tensor causalConv1dSiluForward(const at::Tensor& x_in, const at::Tensor& w_in, const at::Tensor& seq_in) {
    checkConv(x_in, w_in, seq_in);
    const at::Tensor x = x_in.contiguous(), w = w_in.contiguous(), seq = seq_in.contiguous();
    const c10::cuda::CUDAGuard guard(x.device());
    at::Tensor y = at::empty_like(x);
    const int64_t tokens = x.size(0), channels = x.size(1);
    if (x.numel() == 0) return y;
    SIGHTLINE_DISPATCH_FLOAT_BF16(x.scalar_type(), "causal_conv1d", [&] {
        withTaps(w.size(1), [&](auto k) {
            withAlignedPack<kConvPack>(channels, {x.data_ptr(), w.data_ptr(), y.data_ptr()}, [&](auto v) {
                constexpr int kV = decltype(v)::value;
                causal_conv1d_silu_fwd_kernel<scalar_t, decltype(k)::value, kV>
                    <<<convGrid(tokens, channels, kV), kConvThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
                        ptr<scalar_t>(x), ptr<scalar_t>(w), seq.data_ptr<int>(), ptr<scalar_t>(y), tokens, channels);
            });
        });
    });
    checkLaunch("causal_conv1d_silu_fwd_kernel");
    return y;
}

std::tuple<at::Tensor, at::Tensor> causalConv1dSiluBackward(const at::Tensor& dy_in, const at::Tensor& x_in, const at::Tensor& w_in,
                                                            const at::Tensor& seq_in) {
    checkConv(x_in, w_in, seq_in);
    const at::Tensor dy = dy_in.contiguous(), x = x_in.contiguous(), w = w_in.contiguous(), seq = seq_in.contiguous();
    TORCH_CHECK(dy.sizes() == x.sizes(), "causal_conv1d_bwd: dy must match x");
    const c10::cuda::CUDAGuard guard(x.device());
    at::Tensor dx = at::empty_like(x), dw = at::empty_like(w);
    const int64_t tokens = x.size(0), channels = x.size(1), taps = w.size(1);
    if (x.numel() == 0) return {dx, dw.zero_()};
    const int tiles = int((tokens + kConvTile - 1) / kConvTile);
    at::Tensor partial = at::empty({tiles, channels, taps}, x.options().dtype(at::kFloat));
    const auto stream = at::cuda::getCurrentCUDAStream();
    SIGHTLINE_DISPATCH_FLOAT_BF16(x.scalar_type(), "causal_conv1d_bwd", [&] {
        withTaps(taps, [&](auto k) {
            withAlignedPack<kConvPack>(channels, {dy.data_ptr(), x.data_ptr(), w.data_ptr(), dx.data_ptr()}, [&](auto v) {
                constexpr int kV = decltype(v)::value;
                causal_conv1d_silu_bwd_kernel<scalar_t, decltype(k)::value, kV>
                    <<<convGrid(tokens, channels, kV), kConvThreads, 0, stream>>>(
                        ptr<scalar_t>(dy), ptr<scalar_t>(x), ptr<scalar_t>(w), seq.data_ptr<int>(), ptr<scalar_t>(dx), ptr<float>(partial),
                        tokens, channels);
            });
        });
        checkLaunch("causal_conv1d_silu_bwd_kernel");
        const int64_t n = channels * taps;
        conv_weight_grad_sum_kernel<scalar_t><<<unsigned((n + 127) / 128), 128, 0, stream>>>(ptr<float>(partial), tiles, n,
                                                                                             ptr<scalar_t>(dw));
    });
    checkLaunch("conv_weight_grad_sum_kernel");
    return {dx, dw};
}

} // namespace sightline::kernels
