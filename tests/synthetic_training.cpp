#include "synthetic_training.h"

#include <algorithm>

namespace sightline::test {

const char* const kNvjet = "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT";
const char* const kXmmaFp32 = "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize32x32x8_stage3_warpsize1x2x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas";
const char* const kFlashFwd = "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t>, true>(Flash_fwd_params)";
const char* const kFlashBwd = "void pytorch_flash::flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<Flash_bwd_kernel_traits<128>>(Flash_bwd_params)";
const char* const kMulKernel = "void at::native::vectorized_elementwise_kernel<8, at::native::BinaryFunctor<c10::BFloat16, c10::BFloat16, c10::BFloat16, at::native::binary_internal::MulFunctor<float> >, std::array<char*, 3ul> >(int, at::native::BinaryFunctor<c10::BFloat16, c10::BFloat16, c10::BFloat16, at::native::binary_internal::MulFunctor<float> >, std::array<char*, 3ul>)";
const char* const kAddKernel = "void at::native::vectorized_elementwise_kernel<8, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul>)";
const char* const kFusedAdam = "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::FusedOptimizerTensorListMetadata<4>, at::native::(anonymous namespace)::FusedAdamMathFunctor<c10::BFloat16, 4, (at::native::ADAM_MODE)1, false>, float const*, double, double, double, double, double, bool, float const*, float const*>(...)";
const char* const kForeachKernel = "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::TensorListMetadata<1>, at::native::(anonymous namespace)::BinaryOpScalarFunctor<c10::BFloat16, 1, 1, 0>, std::multiplies<float>, float>(...)";
const char* const kSoftmaxFwd = "void at::native::(anonymous namespace)::cunn_SoftMaxForward<8, c10::BFloat16, float, c10::BFloat16, at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(c10::BFloat16*, c10::BFloat16 const*, int)";
const char* const kSoftmaxBwd = "void at::native::(anonymous namespace)::cunn_SoftMaxBackward<8, c10::BFloat16, float, c10::BFloat16, at::native::(anonymous namespace)::SoftMaxBackwardEpilogue>(c10::BFloat16*, c10::BFloat16 const*, c10::BFloat16 const*, long)";
const char* const kRmsNorm = "void at::native::(anonymous namespace)::vectorized_rms_norm_kernel<c10::BFloat16, float>(...)";

// The simulation: host clock h (us), the GPU stream's end of queued work g, ids.
struct Sim {
    Trace* t;
    double h = 0, g = 0;
    int64_t next_id = 1;
    std::vector<size_t> open; // annotation events open
    double ns(double us) const { return us; }
    int64_t at(double us) const { return int64_t(us * 1000.0 + 0.5); }
    size_t cpu(const std::string& name, double start, double end, CpuKind kind, int64_t ext, int64_t corr = 0) {
        CpuEvent e;
        e.name = t->strings.intern(name);
        e.start_ns = at(start);
        e.end_ns = at(end);
        e.thread = t->threadIndex(1, 1);
        e.kind = kind;
        e.external_id = ext;
        e.correlation = corr;
        t->cpu.push_back(e);
        return t->cpu.size() - 1;
    }
};

SyntheticTraining& SyntheticTraining::kernels(const std::string& op, const std::string& kernel, int count, double dur_us,
                                              double launch_us, GpuKind kind) {
    m_items.push_back([=](Sim& s) {
        for (int i = 0; i < count; ++i) {
            const int64_t ext = s.next_id++, corr = s.next_id++;
            const double op_start = s.h, api_start = s.h + 0.5, api_end = api_start + launch_us;
            s.cpu(op, op_start, api_end + 0.5, CpuKind::Op, ext);
            s.cpu(kind == GpuKind::Memset ? "cudaMemsetAsync" : kind == GpuKind::Memcpy ? "cudaMemcpyAsync"
                                                                                        : "cudaLaunchKernel",
                  api_start, api_end, CpuKind::Runtime, ext, corr);
            GpuEvent g;
            g.name = s.t->strings.intern(kernel);
            g.kind = kind;
            g.start_ns = s.at(std::max(s.g, api_end + 1.0));
            g.end_ns = g.start_ns + s.at(dur_us);
            g.stream = 7;
            g.external_id = ext;
            g.correlation = corr;
            s.g = double(g.end_ns) / 1000.0;
            s.t->gpu.push_back(g);
            s.h = api_end + 0.5;
        }
    });
    return *this;
}

SyntheticTraining& SyntheticTraining::host(double us) {
    m_items.push_back([=](Sim& s) { s.h += us; });
    return *this;
}

SyntheticTraining& SyntheticTraining::op(const std::string& name, int count, double us) {
    m_items.push_back([=](Sim& s) {
        for (int i = 0; i < count; ++i) {
            s.cpu(name, s.h, s.h + us, CpuKind::Op, s.next_id++);
            s.h += us + 0.5;
        }
    });
    return *this;
}

SyntheticTraining& SyntheticTraining::item() {
    m_items.push_back([=](Sim& s) {
        const int64_t ext = s.next_id++, corr = s.next_id++;
        const double start = s.h;
        s.cpu("aten::item", start, start, CpuKind::Op, s.next_id++); // end fixed below
        const size_t item = s.t->cpu.size() - 1;
        s.cpu("aten::_local_scalar_dense", start + 0.5, start + 0.5, CpuKind::Op, ext);
        const size_t dense = s.t->cpu.size() - 1;
        s.cpu("cudaMemcpyAsync", start + 1, start + 4, CpuKind::Runtime, ext, corr);
        GpuEvent g;
        g.name = s.t->strings.intern("Memcpy DtoH (Device -> Pinned)");
        g.kind = GpuKind::Memcpy;
        g.start_ns = s.at(std::max(s.g, start + 5));
        g.end_ns = g.start_ns + 2000;
        g.stream = 7;
        g.external_id = ext;
        g.correlation = corr;
        s.t->gpu.push_back(g);
        s.g = double(g.end_ns) / 1000.0;
        s.cpu("cudaStreamSynchronize", start + 4.5, s.g + 1, CpuKind::Runtime, ext, s.next_id++);
        s.h = s.g + 2;
        s.t->cpu[dense].end_ns = s.at(s.h - 0.5);
        s.t->cpu[item].end_ns = s.at(s.h);
        s.h += 0.5;
    });
    return *this;
}

SyntheticTraining& SyntheticTraining::dataloader(double us) {
    m_items.push_back([=](Sim& s) {
        s.cpu("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", s.h, s.h + us, CpuKind::UserAnnotation, s.next_id++);
        s.h += us + 0.5;
    });
    return *this;
}

SyntheticTraining& SyntheticTraining::begin(const std::string& annotation) {
    m_items.push_back([=](Sim& s) {
        s.open.push_back(s.cpu(annotation, s.h, s.h, CpuKind::UserAnnotation, s.next_id++));
        s.h += 0.5;
    });
    return *this;
}

SyntheticTraining& SyntheticTraining::end() {
    m_items.push_back([=](Sim& s) {
        s.h += 0.5;
        s.t->cpu[s.open.back()].end_ns = s.at(s.h);
        s.open.pop_back();
        s.h += 0.5;
    });
    return *this;
}

SyntheticTraining& SyntheticTraining::batch(const std::string& fields) {
    m_items.push_back([=](Sim& s) {
        s.cpu("sightline.batch " + fields, s.h, s.h + 1, CpuKind::UserAnnotation, s.next_id++);
        s.h += 1.5;
    });
    return *this;
}

SyntheticTraining& SyntheticTraining::hostRunsAhead() {
    m_step_sync = false;
    return *this;
}

Trace SyntheticTraining::build(int steps) const {
    Trace t;
    t.source = "synthetic";
    t.format = "test";
    t.devices.push_back(DeviceInfo{0, "NVIDIA H200", 150'000'000'000, 9, 0, 132, 2048, 233472, 65536});
    Sim s;
    s.t = &t;
    s.h = 100;
    for (int k = 1; k <= steps; ++k) {
        const size_t step = s.cpu("ProfilerStep#" + std::to_string(k), s.h, s.h, CpuKind::UserAnnotation, s.next_id++);
        s.h += 1;
        for (const auto& item : m_items)
            item(s);
        if (m_step_sync) {
            // The step ends when the host has waited for the GPU (a final synchronize).
            const int64_t ext = s.next_id++;
            s.cpu("cudaDeviceSynchronize", s.h, std::max(s.h, s.g) + 1, CpuKind::Runtime, ext, s.next_id++);
            s.h = std::max(s.h, s.g) + 2;
        }
        t.cpu[step].end_ns = s.at(s.h);
        s.h += 20;
    }
    return t;
}

SyntheticTraining healthyStep(const std::function<void(SyntheticTraining&)>& extra, const HealthyOptions& o) {
    SyntheticTraining t;
    t.dataloader(o.dataloader_us).batch(o.batch);
    for (int layer = 0; layer < 4; ++layer) {
        if (o.fused_norm)
            t.kernels("sightline::rms_norm", kRmsNorm, 1, 15);
        t.kernels("aten::mm", kNvjet, 3, 200);
        if (o.flash)
            t.kernels("aten::_flash_attention_forward", kFlashFwd, 1, 150);
        else
            t.kernels("aten::_scaled_dot_product_attention_math", kSoftmaxFwd, 1, 150);
        t.kernels("aten::mm", kNvjet, 2, 200).kernels("aten::mul", kMulKernel, 5, 20).kernels("aten::add", kAddKernel, 5, 20);
    }
    for (int layer = 0; layer < 4; ++layer) {
        t.kernels("aten::mm", kNvjet, 10, 200);
        if (o.flash)
            t.kernels("aten::_flash_attention_backward", kFlashBwd, 1, 300);
        else
            t.kernels("aten::_softmax_backward_data", kSoftmaxBwd, 1, 300);
    }
    if (extra)
        extra(t);
    t.begin("Optimizer.step#AdamW.step");
    if (o.fused_optimizer)
        t.kernels("aten::_fused_adamw_", kFusedAdam, 1, 300);
    else
        t.kernels("aten::_foreach_mul_", kForeachKernel, 5, 60);
    t.end();
    return t;
}

SyntheticTraining gpuBoundMlp() {
    SyntheticTraining job;
    for (int block = 0; block < 8; ++block) job.kernels("aten::mm", kNvjet, 2, 3000, 10).kernels("aten::gelu", kMulKernel, 1, 200, 10);
    for (int block = 0; block < 8; ++block) job.kernels("aten::mm", kNvjet, 4, 3000, 10).kernels("aten::gelu_backward", kMulKernel, 1, 200, 10);
    job.begin("Optimizer.step#AdamW.step").kernels("aten::_fused_adamw_", kFusedAdam, 1, 2000, 10).end();
    return job.hostRunsAhead();
}

} // namespace sightline::test
