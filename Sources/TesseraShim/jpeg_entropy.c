// Tessera's own Huffman decoder for single-scan baseline JPEGs, in place of libjpeg-turbo's.
//
// Why: decoding a photo to 1280×720 spends about half its time in libjpeg-turbo 2.1's Huffman
// decoder (decode_mcu_fast: an 8-bit lookahead for the code, then a second read for the
// value's bits). This one reads both at once: for every table, a 10-bit index gives the run,
// the value (sign-extended) and the number of bits to drop, when code and value fit in ten
// bits (most of a photo's coefficients); longer codes take a second table and, past ten bits,
// the canonical search of the standard (ITU T.81 F.2.2.3). The bit buffer is 64 bits, refilled
// eight bytes at a time when none of them is 0xFF (a marker or a stuffed byte), a byte at a
// time otherwise.
//
// How it plugs in: libjpeg's decoder is made of modules reached through method tables
// (libjpeg's structure.txt, "entropy decoder"); after jpeg_start_decompress of a single-scan
// file, before any MCU is read, `ts_jpeg_entropy_install` replaces the entropy decoder's table.
// Everything around it — markers, restart resynchronisation (read_restart_marker), the data
// source, warnings and errors, the coefficient controller, IDCT, upsampling — stays
// libjpeg's. Its outputs are libjpeg's bit for bit on well-formed data: the same coefficients
// reach the same IDCT (tests compare pixels at every scale over the corpora).
//
// Damaged data behaves as libjpeg-turbo's does: a marker or the end of the data pads with zero
// bits, and the first MCU that needs bits past it warns JWRN_HIT_MARKER (an error in strict
// mode) and leaves the rest of the segment grey. A code that is in no table decodes as symbol 0
// after 17 bits, as in libjpeg-turbo, and always warns JWRN_HUFF_BAD_CODE (an error in strict
// mode): libjpeg-turbo warns only in its slow path (every MCU of a file with restart markers;
// otherwise near a marker or the end of its buffer) and passes such damage silently elsewhere.

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#define JPEG_INTERNALS
#include <jpeglib.h>
#include <jerror.h>

#include "tessera_shim.h"
#include "jpeg_internal.h"

enum { FAST_BITS = 10, FAST_SIZE = 1 << FAST_BITS };

typedef struct {
    /// What the next FAST_BITS bits hold, when they hold a whole code and its value: bits 0-7
    /// the bits to drop, 8-15 how far the zigzag index moves (AC: run + 1; 16 for ZRL; 64 for
    /// end of block), 16-31 the value (DC: the difference). 0: they do not.
    int32_t fast[FAST_SIZE];
    /// The symbol of a code of at most FAST_BITS: (length << 8) | symbol. 0: a longer code.
    uint16_t symbol[FAST_SIZE];
    int32_t maxcode[18];     ///< largest code of each length, -1 when none; [17] a sentinel
    int32_t valoffset[17];   ///< huffval index = code + valoffset[length]
    uint8_t huffval[256];
} ts_htable;

typedef struct {
    struct jpeg_entropy_decoder pub;  // first: libjpeg reads pub.insufficient_data
    uint64_t buf;   ///< bits, most significant first; what follows `bits` is zero or the stream's next bits
    int bits;       ///< valid bits in buf (negative once zero padding was consumed past a marker)
    unsigned restarts_to_go;
    unsigned eobrun;  ///< progressive AC scans: blocks left in the current end-of-band run
    int last_dc[MAX_COMPS_IN_SCAN];
    const ts_htable *dc[D_MAX_BLOCKS_IN_MCU], *ac[D_MAX_BLOCKS_IN_MCU];
    int comp[D_MAX_BLOCKS_IN_MCU];
    ts_htable *tables[8];  ///< DC 0-3, AC 4-7, built when a scan uses them
} ts_entropy;

const uint8_t ts_natural[64 + 80] = {
    0,  1,  8,  16, 9,  2,  3,  10, 17, 24, 32, 25, 18, 11, 4,  5,  12, 19, 26, 33, 40, 48,
    41, 34, 27, 20, 13, 6,  7,  14, 21, 28, 35, 42, 49, 56, 57, 50, 43, 36, 29, 22, 15, 23,
    30, 37, 44, 51, 58, 59, 52, 45, 38, 31, 39, 46, 53, 60, 61, 54, 47, 55, 62, 63,
    63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63,
    63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63,
    63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63,
    63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63};

const uint8_t ts_rank[64] = {
    0,  1,  5,  6,  14, 15, 27, 28, 2,  4,  7,  13, 16, 26, 29, 42,
    3,  8,  12, 17, 25, 30, 41, 43, 9,  11, 18, 24, 31, 40, 44, 53,
    10, 19, 23, 32, 39, 45, 52, 54, 20, 22, 33, 38, 46, 51, 55, 60,
    21, 34, 37, 47, 50, 56, 59, 61, 35, 36, 48, 49, 57, 58, 62, 63};

static int ts_use_own = -1;  // atomic: -1 until the environment is read

static long ts_installs;

void ts_jpeg_own_entropy(int enable) { __atomic_store_n(&ts_use_own, enable ? 1 : 0, __ATOMIC_RELAXED); }

long ts_jpeg_own_entropy_scans(void) { return __atomic_load_n(&ts_installs, __ATOMIC_RELAXED); }

static int ts_own_enabled(void) { return ts_env_switch(&ts_use_own, "TESSERA_JPEG_ENTROPY", "libjpeg"); }

static inline int32_t ts_extend(int32_t v, int s) { return v < (1 << (s - 1)) ? v - (1 << s) + 1 : v; }

/// Builds the tables of a DHT (ITU T.81 Annex C). 0 when its counts do not make a prefix code
/// (libjpeg's own start_pass has refused such a table before this runs; checked again here).
static int ts_build(const JHUFF_TBL *h, int is_dc, int progressive, ts_htable *t) {
    memset(t, 0, sizeof *t);
    int count = 0;
    for (int l = 1; l <= 16; l++) count += h->bits[l];
    if (count > 256) return 0;
    memcpy(t->huffval, h->huffval, sizeof t->huffval);
    int32_t code = 0;
    int k = 0;
    for (int l = 1; l <= 16; l++) {
        int n = h->bits[l];
        t->valoffset[l] = k - code;
        for (int i = 0; i < n; i++, k++, code++) {
            int sym = h->huffval[k];
            if (is_dc && sym > 15) return 0;
            if (l > FAST_BITS) continue;
            int spare = FAST_BITS - l;
            for (int j = 0; j < (1 << spare); j++) {
                int idx = code << spare | j;
                t->symbol[idx] = (uint16_t)(l << 8 | sym);
                int s = sym & 15, step = is_dc ? 0 : (sym >> 4) + 1;
                if (!is_dc && s == 0) step = (sym >> 4) == 15 ? 16 : 64;  // ZRL, or end of block
                // A progressive end-of-band run (EOBn, n > 0) has n more bits: the slow path.
                if (progressive && !is_dc && s == 0 && (sym >> 4) != 15 && (sym >> 4) != 0) continue;
                if (l + s > FAST_BITS) continue;
                int32_t v = s ? ts_extend((j >> (spare - s)) & ((1 << s) - 1), s) : 0;
                t->fast[idx] = (int32_t)((uint32_t)v << 16 | (uint32_t)step << 8 | (uint32_t)(l + s));
            }
        }
        // One past the last code of this length must still fit in it: no code is all ones.
        if (n && code >= (1 << l)) return 0;
        t->maxcode[l] = n ? code - 1 : -1;
        code <<= 1;
    }
    t->maxcode[17] = 0x7FFFFFFF;
    return 1;
}

/// The symbol of a code not in `fast`; `*len` its length (17 for a code in no table: symbol 0).
static inline int ts_symbol(const ts_htable *t, uint64_t buf, int *len) {
    uint16_t e = t->symbol[buf >> (64 - FAST_BITS)];
    if (e) {
        *len = e >> 8;
        return e & 0xFF;
    }
    for (int l = FAST_BITS + 1; l <= 16; l++) {
        int32_t code = (int32_t)(buf >> (64 - l));
        if (code <= t->maxcode[l]) {
            *len = l;
            return t->huffval[(code + t->valoffset[l]) & 0xFF];
        }
    }
    *len = 17;
    return 0;
}

static void ts_fill_source(j_decompress_ptr cinfo, const JOCTET **p, size_t *n) {
    struct jpeg_source_mgr *src = cinfo->src;
    src->next_input_byte = *p;
    src->bytes_in_buffer = *n;
    // Tessera's sources never suspend, and end with a fake EOI (after a warning).
    if (!(*src->fill_input_buffer)(cinfo) || src->bytes_in_buffer == 0) ERREXIT(cinfo, JERR_INPUT_EMPTY);
    *p = src->next_input_byte;
    *n = src->bytes_in_buffer;
}

static inline uint64_t ts_big_endian(uint64_t x) {
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    return __builtin_bswap64(x);
#else
    return x;
#endif
}

/// Below 32 bits, tops the buffer up to at least 56 unless a marker stops it (then zeros follow).
#define TS_REFILL()                                                                               \
    do {                                                                                          \
        if (bits < 32 && !stopped) {                                                              \
            uint64_t x_;                                                                          \
            if (n >= 8 && (memcpy(&x_, p, 8), x_ = ts_big_endian(x_),                             \
                           !((~x_ - 0x0101010101010101ULL) & x_ & 0x8080808080808080ULL))) {     \
                buf |= x_ >> bits;                                                                \
                p += (63 - bits) >> 3;                                                            \
                n -= (size_t)((63 - bits) >> 3);                                                  \
                bits |= 56;                                                                       \
            } else {                                                                              \
                while (bits <= 56) {                                                              \
                    if (n == 0) ts_fill_source(cinfo, &p, &n);                                    \
                    unsigned c_ = *p++;                                                           \
                    n--;                                                                          \
                    if (c_ == 0xFF) {                                                             \
                        do {                                                                      \
                            if (n == 0) ts_fill_source(cinfo, &p, &n);                            \
                            c_ = *p++;                                                            \
                            n--;                                                                  \
                        } while (c_ == 0xFF);                                                     \
                        if (c_ == 0) c_ = 0xFF;                                                   \
                        else {                                                                    \
                            cinfo->unread_marker = (int)c_;                                       \
                            stopped = 1;                                                          \
                            break;                                                                \
                        }                                                                         \
                    }                                                                             \
                    buf |= (uint64_t)c_ << (56 - bits);                                           \
                    bits += 8;                                                                    \
                }                                                                                 \
            }                                                                                     \
        }                                                                                         \
    } while (0)

#define TS_DROP(k_) (buf <<= (k_), bits -= (k_))

static boolean ts_restart(j_decompress_ptr cinfo, ts_entropy *e) {
    if (e->bits > 0) cinfo->marker->discarded_bytes += (unsigned)e->bits / 8;
    e->buf = 0;
    e->bits = 0;
    if (!(*cinfo->marker->read_restart_marker)(cinfo)) return FALSE;
    for (int ci = 0; ci < cinfo->comps_in_scan; ci++) e->last_dc[ci] = 0;
    e->restarts_to_go = cinfo->restart_interval;
    e->eobrun = 0;
    // Still against a marker (a lost restart): leave the segment empty, as libjpeg does.
    if (cinfo->unread_marker == 0) e->pub.insufficient_data = FALSE;
    return TRUE;
}

/// The end of an MCU: the source advanced, the bit buffer kept. Bits past a marker or the end
/// of the data were needed when `bits` < 0: zeros were decoded, as libjpeg does.
static void ts_end_mcu(j_decompress_ptr cinfo, ts_entropy *e, const JOCTET *p, size_t n, uint64_t buf, int bits) {
    cinfo->src->next_input_byte = p;
    cinfo->src->bytes_in_buffer = n;
    if (bits < 0) {
        buf = 0;
        bits = 0;
        e->pub.insufficient_data = TRUE;
        WARNMS(cinfo, JWRN_HIT_MARKER);
    }
    e->buf = buf;
    e->bits = bits;
}

/// A scan's start: no bits, predictions at 0, no end-of-band run, the restart count full.
static void ts_reset(j_decompress_ptr cinfo, ts_entropy *e) {
    for (int ci = 0; ci < MAX_COMPS_IN_SCAN; ci++) e->last_dc[ci] = 0;
    e->buf = 0;
    e->bits = 0;
    e->eobrun = 0;
    e->pub.insufficient_data = FALSE;
    e->restarts_to_go = cinfo->restart_interval;
}

/// Every decode_mcu's frame: a restart marker read when one is due; then, unless the segment
/// already ran out of data, the bit reader's state in locals (p, n, buf, bits, stopped) for the
/// body, and written back after it by TS_MCU_END (which also returns).
#define TS_MCU_BEGIN(e_)                                                                          \
    if (cinfo->restart_interval && (e_)->restarts_to_go == 0 && !ts_restart(cinfo, (e_))) return FALSE; \
    if (!(e_)->pub.insufficient_data) {                                                           \
        const JOCTET *p = cinfo->src->next_input_byte;                                            \
        size_t n = cinfo->src->bytes_in_buffer;                                                   \
        uint64_t buf = (e_)->buf;                                                                 \
        int bits = (e_)->bits;                                                                    \
        int stopped = cinfo->unread_marker != 0;

#define TS_MCU_END(e_)                                                                            \
        ts_end_mcu(cinfo, (e_), p, n, buf, bits);                                                 \
    }                                                                                             \
    if (cinfo->restart_interval) (e_)->restarts_to_go--;                                          \
    return TRUE;

/// The next DC difference with table `dc_` into `diff_` (a code in no table: 0 after 17 bits, warned).
#define TS_DC_DIFF(dc_, diff_)                                                                    \
    do {                                                                                          \
        TS_REFILL();                                                                              \
        int32_t f_ = (dc_)->fast[buf >> (64 - FAST_BITS)];                                        \
        if (f_) {                                                                                 \
            (diff_) = f_ >> 16;                                                                   \
            TS_DROP(f_ & 0xFF);                                                                   \
        } else {                                                                                  \
            int len_, s_ = ts_symbol((dc_), buf, &len_);                                          \
            if (len_ > 16) WARNMS(cinfo, JWRN_HUFF_BAD_CODE);                                     \
            TS_DROP(len_);                                                                        \
            (diff_) = 0;                                                                          \
            if (s_) {                                                                             \
                (diff_) = ts_extend((int32_t)(buf >> (64 - s_)), s_);                             \
                TS_DROP(s_);                                                                      \
            }                                                                                     \
        }                                                                                         \
    } while (0)

static boolean ts_decode_mcu(j_decompress_ptr cinfo, JBLOCKROW *MCU_data) {
    ts_entropy *e = (ts_entropy *)cinfo->entropy;
    TS_MCU_BEGIN(e)
        JBLOCK scratch;
        for (int b = 0; b < cinfo->blocks_in_MCU; b++) {
            JCOEF *blk = MCU_data ? MCU_data[b][0] : scratch;
            const ts_htable *ac = e->ac[b];
            int32_t diff;
            TS_DC_DIFF(e->dc[b], diff);
            int ci = e->comp[b];
            unsigned dcv = (unsigned)diff + (unsigned)e->last_dc[ci];
            e->last_dc[ci] = (int)dcv;
            blk[0] = (JCOEF)dcv;
            for (int k = 1; k < 64;) {
                TS_REFILL();
                int32_t f = ac->fast[buf >> (64 - FAST_BITS)];
                if (f) {
                    // Run, value and end of block at once; a ZRL or an end of block stores a
                    // zero where nothing was stored yet.
                    k += (f >> 8) & 0xFF;
                    blk[ts_natural[k - 1]] = (JCOEF)(f >> 16);
                    TS_DROP(f & 0xFF);
                } else {
                    int len, sym = ts_symbol(ac, buf, &len);
                    if (len > 16) WARNMS(cinfo, JWRN_HUFF_BAD_CODE);
                    TS_DROP(len);
                    int r = sym >> 4, s = sym & 15;
                    if (s) {
                        k += r;
                        blk[ts_natural[k]] = (JCOEF)ts_extend((int32_t)(buf >> (64 - s)), s);
                        TS_DROP(s);
                        k++;
                    } else if (r == 15) {
                        k += 16;
                    } else {
                        break;
                    }
                }
            }
        }
    TS_MCU_END(e)
}

/// Table `no` of a class (DC or AC) for the scan starting: checked, and built from its DHT the
/// first time the scan uses it (`built`: a mask of the slots built for this scan; a DHT may
/// come between the scans of a progressive file).
static const ts_htable *ts_scan_table(j_decompress_ptr cinfo, ts_entropy *e, int is_dc, int no, int progressive,
                                      unsigned *built) {
    if (no < 0 || no >= NUM_HUFF_TBLS) ERREXIT1(cinfo, JERR_NO_HUFF_TABLE, no);
    int slot = (is_dc ? 0 : 4) + no;
    if (!(*built >> slot & 1)) {
        JHUFF_TBL *h = is_dc ? cinfo->dc_huff_tbl_ptrs[no] : cinfo->ac_huff_tbl_ptrs[no];
        if (!h) ERREXIT1(cinfo, JERR_NO_HUFF_TABLE, no);
        if (!e->tables[slot])
            e->tables[slot] = (ts_htable *)(*cinfo->mem->alloc_small)((j_common_ptr)cinfo, JPOOL_IMAGE, sizeof(ts_htable));
        if (!ts_build(h, is_dc, progressive, e->tables[slot])) ERREXIT(cinfo, JERR_BAD_HUFF_TABLE);
        *built |= 1u << slot;
    }
    return e->tables[slot];
}

static void ts_start_pass(j_decompress_ptr cinfo) {
    ts_entropy *e = (ts_entropy *)cinfo->entropy;
    unsigned built = 0;
    for (int b = 0; b < cinfo->blocks_in_MCU; b++) {
        jpeg_component_info *comp = cinfo->cur_comp_info[cinfo->MCU_membership[b]];
        e->dc[b] = ts_scan_table(cinfo, e, 1, comp->dc_tbl_no, 0, &built);
        e->ac[b] = ts_scan_table(cinfo, e, 0, comp->ac_tbl_no, 0, &built);
        e->comp[b] = cinfo->MCU_membership[b];
    }
    ts_reset(cinfo, e);
}

int ts_jpeg_entropy_install(j_decompress_ptr cinfo) {
    if (!ts_own_enabled()) return 0;
    // One sequential Huffman scan of 8-bit samples, not yet begun.
    if (cinfo->progressive_mode || cinfo->arith_code || cinfo->data_precision != 8) return 0;
    if (!cinfo->inputctl || cinfo->inputctl->has_multiple_scans || !cinfo->entropy) return 0;
    if (cinfo->Ss != 0 || cinfo->Se != DCTSIZE2 - 1 || cinfo->Ah != 0 || cinfo->Al != 0) return 0;
    if (cinfo->comps_in_scan < 1 || cinfo->comps_in_scan > MAX_COMPS_IN_SCAN) return 0;
    if (cinfo->blocks_in_MCU < 1 || cinfo->blocks_in_MCU > D_MAX_BLOCKS_IN_MCU) return 0;
    if (cinfo->input_iMCU_row != 0 || cinfo->output_scanline != 0) return 0;
    for (int b = 0; b < cinfo->blocks_in_MCU; b++)
        if (cinfo->MCU_membership[b] < 0 || cinfo->MCU_membership[b] >= cinfo->comps_in_scan) return 0;
    ts_entropy *e = (ts_entropy *)(*cinfo->mem->alloc_small)((j_common_ptr)cinfo, JPOOL_IMAGE, sizeof *e);
    memset(e, 0, sizeof *e);
    e->pub.start_pass = ts_start_pass;
    e->pub.decode_mcu = ts_decode_mcu;
    struct jpeg_entropy_decoder *library = cinfo->entropy;
    cinfo->entropy = &e->pub;
    ts_start_pass(cinfo);
    e->pub.insufficient_data = library->insufficient_data;
    __atomic_fetch_add(&ts_installs, 1, __ATOMIC_RELAXED);
    return 1;
}

// MARK: Progressive scans
//
// The same tables and bit reader for the four kinds of progressive scan (ITU T.81 G.1.2):
// DC first (differences, shifted by Al), DC refinement (one bit a block), AC first (one band
// of one component, with end-of-band runs across blocks) and AC refinement (new coefficients
// of ±1 at Al, and a correction bit for each coefficient already nonzero). A progressive file
// is most often decoded to a thumbnail or a screen-size image, and libjpeg-turbo 2.1's
// progressive decoder reads codes and bits one call at a time: a 24 MP progressive photo took
// three times as long as a baseline one at 3/8.
//
// Each scan's parameters are first given to libjpeg's own start_pass: it validates them,
// keeps the progression status (coef_bits, which libjpeg's block smoothing reads) and warns
// about bogus progressions exactly as before. What the decoding routines do with damaged data
// is libjpeg-turbo's, step by step: a run past the band stores where libjpeg stores, a
// refinement symbol of size other than 1 warns and reads one sign bit, a DC value that
// overflows is JERR_BAD_DCT_COEF, a missing marker pads with zeros.

/// The baseline decoder's state (its AC table in ac[0]; tables rebuilt for each scan, since
/// a DHT may come between scans) and what progressive scans add.
typedef struct {
    ts_entropy b;  // first: libjpeg reads b.pub
    struct jpeg_entropy_decoder *library;
    int Ss, Se, Al;
} ts_pentropy;

static void (*ts_library_start_input_pass)(j_decompress_ptr);
static long ts_progressive_installs;

long ts_jpeg_own_progressive_images(void) { return __atomic_load_n(&ts_progressive_installs, __ATOMIC_RELAXED); }

#define TS_P_BEGIN()                                                                              \
    ts_pentropy *pe = (ts_pentropy *)cinfo->entropy;                                              \
    ts_entropy *e = &pe->b;                                                                       \
    TS_MCU_BEGIN(e)

#define TS_P_END() TS_MCU_END(e)

/// The next `k_` (1-16) bits as a number; the buffer holds at least that many (or zeros).
#define TS_BITS(k_) ((int32_t)(buf >> (64 - (k_))))

static boolean ts_p_dc_first(j_decompress_ptr cinfo, JBLOCKROW *MCU_data) {
    TS_P_BEGIN()
    JBLOCK scratch;
    for (int b = 0; b < cinfo->blocks_in_MCU; b++) {
        JCOEF *blk = MCU_data ? MCU_data[b][0] : scratch;
        int32_t diff;
        TS_DC_DIFF(e->dc[b], diff);
        int ci = e->comp[b], last = e->last_dc[ci];
        if ((last >= 0 && diff > INT32_MAX - last) || (last < 0 && diff < INT32_MIN - last))
            ERREXIT(cinfo, JERR_BAD_DCT_COEF);
        e->last_dc[ci] = last + diff;
        blk[0] = (JCOEF)((uint32_t)(last + diff) << pe->Al);
    }
    TS_P_END()
}

static boolean ts_p_dc_refine(j_decompress_ptr cinfo, JBLOCKROW *MCU_data) {
    TS_P_BEGIN()
    JCOEF p1 = (JCOEF)(1 << pe->Al);
    for (int b = 0; b < cinfo->blocks_in_MCU; b++) {
        TS_REFILL();
        if (buf >> 63 && MCU_data) MCU_data[b][0][0] |= p1;
        TS_DROP(1);
    }
    TS_P_END()
}

static boolean ts_p_ac_first(j_decompress_ptr cinfo, JBLOCKROW *MCU_data) {
    TS_P_BEGIN()
    if (e->eobrun > 0) {
        e->eobrun--;
    } else {
        JBLOCK scratch;
        JCOEF *blk = MCU_data ? MCU_data[0][0] : scratch;
        const ts_htable *ac = e->ac[0];
        int Se = pe->Se, Al = pe->Al;
        for (int k = pe->Ss; k <= Se;) {
            TS_REFILL();
            int32_t f = ac->fast[buf >> (64 - FAST_BITS)];
            if (f) {
                int step = (f >> 8) & 0xFF;
                TS_DROP(f & 0xFF);
                if (step == 64) break;  // EOB0: this block's band ends
                k += step;
                if (f >> 16) blk[ts_natural[k - 1]] = (JCOEF)((uint32_t)(f >> 16) << Al);
            } else {
                int len, sym = ts_symbol(ac, buf, &len);
                if (len > 16) WARNMS(cinfo, JWRN_HUFF_BAD_CODE);
                TS_DROP(len);
                int r = sym >> 4, sz = sym & 15;
                if (sz) {
                    k += r;
                    blk[ts_natural[k]] = (JCOEF)((uint32_t)ts_extend(TS_BITS(sz), sz) << Al);
                    TS_DROP(sz);
                    k++;
                } else if (r == 15) {
                    k += 16;
                } else {
                    unsigned run = 1u << r;
                    if (r) {
                        run += (unsigned)TS_BITS(r);
                        TS_DROP(r);
                    }
                    e->eobrun = run - 1;
                    break;
                }
            }
        }
    }
    TS_P_END()
}

/// Correction bits for the nonzero coefficients whose zigzag indexes are the bits of `m_`, in
/// that order: a 1 moves a coefficient one step of 2^Al away from zero (unless this scan did).
/// No branch on the bit: they are as good as random.
#define TS_CORRECT(m_)                                                                            \
    do {                                                                                          \
        for (uint64_t left_ = (m_); left_; left_ &= left_ - 1) {                                  \
            JCOEF *c_ = blk + ts_natural[__builtin_ctzll(left_)];                                 \
            TS_REFILL();                                                                          \
            int on_ = (int)(buf >> 63) & ((*c_ & p1) == 0);                                       \
            *c_ = (JCOEF)(*c_ + (-on_ & (*c_ >= 0 ? p1 : m1)));                                   \
            TS_DROP(1);                                                                           \
        }                                                                                         \
    } while (0)

uint64_t ts_zigzag_bits[8][256];
static pthread_once_t ts_zigzag_once = PTHREAD_ONCE_INIT;

static void ts_zigzag_init(void) {
    for (int j = 0; j < 8; j++)
        for (int v = 0; v < 256; v++) {
            uint64_t m = 0;
            for (int b = 0; b < 8; b++)
                if (v >> b & 1) m |= 1ull << ts_rank[8 * j + b];
            ts_zigzag_bits[j][v] = m;
        }
}

void ts_zigzag_prepare(void) { pthread_once(&ts_zigzag_once, ts_zigzag_init); }

/// Bits from..to-1 (0 <= from <= to <= 64).
static inline uint64_t ts_bit_range(int from, int to) {
    uint64_t below_to = to >= 64 ? ~0ull : (1ull << to) - 1;
    return below_to & ~((1ull << from) - 1);
}

static boolean ts_p_ac_refine(j_decompress_ptr cinfo, JBLOCKROW *MCU_data) {
    TS_P_BEGIN()
    JBLOCK scratch;
    JCOEF *blk = scratch;
    if (MCU_data) blk = MCU_data[0][0];
    else memset(scratch, 0, sizeof scratch);
    const ts_htable *ac = e->ac[0];
    int Se = pe->Se, p1 = 1 << pe->Al, m1 = (int)(~0u << pe->Al);
    int k = pe->Ss;
    unsigned eobrun = e->eobrun;
    // The coefficients nonzero before this scan: only they take correction bits, and the new
    // ones this block gets are behind the position reached when they are set.
    uint64_t nonzero = ts_nonzero_zigzag(blk);
    if (eobrun == 0) {
        for (; k <= Se; k++) {
            TS_REFILL();
            int len, sym = ts_symbol(ac, buf, &len);
            if (len > 16) WARNMS(cinfo, JWRN_HUFF_BAD_CODE);
            TS_DROP(len);
            int r = sym >> 4, sz = sym & 15, value = 0;
            if (sz) {
                if (sz != 1) WARNMS(cinfo, JWRN_HUFF_BAD_CODE);  // a new coefficient is always ±1
                value = buf >> 63 ? p1 : m1;
                TS_DROP(1);
            } else if (r != 15) {
                eobrun = 1u << r;
                if (r) {
                    eobrun += (unsigned)TS_BITS(r);
                    TS_DROP(r);
                }
                break;
            }
            // Past the coefficients already nonzero (each with its correction bit) and r
            // zeros, to the next zero: the (r+1)th zero from k, or past the band.
            uint64_t zeros = ~nonzero & ts_bit_range(k, Se + 1);
            for (int i = 0; i < r && zeros; i++) zeros &= zeros - 1;
            int to = zeros ? __builtin_ctzll(zeros) : Se + 1;
            TS_CORRECT(nonzero & ts_bit_range(k, to));
            k = to;
            if (value) blk[ts_natural[k]] = (JCOEF)value;
        }
    }
    if (eobrun > 0) {
        // The rest of the band: correction bits only.
        if (k <= Se) TS_CORRECT(nonzero & ts_bit_range(k, Se + 1));
        eobrun--;
    }
    e->eobrun = eobrun;
    TS_P_END()
}

static void ts_p_start_pass(j_decompress_ptr cinfo) {
    ts_pentropy *pe = (ts_pentropy *)cinfo->entropy;
    ts_entropy *e = &pe->b;
    // libjpeg's start_pass: scan validation, progression status, warnings, its table checks.
    cinfo->entropy = pe->library;
    (*pe->library->start_pass)(cinfo);
    cinfo->entropy = &e->pub;
    int dc_band = cinfo->Ss == 0, first = cinfo->Ah == 0;
    pe->Ss = cinfo->Ss;
    pe->Se = cinfo->Se;
    pe->Al = cinfo->Al;
    unsigned built = 0;
    for (int b = 0; b < cinfo->blocks_in_MCU; b++) {
        int ci = cinfo->MCU_membership[b];
        if (ci < 0 || ci >= cinfo->comps_in_scan) ERREXIT(cinfo, JERR_BAD_MCU_SIZE);
        jpeg_component_info *comp = cinfo->cur_comp_info[ci];
        e->comp[b] = ci;
        e->dc[b] = NULL;
        if (dc_band && !first) continue;  // DC refinement reads bits, no codes
        if (dc_band) e->dc[b] = ts_scan_table(cinfo, e, 1, comp->dc_tbl_no, 1, &built);
        else e->ac[0] = ts_scan_table(cinfo, e, 0, comp->ac_tbl_no, 1, &built);
    }
    e->pub.decode_mcu = dc_band ? (first ? ts_p_dc_first : ts_p_dc_refine) : (first ? ts_p_ac_first : ts_p_ac_refine);
    ts_reset(cinfo, e);
}

/// In place of libjpeg's first start_input_pass (jpeg_start_decompress, after it has made its
/// modules and before the first scan): puts Tessera's decoder in front of libjpeg's
/// progressive one. Later scans reach it through cinfo->entropy.
static void ts_first_input_pass(j_decompress_ptr cinfo) {
    void (*library)(j_decompress_ptr) = __atomic_load_n(&ts_library_start_input_pass, __ATOMIC_RELAXED);
    cinfo->inputctl->start_input_pass = library;
    if (cinfo->progressive_mode && !cinfo->arith_code && cinfo->data_precision == 8 && cinfo->entropy &&
        cinfo->coef_bits && cinfo->input_scan_number == 1) {
        ts_pentropy *pe = (ts_pentropy *)(*cinfo->mem->alloc_small)((j_common_ptr)cinfo, JPOOL_IMAGE, sizeof *pe);
        memset(pe, 0, sizeof *pe);
        pe->b.pub.start_pass = ts_p_start_pass;
        pe->b.pub.decode_mcu = ts_p_dc_first;
        pe->library = cinfo->entropy;
        cinfo->entropy = &pe->b.pub;
        ts_zigzag_prepare();
        __atomic_fetch_add(&ts_progressive_installs, 1, __ATOMIC_RELAXED);
    }
    (*library)(cinfo);
}

int ts_jpeg_progressive_prepare(j_decompress_ptr cinfo) {
    if (!ts_own_enabled() || !cinfo->progressive_mode || cinfo->arith_code || !cinfo->inputctl) return 0;
    if (cinfo->global_state != DSTATE_READY) return 0;  // after jpeg_read_header, before jpeg_start_decompress
    void (*current)(j_decompress_ptr) = cinfo->inputctl->start_input_pass;
    if (!current || current == ts_first_input_pass) return 0;
    // Every decompressor of this libjpeg has the same start_input_pass.
    void (*expected)(j_decompress_ptr) = NULL;
    if (!__atomic_compare_exchange_n(&ts_library_start_input_pass, &expected, current, 0, __ATOMIC_RELAXED,
                                     __ATOMIC_RELAXED) &&
        expected != current)
        return 0;
    cinfo->inputctl->start_input_pass = ts_first_input_pass;
    return 1;
}
