// The aggregation rules of the op table, each on a small trace built by hand (docs/op-table.md).
#include "sightline/op_tree.h"
#include "sightline/tables.h"
#include "test_support.h"

#include <catch2/catch.hpp>

using namespace sightline;
using sightline::test::TraceBuilder;

namespace {

Tables tablesOf(const Trace& t) { return computeTables(t, buildOpTree(t), Taxonomy::builtin()); }

const OpRow& row(const Tables& t, const std::string& name, CpuKind kind = CpuKind::Op) {
    for (const OpRow& r : t.ops)
        if (r.name == name && r.kind == kind)
            return r;
    FAIL("no op row " << name);
    throw std::logic_error("unreachable");
}

bool hasRow(const Tables& t, const std::string& name) {
    for (const OpRow& r : t.ops)
        if (r.name == name)
            return true;
    return false;
}

} // namespace

TEST_CASE("self CPU time subtracts direct children only", "[op_tree]") {
    // outer [0,100) > mid [10,60) > inner [20,30); sibling [70,90)
    Trace t = TraceBuilder()
                  .op("outer", 0, 100, 1)
                  .op("mid", 10, 50, 2)
                  .op("inner", 20, 10, 3)
                  .op("sibling", 70, 20, 4)
                  .build();
    const Tables tab = tablesOf(t);
    CHECK(row(tab, "outer").self_cpu_ns == 30'000);
    CHECK(row(tab, "outer").cpu_total_ns == 100'000);
    CHECK(row(tab, "mid").self_cpu_ns == 40'000);
    CHECK(row(tab, "inner").self_cpu_ns == 10'000);
    CHECK(tab.self_cpu_total_ns == 100'000); // self times partition the root
}

TEST_CASE("nesting is per thread", "[op_tree]") {
    Trace t = TraceBuilder().op("a", 0, 100, 1, /*tid*/ 1).op("b", 10, 10, 2, /*tid*/ 2).build();
    const Tables tab = tablesOf(t);
    CHECK(row(tab, "a").self_cpu_ns == 100'000); // b runs on another thread: not a child
}

TEST_CASE("an event that overlaps its would-be parent's end is not its child", "[op_tree]") {
    Trace t = TraceBuilder().op("a", 0, 50, 1).op("b", 40, 20, 2).build();
    const OpTree tree = buildOpTree(t);
    CHECK(tree.parent[1] == OpTree::kNone);
    CHECK(tree.links.partial_overlaps == 1);
    CHECK(tree.self_cpu_ns[0] == 50'000);
}

TEST_CASE("equal intervals nest: the first is the parent", "[op_tree]") {
    Trace t = TraceBuilder().op("a", 0, 10, 1).op("b", 0, 10, 2).build();
    const OpTree tree = buildOpTree(t);
    CHECK(tree.parent[1] == 0);
    CHECK(tree.self_cpu_ns[0] == 0);
}

TEST_CASE("CUDA API calls are children of their op and count against its self time", "[op_tree]") {
    Trace t = TraceBuilder().op("aten::mul", 0, 20, 7).api("cudaLaunchKernel", 5, 8, 7).build();
    const Tables tab = tablesOf(t);
    CHECK(row(tab, "aten::mul").self_cpu_ns == 12'000);
    CHECK(row(tab, "cudaLaunchKernel", CpuKind::Runtime).calls == 1);
}

TEST_CASE("an API call recorded on another thread nests on its op's thread", "[op_tree]") {
    Trace t = TraceBuilder().op("aten::mm", 0, 20, 9, /*tid*/ 1).api("cudaLaunchKernel", 5, 8, 9, /*tid*/ 2).build();
    const OpTree tree = buildOpTree(t);
    CHECK(tree.thread[1] == tree.thread[0]);
    CHECK(tree.parent[1] == 0);
    CHECK(tree.links.api_linked == 1);
}

TEST_CASE("GPU time goes to the op whose external id the kernel carries", "[op_tree]") {
    Trace t = TraceBuilder()
                  .op("aten::linear", 0, 100, 1)
                  .op("aten::mm", 10, 50, 2)
                  .kernel("nvjet_sm90_tst_x", 200, 30, 2)
                  .kernel("Memcpy DtoD (Device -> Device)", 240, 5, 2, GpuKind::Memcpy)
                  .kernel("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>", 250, 3, 1)
                  .kernel("orphan", 260, 4, 0)
                  .kernel("stranger", 270, 6, 99)
                  .kernel("train_step", 0, 500, 1, GpuKind::Annotation)
                  .build();
    const OpTree tree = buildOpTree(t);
    CHECK(tree.links.gpu_linked == 3);
    CHECK(tree.links.gpu_without_id == 1);
    CHECK(tree.links.gpu_unmatched == 1);
    const Tables tab = tablesOf(t);
    CHECK(row(tab, "aten::mm").self_device_ns == 35'000);
    CHECK(row(tab, "aten::linear").self_device_ns == 3'000);
    CHECK(row(tab, "aten::linear").device_total_ns == 38'000);
    // GPU-side annotations are not GPU work.
    CHECK(tab.gpu_total_ns == 30'000 + 5'000 + 3'000 + 4'000 + 6'000);
}

TEST_CASE("every frontend event sharing an external id gets the GPU time", "[op_tree]") {
    Trace t = TraceBuilder().op("a", 0, 10, 5, 1).op("b", 0, 10, 5, 2).kernel("k", 20, 4, 5).build();
    const Tables tab = tablesOf(t);
    CHECK(row(tab, "a").self_device_ns == 4'000);
    CHECK(row(tab, "b").self_device_ns == 4'000);
}

TEST_CASE("a same-name single child folds into its parent, which takes its kernels", "[op_tree]") {
    // aten::to [0,100) > aten::to [10,90) > aten::_to_copy [20,80); the outer also launched a kernel
    Trace t = TraceBuilder()
                  .op("aten::to", 0, 100, 1)
                  .op("aten::to", 10, 80, 2)
                  .op("aten::_to_copy", 20, 60, 3)
                  .kernel("k-outer", 200, 7, 1)
                  .kernel("k-inner", 210, 2, 2)
                  .build();
    const OpTree tree = buildOpTree(t);
    CHECK(tree.links.folded == 1);
    CHECK(tree.counted[1] == 0);
    CHECK(tree.parent[2] == 0);
    const Tables tab = tablesOf(t);
    const OpRow& to = row(tab, "aten::to");
    CHECK(to.calls == 1);
    CHECK(to.cpu_total_ns == 100'000);
    CHECK(to.self_cpu_ns == 40'000);   // 100 - the grandchild's 60
    CHECK(to.self_device_ns == 2'000); // the inner's kernels replace the outer's, as in PyTorch
}

TEST_CASE("a same-name parent with several children is not folded", "[op_tree]") {
    Trace t = TraceBuilder().op("f", 0, 100, 1).op("f", 10, 20, 2).op("g", 40, 20, 3).build();
    const OpTree tree = buildOpTree(t);
    CHECK(tree.links.folded == 0);
    CHECK(row(tablesOf(t), "f").calls == 2);
}

TEST_CASE("ProfilerStep#N rows become one ProfilerStep* row", "[op_tree]") {
    Trace t = TraceBuilder()
                  .op("ProfilerStep#1", 0, 100, 1, 1, CpuKind::UserAnnotation)
                  .op("ProfilerStep#2", 200, 100, 2, 1, CpuKind::UserAnnotation)
                  .op("aten::add", 210, 10, 3)
                  .build();
    const Tables tab = tablesOf(t);
    const OpRow& step = row(tab, "ProfilerStep*", CpuKind::UserAnnotation);
    CHECK(step.calls == 2);
    CHECK(step.cpu_total_ns == 200'000);
    CHECK(step.self_cpu_ns == 190'000);
    CHECK_FALSE(hasRow(tab, "ProfilerStep#1"));
}

TEST_CASE("profiler bookkeeping ops are left out and do not count as children", "[op_tree]") {
    Trace t = TraceBuilder()
                  .op("aten::add", 0, 10, 1)
                  .op("aten::is_leaf", 2, 2, 2)
                  .op("profiler::_record_function_enter_new", 5, 1, 3)
                  .build();
    const Tables tab = tablesOf(t);
    CHECK(row(tab, "aten::add").self_cpu_ns == 10'000);
    CHECK_FALSE(hasRow(tab, "aten::is_leaf"));
    CHECK(buildOpTree(t).links.excluded == 2);
}

TEST_CASE("kernel tables sum by name and by class", "[tables]") {
    Trace t = TraceBuilder()
                  .op("aten::add", 0, 10, 1)
                  .kernel("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>)", 10, 2, 1)
                  .kernel("void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<at::native::CUDAFunctor_add<c10::BFloat16> >(at::TensorIteratorBase&, at::native::CUDAFunctor_add<c10::BFloat16> const&)::{lambda(int)#1}>(int, at::native::gpu_kernel_impl_nocast<at::native::CUDAFunctor_add<c10::BFloat16> >(at::TensorIteratorBase&, at::native::CUDAFunctor_add<c10::BFloat16> const&)::{lambda(int)#1})", 20, 4, 1)
                  .kernel("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>)", 30, 6, 1)
                  .kernel("nvjet_sm90_tst_128x64_64x8_1x2_h_bz_NNT", 40, 10, 1)
                  .build();
    const Tables tab = tablesOf(t);
    REQUIRE(tab.kernels.size() == 3);
    REQUIRE(tab.kernel_classes.size() == 2);
    const GpuRow& add = tab.kernel_classes[0]; // 12 us, ahead of the GEMM's 10
    CHECK(add.name == "Elementwise add");
    CHECK(add.family == "elementwise");
    CHECK(add.calls == 3);
    CHECK(add.total_ns == 12'000);
    CHECK(add.min_ns == 2'000);
    CHECK(add.max_ns == 6'000);
    CHECK(add.share == Approx(12.0 / 22.0));
    CHECK(tab.kernel_classes[1].name == "nvjet GEMM");
    CHECK(tab.kernels[0].name.rfind("nvjet", 0) == 0); // 10 us in one call
    CHECK(tab.kernels[1].calls == 2);                  // the float add: 8 us in two calls
    CHECK(tab.kernels[1].total_ns == 8'000);
}

TEST_CASE("op sorting keys", "[tables]") {
    Trace t = TraceBuilder().op("a", 0, 10, 1).op("b", 20, 30, 2).op("b", 60, 1, 3).kernel("k", 0, 50, 1).build();
    Tables tab = tablesOf(t);
    sortOps(tab.ops, OpSort::Calls);
    CHECK(tab.ops[0].name == "b");
    sortOps(tab.ops, OpSort::SelfDevice);
    CHECK(tab.ops[0].name == "a");
    sortOps(tab.ops, OpSort::Name);
    CHECK(tab.ops[0].name == "a");
}

TEST_CASE("range summaries and the kernel duration histogram", "[tables]") {
    Trace t = TraceBuilder()
                  .op("a", 0, 100, 1)
                  .kernel("k1", 10, 0.5, 1)
                  .kernel("k2", 20, 3, 1)
                  .kernel("k3", 22, 3, 1) // overlaps k2 by 1 us
                  .kernel("m", 50, 40, 1, GpuKind::Memcpy)
                  .build();
    const RangeSummary r = summarizeRange(t, 0, 60'000); // ns; the builder takes us
    CHECK(r.duration_ns == 60'000);
    CHECK(r.gpu_busy_ns == 500 + 5'000 + 10'000); // k2+k3 union 5 us; the copy clipped to 10 us
    CHECK(r.kernels == 3);
    CHECK(r.memops == 1);
    CHECK(r.cpu_ops == 1);
    const auto h = kernelDurationHistogram(t);
    CHECK(h[0] == 1); // 0.5 us
    CHECK(h[1] == 2); // 3 us: [2, 4)
    const EventFilter f = rangeFilter(t, 15'000, 60'000);
    CHECK(f.gpu == std::vector<uint8_t>{0, 1, 1, 1});
}
