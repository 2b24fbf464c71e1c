// The collector's capture: recorder -> file -> analyzer round trip, a capture cut at any byte,
// a newer format refused, and the ring buffer under wrap-around and overflow.
#include "recorder.h"
#include "ring.h"
#include "sightline/error.h"
#include "sightline/import.h"
#include "sightline/op_tree.h"
#include "sightline/tables.h"
#include "test_support.h"

#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <thread>

#include <zlib.h>

#include <fmt/format.h>

#include <catch2/catch.hpp>

using namespace sightline;
using namespace sightline::capture;
using sightline::collector::ChunkSink;
using sightline::collector::Recorder;
using sightline::collector::ThreadRing;

namespace {

class MemorySink final : public ChunkSink {
public:
    explicit MemorySink(std::string* out) : m_out(out) {}
    bool write(const void* data, size_t size) override {
        m_out->append(static_cast<const char*>(data), size);
        return true;
    }

private:
    std::string* m_out;
};

FileHeader header(int rank = -1) {
    FileHeader h{};
    std::memcpy(h.magic, kFileMagic, 8);
    h.version = kFormatVersion;
    h.header_size = sizeof h;
    h.pid = 4242;
    h.rank = rank;
    h.world_size = rank >= 0 ? 2 : -1;
    std::strcpy(h.host, "testhost");
    return h;
}

// A small training-like capture: an op launching a kernel and a memcpy through linked API calls,
// an NVTX range around it, in `chunks` flushes. Without `correlation`, no external correlation
// records (the collector's default: the importer links calls by nesting).
std::string makeCapture(int steps = 3, bool correlation = true) {
    std::string bytes;
    auto rec = std::make_unique<Recorder>(std::make_unique<MemorySink>(&bytes), header(1));
    const uint32_t mm = rec->intern("aten::mm"), launch = rec->intern("cudaLaunchKernel"), copy = rec->intern("cudaMemcpyAsync");
    const uint32_t kernel = rec->intern("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT"), step = rec->intern("train_step");
    const uint32_t mangled = rec->intern("_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_15CUDAFunctor_addIfEESt5arrayIPcLm3EEEEviT0_T1_");
    const uint32_t dev = rec->intern("NVIDIA H200");
    DeviceRecord d;
    initHeader(d, RecordType::Device);
    d.id = 0;
    d.name_id = dev;
    d.sm_count = 132;
    d.compute_major = 9;
    d.total_memory = 150'000'000'000ull;
    rec->emit(d);
    for (int s = 0; s < steps; ++s) {
        const uint64_t t0 = 1'000'000 + uint64_t(s) * 100'000;
        MarkerRecord begin;
        initHeader(begin, RecordType::Marker);
        begin.ts_ns = t0;
        begin.tid = 7;
        begin.id = uint64_t(s + 1);
        begin.flags = uint32_t(MarkerFlags::Start);
        begin.name_id = step;
        rec->emit(begin);
        OpRecord op;
        initHeader(op, RecordType::Op);
        op.start_ns = t0 + 1000;
        op.end_ns = t0 + 20'000;
        op.tid = 7;
        op.external_id = uint64_t(100 + s);
        op.sequence = -1;
        op.name_id = mm;
        rec->emit(op);
        for (int k = 0; k < 2; ++k) {
            const uint32_t corr = uint32_t(1000 + s * 10 + k);
            ApiRecord a;
            initHeader(a, RecordType::Api);
            a.start_ns = t0 + 2000 + uint64_t(k) * 5000;
            a.end_ns = a.start_ns + 4000;
            a.tid = 7;
            a.correlation = corr;
            a.name_id = k == 0 ? launch : copy;
            rec->emit(a);
            if (!correlation) continue;
            ExternalCorrelationRecord x;
            initHeader(x, RecordType::ExternalCorrelation);
            x.external_id = op.external_id;
            x.external_kind = 4;
            x.correlation = corr;
            rec->emit(x);
        }
        KernelRecord kr;
        initHeader(kr, RecordType::Kernel);
        kr.start_ns = t0 + 30'000;
        kr.end_ns = t0 + 80'000;
        kr.name_id = kernel;
        kr.stream = 7;
        kr.correlation = uint32_t(1000 + s * 10);
        kr.grid[0] = 132;
        rec->emit(kr);
        KernelRecord add = kr;
        add.name_id = mangled;
        add.correlation = 0;
        add.start_ns = t0 + 82'000;
        add.end_ns = t0 + 83'000;
        rec->emit(add);
        MemcpyRecord mc;
        initHeader(mc, RecordType::Memcpy);
        mc.start_ns = t0 + 80'000;
        mc.end_ns = t0 + 81'000;
        mc.bytes = 4096;
        mc.copy_kind = 8; // DtoD
        mc.src_kind = 3;
        mc.dst_kind = 3;
        mc.stream = 7;
        mc.correlation = uint32_t(1000 + s * 10 + 1);
        rec->emit(mc);
        MarkerRecord end;
        initHeader(end, RecordType::Marker);
        end.ts_ns = t0 + 90'000;
        end.tid = 7;
        end.id = uint64_t(s + 1);
        end.flags = uint32_t(MarkerFlags::End);
        rec->emit(end);
        rec->flush(); // one or more chunks per step
    }
    rec->setCounters(3, 5);
    rec->close();
    return bytes;
}

Trace importBytes(const std::string& bytes, const std::string& name = "capture.slcap") {
    const auto dir = test::tempDir();
    test::writeFile(dir / name, bytes);
    return importTrace(dir / name);
}

size_t chunkCount(const std::string& bytes, std::vector<size_t>* ends = nullptr) {
    size_t pos = sizeof(FileHeader), n = 0;
    while (pos + sizeof(ChunkHeader) <= bytes.size()) {
        ChunkHeader ch;
        std::memcpy(&ch, bytes.data() + pos, sizeof ch);
        pos += sizeof ch + ch.payload_size;
        if (ends) ends->push_back(pos);
        ++n;
    }
    return n;
}

} // namespace

TEST_CASE("a capture written by the recorder reads back with ops linked to their kernels", "[capture]") {
    const std::string bytes = makeCapture();
    CHECK(detectFormat([&] { auto d = test::tempDir(); test::writeFile(d / "x.slcap", bytes); return d / "x.slcap"; }()) == InputFormat::Capture);
    const Trace t = importBytes(bytes);
    CHECK(t.format == "sightline-capture");
    CHECK(t.recorder == "sightline");
    CHECK(t.metadata.at("pid") == "4242");
    CHECK(t.metadata.at("rank") == "1");
    CHECK(t.metadata.at("host") == "testhost");
    REQUIRE(t.devices.size() == 1);
    CHECK(t.devices[0].name == "NVIDIA H200");
    CHECK(t.quality.dropped_records == 3);
    CHECK(t.quality.lost_chunks == 0);
    size_t ops = 0, apis = 0, ranges = 0;
    for (const CpuEvent& e : t.cpu) {
        ops += e.kind == CpuKind::Op;
        ranges += e.kind == CpuKind::UserAnnotation;
        if (e.kind == CpuKind::Runtime) {
            ++apis;
            CHECK(e.external_id >= 100); // resolved through the external correlation records
        }
    }
    CHECK(ops == 3);
    CHECK(apis == 6);
    CHECK(ranges == 3);
    REQUIRE(t.gpu.size() == 9);
    CHECK(t.str(t.gpu[2].name) == "Memcpy DtoD (Device -> Device)");
    // Kernel names arrive mangled from CUPTI and are demangled as Kineto shows them.
    CHECK(t.str(t.gpu[1].name) == "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
                                  "std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>)");
    // The op table links each kernel to its op, as with a PyTorch trace.
    const Tables tab = computeTables(t, buildOpTree(t), Taxonomy::builtin());
    bool found = false;
    for (const OpRow& r : tab.ops)
        if (r.name == "aten::mm") {
            found = true;
            CHECK(r.calls == 3);
            CHECK(r.self_device_ns == 3 * (50'000 + 1'000));
            CHECK(r.self_cpu_ns == 3 * (19'000 - 8'000)); // two API calls of 4 us nest under it
        }
    CHECK(found);
    CHECK(tab.kernel_classes[0].name == "nvjet GEMM");
}

TEST_CASE("without external correlation records, calls and kernels link to the same ops", "[capture]") {
    const Trace with = importBytes(makeCapture(3, true)), without = importBytes(makeCapture(3, false));
    REQUIRE(with.cpu.size() == without.cpu.size());
    REQUIRE(with.gpu.size() == without.gpu.size());
    size_t linked = 0;
    for (size_t i = 0; i < with.cpu.size(); ++i) {
        CHECK(with.cpu[i].external_id == without.cpu[i].external_id);
        linked += with.cpu[i].kind == CpuKind::Runtime && with.cpu[i].external_id != 0;
    }
    CHECK(linked == 6);
    for (size_t i = 0; i < with.gpu.size(); ++i) CHECK(with.gpu[i].external_id == without.gpu[i].external_id);
}

namespace {
// Records for the nesting test: an op or bridge range, an API call (a launch) and its kernel.
void emitOp(Recorder& rec, uint64_t id, int64_t tid, uint64_t start, uint64_t end, OpKind kind = OpKind::Op) {
    OpRecord op;
    initHeader(op, RecordType::Op);
    op.start_ns = start;
    op.end_ns = end;
    op.tid = tid;
    op.external_id = id;
    op.sequence = -1;
    op.kind = uint32_t(kind);
    op.name_id = rec.intern(fmt::format("op{}", id));
    rec.emit(op);
}
void emitLaunch(Recorder& rec, uint32_t corr, int64_t tid, uint64_t start, uint64_t end) {
    ApiRecord a;
    initHeader(a, RecordType::Api);
    a.start_ns = start;
    a.end_ns = end;
    a.tid = tid;
    a.correlation = corr;
    a.name_id = rec.intern("cudaLaunchKernel");
    rec.emit(a);
    KernelRecord k;
    initHeader(k, RecordType::Kernel);
    k.start_ns = 1'000'000 + corr * 100;
    k.end_ns = k.start_ns + 50;
    k.correlation = corr;
    k.name_id = rec.intern(fmt::format("kernel{}", corr));
    rec.emit(k);
}
} // namespace

TEST_CASE("a launch call links to the innermost op around it on its thread", "[capture]") {
    std::string bytes;
    auto rec = std::make_unique<Recorder>(std::make_unique<MemorySink>(&bytes), header());
    // CUPTI names thread 7 0x5000 (its pthread_self()); the thread record says so.
    constexpr int64_t kCuptiTid = 0x5000;
    emitLaunch(*rec, 11, kCuptiTid, 250, 300); // in op 2 (CUPTI's records may come before the thread's)
    ThreadRecord tr;
    initHeader(tr, RecordType::Thread);
    tr.tid = 7;
    tr.cupti_tid = uint32_t(kCuptiTid);
    tr.name_id = rec->intern("main");
    rec->emit(tr);
    emitOp(*rec, 1, 7, 100, 1000); // op 1, with op 2 inside it
    emitOp(*rec, 2, 7, 200, 400);
    emitLaunch(*rec, 12, kCuptiTid, 500, 600);              // in op 1, after op 2
    emitLaunch(*rec, 13, 8, 300, 350);                      // another thread: no op there
    emitLaunch(*rec, 14, 7, 900, 1100);                     // runs past op 1's end: not its call
    emitOp(*rec, 3, 7, 2000, 3000, OpKind::UserAnnotation); // a range the bridge recorded
    emitLaunch(*rec, 15, 7, 2100, 2200);
    MarkerRecord nvtx; // an NVTX range has no op id: nothing links to it
    initHeader(nvtx, RecordType::Marker);
    nvtx.ts_ns = 4000;
    nvtx.tid = 7;
    nvtx.id = 1;
    nvtx.flags = uint32_t(MarkerFlags::Start);
    nvtx.name_id = rec->intern("nvtx range");
    rec->emit(nvtx);
    emitLaunch(*rec, 16, 7, 4100, 4200);
    nvtx.ts_ns = 5000;
    nvtx.flags = uint32_t(MarkerFlags::End);
    rec->emit(nvtx);
    emitOp(*rec, 4, 7, 6000, 7000); // ops 4 and 5 overlap without nesting
    emitOp(*rec, 5, 7, 6500, 7500);
    emitLaunch(*rec, 17, 7, 6600, 6700); // in both: the inner (later) one
    emitLaunch(*rec, 18, 7, 7200, 7300); // after op 4's end: op 5
    emitLaunch(*rec, 19, 7, 6100, 6200); // before op 5: op 4
    emitOp(*rec, 6, 7, 8000, 9000);
    emitLaunch(*rec, 20, 7, 8000, 9000); // the op's own bounds count as inside
    rec->close();
    const Trace t = importBytes(bytes);
    std::map<int64_t, int64_t> callOp, kernelOp;
    for (const CpuEvent& e : t.cpu)
        if (e.kind == CpuKind::Runtime) callOp[e.correlation] = e.external_id;
    for (const GpuEvent& g : t.gpu) kernelOp[g.correlation] = g.external_id;
    const std::map<int64_t, int64_t> expected{{11, 2}, {12, 1}, {13, 0}, {14, 0}, {15, 3}, {16, 0}, {17, 5}, {18, 5}, {19, 4}, {20, 6}};
    CHECK(callOp == expected);
    CHECK(kernelOp == expected);
    // The calls under CUPTI's id sit on the ops' thread, which keeps its name.
    for (const CpuEvent& e : t.cpu)
        if (e.kind == CpuKind::Runtime && (e.correlation == 11 || e.correlation == 12)) {
            CHECK(t.threads[e.thread].tid == 7);
            CHECK(t.str(t.threads[e.thread].name) == "main");
        }
}

TEST_CASE("a capture cut at any byte is read up to its last whole chunk", "[capture]") {
    const std::string bytes = makeCapture();
    std::vector<size_t> ends;
    REQUIRE(chunkCount(bytes, &ends) >= 3);
    REQUIRE(ends.back() == bytes.size());
    const size_t full_events = importBytes(bytes).eventCount();
    std::vector<size_t> starts = {sizeof(FileHeader)}; // where each whole prefix ends
    starts.insert(starts.end(), ends.begin(), ends.end());
    size_t previous = 0;
    for (size_t cut = 0; cut < bytes.size(); ++cut) {
        const std::string part = bytes.substr(0, cut);
        if (cut < sizeof(FileHeader)) {
            CHECK_THROWS_AS(importBytes(part), InputError);
            continue;
        }
        const Trace t = importBytes(part);
        const bool at_boundary = cut == sizeof(FileHeader) || std::find(ends.begin(), ends.end(), cut) != ends.end();
        INFO("cut at " << cut);
        CHECK(t.quality.lost_chunks == (at_boundary ? 0u : 1u));
        const size_t last_whole = *std::prev(std::upper_bound(starts.begin(), starts.end(), cut));
        CHECK(t.quality.lost_bytes == cut - last_whole);
        CHECK(t.eventCount() >= previous); // more bytes never mean fewer events
        CHECK(t.eventCount() <= full_events);
        previous = t.eventCount();
    }
}

TEST_CASE("a damaged chunk is skipped and counted, and the others are kept", "[capture]") {
    std::string bytes = makeCapture();
    std::vector<size_t> ends;
    chunkCount(bytes, &ends);
    bytes[ends[0] + sizeof(ChunkHeader) + 3] ^= 0x55; // inside the second chunk's payload
    const Trace t = importBytes(bytes);
    CHECK(t.quality.lost_chunks == 1);
    CHECK(t.eventCount() > 0);
}

TEST_CASE("a capture of a newer format is refused with both versions named", "[capture]") {
    std::string bytes = makeCapture(1);
    const uint32_t newer = kFormatVersion + 1;
    std::memcpy(bytes.data() + offsetof(FileHeader, version), &newer, 4);
    CHECK_THROWS_WITH(importBytes(bytes), Catch::Contains(fmt::format("capture format {} is newer", newer)) && Catch::Contains(fmt::format("(format {})", kFormatVersion)));
}

TEST_CASE("the ring refuses a record whose header does not give its size", "[capture]") {
    ThreadRing ring(4096);
    OpRecord op;
    initHeader(op, RecordType::Op);
    CHECK_FALSE(ring.write(&op, op.h.size - 8)); // the header says more than is written
    CHECK_FALSE(ring.write(&op, op.h.size + 8)); // less
    op.h.size = 0;
    CHECK_FALSE(ring.write(&op, 0)); // no size: the consumer would never move on
    op.h.size = 12;
    CHECK_FALSE(ring.write(&op, 12)); // not a multiple of 8
    initHeader(op, RecordType::Op);
    op.external_id = 7;
    REQUIRE(ring.write(&op, op.h.size)); // a good one still goes through, and alone comes out
    std::vector<char> out;
    CHECK(ring.drain(out) == 1);
    REQUIRE(out.size() == sizeof op);
    OpRecord back;
    std::memcpy(&back, out.data(), sizeof back);
    CHECK(back.external_id == 7);
}

TEST_CASE("the ring keeps whole records across wrap-around and drops when full", "[capture]") {
    ThreadRing ring(4096);
    std::vector<char> out;
    uint64_t written = 0, read = 0;
    for (int round = 0; round < 200; ++round) {
        for (int i = 0; i < 5; ++i) {
            OpRecord op;
            initHeader(op, RecordType::Op);
            op.external_id = ++written;
            REQUIRE(ring.write(&op, op.h.size));
        }
        out.clear();
        const size_t n = ring.drain(out);
        REQUIRE(n == 5);
        for (size_t k = 0; k < n; ++k) {
            OpRecord op;
            std::memcpy(&op, out.data() + k * sizeof op, sizeof op);
            CHECK(op.external_id == ++read);
        }
    }
    OpRecord op;
    initHeader(op, RecordType::Op);
    size_t accepted = 0;
    while (ring.write(&op, op.h.size)) ++accepted;
    CHECK(accepted <= 4096 / sizeof(OpRecord));     // full: no more room
    CHECK(accepted + 2 >= 4096 / sizeof(OpRecord)); // at most one record's room goes to wrap padding
    out.clear();
    CHECK(ring.drain(out) == accepted);
}

TEST_CASE("damaged records with valid checksums are skipped, never trusted", "[capture]") {
    // One chunk holding a string with an absurd id and a kernel record cut to 8 bytes.
    std::string payload;
    StringRecord bad;
    initHeader(bad, RecordType::String);
    bad.id = 0xFFFFFFFFu;
    bad.length = 0;
    payload.append(reinterpret_cast<const char*>(&bad), sizeof bad);
    RecordHeader tiny{uint16_t(RecordType::Kernel), 0, 8};
    payload.append(reinterpret_cast<const char*>(&tiny), sizeof tiny);
    const FileHeader fh = header();
    ChunkHeader ch{kChunkMagic, uint32_t(payload.size()), 2, crc32(payload.data(), payload.size())};
    std::string bytes(reinterpret_cast<const char*>(&fh), sizeof fh);
    bytes.append(reinterpret_cast<const char*>(&ch), sizeof ch);
    bytes += payload;
    const Trace t = importBytes(bytes);
    CHECK(t.gpu.empty());
    CHECK(t.quality.damaged_records == 2);
    CHECK(t.quality.unknown_categories == 0);
    CHECK(t.quality.lost_chunks == 0);
}

TEST_CASE("capture CRC-32 is the IEEE one, at every length and alignment") {
    const char* check = "123456789";
    CHECK(crc32(check, 9) == 0xCBF43926u); // the standard check value
    std::mt19937 rng(7);
    std::vector<unsigned char> bytes(4096 + 16);
    for (auto& b : bytes) b = static_cast<unsigned char>(rng());
    for (size_t offset = 0; offset < 8; ++offset)
        for (size_t n : {size_t(0), size_t(1), size_t(7), size_t(8), size_t(9), size_t(63), size_t(1000), size_t(4096)}) {
            const uLong want = ::crc32(0L, bytes.data() + offset, uInt(n));
            CHECK(crc32(bytes.data() + offset, n) == uint32_t(want));
        }
    // Continuing a running CRC gives the CRC of the whole.
    CHECK(crc32(bytes.data() + 100, 900, crc32(bytes.data(), 100)) == crc32(bytes.data(), 1000));
}

namespace {

// A job's collectives as the libtorch bridge records them: a record_param_comms op (id 7) with its
// all-reduce's metadata, and the metadata of an op (id 8) the capture never got (it began as the
// window closed).
std::string collectiveCapture(uint32_t version, bool short_record = false) {
    std::string bytes;
    FileHeader h = header(0);
    h.version = version;
    auto rec = std::make_unique<Recorder>(std::make_unique<MemorySink>(&bytes), h);
    OpRecord op;
    initHeader(op, RecordType::Op);
    op.start_ns = 1000;
    op.end_ns = 5000;
    op.tid = 3;
    op.external_id = 7;
    op.sequence = -1;
    op.name_id = rec->intern("record_param_comms");
    rec->emit(op);
    CollectiveRecord c;
    initHeader(c, RecordType::Collective);
    c.op_id = 7;
    c.in_elements = c.out_elements = 1 << 20;
    c.name_id = rec->intern("allreduce");
    c.dtype_id = rec->intern("BFloat16");
    c.element_size = 2;
    c.group_name_id = rec->intern("0");
    c.group_desc_id = rec->intern("default_pg");
    c.rank = 0;
    c.group_size = 8;
    rec->emit(c);
    if (short_record) { // a record of the Collective type too short for its fields: damage
        CollectiveRecord cut = c;
        cut.h.size = sizeof cut - 16;
        rec->emitBytes(&cut, cut.h.size);
    }
    c.op_id = 8;
    rec->emit(c);
    rec->close();
    return bytes;
}

} // namespace

TEST_CASE("collectives read back from a capture, linked to their op", "[capture][comms]") {
    const Trace t = importBytes(collectiveCapture(kFormatVersion));
    REQUIRE(t.collectives.size() == 2);
    const Collective& c = t.collectives[0];
    CHECK(c.op_id == 7);
    CHECK(t.str(c.name) == "allreduce");
    CHECK(t.str(c.dtype) == "BFloat16");
    CHECK(c.element_size == 2);
    CHECK(c.in_elements == 1 << 20);
    CHECK(c.out_elements == 1 << 20);
    CHECK(t.str(c.group_name) == "0");
    CHECK(t.str(c.group_desc) == "default_pg");
    CHECK(c.rank == 0);
    CHECK(c.group_size == 8);
    CHECK(t.quality.unlinked_collectives == 1); // op 8 is not in the capture
    CHECK(t.quality.unknown_categories == 0);
}

TEST_CASE("a version 1 capture still reads, and a damaged collective record is counted and skipped", "[capture][comms]") {
    // Version 1 had no Collective records; its other records are unchanged.
    const Trace v1 = importBytes(makeCapture(1).replace(offsetof(FileHeader, version), 4, "\1\0\0\0", 4));
    CHECK(v1.collectives.empty());
    CHECK(v1.cpu.size() > 0);
    CHECK(v1.quality.unknown_categories == 0);

    const Trace t = importBytes(collectiveCapture(kFormatVersion, true));
    CHECK(t.quality.damaged_records == 1); // the short record
    CHECK(t.quality.unknown_categories == 0);
    CHECK(t.collectives.size() == 2); // the records around it
}

TEST_CASE("GPU records without times are counted as dropped, never put on the timeline", "[capture]") {
    // What CUPTI hands over for work still running at a forced flush: the times left at zero.
    std::string bytes;
    auto rec = std::make_unique<Recorder>(std::make_unique<MemorySink>(&bytes), header(1));
    const uint32_t name = rec->intern("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT");
    KernelRecord timed;
    initHeader(timed, RecordType::Kernel);
    timed.start_ns = 1'000'000;
    timed.end_ns = 1'050'000;
    timed.name_id = name;
    timed.stream = 7;
    rec->emit(timed);
    KernelRecord unfinished = timed;
    unfinished.start_ns = unfinished.end_ns = 0;
    rec->emit(unfinished);
    KernelRecord backwards = timed; // an end before its start is no time either
    backwards.end_ns = timed.start_ns - 1;
    rec->emit(backwards);
    MemsetRecord memset;
    initHeader(memset, RecordType::Memset);
    memset.stream = 7;
    rec->emit(memset);
    rec->setCounters(2, 5);
    rec->close();
    const Trace t = importBytes(bytes);
    REQUIRE(t.gpu.size() == 1);
    CHECK(t.gpu[0].start_ns > 0);
    CHECK(t.quality.dropped_records == 2 + 3);
}

TEST_CASE("a recording thread's ring is freed once the thread ends, its records kept", "[capture]") {
    std::string bytes;
    auto rec = std::make_unique<Recorder>(std::make_unique<MemorySink>(&bytes), header(1));
    const uint32_t mm = rec->intern("aten::mm");
    constexpr int kRounds = 3, kThreads = 8, kOps = 100;
    for (int round = 0; round < kRounds; ++round) {
        std::vector<std::thread> threads;
        for (int k = 0; k < kThreads; ++k)
            threads.emplace_back([&, round, k] {
                for (int i = 0; i < kOps; ++i) {
                    OpRecord op;
                    initHeader(op, RecordType::Op);
                    op.start_ns = 1'000'000 + uint64_t(i) * 1000;
                    op.end_ns = op.start_ns + 500;
                    op.tid = 100 * round + k;
                    op.external_id = uint64_t((round * kThreads + k) * kOps + i + 1);
                    op.sequence = -1;
                    op.name_id = mm;
                    rec->recordOp(op);
                }
            });
        for (auto& t : threads) t.join();
        rec->flush();
        CHECK(rec->ringCount() == 0); // every thread has ended: no ring kept for any
    }
    CHECK(rec->opsRecorded() == uint64_t(kRounds * kThreads * kOps));
    rec->close();
    const Trace t = importBytes(bytes);
    size_t ops = 0;
    for (const CpuEvent& e : t.cpu) ops += e.kind == CpuKind::Op;
    CHECK(ops == size_t(kRounds * kThreads * kOps));
    CHECK(t.quality.dropped_records == 0);
}

namespace {
// A counted launch call (the collector's LaunchRecord) and, apart, the kernel CUPTI numbered.
void emitCounted(Recorder& rec, uint32_t segment, uint64_t count, int64_t tid, uint64_t start, const char* kernel) {
    LaunchRecord l;
    initHeader(l, RecordType::Launch);
    l.start_ns = start;
    l.end_ns = start + 10;
    l.tid = tid;
    l.count = count;
    l.segment = segment;
    l.name_id = rec.intern("cuLaunchKernel");
    l.kernel_name_id = rec.intern(kernel);
    l.activity = uint32_t(LaunchActivity::Kernel);
    rec.emit(l);
}
void emitKernel(Recorder& rec, uint32_t corr, uint64_t start, const char* kernel) {
    KernelRecord k;
    initHeader(k, RecordType::Kernel);
    k.start_ns = start;
    k.end_ns = start + 50;
    k.correlation = corr;
    k.name_id = rec.intern(kernel);
    rec.emit(k);
}
} // namespace

TEST_CASE("host synchronisations recorded with the counted launches are events, not numbered, and mark the trace", "[capture]") {
    std::string bytes;
    auto rec = std::make_unique<Recorder>(std::make_unique<MemorySink>(&bytes), header());
    emitOp(*rec, 1, 7, 1000, 2000);
    emitCounted(*rec, 1, 1, 7, 1100, "_Z1av");
    LaunchRecord sync;
    initHeader(sync, RecordType::Launch);
    sync.start_ns = 1200;
    sync.end_ns = 1900;
    sync.tid = 7;
    sync.segment = 1; // count 0: not numbered
    sync.name_id = rec->intern("cuStreamSynchronize");
    sync.activity = uint32_t(LaunchActivity::Sync);
    rec->emit(sync);
    emitKernel(*rec, 1, 1300, "_Z1av");
    rec->close();
    const Trace t = importBytes(bytes);
    REQUIRE(t.gpu.size() == 1);
    CHECK(t.gpu[0].external_id == 1);
    size_t syncs = 0;
    for (const CpuEvent& e : t.cpu)
        if (t.str(e.name) == "cuStreamSynchronize") {
            ++syncs;
            CHECK(e.kind == CpuKind::Driver);
            CHECK(e.correlation == 0);
            CHECK(e.end_ns - e.start_ns == 700);
        }
    CHECK(syncs == 1);
    CHECK(t.quality.counted_launches == 1);
    CHECK(t.quality.unmatched_launches == 0);
    CHECK(t.metadata.count(std::string(kHostSyncsKey)) == 1);
    // Format 3 had no such records: its counted windows say nothing of host synchronisations.
    std::string v3 = bytes;
    const uint32_t three = 3;
    std::memcpy(v3.data() + offsetof(FileHeader, version), &three, sizeof three);
    CHECK(importBytes(v3).metadata.count(std::string(kHostSyncsKey)) == 0);
}

TEST_CASE("counted launch calls link kernels to ops without API records, window by window", "[capture]") {
    std::string bytes;
    auto rec = std::make_unique<Recorder>(std::make_unique<MemorySink>(&bytes), header());
    // Window 1: op 1 launches _Z1av and _Z1bv; cuBLAS (not counted) launches a gemm CUPTI numbers 2.
    emitOp(*rec, 1, 7, 1000, 2000);
    emitCounted(*rec, 1, 1, 7, 1100, "_Z1av");
    emitCounted(*rec, 1, 2, 7, 1200, "_Z1bv");
    emitKernel(*rec, 1, 3000, "_Z1av");
    emitKernel(*rec, 2, 3100, "_Z4gemmv");
    emitKernel(*rec, 3, 3200, "_Z1bv");
    // Window 2, after CUPTI was detached: both count from 1 again, and the decoding shifts CUPTI's
    // ids past window 1's (DecodeContext::correlation_base), here by 3. Op 2's thread is another.
    emitOp(*rec, 2, 8, 10'000, 11'000);
    emitCounted(*rec, 2, 1, 8, 10'100, "_Z1bv");
    emitCounted(*rec, 2, 2, 8, 10'200, "_Z1av");
    emitCounted(*rec, 2, 3, 9, 10'300, "_Z1cv"); // on a thread without ops: counted, unlinked
    emitKernel(*rec, 4, 12'000, "_Z1bv");
    emitKernel(*rec, 5, 12'100, "_Z1av");
    emitKernel(*rec, 6, 12'200, "_Z1cv");
    rec->close();
    const Trace t = importBytes(bytes);
    std::map<std::pair<int64_t, std::string>, int64_t> kernel_op; // (start, name) -> op
    for (const GpuEvent& g : t.gpu) kernel_op[{g.start_ns, std::string(t.str(g.name))}] = g.external_id;
    const std::map<std::pair<int64_t, std::string>, int64_t> expected{
        {{3000, "a()"}, 1}, {{3100, "gemm()"}, 0}, {{3200, "b()"}, 1}, {{12'000, "b()"}, 2}, {{12'100, "a()"}, 2}, {{12'200, "c()"}, 0}};
    CHECK(kernel_op == expected);
    size_t calls = 0;
    for (const CpuEvent& e : t.cpu)
        if (e.kind == CpuKind::Driver) {
            ++calls;
            CHECK(t.str(e.name) == "cuLaunchKernel");
            CHECK(e.correlation != 0);
        }
    CHECK(calls == 5);
    CHECK(t.quality.counted_launches == 5);
    CHECK(t.quality.unmatched_launches == 0);
}

namespace {

// A capture of hardware samples: a session started on GPU 0 (CUPTI's clock `cupti_ns`), then
// `samples` samples of three metrics from `first_ns` on, one per microsecond, around makeCapture's
// records; a last status saying why sampling stopped when `stopped`.
std::string hwCapture(uint64_t cupti_ns, uint64_t first_ns, int samples, bool stopped = false) {
    std::string bytes;
    auto rec = std::make_unique<Recorder>(std::make_unique<MemorySink>(&bytes), header());
    const uint32_t names[] = {rec->intern("sm__cycles_active.avg.pct_of_peak_sustained_elapsed"),
                              rec->intern("sm__pipe_tensor_cycles_active_realtime.avg.pct_of_peak_sustained_elapsed"),
                              rec->intern("dram__bytes_read.sum")};
    HwStatusRecord st;
    initHeader(st, RecordType::HwStatus);
    st.interval_ns = 1000;
    st.cupti_ns = cupti_ns;
    rec->emit(st);
    for (int i = 0; i < samples; ++i) {
        alignas(8) char buf[sizeof(HwSampleRecord) + 3 * sizeof(HwValue)];
        auto* r = reinterpret_cast<HwSampleRecord*>(buf);
        initHeader(*r, RecordType::HwSample);
        r->h.size = sizeof buf;
        r->start_ns = first_ns + uint64_t(i) * 1000;
        r->end_ns = r->start_ns + 1000;
        r->count = 3;
        auto* v = reinterpret_cast<HwValue*>(buf + sizeof(HwSampleRecord));
        for (int k = 0; k < 3; ++k) v[k] = HwValue{names[k], 0, 10.0 * k + i};
        rec->emitBytes(buf, r->h.size);
        if (i % 4 == 3) rec->flush(); // several chunks
    }
    if (stopped) {
        HwStatusRecord end = st;
        end.result = -1;
        end.message_id = rec->intern("the GPU's sample buffer overflowed (samples lost)");
        end.overflows = 1;
        rec->emit(end);
    }
    rec->close();
    return bytes;
}

} // namespace

TEST_CASE("hardware samples read back as counter samples of their metrics, on CUPTI's clock", "[capture][hardware]") {
    const Trace t = importBytes(hwCapture(1'000'000, 1'000'500, 10));
    REQUIRE(t.counters.size() == 30);
    const CounterSample& c = t.counters[4]; // the second sample's tensor-pipe value
    CHECK(t.str(c.name) == "sm__pipe_tensor_cycles_active_realtime.avg.pct_of_peak_sustained_elapsed");
    CHECK(c.value == 11.0);
    CHECK(c.start_ns == 1'001'500);
    CHECK(c.end_ns == 1'002'500);
    CHECK(c.device == 0);
    CHECK(c.kind == CounterKind::Hardware);
    CHECK(c.label.empty());
    CHECK(t.metadata.at("hw_sampling") == "GPU 0 sampled every 1 us");
    CHECK(t.metadata.at("hw_clock") == "samples on CUPTI's clock");
    CHECK(t.quality.unknown_categories == 0);
}

TEST_CASE("samples on another clock than CUPTI's are moved to its reading at sampling start", "[capture][hardware]") {
    const uint64_t cupti = 1'790'000'000'000'000'000ull; // CLOCK_REALTIME ns; the samples' clock starts near 0
    const Trace t = importBytes(hwCapture(cupti, 5'000'000, 3));
    REQUIRE(t.counters.size() == 9);
    CHECK(uint64_t(t.counters[0].start_ns) == cupti);
    CHECK(uint64_t(t.counters[8].start_ns) == cupti + 2000);
    CHECK(t.metadata.at("hw_clock").find("moved by") != std::string::npos);
}

TEST_CASE("a capture without samples has none, and a status saying why is kept for the report", "[capture][hardware]") {
    const Trace plain = importBytes(makeCapture(1));
    CHECK(plain.counters.empty());
    CHECK_FALSE(plain.metadata.count("hw_sampling"));
    std::string bytes;
    auto rec = std::make_unique<Recorder>(std::make_unique<MemorySink>(&bytes), header());
    HwStatusRecord st;
    initHeader(st, RecordType::HwStatus);
    st.result = 35; // CUPTI_ERROR_INSUFFICIENT_PRIVILEGES
    st.message_id = rec->intern("this user may not read the GPU's performance counters");
    rec->emit(st);
    rec->close();
    const Trace denied = importBytes(bytes);
    CHECK(denied.counters.empty());
    CHECK(denied.metadata.at("hw_sampling") == "not recorded on GPU 0: this user may not read the GPU's performance counters");
    const Trace stopped = importBytes(hwCapture(1'000'000, 1'000'500, 4, true));
    CHECK(stopped.counters.size() == 12);
    CHECK(stopped.metadata.at("hw_sampling").starts_with("stopped on GPU 0: the GPU's sample buffer overflowed"));
}

TEST_CASE("a capture of samples cut at any byte keeps whole samples only, and a sample whose values overrun it is skipped", "[capture][hardware]") {
    const std::string bytes = hwCapture(1'000'000, 1'000'500, 12);
    size_t previous = 0;
    for (size_t cut = sizeof(FileHeader); cut <= bytes.size(); cut += 7) {
        const Trace t = importBytes(bytes.substr(0, cut));
        INFO("cut at " << cut);
        CHECK(t.counters.size() % 3 == 0); // a sample's values come whole or not at all
        CHECK(t.counters.size() >= previous);
        previous = t.counters.size();
    }
    CHECK(previous == 36);
    // A sample record whose count claims more values than it holds (a valid checksum over damage).
    std::string damaged;
    auto rec = std::make_unique<Recorder>(std::make_unique<MemorySink>(&damaged), header());
    alignas(8) char buf[sizeof(HwSampleRecord) + sizeof(HwValue)];
    auto* r = reinterpret_cast<HwSampleRecord*>(buf);
    initHeader(*r, RecordType::HwSample);
    r->h.size = sizeof buf;
    r->count = 5;
    *reinterpret_cast<HwValue*>(buf + sizeof(HwSampleRecord)) = HwValue{0, 0, 1.0};
    rec->emitBytes(buf, r->h.size);
    rec->close();
    const Trace t = importBytes(damaged);
    CHECK(t.counters.empty());
    CHECK(t.quality.damaged_records == 1);
    CHECK(t.quality.unknown_categories == 0);
}

TEST_CASE("a version 4 capture (before hardware samples) still reads", "[capture][hardware]") {
    const Trace v4 = importBytes(makeCapture(1).replace(offsetof(FileHeader, version), 4, "\4\0\0\0", 4));
    CHECK(v4.cpu.size() > 0);
    CHECK(v4.counters.empty());
}
