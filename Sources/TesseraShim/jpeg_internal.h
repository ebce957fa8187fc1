// What the shim's JPEG files share and Swift does not see.
#ifndef TS_JPEG_INTERNAL_H
#define TS_JPEG_INTERNAL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jpeglib.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/// A switch of the decoder's own parts: `*slot` once read (tests set it directly; -1 until
/// then), else 1 unless the environment variable `name` is `off`.
static inline int ts_env_switch(int *slot, const char *name, const char *off) {
    int use = __atomic_load_n(slot, __ATOMIC_RELAXED);
    if (use < 0) {
        const char *v = getenv(name);
        use = !(v && strcmp(v, off) == 0);
        int unset = -1;
        __atomic_compare_exchange_n(slot, &unset, use, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
        use = __atomic_load_n(slot, __ATOMIC_RELAXED);
    }
    return use;
}

/// Installed around jpeg_start_decompress by jpeg_shim.c: a progressive file's scans before it
/// (jpeg_entropy.c), a single-scan file's Huffman decoding and the SIMD inverse DCTs after it
/// (jpeg_entropy.c, jpeg_idct.c).
int ts_jpeg_progressive_prepare(j_decompress_ptr cinfo);
int ts_jpeg_entropy_install(j_decompress_ptr cinfo);
int ts_jpeg_idct_install(j_decompress_ptr cinfo);

/// The zig-zag order (the JPEG standard's Figure A.6). ts_natural[k]: the natural index of the
/// k-th coefficient in zig-zag order; past 63 (a corrupt run or a decoder's end-of-block step)
/// it stays at 63. ts_rank[n]: the zig-zag position of natural index n, its inverse. Both in
/// jpeg_entropy.c.
extern const uint8_t ts_natural[64 + 80];
extern const uint8_t ts_rank[64];

/// For each byte j of a block's natural-order nonzero mask, the zigzag-order bits its eight
/// bits stand for (jpeg_entropy.c); filled by ts_zigzag_prepare, once per process.
extern uint64_t ts_zigzag_bits[8][256];
void ts_zigzag_prepare(void);

/// Bit k: the coefficient at zigzag index k of the block (natural order, 64 JCOEFs) is nonzero.
/// ts_zigzag_prepare must have run.
static inline uint64_t ts_nonzero_zigzag(const int16_t *blk) {
    uint64_t natural = 0;
#if defined(__SSE2__)
    const __m128i zero = _mm_setzero_si128();
    for (int i = 0; i < 4; i++) {
        __m128i a = _mm_loadu_si128((const __m128i *)(blk + 16 * i)), b = _mm_loadu_si128((const __m128i *)(blk + 16 * i + 8));
        // Saturating packs keep zero and nonzero apart.
        unsigned z = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_packs_epi16(a, b), zero));
        natural |= (uint64_t)(~z & 0xFFFF) << (16 * i);
    }
#else
    for (int i = 0; i < 64; i++) natural |= (uint64_t)(blk[i] != 0) << i;
#endif
    uint64_t m = 0;
    for (int j = 0; j < 8; j++) m |= ts_zigzag_bits[j][(natural >> (8 * j)) & 0xFF];
    return m;
}

#endif
