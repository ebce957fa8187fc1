// Tessera's JPEG encoder front end: colour conversion, chroma downsampling, the forward DCT,
// quantisation and (for sequential JPEGs) the Huffman statistics and tables are done here, and
// libjpeg-turbo only writes the coefficients (jpeg_write_coefficients; progressive scans, when
// asked, with its own optimised tables). Over libjpeg-turbo's own pipeline this adds its own
// quantisation tables (ts_jpeg_tessera_tables, used alone at effort 1), a dead-zone quantiser
// that drops the trailing ±1s whose code costs more than their error (effort 2, the default),
// and a rate-distortion optimal quantiser (effort 3: a trellis over the run-length code, after
// Ramchandran and Vetterli, "Rate-distortion optimal fast thresholding with complete
// JPEG/MPEG decoder compatibility", IEEE TIP 1994). The output is an ordinary baseline (or
// progressive) JPEG. docs/decisions/024-jpeg-front-end.md.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tessera_shim.h"
#include "jpeg_internal.h"

#include <jpeglib.h>

/// Eight floats as one value: on x86-64 two SSE registers, one AVX register.
typedef float ts_v8 __attribute__((vector_size(32)));

/// One 8-point DCT-II over eight columns at once (each ts_v8 is a row), by the factorisation
/// of Arai, Agui and Nakajima (1988; Pennebaker & Mitchell, "JPEG", §4.3.5): 5 multiplies,
/// 29 adds. Output k is the DCT coefficient times 2·sqrt(2)·s(k), s(0) = 1/sqrt(2),
/// s(k) = cos(k·pi/16); see ts_fdct for the 2-D scale.
static inline __attribute__((always_inline)) void ts_aan(ts_v8 d[8]) {
    ts_v8 t0 = d[0] + d[7], t7 = d[0] - d[7], t1 = d[1] + d[6], t6 = d[1] - d[6];
    ts_v8 t2 = d[2] + d[5], t5 = d[2] - d[5], t3 = d[3] + d[4], t4 = d[3] - d[4];
    ts_v8 e0 = t0 + t3, e3 = t0 - t3, e1 = t1 + t2, e2 = t1 - t2;
    d[0] = e0 + e1;
    d[4] = e0 - e1;
    ts_v8 z1 = (e2 + e3) * 0.707106781f;
    d[2] = e3 + z1;
    d[6] = e3 - z1;
    ts_v8 o0 = t4 + t5, o1 = t5 + t6, o2 = t6 + t7;
    ts_v8 z5 = (o0 - o2) * 0.382683433f;
    ts_v8 z2 = o0 * 0.541196100f + z5, z4 = o2 * 1.306562965f + z5, z3 = o1 * 0.707106781f;
    ts_v8 z11 = t7 + z3, z13 = t7 - z3;
    d[5] = z13 + z2;
    d[3] = z13 - z2;
    d[1] = z11 + z4;
    d[7] = z11 - z4;
}

static inline __attribute__((always_inline)) void ts_transpose(ts_v8 m[8]) {
    float t[64];
    memcpy(t, m, sizeof t);
    float *o = (float *)m;
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < 8; j++) o[i * 8 + j] = t[j * 8 + i];
}

/// The forward DCT of one 8×8 block (rows `stride` floats apart) into `out`, natural order,
/// in the AAN scale: coefficient (u,v) times 8·a(u)·a(v), a(0) = 1, a(k) = sqrt(2)·cos(k·pi/16).
/// The quantiser's reciprocal table takes that scale out (ts_jpeg_frontend_write).
static inline __attribute__((always_inline)) void ts_fdct(const float *block, size_t stride, float out[64]) {
    ts_v8 m[8];
    for (int y = 0; y < 8; y++) memcpy(&m[y], block + (size_t)y * stride, sizeof m[y]);
    ts_aan(m);       // down the columns: m[v] holds frequency v of every column
    ts_transpose(m);
    ts_aan(m);       // along the rows: m[u] holds (u, v) for every v
    ts_transpose(m);
    memcpy(out, m, sizeof m);
}

/// Bits of a magnitude category (the JPEG "size" of a coefficient value).
static inline int ts_nbits(int a) { return a ? 32 - __builtin_clz((unsigned)a) : 0; }

/// lambda × code length (bits) of every AC symbol (run << 4 | size) of one table class,
/// read from a Huffman table (symbols it lacks: 16 bits).
typedef struct {
    float bits[256];
    float least[16];  ///< the cheapest symbol of each size, over every run
} ts_rate;

static void ts_rate_from_table(ts_rate *r, const JHUFF_TBL *t, float lambda) {
    for (int s = 0; s < 256; s++) r->bits[s] = 16 * lambda;
    int k = 0;
    for (int len = 1; len <= 16; len++)
        for (int i = 0; i < t->bits[len]; i++, k++) r->bits[t->huffval[k]] = (float)len * lambda;
    for (int size = 0; size < 16; size++) {
        r->least[size] = INFINITY;
        for (int run = 0; run < 16; run++) r->least[size] = fminf(r->least[size], r->bits[(run << 4) | size]);
    }
}

/// The rate weight: quantiser steps² of error one bit is worth (of 0.03, 0.05, 0.07, 0.1 and
/// 0.18, 0.05 gave the fewest bytes at equal SSIMULACRA2 70 and 80: decision 024).
#define TS_LAMBDA 0.05f

/// Eight ints and eight shorts as one value, for the fast quantiser.
typedef int32_t ts_i8 __attribute__((vector_size(32)));
typedef int16_t ts_s8 __attribute__((vector_size(16)));

/// The fast quantiser's rounding offsets: |coefficient| / step + offset, truncated. 0.5 would
/// round to nearest; less biases towards zero (a dead zone), more so at high frequencies:
/// linear in zig-zag position from TS_ROUND_LOW to TS_ROUND_HIGH. Chosen with the trimming
/// below on Benchmarks/pareto.py's photos (decision 024): with it, the bytes of the trellis.
#define TS_ROUND_LOW 0.45f
#define TS_ROUND_HIGH 0.35f

/// Quantises one block (effort 2): every coefficient with the dead-zone rounding of `offset`
/// (natural order), eight at a time; then, from the end of the block in zig-zag order, each
/// trailing ±1 is dropped while its code (run/size symbol, its magnitude bit, any ZRLs) costs
/// more, at the trellis's lambda, than the error its dropping adds (a² against (a − 1)²).
/// Returns the block's AC nonzero mask in zig-zag order (for ts_count_ac).
static inline __attribute__((always_inline)) uint64_t ts_quantize_fast(const float f[64], const float rq[64], const float offset[64], const ts_rate *rate,
                             JCOEF out[64]) {
    for (int i = 0; i < 64; i += 8) {
        ts_v8 x, r, o;
        memcpy(&x, f + i, sizeof x);
        memcpy(&r, rq + i, sizeof r);
        memcpy(&o, offset + i, sizeof o);
        x *= r;
        ts_i8 bits = (ts_i8)x;
        ts_i8 negative = bits >> 31;                      // −1 where x < 0
        ts_v8 a = (ts_v8)(bits & 0x7fffffff);             // |x|
        ts_i8 q = __builtin_convertvector(a + o, ts_i8);  // truncates: a + offset ≥ 0
        ts_i8 over = q > 1023;
        q = (q & ~over) | (over & 1023);
        ts_s8 v = __builtin_convertvector((q ^ negative) - negative, ts_s8);
        memcpy(out + i, &v, sizeof v);
    }
    out[0] = (JCOEF)lrintf(f[0] * rq[0]);
    // Bit k: zig-zag position k (AC only) is nonzero; the last one and the one before it
    // come from the mask, not from a scan over the zeros.
    uint64_t nonzero = ts_nonzero_zigzag(out) & ~1ull;
    while (nonzero) {
        int k = 63 - __builtin_clzll(nonzero);
        int n = ts_natural[k];
        if (out[n] != 1 && out[n] != -1) break;
        uint64_t before = nonzero & ~(1ull << k);
        int p = before ? 63 - __builtin_clzll(before) : 0;
        int run = k - p - 1;
        float a = fabsf(f[n] * rq[n]);
        float code = (float)(run >> 4) * rate->bits[0xF0] + rate->bits[((run & 15) << 4) | 1] + TS_LAMBDA;
        if (2 * a - 1 >= code) break;
        out[n] = 0;
        nonzero = before;
    }
    return nonzero;
}

/// Quantises one block's coefficients `f` (natural order; `rq`: 1 / (step × the DCT's scale)) into `out`: the DC
/// and, when `rate` is NULL, every coefficient to the nearest step; otherwise the AC
/// coefficients minimise distortion (in quantiser steps²) + lambda × bits, over every
/// choice of which coefficients stay non-zero and whether each rounds down a step.
static void ts_quantize_block(const float f[64], const float rq[64], const ts_rate *rate, JCOEF out[64]) {
    out[0] = (JCOEF)lrintf(f[0] * rq[0]);
    memset(out + 1, 0, 63 * sizeof(JCOEF));
    float qa[64], a[64];  // |coefficient| in quantiser steps: natural, then zig-zag order
    for (int n = 0; n < 64; n++) qa[n] = fabsf(f[n] * rq[n]);
    int near[64];
    int last = 0;
    for (int k = 1; k < 64; k++) {
        a[k] = qa[ts_natural[k]];
        int n = (int)(a[k] + 0.5f);
        near[k] = n > 1023 ? 1023 : n;
        last = n ? k : last;
    }
    if (!rate || last == 0) {
        for (int k = 1; k <= last; k++)
            if (near[k]) out[ts_natural[k]] = (JCOEF)(f[ts_natural[k]] < 0 ? -near[k] : near[k]);
        return;
    }
    // zero[k]: the error of setting positions 1..k to zero. The path so far, by non-zero
    // position: pos[s], and adj[s], the cost of the best coding of 1..pos[s] that ends
    // with a non-zero there, minus zero[pos[s]] (s = 0: position 0, nothing coded).
    float zero[64];
    zero[0] = 0;
    for (int k = 1; k < 64; k++) zero[k] = zero[k - 1] + a[k] * a[k];
    float adj[64], low[64];  // low[s]: the least adj[0...s], to stop a search early
    int pos[64], from[64], value[64], nsig = 0;
    adj[0] = low[0] = 0;
    pos[nsig++] = 0;
    const float zrl = rate->bits[0xF0];
    for (int k = 1; k <= last; k++) {
        if (!near[k]) continue;
        int v1 = near[k], v2 = v1 - 1;  // v2 = 0: only v1 (zero is "not in the path")
        int s1 = ts_nbits(v1), s2 = ts_nbits(v2);
        float best1 = INFINITY, best2 = INFINITY;
        int from1 = 0, from2 = 0;
        // Newest first: no earlier position can beat the best once the least cost before it
        // plus the cheapest code of this size (rate->least) cannot.
        if (v2 == 0) {
            for (int s = nsig - 1; s >= 0 && low[s] + rate->least[s1] < best1; s--) {
                int run = k - pos[s] - 1;
                float c1 = adj[s] + (float)(run >> 4) * zrl + rate->bits[((run & 15) << 4) | s1];
                from1 = c1 < best1 ? s : from1;
                best1 = c1 < best1 ? c1 : best1;
            }
        } else {
            float least = fminf(rate->least[s1], rate->least[s2]);
            for (int s = nsig - 1; s >= 0 && low[s] + least < fmaxf(best1, best2); s--) {
                int run = k - pos[s] - 1;
                float base = adj[s] + (float)(run >> 4) * zrl;
                const float *rb = rate->bits + ((run & 15) << 4);
                float c1 = base + rb[s1], c2 = base + rb[s2];
                from1 = c1 < best1 ? s : from1;
                best1 = c1 < best1 ? c1 : best1;
                from2 = c2 < best2 ? s : from2;
                best2 = c2 < best2 ? c2 : best2;
            }
        }
        // Magnitude bits cost lambda each: the size symbol's extra bits.
        best1 += (a[k] - v1) * (a[k] - v1) + (float)s1 * TS_LAMBDA;
        best2 = v2 ? best2 + (a[k] - v2) * (a[k] - v2) + (float)s2 * TS_LAMBDA : INFINITY;
        int second = best2 < best1;
        adj[nsig] = (second ? best2 : best1) + zero[k - 1] - zero[k];
        low[nsig] = fminf(low[nsig - 1], adj[nsig]);
        from[nsig] = second ? from2 : from1;
        value[nsig] = second ? v2 : v1;
        pos[nsig++] = k;
    }
    float endCost = INFINITY;
    int end = 0;
    for (int s = 0; s < nsig; s++) {
        float cost = adj[s] + (pos[s] < 63 ? rate->bits[0x00] : 0);
        end = cost < endCost ? s : end;
        endCost = cost < endCost ? cost : endCost;
    }
    for (int s = end; s > 0; s = from[s]) {
        int n = ts_natural[pos[s]];
        out[n] = (JCOEF)(f[n] < 0 ? -value[s] : value[s]);
    }
}

/// Counts the AC symbols of one quantised block (natural order) as the sequential Huffman
/// coder will code them (JPEG F.1.2.2): a run/size symbol per non-zero coefficient, a ZRL
/// (0xF0) per 16 zeros before it beyond 15, and an EOB (0x00) unless position 63 is non-zero.
/// `nonzero`: bit k set when zig-zag position k (AC only) is nonzero.
static inline __attribute__((always_inline)) void ts_count_ac(const JCOEF b[64], uint64_t nonzero, uint32_t ac[256]) {
    int prev = 0;
    while (nonzero) {
        int k = __builtin_ctzll(nonzero);
        nonzero &= nonzero - 1;
        int run = k - prev - 1, v = b[ts_natural[k]];
        ac[0xF0] += (uint32_t)(run >> 4);
        ac[((run & 15) << 4) | ts_nbits(v < 0 ? -v : v)]++;
        prev = k;
    }
    if (prev < 63) ac[0x00]++;
}

/// Fills `t` with an optimal length-limited Huffman code for the symbols 0..n-1 with
/// `count[s]` occurrences (those with none get no code). Code lengths by Huffman's
/// construction over two queues (leaves in ascending count, then merged nodes, which are made
/// in ascending weight); a reserved extra symbol of count 1 is coded too and then dropped, so
/// that no code is all ones (JPEG K.2), and lengths over 16 bits are shortened by the
/// standard's procedure (JPEG Figure K.3). Symbols are listed most frequent first.
static void ts_huffman_table(const uint32_t *count, int n, JHUFF_TBL *t) {
    int sym[257], m = 0;
    for (int s = 0; s < n; s++) {
        if (!count[s]) continue;
        // Insertion by count, descending; equal counts keep symbol order.
        int i = m++;
        while (i > 0 && count[sym[i - 1]] < count[s]) {
            sym[i] = sym[i - 1];
            i--;
        }
        sym[i] = s;
    }
    // Leaves in ascending weight: the reserved symbol (weight 1, listed last) first.
    int leaves = m + 1;
    uint64_t weight[2 * 257];
    int parent[2 * 257];
    weight[0] = 1;
    for (int i = 1; i < leaves; i++) weight[i] = count[sym[m - i]];
    int nextLeaf = 0, nextNode = leaves, made = leaves;
    while (made < 2 * leaves - 1) {
        int pick[2];
        for (int j = 0; j < 2; j++) {
            if (nextLeaf < leaves && (nextNode == made || weight[nextLeaf] <= weight[nextNode]))
                pick[j] = nextLeaf++;
            else
                pick[j] = nextNode++;
        }
        weight[made] = weight[pick[0]] + weight[pick[1]];
        parent[pick[0]] = parent[pick[1]] = made;
        made++;
    }
    int depth[2 * 257], lengths[2 * 257 + 1] = {0}, longest = 0;
    depth[made - 1] = 0;
    for (int i = made - 2; i >= 0; i--) depth[i] = depth[parent[i]] + 1;
    for (int i = 0; i < leaves; i++) {
        lengths[depth[i]]++;
        longest = depth[i] > longest ? depth[i] : longest;
    }
    for (int i = longest; i > 16; i--)
        while (lengths[i] > 0) {
            int j = i - 2;
            while (lengths[j] == 0) j--;
            lengths[i] -= 2;
            lengths[i - 1]++;
            lengths[j + 1] += 2;
            lengths[j]--;
        }
    int i = 16;
    while (lengths[i] == 0) i--;
    lengths[i]--;  // the reserved symbol's code: one of the longest
    memset(t->bits, 0, sizeof t->bits);
    for (int len = 1; len <= 16; len++) t->bits[len] = (UINT8)lengths[len];
    for (int k = 0; k < m; k++) t->huffval[k] = (UINT8)sym[k];
    t->sent_table = FALSE;
}

/// Counts the DC symbols (the size of each difference from the previous block's DC, JPEG
/// F.1.2.1) in the order jpeg_write_coefficients codes the blocks: MCU by MCU, each
/// component's blocks in the MCU row by row, the prediction restarting at each restart
/// interval; the dummy blocks at the right and bottom edges of an MCU repeat the previous
/// block's DC and code an EOB, so each adds a size-0 DC symbol and an EOB. One MCU row at a
/// time, right after its band is quantised (its blocks are still in the cache).
typedef struct {
    int last[3];
    unsigned int toGo;
} ts_dc_state;

static void ts_count_dc_row(j_compress_ptr c, jvirt_barray_ptr *arrays, const int *wBlocks, const int *hBlocks,
                            int maxH, int my, ts_dc_state *st, uint32_t dc[2][17], uint32_t ac[2][256]) {
    int n = c->num_components, interleaved = n > 1;
    int mcuCols = interleaved ? ((int)c->image_width + 8 * maxH - 1) / (8 * maxH) : wBlocks[0];
    int *last = st->last;
    JBLOCKARRAY rows[3];
    for (int ci = 0; ci < n; ci++) {
        int v = interleaved ? c->comp_info[ci].v_samp_factor : 1;
        rows[ci] = (*c->mem->access_virt_barray)((j_common_ptr)c, arrays[ci], (JDIMENSION)(my * v), (JDIMENSION)v, FALSE);
    }
    for (int mx = 0; mx < mcuCols; mx++) {
        if (c->restart_interval) {
            if (st->toGo == 0) {
                last[0] = last[1] = last[2] = 0;
                st->toGo = c->restart_interval;
            }
            st->toGo--;
        }
        for (int ci = 0; ci < n; ci++) {
            jpeg_component_info *comp = &c->comp_info[ci];
            int h = interleaved ? comp->h_samp_factor : 1, v = interleaved ? comp->v_samp_factor : 1;
            for (int yi = 0; yi < v; yi++)
                for (int xi = 0; xi < h; xi++) {
                    int by = my * v + yi, bx = mx * h + xi, diff = 0;
                    if (by < hBlocks[ci] && bx < wBlocks[ci]) {
                        int value = rows[ci][yi][bx][0];
                        diff = value - last[ci];
                        last[ci] = value;
                    } else {
                        ac[comp->ac_tbl_no][0x00]++;
                    }
                    dc[comp->dc_tbl_no][ts_nbits(diff < 0 ? -diff : diff)]++;
                }
        }
    }
}

typedef uint8_t ts_b32 __attribute__((vector_size(32)));

/// Eight RGB pixels to JFIF YCbCr (full range; Y level-shifted), eight at a time: the same
/// arithmetic, in the same order, as the scalar loop for the last pixels of a row.
static inline void ts_ycc8(const uint8_t *rgb, float *Y, float *Cb, float *Cr) {
    ts_b32 v = {0};
    memcpy(&v, rgb, 24);
    ts_v8 R = __builtin_convertvector(__builtin_shufflevector(v, v, 0, 3, 6, 9, 12, 15, 18, 21), ts_v8);
    ts_v8 G = __builtin_convertvector(__builtin_shufflevector(v, v, 1, 4, 7, 10, 13, 16, 19, 22), ts_v8);
    ts_v8 B = __builtin_convertvector(__builtin_shufflevector(v, v, 2, 5, 8, 11, 14, 17, 20, 23), ts_v8);
    ts_v8 y = 0.299f * R + 0.587f * G + 0.114f * B - 128.0f;
    ts_v8 cb = -0.168735892f * R - 0.331264108f * G + 0.5f * B;
    ts_v8 cr = 0.5f * R - 0.418687589f * G - 0.081312411f * B;
    memcpy(Y, &y, sizeof y);
    memcpy(Cb, &cb, sizeof cb);
    memcpy(Cr, &cr, sizeof cr);
}

/// One component's samples for the current band of block rows: level-shifted floats,
/// `rows` × `cols` with the edges replicated out to whole blocks.
typedef struct {
    float *plane;
    int cols, rows;
} ts_band;

/// Tessera's quantisation tables at `quality` (libjpeg's scaling of a base table: 50 is the
/// base, 100 all ones). The base tables rise smoothly with radial frequency
/// d = sqrt(u² + v²) / sqrt(98): luma 12 + 68·d^1.5, chroma 10 + 40·d. Flatter than the
/// JPEG standard's Annex K examples (luma 16…121, chroma 17…99): finer DC and high
/// frequencies, coarser low-mid luma; fewer bytes at equal SSIMULACRA2 and at equal SSIM
/// (the shape and constants chosen by Benchmarks/pareto.py: docs/decisions/024-jpeg-front-end.md).
void ts_jpeg_tessera_tables(j_compress_ptr c, int quality) {
    unsigned int luma[64], chroma[64];
    for (int v = 0; v < 8; v++)
        for (int u = 0; u < 8; u++) {
            float d = sqrtf((float)(u * u + v * v) / 98.0f);
            luma[v * 8 + u] = (unsigned)lrintf(12.0f + 68.0f * powf(d, 1.5f));
            chroma[v * 8 + u] = (unsigned)lrintf(10.0f + 40.0f * d);
        }
    int scale = jpeg_quality_scaling(quality);
    jpeg_add_quant_table(c, 0, luma, scale, TRUE);
    jpeg_add_quant_table(c, 1, chroma, scale, TRUE);
}

/// Quantises `pixels` here (dead-zone quantisation of every block, or with `trellis` the
/// trellis) and hands the coefficients to jpeg_write_coefficients; with `own_tables` (a
/// sequential JPEG) it also counts the symbols and builds optimal Huffman tables, so that
/// libjpeg-turbo codes in one pass instead of gathering statistics in a second. `c` is set up
/// (size, components, sampling factors, tables, Huffman optimisation) and still at
/// CSTATE_START; libjpeg errors longjmp to the caller's handler, and every buffer here comes
/// from the image pool, which jpeg_destroy frees.
#if defined(__x86_64__) && defined(__clang__)
// Eight-float vectors are one register with AVX (two with SSE2, and byte shuffles without
// pshufb): the same IEEE operations either way (no FMA: "avx2" alone does not contract), so
// the same bytes out.
__attribute__((target_clones("avx2", "default")))
#endif
void ts_jpeg_frontend_write(j_compress_ptr c, const uint8_t *pixels, size_t stride, int components, int trellis,
                            int own_tables) {
    uint32_t dcCount[2][17], acCount[2][256];
    memset(dcCount, 0, sizeof dcCount);
    memset(acCount, 0, sizeof acCount);
    ts_rate rate[2];
    // Code lengths of the standard Huffman tables stand in for the optimised ones, which
    // follow from the choices made here (a statistics pass first measured no fewer bytes).
    for (int t = 0; t < 2; t++) ts_rate_from_table(&rate[t], c->ac_huff_tbl_ptrs[t], TS_LAMBDA);
    int width = (int)c->image_width, height = (int)c->image_height;
    int maxH = 1, maxV = 1;
    for (int ci = 0; ci < c->num_components; ci++) {
        if (c->comp_info[ci].h_samp_factor > maxH) maxH = c->comp_info[ci].h_samp_factor;
        if (c->comp_info[ci].v_samp_factor > maxV) maxV = c->comp_info[ci].v_samp_factor;
    }
    // libjpeg keeps this pointer until jpeg_finish_compress: it lives in the image pool.
    jvirt_barray_ptr *arrays = (jvirt_barray_ptr *)(*c->mem->alloc_small)((j_common_ptr)c, JPOOL_IMAGE,
                                                                          sizeof(jvirt_barray_ptr) * 3);
    int wBlocks[3], hBlocks[3];
    for (int ci = 0; ci < c->num_components; ci++) {
        jpeg_component_info *comp = &c->comp_info[ci];
        int cw = (width * comp->h_samp_factor + maxH - 1) / maxH;
        int ch = (height * comp->v_samp_factor + maxV - 1) / maxV;
        wBlocks[ci] = (cw + 7) / 8;
        hBlocks[ci] = (ch + 7) / 8;
        int wAlloc = (wBlocks[ci] + comp->h_samp_factor - 1) / comp->h_samp_factor * comp->h_samp_factor;
        int hAlloc = (hBlocks[ci] + comp->v_samp_factor - 1) / comp->v_samp_factor * comp->v_samp_factor;
        arrays[ci] = (*c->mem->request_virt_barray)((j_common_ptr)c, JPOOL_IMAGE, TRUE, (JDIMENSION)wAlloc,
                                                    (JDIMENSION)hAlloc, (JDIMENSION)comp->v_samp_factor);
    }
    (*c->mem->realize_virt_arrays)((j_common_ptr)c);

    // Bands of one iMCU row of pixels (8 × maxV rows): converted, downsampled, transformed.
    int bandRows = 8 * maxV;
    int fullCols = (width + 8 * maxH - 1) / (8 * maxH) * 8 * maxH;
    float *full[3];
    for (int ci = 0; ci < components; ci++)
        full[ci] = (float *)(*c->mem->alloc_large)((j_common_ptr)c, JPOOL_IMAGE, sizeof(float) * (size_t)fullCols * bandRows);
    // Each component's samples for the band: the converted plane itself at full resolution,
    // else a downsampled copy.
    ts_band band[3];
    // 1 / (quantiser step × the AAN scale 8·a(u)·a(v)), a(0) = 1, a(k) = sqrt(2)·cos(k·pi/16).
    double aan[8];
    for (int k = 0; k < 8; k++) aan[k] = k == 0 ? 1.0 : M_SQRT2 * cos(k * M_PI / 16.0);
    float rq[3][64], offset[64];
    for (int k = 0; k < 64; k++)
        offset[ts_natural[k]] = TS_ROUND_LOW + (TS_ROUND_HIGH - TS_ROUND_LOW) * (float)k / 63.0f;
    for (int ci = 0; ci < c->num_components; ci++) {
        jpeg_component_info *comp = &c->comp_info[ci];
        band[ci].cols = fullCols * comp->h_samp_factor / maxH;
        band[ci].rows = bandRows * comp->v_samp_factor / maxV;
        band[ci].plane = comp->h_samp_factor == maxH && comp->v_samp_factor == maxV
            ? full[ci]
            : (float *)(*c->mem->alloc_large)((j_common_ptr)c, JPOOL_IMAGE,
                                              sizeof(float) * (size_t)band[ci].cols * band[ci].rows);
        const UINT16 *q = c->quant_tbl_ptrs[comp->quant_tbl_no]->quantval;
        for (int k = 0; k < 64; k++) rq[ci][k] = (float)(1.0 / (q[k] * 8.0 * aan[k % 8] * aan[k / 8]));
    }
    ts_zigzag_prepare();  // the quantiser's and the symbol count's nonzero masks
    ts_dc_state dcState = {{0, 0, 0}, c->restart_interval};
    for (int y0 = 0; y0 < height; y0 += bandRows) {
        // Colour conversion (JFIF YCbCr, full range, level-shifted), edges replicated.
        for (int r = 0; r < bandRows; r++) {
            int y = y0 + r < height ? y0 + r : height - 1;
            const uint8_t *row = pixels + (size_t)y * stride;
            float *Y = full[0] + (size_t)r * fullCols;
            if (components == 1) {
                for (int x = 0; x < width; x++) Y[x] = (float)row[x] - 128.0f;
            } else {
                float *Cb = full[1] + (size_t)r * fullCols, *Cr = full[2] + (size_t)r * fullCols;
                int x = 0;
                for (; x + 8 <= width; x += 8) ts_ycc8(row + 3 * x, Y + x, Cb + x, Cr + x);
                for (; x < width; x++) {
                    float R = row[3 * x], G = row[3 * x + 1], B = row[3 * x + 2];
                    Y[x] = 0.299f * R + 0.587f * G + 0.114f * B - 128.0f;
                    Cb[x] = -0.168735892f * R - 0.331264108f * G + 0.5f * B;
                    Cr[x] = 0.5f * R - 0.418687589f * G - 0.081312411f * B;
                }
                for (int x = width; x < fullCols; x++) {
                    Cb[x] = Cb[width - 1];
                    Cr[x] = Cr[width - 1];
                }
            }
            for (int x = width; x < fullCols; x++) Y[x] = Y[width - 1];
        }
        for (int ci = 0; ci < c->num_components; ci++) {
            jpeg_component_info *comp = &c->comp_info[ci];
            int fx = maxH / comp->h_samp_factor, fy = maxV / comp->v_samp_factor;
            float *dst = band[ci].plane;
            if (fx == 1 && fy == 1) {
                // dst is the converted plane
            } else if (fx == 2 && fy == 2) {
                for (int r = 0; r < band[ci].rows; r++) {
                    const float *a = full[ci] + (size_t)(2 * r) * fullCols, *b = a + fullCols;
                    float *o = dst + (size_t)r * band[ci].cols;
                    for (int x = 0; x < band[ci].cols; x++)
                        o[x] = 0.25f * (a[2 * x] + a[2 * x + 1] + b[2 * x] + b[2 * x + 1]);
                }
            } else {
                float norm = 1.0f / (float)(fx * fy);
                for (int r = 0; r < band[ci].rows; r++)
                    for (int x = 0; x < band[ci].cols; x++) {
                        float s = 0;
                        for (int dy = 0; dy < fy; dy++)
                            for (int dx = 0; dx < fx; dx++) s += full[ci][(size_t)(r * fy + dy) * fullCols + x * fx + dx];
                        dst[(size_t)r * band[ci].cols + x] = s * norm;
                    }
            }
            int blockRow0 = y0 / 8 * comp->v_samp_factor / maxV;
            JBLOCKARRAY rows = (*c->mem->access_virt_barray)((j_common_ptr)c, arrays[ci], (JDIMENSION)blockRow0,
                                                             (JDIMENSION)comp->v_samp_factor, TRUE);
            const ts_rate *r = &rate[ci == 0 ? 0 : 1];
            for (int br = 0; br < comp->v_samp_factor && blockRow0 + br < hBlocks[ci]; br++) {
                for (int bx = 0; bx < wBlocks[ci]; bx++) {
                    float f[64];
                    ts_fdct(dst + (size_t)br * 8 * band[ci].cols + bx * 8, (size_t)band[ci].cols, f);
                    uint64_t nonzero;
                    if (trellis) {
                        ts_quantize_block(f, rq[ci], r, rows[br][bx]);
                        nonzero = own_tables ? ts_nonzero_zigzag(rows[br][bx]) & ~1ull : 0;
                    } else {
                        nonzero = ts_quantize_fast(f, rq[ci], offset, r, rows[br][bx]);
                    }
                    if (own_tables) ts_count_ac(rows[br][bx], nonzero, acCount[comp->ac_tbl_no]);
                }
            }
        }
        if (own_tables) {
            // The band's MCU rows: one when interleaved; a single component's are its block rows.
            if (c->num_components > 1)
                ts_count_dc_row(c, arrays, wBlocks, hBlocks, maxH, y0 / bandRows, &dcState, dcCount, acCount);
            else
                for (int my = y0 / 8; my < (y0 + bandRows) / 8 && my < hBlocks[0]; my++)
                    ts_count_dc_row(c, arrays, wBlocks, hBlocks, maxH, my, &dcState, dcCount, acCount);
        }
    }
    if (own_tables) {
        // The statistics pass libjpeg-turbo would make over the coefficients is made here, and
        // the tables built from them: jpeg_write_coefficients then codes in one pass.
        for (int t = 0; t < 2; t++) {
            int used = 0;
            for (int ci = 0; ci < c->num_components; ci++) used |= c->comp_info[ci].dc_tbl_no == t;
            if (used) ts_huffman_table(dcCount[t], 17, c->dc_huff_tbl_ptrs[t]);
            used = 0;
            for (int ci = 0; ci < c->num_components; ci++) used |= c->comp_info[ci].ac_tbl_no == t;
            if (used) ts_huffman_table(acCount[t], 256, c->ac_huff_tbl_ptrs[t]);
        }
        c->optimize_coding = FALSE;
    }
    jpeg_write_coefficients(c, arrays);
}
