// The kernel taxonomy: real kernel names of the fixtures -> family and class; rule-file errors.
#include "sightline/error.h"
#include "sightline/import.h"
#include "sightline/taxonomy.h"
#include "test_support.h"

#include <catch2/catch.hpp>

using namespace sightline;

namespace {
KernelClass of(const std::string& name) { return Taxonomy::builtin().classify(name); }
} // namespace

TEST_CASE("GEMMs by library", "[taxonomy]") {
    CHECK(of("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT").name == "nvjet GEMM");
    CHECK(of("sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize32x32x8_stage3_warpsize1x2x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas").name ==
          "xmma GEMM fp32 (FFMA, no tensor cores)");
    CHECK(of("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas").name == "xmma GEMM");
    CHECK(of("void cutlass::Kernel2<cutlass_80_simt_sgemm_128x32_8x5_nn_align1>(cutlass_80_simt_sgemm_128x32_8x5_nn_align1::Params)").name ==
          "cutlass GEMM fp32 (SIMT, no tensor cores)");
    CHECK(of("void gemv2T_kernel_val<int, int, float, float, float, float, 128, 16, 4, 4, false, false>(...)").name == "gemv");
    CHECK(of("nvjet_sm90_tst_8x64_64x16_4x2_h_bz_TNN").family == "gemm");
}

TEST_CASE("attention kernels", "[taxonomy]") {
    CHECK(of("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x128_4x1x1_cga1x1x1_kernel0_0").name == "cuDNN attention fwd");
    CHECK(of("cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_f16_knob_26_64x64x128_1x4x1_cga1x1x1_kernel0_0").name == "cuDNN attention bwd");
    CHECK(of("void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t>, true>(Flash_fwd_params)").name == "flash attention fwd");
    CHECK(of("void pytorch_flash::flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<Flash_bwd_kernel_traits<128>>(Flash_bwd_params)").name == "flash attention bwd");
}

TEST_CASE("elementwise kernels are split by functor", "[taxonomy]") {
    CHECK(of("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>)").name == "Elementwise add");
    CHECK(of("void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast<at::native::BinaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> > >(at::TensorIteratorBase&, at::native::BinaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> > const&)::{lambda(int)#1}>(int, at::native::gpu_kernel_impl_nocast<at::native::BinaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> > >(at::TensorIteratorBase&, at::native::BinaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> > const&)::{lambda(int)#1})").name == "Elementwise mul");
    CHECK(of("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, 1ul> >(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)").name == "Elementwise fill");
    CHECK(of("void at::native::vectorized_elementwise_kernel<8, at::native::bfloat16_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda(float)#1}, std::array<char*, 2ul> >(int, at::native::bfloat16_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda(float)#1}, std::array<char*, 2ul>)").name == "Elementwise copy/cast");
    CHECK(of("void at::native::vectorized_elementwise_kernel<4, at::native::rsqrt_kernel_cuda(at::TensorIteratorBase&)::{lambda()#2}::operator()() const::{lambda()#2}::operator()() const::{lambda(float)#1}, std::array<char*, 2ul> >(int, at::native::rsqrt_kernel_cuda(at::TensorIteratorBase&)::{lambda()#2}::operator()() const::{lambda()#2}::operator()() const::{lambda(float)#1}, std::array<char*, 2ul>)").name == "Elementwise rsqrt");
    CHECK(of("void at::native::vectorized_elementwise_kernel<8, at::native::(anonymous namespace)::silu_backward_kernel(at::TensorIteratorBase&)::{lambda()#1}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16, c10::BFloat16)#1}, std::array<char*, 3ul> >(int, ...)").name == "Elementwise silu_backward");
    CHECK(of("void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::pow_tensor_scalar_kernel_impl<float, float>(at::TensorIteratorBase&, float)::{lambda(float)#2}, std::array<char*, 2ul> >(int, ...)").name == "Elementwise pow_tensor_scalar");
    CHECK(of("void at::native::vectorized_elementwise_kernel<4, at::native::AUnaryFunctor<long, long, bool, at::native::(anonymous namespace)::CompareEqFunctor<long> >, std::array<char*, 2ul> >(int, ...)").name == "Elementwise CompareEq");
}

TEST_CASE("reductions, norms, solves, indexing, memory operations, libraries", "[taxonomy]") {
    CHECK(of("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::func_wrapper_t<float, at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, unsigned int, float, 4, 4> >(...)").name == "reduce sum");
    CHECK(of("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float, float, float, float>, unsigned int, float, 4, 4> >(...)").name == "reduce Mean");
    CHECK(of("void batch_trsm_left_kernel<float, 64, 4, 3, false, true, true>(cublasTrsmBatchParams2<float>, float, float const*, int)").name == "triangular solve (trsm)");
    CHECK(of("void at::native::vectorized_gather_kernel<16, long>(char*, char*, long*, int, long, long, long, long, bool)").name == "gather");
    CHECK(of("void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, at::native::(anonymous namespace)::LogSoftMaxForwardEpilogue>(float*, float const*, int)").name == "log_softmax Forward");
    CHECK(of("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>(...)").name == "LayerNorm");
    CHECK(of("Memcpy DtoD (Device -> Device)").name == "Memcpy DtoD");
    CHECK(of("Memcpy HtoD (Pageable -> Device)").family == "memcpy");
    CHECK(of("Memset (Device)").name == "Memset");
    CHECK(of("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)").name == "NCCL AllReduce");
    CHECK(of("chunk_gated_delta_rule_fwd_kernel_h_blockdim64").name == "Triton (fla) chunk_gated_delta_rule_fwd");
    CHECK(of("void causal_conv1d_fwd_kernel<Causal_conv1d_fwd_kernel_traits<128, 4, true, c10::BFloat16, c10::BFloat16>>(ConvParamsBase)").name == "causal_conv1d fwd");
    CHECK(of("triton_poi_fused_add_mul_0").name == "Triton poi_fused_add_mul_0");
    CHECK(of("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::FusedOptimizerTensorListMetadata<4>, at::native::(anonymous namespace)::FusedAdamMathFunctor<c10::BFloat16, 4, (at::native::ADAM_MODE)1, false>, float const*, double, double, double, double, double, bool, float const*, float const*>(...)").name == "fused Adam/AdamW");
    CHECK(of("void at::native::(anonymous namespace)::conv_depthwise2d_forward_kernel_generic<c10::BFloat16, int>(...)").name == "depthwise conv forward");
}

TEST_CASE("names no rule knows keep a short readable name", "[taxonomy]") {
    const KernelClass k = of("void my_project::(anonymous namespace)::special_kernel<float, 4>(float*, int)");
    CHECK(k.family == "other");
    CHECK(k.name == "special_kernel");
    CHECK(shortKernelName("plain_kernel_name") == "plain_kernel_name");
}

TEST_CASE("every kernel in the fixtures gets a known family", "[taxonomy]") {
    for (const char* name : {"qwen3next_fallback_small.json.gz", "dense_healthy.json.gz"}) {
        const Trace t = importTrace(test::fixture(name));
        for (const GpuEvent& g : t.gpu) {
            if (g.kind == GpuKind::Annotation)
                continue;
            INFO(t.str(g.name));
            CHECK(Taxonomy::builtin().classify(t.str(g.name)).family != "other");
        }
    }
}

TEST_CASE("user rules come first, and a bad rule file names its line", "[taxonomy]") {
    const auto dir = test::tempDir();
    test::writeFile(dir / "mine.tsv", "# my kernels\nmine\tMy fused kernel\t^my_fused_\n");
    const Taxonomy t = Taxonomy::withUserRules(dir / "mine.tsv");
    CHECK(t.classify("my_fused_rmsnorm").name == "My fused kernel");
    CHECK(t.classify("nvjet_sm90_x").name == "nvjet GEMM");
    CHECK(t.ruleCount() == Taxonomy::builtin().ruleCount() + 1);

    test::writeFile(dir / "bad.tsv", "ok\tOk\t^ok\nbroken\tBroken\t(unclosed\n");
    CHECK_THROWS_WITH(Taxonomy::withUserRules(dir / "bad.tsv"), Catch::Contains("bad.tsv:2") && Catch::Contains("regular expression"));
    test::writeFile(dir / "short.tsv", "family-only\n");
    CHECK_THROWS_WITH(Taxonomy::withUserRules(dir / "short.tsv"), Catch::Contains("short.tsv:1"));
}
