#pragma once
// Where the held forms' operands lie in shared memory as the tensor memory accelerator lands them
// (gdn_held_tiles.h's tileBox and tileRows), on the host too, so that the CPU checks hold these
// addresses to the accelerator's swizzles and to ldmatrix's banks (gdn_checks.cpp's
// checkSwizzles). A box lands at a kSwizzleAlign-aligned address as dense rows (128 bytes: a
// [64 x 64] bf16 box; 64 bytes: [64 x 32]) whose 16-byte pieces the swizzle permutes by the
// address's bits 7 and up: the 128-byte swizzle XORs bits 4-6 with bits 7-9, the 64-byte one bits
// 4-5 with bits 7-8.
#include "gdn_block.h"

#include <cstdint>

namespace sightline::gdn::held {

constexpr int kBoxBytes = 64 * 128;       // a [64 x 64] bf16 box
constexpr int kTileBytes = 2 * kBoxBytes; // a chunk's [64 x 128] rows (tileRows)
constexpr int kNarrowBoxBytes = 64 * 64;  // a [64 x 32] bf16 box
constexpr int kSwizzleAlign = 1024;       // where a box lands (the 128-byte swizzle's period)

// `bytes` rounded up to a whole number of kSwizzleAlign (a stage whose successor's boxes land aligned).
SL_GDN_HD constexpr int swizzleRounded(int bytes) { return (bytes + kSwizzleAlign - 1) / kSwizzleAlign * kSwizzleAlign; }

// Element (row, col) of a chunk's [64 x 128] (or [64 x 64]) bf16 rows as tileRows lands them,
// from their shared address: 16-byte piece j of row r at piece j ^ (r % 8) of its box's row.
struct SwizzledRows {
    SL_GDN_HD static uint32_t at(uint32_t base, int row, int col) {
        return base + (col >> 6) * kBoxBytes + row * 128 + ((((col >> 3) & 7) ^ (row & 7)) << 4) + (col & 7) * 2;
    }
};
// More than 64 rows (a state's 128): tileRows' [64 x 128] one after another.
struct SwizzledTall {
    SL_GDN_HD static uint32_t at(uint32_t base, int row, int col) { return SwizzledRows::at(base + (row >> 6) * kTileBytes, row & 63, col); }
};
// A [64 x 32] box (64-byte rows) with the 64-byte swizzle: piece j of row r at piece j ^ (r / 2 % 4).
struct NarrowRows {
    SL_GDN_HD static uint32_t at(uint32_t base, int row, int col) { return base + row * 64 + ((((col >> 3) ^ (row >> 1)) & 3) << 4) + (col & 7) * 2; }
};

} // namespace sightline::gdn::held
