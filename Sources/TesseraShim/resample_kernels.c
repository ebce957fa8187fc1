// Resampling kernels: the three loops where the pixels are (see Steps/Resample.swift for
// the planning around them). C because Swift can neither target an instruction set per
// function nor choose one at run time; these use AVX2+FMA when the CPU has them and SSE2
// (every x86-64) otherwise. Non-x86 builds get the plain C versions.
#include "tessera_shim.h"

#include <stdint.h>
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>
#define TS_X86 1
#endif

void ts_linearise_row16(const uint16_t *src, int width, int channels, float *dst) {
    const float k = 1.0f / 65535.0f;
    if (channels == 1) {
        for (int x = 0; x < width; x++) {
            dst[4 * x] = src[x] * k;
            dst[4 * x + 1] = 0;
            dst[4 * x + 2] = 0;
            dst[4 * x + 3] = 1;
        }
        return;
    }
    for (int x = 0; x < width; x++, src += 3) {
        dst[4 * x] = src[0] * k;
        dst[4 * x + 1] = src[1] * k;
        dst[4 * x + 2] = src[2] * k;
        dst[4 * x + 3] = 1;
    }
}

void ts_linearise_row(const uint8_t *src, int width, int channels, const float *lut, float *dst) {
    switch (channels) {
    case 1:
        for (int x = 0; x < width; x++) {
            dst[4 * x] = lut[src[x]];
            dst[4 * x + 1] = 0;
            dst[4 * x + 2] = 0;
            dst[4 * x + 3] = 1;
        }
        break;
    case 3: {
        int x = 0;
#ifdef TS_X86
        // One 16-byte store per pixel instead of four (two pixels a turn): 10 % faster.
        const __m128 one = _mm_set_ss(1.0f);
        for (; x + 2 <= width; x += 2, src += 6) {
            __m128 rg0 = _mm_unpacklo_ps(_mm_load_ss(lut + src[0]), _mm_load_ss(lut + src[1]));
            __m128 b10 = _mm_unpacklo_ps(_mm_load_ss(lut + src[2]), one);
            __m128 rg1 = _mm_unpacklo_ps(_mm_load_ss(lut + src[3]), _mm_load_ss(lut + src[4]));
            __m128 b11 = _mm_unpacklo_ps(_mm_load_ss(lut + src[5]), one);
            _mm_storeu_ps(dst + 4 * x, _mm_movelh_ps(rg0, b10));
            _mm_storeu_ps(dst + 4 * x + 4, _mm_movelh_ps(rg1, b11));
        }
#endif
        for (; x < width; x++, src += 3) {
            dst[4 * x] = lut[src[0]];
            dst[4 * x + 1] = lut[src[1]];
            dst[4 * x + 2] = lut[src[2]];
            dst[4 * x + 3] = 1;
        }
        break;
    }
    default:
        for (int x = 0; x < width; x++, src += 4) {
            float a = src[3] * (1.0f / 255);
            dst[4 * x] = lut[src[0]] * a;
            dst[4 * x + 1] = lut[src[1]] * a;
            dst[4 * x + 2] = lut[src[2]] * a;
            dst[4 * x + 3] = a;
        }
    }
}

// MARK: - CPU dispatch

#ifdef TS_X86
int ts_cpu_features(void) {
    static int features = -1;  // atomic: -1 until read
    int f = __atomic_load_n(&features, __ATOMIC_RELAXED);
    if (f < 0) {
        __builtin_cpu_init();
        f = (__builtin_cpu_supports("ssse3") ? TS_CPU_SSSE3 : 0) | (__builtin_cpu_supports("sse4.1") ? TS_CPU_SSE41 : 0) |
            (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? TS_CPU_AVX2_FMA : 0);
        __atomic_store_n(&features, f, __ATOMIC_RELAXED);
    }
    return f;
}
#else
int ts_cpu_features(void) { return 0; }
#endif

int ts_kernels_avx2(void) { return (ts_cpu_features() & TS_CPU_AVX2_FMA) != 0; }

// MARK: - Horizontal

static void filter_h_generic(const float *in, float *out, int count, int max_taps, const int32_t *starts,
                             const int32_t *lengths, const float *expanded) {
#ifdef TS_X86
    for (int x = 0; x < count; x++) {
        const float *p = in + 4 * starts[x];
        const float *w = expanded + (size_t)x * max_taps * 4;
        int n = lengths[x], k = 0;
        __m128 a0 = _mm_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        for (; k + 4 <= n; k += 4) {
            a0 = _mm_add_ps(a0, _mm_mul_ps(_mm_loadu_ps(w + 4 * k), _mm_loadu_ps(p + 4 * k)));
            a1 = _mm_add_ps(a1, _mm_mul_ps(_mm_loadu_ps(w + 4 * k + 4), _mm_loadu_ps(p + 4 * k + 4)));
            a2 = _mm_add_ps(a2, _mm_mul_ps(_mm_loadu_ps(w + 4 * k + 8), _mm_loadu_ps(p + 4 * k + 8)));
            a3 = _mm_add_ps(a3, _mm_mul_ps(_mm_loadu_ps(w + 4 * k + 12), _mm_loadu_ps(p + 4 * k + 12)));
        }
        for (; k < n; k++) a0 = _mm_add_ps(a0, _mm_mul_ps(_mm_loadu_ps(w + 4 * k), _mm_loadu_ps(p + 4 * k)));
        _mm_storeu_ps(out + 4 * x, _mm_add_ps(_mm_add_ps(a0, a1), _mm_add_ps(a2, a3)));
    }
#else
    for (int x = 0; x < count; x++) {
        const float *p = in + 4 * starts[x];
        const float *w = expanded + (size_t)x * max_taps * 4;
        float a[4] = {0, 0, 0, 0};
        for (int k = 0; k < lengths[x]; k++)
            for (int c = 0; c < 4; c++) a[c] += w[4 * k] * p[4 * k + c];
        memcpy(out + 4 * x, a, sizeof a);
    }
#endif
}

#ifdef TS_X86
__attribute__((target("avx2,fma")))
static void filter_h_avx2(const float *in, float *out, int count, int max_taps, const int32_t *starts,
                          const int32_t *lengths, const float *expanded) {
    for (int x = 0; x < count; x++) {
        const float *p = in + 4 * starts[x];
        const float *w = expanded + (size_t)x * max_taps * 4;
        int n = lengths[x], k = 0;
        // Two taps per 256-bit register, two registers in flight.
        __m256 a0 = _mm256_setzero_ps(), a1 = a0;
        for (; k + 4 <= n; k += 4) {
            a0 = _mm256_fmadd_ps(_mm256_loadu_ps(w + 4 * k), _mm256_loadu_ps(p + 4 * k), a0);
            a1 = _mm256_fmadd_ps(_mm256_loadu_ps(w + 4 * k + 8), _mm256_loadu_ps(p + 4 * k + 8), a1);
        }
        if (k + 2 <= n) {
            a0 = _mm256_fmadd_ps(_mm256_loadu_ps(w + 4 * k), _mm256_loadu_ps(p + 4 * k), a0);
            k += 2;
        }
        __m256 s = _mm256_add_ps(a0, a1);
        __m128 r = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
        if (k < n) r = _mm_fmadd_ps(_mm_loadu_ps(w + 4 * k), _mm_loadu_ps(p + 4 * k), r);
        _mm_storeu_ps(out + 4 * x, r);
    }
}
#endif

#ifdef TS_X86
/// Two rows at once: each weight load serves both.
__attribute__((target("avx2,fma")))
static void filter_h2_avx2(const float *in0, const float *in1, float *out0, float *out1, int count, int max_taps,
                           const int32_t *starts, const int32_t *lengths, const float *expanded) {
    for (int x = 0; x < count; x++) {
        const float *p = in0 + 4 * starts[x], *q = in1 + 4 * starts[x];
        const float *w = expanded + (size_t)x * max_taps * 4;
        int n = lengths[x], k = 0;
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, b0 = a0, b1 = a0;
        for (; k + 4 <= n; k += 4) {
            __m256 w0 = _mm256_loadu_ps(w + 4 * k), w1 = _mm256_loadu_ps(w + 4 * k + 8);
            a0 = _mm256_fmadd_ps(w0, _mm256_loadu_ps(p + 4 * k), a0);
            a1 = _mm256_fmadd_ps(w1, _mm256_loadu_ps(p + 4 * k + 8), a1);
            b0 = _mm256_fmadd_ps(w0, _mm256_loadu_ps(q + 4 * k), b0);
            b1 = _mm256_fmadd_ps(w1, _mm256_loadu_ps(q + 4 * k + 8), b1);
        }
        if (k + 2 <= n) {
            __m256 w0 = _mm256_loadu_ps(w + 4 * k);
            a0 = _mm256_fmadd_ps(w0, _mm256_loadu_ps(p + 4 * k), a0);
            b0 = _mm256_fmadd_ps(w0, _mm256_loadu_ps(q + 4 * k), b0);
            k += 2;
        }
        __m256 sa = _mm256_add_ps(a0, a1), sb = _mm256_add_ps(b0, b1);
        __m128 ra = _mm_add_ps(_mm256_castps256_ps128(sa), _mm256_extractf128_ps(sa, 1));
        __m128 rb = _mm_add_ps(_mm256_castps256_ps128(sb), _mm256_extractf128_ps(sb, 1));
        if (k < n) {
            __m128 wk = _mm_loadu_ps(w + 4 * k);
            ra = _mm_fmadd_ps(wk, _mm_loadu_ps(p + 4 * k), ra);
            rb = _mm_fmadd_ps(wk, _mm_loadu_ps(q + 4 * k), rb);
        }
        _mm_storeu_ps(out0 + 4 * x, ra);
        _mm_storeu_ps(out1 + 4 * x, rb);
    }
}
#endif

void ts_filter_h2(const float *in0, const float *in1, float *out0, float *out1, int count, int max_taps,
                  const int32_t *starts, const int32_t *lengths, const float *expanded) {
#ifdef TS_X86
    if (ts_kernels_avx2()) {
        filter_h2_avx2(in0, in1, out0, out1, count, max_taps, starts, lengths, expanded);
        return;
    }
#endif
    filter_h_generic(in0, out0, count, max_taps, starts, lengths, expanded);
    filter_h_generic(in1, out1, count, max_taps, starts, lengths, expanded);
}

void ts_filter_h(const float *in, float *out, int count, int max_taps, const int32_t *starts,
                 const int32_t *lengths, const float *expanded) {
#ifdef TS_X86
    if (ts_kernels_avx2()) {
        filter_h_avx2(in, out, count, max_taps, starts, lengths, expanded);
        return;
    }
#endif
    filter_h_generic(in, out, count, max_taps, starts, lengths, expanded);
}

// MARK: - Vertical and output

static inline int ts_lut_index(float v) {
    // Clamp to 0...1 (NaN -> 0), then round to 16 bits.
    if (!(v > 0)) return 0;
    if (v >= 1) return 65535;
    return (int)(v * 65535.0f + 0.5f);
}

static void convert_out(const float *acc, int width, int channels, const uint8_t *lut, uint8_t *out) {
    switch (channels) {
    case 1:
        for (int x = 0; x < width; x++) out[x] = lut[ts_lut_index(acc[4 * x])];
        break;
    case 3:
        for (int x = 0; x < width; x++, out += 3) {
            out[0] = lut[ts_lut_index(acc[4 * x])];
            out[1] = lut[ts_lut_index(acc[4 * x + 1])];
            out[2] = lut[ts_lut_index(acc[4 * x + 2])];
        }
        break;
    default:
        for (int x = 0; x < width; x++, out += 4) {
            float a = acc[4 * x + 3];
            a = a > 0 ? (a < 1 ? a : 1) : 0;
            if (a < 1.0f / 512) {
                out[0] = out[1] = out[2] = out[3] = 0;
                continue;
            }
            float inv = 1 / a;
            out[0] = lut[ts_lut_index(acc[4 * x] * inv)];
            out[1] = lut[ts_lut_index(acc[4 * x + 1] * inv)];
            out[2] = lut[ts_lut_index(acc[4 * x + 2] * inv)];
            out[3] = (uint8_t)(a * 255 + 0.5f);
        }
    }
}

#ifdef TS_X86
/// convert_out for RGB and gray with AVX2: the LUT indexes of eight samples at once — the same
/// clamp (NaN to 0: maxps returns its second operand for a NaN), the same multiply and add
/// (not fused) and the same truncation as ts_lut_index — then the table read per sample.
__attribute__((target("avx2")))
static void convert_out_avx2(const float *acc, int width, int channels, const uint8_t *lut, uint8_t *out) {
    const __m256 zero = _mm256_setzero_ps(), one = _mm256_set1_ps(1.0f), scale = _mm256_set1_ps(65535.0f),
                 half = _mm256_set1_ps(0.5f);
    int32_t idx[8];
    int x = 0;
    for (; x + 2 <= width; x += 2) {
        __m256 v = _mm256_min_ps(_mm256_max_ps(_mm256_loadu_ps(acc + 4 * x), zero), one);
        _mm256_storeu_si256((__m256i *)idx, _mm256_cvttps_epi32(_mm256_add_ps(_mm256_mul_ps(v, scale), half)));
        if (channels == 3) {
            out[3 * x] = lut[idx[0]];
            out[3 * x + 1] = lut[idx[1]];
            out[3 * x + 2] = lut[idx[2]];
            out[3 * x + 3] = lut[idx[4]];
            out[3 * x + 4] = lut[idx[5]];
            out[3 * x + 5] = lut[idx[6]];
        } else {
            out[x] = lut[idx[0]];
            out[x + 1] = lut[idx[4]];
        }
    }
    convert_out(acc + 4 * x, width - x, channels, lut, out + (size_t)channels * x);  // an odd last pixel
}
#endif

#define TS_CHUNK 256  // floats per pass: the partial sums stay in L1

/// acc = (accumulate ? acc : 0) + sum of w[k] * rows[k].
static void filter_v_generic(const float *const *rows, const float *w, int taps, int n, float *acc, int accumulate) {
    for (int i0 = 0; i0 < n; i0 += TS_CHUNK) {
        int end = i0 + TS_CHUNK < n ? i0 + TS_CHUNK : n;
        for (int i = i0; i < end; i++) acc[i] = (accumulate ? acc[i] : 0) + w[0] * rows[0][i];
        for (int k = 1; k < taps; k++) {
            const float *r = rows[k];
            float wk = w[k];
            for (int i = i0; i < end; i++) acc[i] += wk * r[i];
        }
    }
}

#ifdef TS_X86
__attribute__((target("avx2,fma")))
static void filter_v_avx2(const float *const *rows, const float *w, int taps, int n, float *acc, int accumulate) {
    int i = 0;
    // Each 8-float column runs through every tap in a register.
    for (; i + 16 <= n; i += 16) {
        __m256 a0 = accumulate ? _mm256_loadu_ps(acc + i) : _mm256_setzero_ps();
        __m256 a1 = accumulate ? _mm256_loadu_ps(acc + i + 8) : _mm256_setzero_ps();
        for (int k = 0; k < taps; k++) {
            __m256 wk = _mm256_set1_ps(w[k]);
            a0 = _mm256_fmadd_ps(wk, _mm256_loadu_ps(rows[k] + i), a0);
            a1 = _mm256_fmadd_ps(wk, _mm256_loadu_ps(rows[k] + i + 8), a1);
        }
        _mm256_storeu_ps(acc + i, a0);
        _mm256_storeu_ps(acc + i + 8, a1);
    }
    for (; i < n; i++) {
        float a = accumulate ? acc[i] : 0;
        for (int k = 0; k < taps; k++) a += w[k] * rows[k][i];
        acc[i] = a;
    }
}
#endif

void ts_filter_v_out(const float *const *rows, const float *w, int taps, int width, int channels,
                     const uint8_t *lut, uint8_t *out) {
    float acc[4 * 1024];
    // Slices of 1024 pixels keep the accumulator on the stack; taps in groups of 64.
    for (int x0 = 0; x0 < width; x0 += 1024) {
        int n = (width - x0 < 1024 ? width - x0 : 1024);
        const float *slice[64];
        for (int k0 = 0; k0 < taps; k0 += 64) {
            int t = taps - k0 < 64 ? taps - k0 : 64;
            for (int k = 0; k < t; k++) slice[k] = rows[k0 + k] + 4 * x0;
#ifdef TS_X86
            if (ts_kernels_avx2())
                filter_v_avx2(slice, w + k0, t, 4 * n, acc, k0 > 0);
            else
#endif
                filter_v_generic(slice, w + k0, t, 4 * n, acc, k0 > 0);
        }
#ifdef TS_X86
        if ((channels == 1 || channels == 3) && ts_kernels_avx2())
            convert_out_avx2(acc, n, channels, lut, out + (size_t)x0 * channels);
        else
#endif
            convert_out(acc, n, channels, lut, out + (size_t)x0 * channels);
    }
}

static inline uint8_t ts_clamp_fixed(int32_t v) {
    v = (v + 32768) >> 16;
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

void ts_ycbcr_row_to_rgb(const uint8_t *y, const uint8_t *cb, const uint8_t *cr, int chroma_shift_x,
                         uint8_t *dst, int width, const int32_t coefficients[4]) {
    const int32_t cr_r = coefficients[0], cb_g = coefficients[1], cr_g = coefficients[2], cb_b = coefficients[3];
    if (chroma_shift_x == 0) {
        for (int x = 0; x < width; x++, dst += 3) {
            int32_t l = (int32_t)y[x] << 16, u = (int32_t)cb[x] - 128, v = (int32_t)cr[x] - 128;
            dst[0] = ts_clamp_fixed(l + cr_r * v);
            dst[1] = ts_clamp_fixed(l - cb_g * u - cr_g * v);
            dst[2] = ts_clamp_fixed(l + cb_b * u);
        }
        return;
    }
    /* Two luma samples per chroma sample: the chroma terms once per pair. */
    int x = 0;
    for (int c = 0; x + 1 < width; c++, x += 2, dst += 6) {
        int32_t u = (int32_t)cb[c] - 128, v = (int32_t)cr[c] - 128;
        int32_t r = cr_r * v, g = -cb_g * u - cr_g * v, b = cb_b * u;
        int32_t l0 = (int32_t)y[x] << 16, l1 = (int32_t)y[x + 1] << 16;
        dst[0] = ts_clamp_fixed(l0 + r);
        dst[1] = ts_clamp_fixed(l0 + g);
        dst[2] = ts_clamp_fixed(l0 + b);
        dst[3] = ts_clamp_fixed(l1 + r);
        dst[4] = ts_clamp_fixed(l1 + g);
        dst[5] = ts_clamp_fixed(l1 + b);
    }
    if (x < width) {
        int32_t u = (int32_t)cb[x >> 1] - 128, v = (int32_t)cr[x >> 1] - 128, l = (int32_t)y[x] << 16;
        dst[0] = ts_clamp_fixed(l + cr_r * v);
        dst[1] = ts_clamp_fixed(l - cb_g * u - cr_g * v);
        dst[2] = ts_clamp_fixed(l + cb_b * u);
    }
}

// 2×2 box halving (pyramid levels): integer means, rounded half up, as the tile renderer's
// `halve` defines them. Written per channel count so the compiler vectorises each loop.
#define TS_HALVE(CH)                                                                          \
    for (int x = 0; x < half; x++) {                                                          \
        const uint8_t *a = r0 + 2 * x * (CH), *b = r1 + 2 * x * (CH);                         \
        for (int c = 0; c < (CH); c++)                                                        \
            out[x * (CH) + c] = (uint8_t)((a[c] + a[c + (CH)] + b[c] + b[c + (CH)] + 2) >> 2); \
    }
void ts_halve_rows(const uint8_t *r0, const uint8_t *r1, int width, int channels, int keep_odd, uint8_t *out) {
    int half = width / 2;
    switch (channels) {
    case 1: TS_HALVE(1) break;
    case 3: TS_HALVE(3) break;
    case 4: TS_HALVE(4) break;
    default: TS_HALVE(channels) break;
    }
    if ((width & 1) && keep_odd) {
        const uint8_t *a = r0 + (width - 1) * channels, *b = r1 + (width - 1) * channels;
        for (int c = 0; c < channels; c++) out[half * channels + c] = (uint8_t)((a[c] + b[c] + 1) >> 1);
    }
}
