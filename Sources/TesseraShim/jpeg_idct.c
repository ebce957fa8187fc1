// The reduced-size inverse DCTs libjpeg-turbo 2.1 has only in C, in SIMD in place of its own:
// the 3×3 of a JPEG decoded at 3/8, bit-exact (this header), and the 5×5-7×7 and the 4:2:0
// chroma's 10×10-14×14 in float (TS_FLOAT_IDCT below: within a level of libjpeg's).
//
// Why: at 3/8 (a 12 MP photo to 1280×720) libjpeg-turbo 2.1 turns each 8×8 block into 3×3
// pixels with `jpeg_idct_3x3`, plain C with a table lookup per pixel and no SIMD version:
// 7 % of a 1280×720 render. This computes the same integer arithmetic — the 3-point
// transform of libjpeg's jidctint.c (ITU T.81 A.3.3's inverse DCT, factored as in Loeffler,
// Ligtenberg and Moschytz, ICASSP 1989, with 13-bit fixed-point constants and a 2-bit
// intermediate scale), the same rounding and the same wrap-then-clamp of the range-limit
// table — on the three columns at once, then the three rows at once. The pixels are
// libjpeg's bit for bit (tests compare them on every corpus photo and on generated blocks).
//
// 32-bit lanes give libjpeg's 64-bit results while every dequantised coefficient of the
// block is below TS_IDCT_SAFE (2^16) in magnitude: the first pass then stays below
// 2^16 · 24018 < 2^31, and the second pass may wrap, since only bits 18-27 of its results
// reach the range-limit table (libjpeg masks them with 1023). A well-formed 8-bit JPEG's
// coefficients stay below 2^11 times their quantiser; a block beyond the bound (hostile
// coefficients, or a 16-bit quantisation table) goes to libjpeg's own function, so even then
// the pixels are libjpeg's.
//
// How it plugs in: after jpeg_start_decompress, `ts_jpeg_idct_install` replaces the idct
// module's method for each component whose method is libjpeg's jpeg_idct_3x3 and whose
// multiplier table is in the layout this reads (16-bit, as libjpeg-turbo's SIMD builds
// have it: checked against the quantisation table).

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#define JPEG_INTERNALS
#include <jpeglib.h>

#include "tessera_shim.h"
#include "jpeg_internal.h"

enum { TS_IDCT_SAFE = 1 << 16 };

static int ts_idct_use = -1;  // atomic: -1 until the environment is read
static long ts_idct_installs;

void ts_jpeg_own_idct(int enable) { __atomic_store_n(&ts_idct_use, enable ? 1 : 0, __ATOMIC_RELAXED); }

long ts_jpeg_own_idct_components(void) { return __atomic_load_n(&ts_idct_installs, __ATOMIC_RELAXED); }

// libjpeg's own reduced and enlarged inverse DCTs (jidctint.c, exported by libjpeg-turbo).
#define TS_LIBJPEG_IDCT(name)                                                                     \
    void name(j_decompress_ptr cinfo, jpeg_component_info *compptr, JCOEFPTR coef_block, JSAMPARRAY output_buf, \
              JDIMENSION output_col);
TS_LIBJPEG_IDCT(jpeg_idct_3x3)
TS_LIBJPEG_IDCT(jpeg_idct_5x5)
TS_LIBJPEG_IDCT(jpeg_idct_6x6)
TS_LIBJPEG_IDCT(jpeg_idct_7x7)
TS_LIBJPEG_IDCT(jpeg_idct_10x10)
TS_LIBJPEG_IDCT(jpeg_idct_12x12)
TS_LIBJPEG_IDCT(jpeg_idct_14x14)

// TESSERA_JPEG_IDCT=libjpeg: libjpeg's everywhere; =exact: only the bit-exact 3×3.
static int ts_float_use = -1;

void ts_jpeg_float_idct(int enable) { __atomic_store_n(&ts_float_use, enable ? 1 : 0, __ATOMIC_RELAXED); }

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
static int ts_float_enabled(void) { return ts_env_switch(&ts_float_use, "TESSERA_JPEG_IDCT", "exact"); }
#include <immintrin.h>

#define TS_FIX_0_707106781 5793   // round(0.707106781 * 2^13)
#define TS_FIX_1_224744871 10033  // round(1.224744871 * 2^13)

/// Dequantised row `r`, columns 0-3, as 32-bit lanes.
__attribute__((target("sse4.1"))) static inline __m128i ts_row(const JCOEF *c, const int16_t *q, int r) {
    __m128i cv = _mm_cvtepi16_epi32(_mm_loadl_epi64((const __m128i *)(c + 8 * r)));
    __m128i qv = _mm_cvtepi16_epi32(_mm_loadl_epi64((const __m128i *)(q + 8 * r)));
    return _mm_mullo_epi32(cv, qv);
}

/// Lanes: libjpeg's range limit after the IDCT — the low 10 bits as a signed number, plus
/// 128, clamped to 0-255 — packed as 16-bit values by the caller.
__attribute__((target("sse4.1"))) static inline __m128i ts_limit(__m128i x) {
    return _mm_add_epi32(_mm_srai_epi32(_mm_slli_epi32(x, 22), 22), _mm_set1_epi32(128));
}

__attribute__((target("sse4.1,ssse3"))) static void ts_idct_3x3(j_decompress_ptr cinfo, jpeg_component_info *compptr,
                                                                JCOEFPTR coef, JSAMPARRAY output_buf,
                                                                JDIMENSION output_col) {
    const int16_t *q = (const int16_t *)compptr->dct_table;
    __m128i r0 = ts_row(coef, q, 0), r1 = ts_row(coef, q, 1), r2 = ts_row(coef, q, 2);
    // Columns 0-2 only: lane 3 (column 3) is not part of the 3×3 transform.
    __m128i big = _mm_or_si128(_mm_or_si128(_mm_cmpgt_epi32(_mm_abs_epi32(r0), _mm_set1_epi32(TS_IDCT_SAFE)),
                                            _mm_cmpgt_epi32(_mm_abs_epi32(r1), _mm_set1_epi32(TS_IDCT_SAFE))),
                               _mm_cmpgt_epi32(_mm_abs_epi32(r2), _mm_set1_epi32(TS_IDCT_SAFE)));
    if (_mm_movemask_ps(_mm_castsi128_ps(big)) & 7) {
        jpeg_idct_3x3(cinfo, compptr, coef, output_buf, output_col);
        return;
    }
    const __m128i c2 = _mm_set1_epi32(TS_FIX_0_707106781), c1 = _mm_set1_epi32(TS_FIX_1_224744871);
    // Pass 1, down the columns (lanes: columns); outputs carry 2 extra bits.
    __m128i t0 = _mm_add_epi32(_mm_slli_epi32(r0, 13), _mm_set1_epi32(1 << 10));
    __m128i t12 = _mm_mullo_epi32(r2, c2);
    __m128i t10 = _mm_add_epi32(t0, t12);
    __m128i t2 = _mm_sub_epi32(_mm_sub_epi32(t0, t12), t12);
    __m128i odd = _mm_mullo_epi32(r1, c1);
    __m128i w0 = _mm_srai_epi32(_mm_add_epi32(t10, odd), 11);
    __m128i w1 = _mm_srai_epi32(t2, 11);
    __m128i w2 = _mm_srai_epi32(_mm_sub_epi32(t10, odd), 11);
    // Transpose: lanes become rows, vectors columns.
    __m128i z = _mm_setzero_si128();
    __m128i a = _mm_unpacklo_epi32(w0, w1), b = _mm_unpackhi_epi32(w0, w1);
    __m128i c = _mm_unpacklo_epi32(w2, z), d = _mm_unpackhi_epi32(w2, z);
    __m128i k0 = _mm_unpacklo_epi64(a, c), k1 = _mm_unpackhi_epi64(a, c), k2 = _mm_unpacklo_epi64(b, d);
    // Pass 2, along the rows (lanes: rows).
    t0 = _mm_slli_epi32(_mm_add_epi32(k0, _mm_set1_epi32(1 << 4)), 13);
    t12 = _mm_mullo_epi32(k2, c2);
    t10 = _mm_add_epi32(t0, t12);
    t2 = _mm_sub_epi32(_mm_sub_epi32(t0, t12), t12);
    odd = _mm_mullo_epi32(k1, c1);
    __m128i o0 = ts_limit(_mm_srai_epi32(_mm_add_epi32(t10, odd), 18));
    __m128i o1 = ts_limit(_mm_srai_epi32(t2, 18));
    __m128i o2 = ts_limit(_mm_srai_epi32(_mm_sub_epi32(t10, odd), 18));
    // Bytes: column c of row r at 4c + r; gathered row by row.
    __m128i bytes = _mm_packus_epi16(_mm_packs_epi32(o0, o1), _mm_packs_epi32(o2, z));
    bytes = _mm_shuffle_epi8(bytes, _mm_setr_epi8(0, 4, 8, -1, 1, 5, 9, -1, 2, 6, 10, -1, -1, -1, -1, -1));
    uint32_t row0 = (uint32_t)_mm_cvtsi128_si32(bytes), row1 = (uint32_t)_mm_extract_epi32(bytes, 1),
             row2 = (uint32_t)_mm_extract_epi32(bytes, 2);
    memcpy(output_buf[0] + output_col, &row0, 3);
    memcpy(output_buf[1] + output_col, &row1, 3);
    memcpy(output_buf[2] + output_col, &row2, 3);
}

// MARK: 5×5 to 7×7, 10×10 to 14×14: a float inverse DCT of any size
//
// libjpeg-turbo has SIMD inverse DCTs for 1, 2, 4 and 8 only. Boxes of 1920×1080 and more
// decode 8-16 MP photos at 5/8, 6/8 or 7/8, and the chroma of a 4:2:0 file at twice that
// (10×10 to 14×14, libjpeg's way of upsampling chroma in the IDCT): their C functions took
// 12-21 % of such a render. This one computes the definition instead of a factorisation —
// pixel(y, x) = Σ_r Σ_c a(y, r) a(x, c) K(r, c) + 128, a(x, u) = C(u)/2 · cos((2x+1)uπ/2N),
// C(0) = 1/√2, over the frequencies below min(N, 8), which is what libjpeg's reduced and
// enlarged IDCTs compute in 13-bit fixed point (ITU T.81 A.3.3 sampled at N points) — in
// single-precision floats, eight frequencies or pixels at a time (AVX2, FMA). The result is
// within one level of libjpeg's (tests): rounding differs, not the transform.

enum { TS_FLOAT_MIN = 5, TS_FLOAT_MAX = 14 };

/// a(x, u) for each size: [N - TS_FLOAT_MIN][x][u]; u past min(N, 8) is 0.
static float ts_basis[TS_FLOAT_MAX - TS_FLOAT_MIN + 1][16][8];
/// The same transposed for the horizontal pass: [N - TS_FLOAT_MIN][u][x], x padded to 16.
static float ts_basis_t[TS_FLOAT_MAX - TS_FLOAT_MIN + 1][8][16];
static pthread_once_t ts_basis_once = PTHREAD_ONCE_INIT;

static void ts_basis_init(void) {
    const double pi = 3.14159265358979323846;
    for (int n = TS_FLOAT_MIN; n <= TS_FLOAT_MAX; n++)
        for (int x = 0; x < n; x++)
            for (int u = 0; u < 8 && u < n; u++) {
                double a = (u == 0 ? 0.70710678118654752440 : 1.0) / 2 * cos((2 * x + 1) * u * pi / (2 * n));
                ts_basis[n - TS_FLOAT_MIN][x][u] = (float)a;
                ts_basis_t[n - TS_FLOAT_MIN][u][x] = (float)a;
            }
}

/// One block: N×N pixels from the frequencies below min(N, 8), + 128, rounded, clamped to 0-255.
__attribute__((target("avx2,fma"))) static inline void ts_float_idct(jpeg_component_info *compptr, JCOEFPTR coef,
                                                                      JSAMPARRAY output_buf, JDIMENSION output_col,
                                                                      const int n) {
    const int16_t *q = (const int16_t *)compptr->dct_table;
    const int used = n < 8 ? n : 8;
    const float(*a)[8] = ts_basis[n - TS_FLOAT_MIN];
    const float(*at)[16] = ts_basis_t[n - TS_FLOAT_MIN];
    // The rows and columns that hold a nonzero AC coefficient (within min(N, 8)): most blocks
    // of a photo end well before, and a block of DC alone is one value.
    __m256 k[8];
    const int inside = (1 << (2 * used)) - 1;  // movemask bits of the used columns
    int last_row = 0, columns = 0;
    for (int r = 0; r < used; r++) {
        __m128i c16 = _mm_loadu_si128((const __m128i *)(coef + 8 * r));
        if (r == 0) c16 = _mm_insert_epi16(c16, 0, 0);  // the DC term is added on its own
        int nz = ~_mm_movemask_epi8(_mm_cmpeq_epi16(c16, _mm_setzero_si128())) & inside;
        if (nz) last_row = r + 1;
        columns |= nz;
        __m256i m = _mm256_cvtepi16_epi32(_mm_loadu_si128((const __m128i *)(q + 8 * r)));
        k[r] = _mm256_cvtepi32_ps(_mm256_mullo_epi32(_mm256_cvtepi16_epi32(c16), m));
    }
    const int last_column = columns ? (32 - __builtin_clz((unsigned)columns) + 1) / 2 : 0;
    // The DC term is K(0, 0)/8 exactly, added with the centre (128) and the half that rounds:
    // a block of DC alone then rounds its ties up as libjpeg does, not to the float product.
    float dc = (float)((int32_t)coef[0] * (int32_t)q[0]);
    // Vertical: row y of v (lanes: horizontal frequencies) = Σ_r a(y, r) · K(r, ·).
    float v[16][8];
    for (int y = 0; y < n && last_row; y++) {
        __m256 acc = _mm256_mul_ps(_mm256_set1_ps(a[y][0]), k[0]);
        for (int r = 1; r < last_row; r++) acc = _mm256_fmadd_ps(_mm256_set1_ps(a[y][r]), k[r], acc);
        _mm256_storeu_ps(v[y], acc);
    }
    // Horizontal: pixel row y (lanes: x) = Σ_c v(y, c) · a(·, c), then + 128, rounded, clamped.
    const __m256 centre = _mm256_set1_ps(128.5f + dc * 0.125f);
    for (int y = 0; y < n; y++) {
        __m256 lo = centre, hi = centre;
        for (int c = 0; c < last_column; c++) {
            __m256 w = _mm256_broadcast_ss(&v[y][c]);
            lo = _mm256_fmadd_ps(w, _mm256_loadu_ps(at[c]), lo);
            if (n > 8) hi = _mm256_fmadd_ps(w, _mm256_loadu_ps(at[c] + 8), hi);
        }
        // Rounded half up (the half is in `centre`: libjpeg adds it before its shifts), clamped by the packs.
        __m256i l = _mm256_cvttps_epi32(_mm256_floor_ps(lo)), h = _mm256_cvttps_epi32(_mm256_floor_ps(hi));
        __m256i words = _mm256_permute4x64_epi64(_mm256_packs_epi32(l, h), 0xD8);
        __m128i bytes = _mm_packus_epi16(_mm256_castsi256_si128(words), _mm256_extracti128_si256(words, 1));
        uint8_t row[16];
        _mm_storeu_si128((__m128i *)row, bytes);
        memcpy(output_buf[y] + output_col, row, (size_t)n);
    }
}

#define TS_FLOAT_IDCT(n)                                                                          \
    __attribute__((target("avx2,fma"))) static void ts_idct_##n##x##n(                            \
        j_decompress_ptr cinfo, jpeg_component_info *compptr, JCOEFPTR coef, JSAMPARRAY out, JDIMENSION col) { \
        (void)cinfo;                                                                              \
        ts_float_idct(compptr, coef, out, col, n);                                                \
    }
TS_FLOAT_IDCT(5)
TS_FLOAT_IDCT(6)
TS_FLOAT_IDCT(7)
TS_FLOAT_IDCT(10)
TS_FLOAT_IDCT(12)
TS_FLOAT_IDCT(14)


static int ts_idct_simd(void) {
    const int needed = TS_CPU_SSE41 | TS_CPU_SSSE3;
    return (ts_cpu_features() & needed) == needed;
}

static int ts_idct_enabled(void) { return ts_env_switch(&ts_idct_use, "TESSERA_JPEG_IDCT", "libjpeg"); }
#endif

int ts_jpeg_idct_install(j_decompress_ptr cinfo) {
    int installed = 0;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    if (!ts_idct_enabled() || !ts_idct_simd() || cinfo->data_precision != 8 || !cinfo->idct) return 0;
    jpeg_component_info *comp = cinfo->comp_info;
    for (int ci = 0; ci < cinfo->num_components && ci < MAX_COMPONENTS; ci++, comp++) {
        inverse_DCT_method_ptr library = cinfo->idct->inverse_DCT[ci], own = NULL;
        if (library == jpeg_idct_3x3) own = ts_idct_3x3;
        else if (ts_kernels_avx2() && ts_float_enabled()) {
            if (library == jpeg_idct_5x5) own = ts_idct_5x5;
            else if (library == jpeg_idct_6x6) own = ts_idct_6x6;
            else if (library == jpeg_idct_7x7) own = ts_idct_7x7;
            else if (library == jpeg_idct_10x10) own = ts_idct_10x10;
            else if (library == jpeg_idct_12x12) own = ts_idct_12x12;
            else if (library == jpeg_idct_14x14) own = ts_idct_14x14;
            if (own) pthread_once(&ts_basis_once, ts_basis_init);
        }
        if (!own || !comp->dct_table || !comp->quant_table) continue;
        // The multipliers must be the quantisation table as 16-bit values (libjpeg-turbo's
        // ISLOW_MULT_TYPE in its SIMD builds); any other layout keeps libjpeg's function.
        const int16_t *q = (const int16_t *)comp->dct_table;
        int same = 1;
        for (int k = 0; k < DCTSIZE2 && same; k++) same = q[k] == (int16_t)comp->quant_table->quantval[k];
        if (!same) continue;
        cinfo->idct->inverse_DCT[ci] = own;
        installed++;
    }
    if (installed) __atomic_fetch_add(&ts_idct_installs, installed, __ATOMIC_RELAXED);
#else
    (void)cinfo;
#endif
    return installed;
}
