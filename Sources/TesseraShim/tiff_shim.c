// libtiff wrappers: a TIFF in memory, errors kept per handle (never printed), the
// variadic tag getters, and the RGBA reader for what Tessera does not unpack itself.
// See include/tessera_shim.h.
#include "tessera_shim.h"
#include "lzw_run.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <tiffio.h>
#include <unistd.h>
#include <zlib.h>

struct ts_tiff {
    TIFF *tif;
    const uint8_t *data;
    size_t size, pos;
    int warnings;
    int problems;                // errors and warnings, however many
    int rgba_started;
    int release_reads;
    TIFFRGBAImage rgba;
    char message[256];
    char warning[160];
    char problem[200];           // the latest error or warning
};

static tmsize_t ts_read(thandle_t h, void *buf, tmsize_t n) {
    ts_tiff *t = (ts_tiff *)h;
    if (n < 0) return -1;
    size_t left = t->pos < t->size ? t->size - t->pos : 0;
    size_t k = (size_t)n < left ? (size_t)n : left;
    if (k) memcpy(buf, t->data + t->pos, k);
    if (t->release_reads && k >= 16384) {
        // The whole pages inside what was copied: libtiff keeps its own copy of a strip or tile.
        static long page = 0;
        if (!page) page = sysconf(_SC_PAGESIZE);
        uintptr_t from = ((uintptr_t)(t->data + t->pos) + page - 1) & ~(uintptr_t)(page - 1);
        uintptr_t to = ((uintptr_t)(t->data + t->pos + k)) & ~(uintptr_t)(page - 1);
        if (to > from) madvise((void *)from, to - from, MADV_DONTNEED);
    }
    t->pos += k;
    return (tmsize_t)k;
}

static tmsize_t ts_write(thandle_t h, void *buf, tmsize_t n) {
    (void)h; (void)buf; (void)n;
    return -1;
}

static toff_t ts_seek(thandle_t h, toff_t off, int whence) {
    ts_tiff *t = (ts_tiff *)h;
    uint64_t base = whence == SEEK_SET ? 0 : whence == SEEK_CUR ? t->pos : t->size;
    // Offsets past the end are allowed (reads there return nothing), as for a file.
    if (off > UINT64_MAX - base) return (toff_t)-1;
    t->pos = (size_t)(base + off);
    return t->pos;
}

static int ts_close(thandle_t h) { (void)h; return 0; }
static toff_t ts_size(thandle_t h) { return ((ts_tiff *)h)->size; }
static int ts_map(thandle_t h, void **base, toff_t *size) {
    ts_tiff *t = (ts_tiff *)h;
    *base = (void *)t->data;
    *size = t->size;
    return 1;
}
static void ts_unmap(thandle_t h, void *base, toff_t size) { (void)h; (void)base; (void)size; }

static int ts_on_error(TIFF *tif, void *user, const char *module, const char *fmt, va_list ap) {
    (void)tif;
    ts_tiff *t = (ts_tiff *)user;
    if (!t) return 1;
    char text[200];
    vsnprintf(text, sizeof text, fmt, ap);
    if (!t->message[0]) {
        if (module && module[0]) snprintf(t->message, sizeof t->message, "%s: %s", module, text);
        else snprintf(t->message, sizeof t->message, "%s", text);
    }
    snprintf(t->problem, sizeof t->problem, "%s: %s", module && module[0] ? module : "libtiff", text);
    t->problems++;
    return 1;  // handled: libtiff's global handler (stderr) is not called
}

static int ts_on_warning(TIFF *tif, void *user, const char *module, const char *fmt, va_list ap) {
    (void)tif;
    ts_tiff *t = (ts_tiff *)user;
    if (t) {
        char text[160];
        vsnprintf(text, sizeof text, fmt, ap);
        if (!t->warnings) snprintf(t->warning, sizeof t->warning, "%s: %s", module ? module : "libtiff", text);
        snprintf(t->problem, sizeof t->problem, "%s: %s", module ? module : "libtiff", text);
        t->warnings++;
        t->problems++;
    }
    return 1;
}

static pthread_once_t ts_tiff_once = PTHREAD_ONCE_INIT;
static void ts_tiff_quiet(void) {
    // What libtiff reports with no handle at hand would go to stderr: nowhere instead.
    TIFFSetErrorHandler(NULL);
    TIFFSetWarningHandler(NULL);
}

ts_tiff *ts_tiff_open(const uint8_t *data, size_t size, long max_alloc) {
    pthread_once(&ts_tiff_once, ts_tiff_quiet);
    ts_tiff *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->data = data;
    t->size = size;
    TIFFOpenOptions *opts = TIFFOpenOptionsAlloc();
    if (!opts) { free(t); return NULL; }
    TIFFOpenOptionsSetErrorHandlerExtR(opts, ts_on_error, t);
    TIFFOpenOptionsSetWarningHandlerExtR(opts, ts_on_warning, t);
    if (max_alloc > 0) TIFFOpenOptionsSetMaxSingleMemAlloc(opts, (tmsize_t)max_alloc);
    // "rm": read, and never map the file (we hand libtiff our bytes through the procs).
    t->tif = TIFFClientOpenExt("input", "rm", (thandle_t)t, ts_read, ts_write, ts_seek, ts_close, ts_size,
                               ts_map, ts_unmap, opts);
    TIFFOpenOptionsFree(opts);
    if (!t->tif && !t->message[0]) snprintf(t->message, sizeof t->message, "not a readable TIFF");
    return t;
}

void ts_tiff_close(ts_tiff *t) {
    if (!t) return;
    if (t->rgba_started) TIFFRGBAImageEnd(&t->rgba);
    if (t->tif) TIFFClose(t->tif);
    free(t);
}

void ts_tiff_release_reads(ts_tiff *t, int on) { t->release_reads = on; }

int ts_tiff_ok(const ts_tiff *t) { return t && t->tif != NULL; }
const char *ts_tiff_message(const ts_tiff *t) { return t->message; }
int ts_tiff_warnings(const ts_tiff *t) { return t->warnings; }
int ts_tiff_problems(const ts_tiff *t) { return t->problems; }
const char *ts_tiff_last_problem(const ts_tiff *t) { return t->problem; }
const char *ts_tiff_first_warning(const ts_tiff *t) { return t->warning; }
void ts_tiff_clear(ts_tiff *t) { t->message[0] = 0; }
void *ts_tiff_handle(ts_tiff *t) { return t->tif; }

int ts_tiff_info_read(ts_tiff *t, ts_tiff_info *o) {
    TIFF *tif = t->tif;
    memset(o, 0, sizeof *o);
    if (!TIFFGetField(tif, TIFFTAG_IMAGEWIDTH, &o->width) || !TIFFGetField(tif, TIFFTAG_IMAGELENGTH, &o->height)) {
        if (!t->message[0]) snprintf(t->message, sizeof t->message, "no image width or length");
        return -1;
    }
    TIFFGetFieldDefaulted(tif, TIFFTAG_BITSPERSAMPLE, &o->bits_per_sample);
    TIFFGetFieldDefaulted(tif, TIFFTAG_SAMPLESPERPIXEL, &o->samples_per_pixel);
    TIFFGetFieldDefaulted(tif, TIFFTAG_SAMPLEFORMAT, &o->sample_format);
    o->has_photometric = TIFFGetField(tif, TIFFTAG_PHOTOMETRIC, &o->photometric) ? 1 : 0;
    TIFFGetFieldDefaulted(tif, TIFFTAG_PLANARCONFIG, &o->planar);
    TIFFGetFieldDefaulted(tif, TIFFTAG_COMPRESSION, &o->compression);
    TIFFGetFieldDefaulted(tif, TIFFTAG_ORIENTATION, &o->orientation);
    TIFFGetFieldDefaulted(tif, TIFFTAG_FILLORDER, &o->fill_order);
    TIFFGetFieldDefaulted(tif, TIFFTAG_INKSET, &o->ink_set);
    uint16_t count = 0, *types = NULL;
    if (TIFFGetField(tif, TIFFTAG_EXTRASAMPLES, &count, &types) && count > 0 && types) {
        o->extra_samples = count;
        o->extra_sample_type = types[0];
    }
    TIFFGetFieldDefaulted(tif, TIFFTAG_YCBCRSUBSAMPLING, &o->ycbcr_h, &o->ycbcr_v);
    TIFFGetFieldDefaulted(tif, TIFFTAG_RESOLUTIONUNIT, &o->resolution_unit);
    TIFFGetField(tif, TIFFTAG_XRESOLUTION, &o->x_resolution);
    TIFFGetField(tif, TIFFTAG_YRESOLUTION, &o->y_resolution);
    o->tiled = TIFFIsTiled(tif);
    if (o->tiled) {
        TIFFGetField(tif, TIFFTAG_TILEWIDTH, &o->tile_width);
        TIFFGetField(tif, TIFFTAG_TILELENGTH, &o->tile_height);
        o->strips_or_tiles = TIFFNumberOfTiles(tif);
    } else {
        TIFFGetFieldDefaulted(tif, TIFFTAG_ROWSPERSTRIP, &o->rows_per_strip);
        o->strips_or_tiles = TIFFNumberOfStrips(tif);
    }
    TIFFGetField(tif, TIFFTAG_SUBFILETYPE, &o->subfile_type);
    uint16_t n = 0;
    uint64_t *offsets = NULL;
    if (TIFFGetField(tif, TIFFTAG_SUBIFD, &n, &offsets)) o->subifd_count = n;
    uint32_t len = 0;
    void *icc = NULL;
    if (TIFFGetField(tif, TIFFTAG_ICCPROFILE, &len, &icc) && icc && len > 0) {
        o->icc = icc;
        o->icc_length = len;
    }
    if (o->photometric == PHOTOMETRIC_PALETTE) {
        uint16_t *r = NULL, *g = NULL, *b = NULL;
        if (TIFFGetField(tif, TIFFTAG_COLORMAP, &r, &g, &b)) {
            o->colormap[0] = r; o->colormap[1] = g; o->colormap[2] = b;
        }
    }
    return 0;
}

int ts_tiff_jpeg_rgb(ts_tiff *t) {
    return TIFFSetField(t->tif, TIFFTAG_JPEGCOLORMODE, JPEGCOLORMODE_RGB) ? 0 : -1;
}

int ts_tiff_subifds(ts_tiff *t, uint64_t *out, int max) {
    uint16_t n = 0;
    uint64_t *offsets = NULL;
    if (!TIFFGetField(t->tif, TIFFTAG_SUBIFD, &n, &offsets) || !offsets) return 0;
    int k = n < max ? n : max;
    for (int i = 0; i < k; i++) out[i] = offsets[i];
    return k;
}

int ts_tiff_rgba_ok(ts_tiff *t) {
    char reason[1024];
    if (TIFFRGBAImageOK(t->tif, reason)) return 1;
    snprintf(t->message, sizeof t->message, "%s", reason);
    return 0;
}

int ts_tiff_rgba_rows(ts_tiff *t, uint32_t row, uint32_t rows, uint32_t *out) {
    if (!t->rgba_started) {
        char reason[1024];
        if (!TIFFRGBAImageBegin(&t->rgba, t->tif, 0, reason)) {
            if (!t->message[0]) snprintf(t->message, sizeof t->message, "%s", reason);
            return -1;
        }
        t->rgba_started = 1;
        // The stored order: no flips (orientation is applied by the pipeline, as for EXIF).
        t->rgba.req_orientation = t->rgba.orientation;
    }
    t->rgba.row_offset = (int)row;
    t->rgba.col_offset = 0;
    return TIFFRGBAImageGet(&t->rgba, out, t->rgba.width, rows) ? 0 : -1;
}

// MARK: - LZW strips and tiles without libtiff's codec

// TIFF's LZW (MSB-first codes of 9 to 12 bits, "early change", Clear 256, End 257) decoded in
// one pass over a whole strip or tile held in memory. Each table entry is a run already in the
// output (a code's string is the previous string plus one byte, and the decoder wrote them side
// by side), so a code is one copy rather than a walk down a chain of prefixes. Anything
// unusual — old-style LZW, a code out of range, a full table, the data ending before the strip
// is filled — returns -1 and the caller reads the chunk through libtiff, which then decides
// (and words the error) exactly as before.
enum { TS_LZW_CLEAR = 256, TS_LZW_END = 257, TS_LZW_FIRST = 258 };

static long ts_lzw_decode(const uint8_t *in, size_t n, uint8_t *out, size_t cap) {
    // Per code: its string's first 8 bytes (so a short string is one store, never a load from
    // output just written), its length, and where the whole string already is in the output.
    ts_lzw_entry e[4096];
    for (uint32_t c = 0; c < 256; c++) { e[c].head = c; e[c].len = 1; e[c].off = 0; }
    uint64_t bits = 0;
    int have = 0, width = 9;
    size_t ip = 0, op = 0, prev_pos = 0;
    uint32_t next = TS_LZW_FIRST, prev_len = 0;
    uint64_t prev_head = 0;
    int prev = -1;
    if (cap > UINT32_MAX || (n >= 2 && in[0] == 0 && (in[1] & 1))) return -1;  // old-style
    while (op < cap) {
        if (have < width) {
            if (ip + 8 <= n) {
                uint64_t v;
                memcpy(&v, in + ip, 8);
                v = __builtin_bswap64(v);
                int take = (63 - have) >> 3;
                bits = bits << (take * 8) | v >> (64 - take * 8);
                ip += (size_t)take;
                have += take * 8;
            } else {
                while (have <= 56 && ip < n) { bits = bits << 8 | in[ip++]; have += 8; }
                if (have < width) return -1;  // the data ends first
            }
        }
        have -= width;
        uint32_t code = (uint32_t)(bits >> have) & ((1u << width) - 1);
        if (code >= 256) {
            if (code == TS_LZW_CLEAR) { width = 9; next = TS_LZW_FIRST; prev = -1; continue; }
            if (code == TS_LZW_END || prev < 0 || code > next) return -1;
        }
        if (prev >= 0) {
            // The previous string and this one's first byte (a code being defined right now
            // starts with the previous string's first byte).
            if (next >= 4096) return -1;
            uint64_t first = (code == next ? prev_head : e[code].head) & 0xff;
            e[next].head = prev_len >= 8 ? prev_head : prev_head | first << (8 * prev_len);
            e[next].off = (uint32_t)prev_pos;
            e[next].len = prev_len + 1;
            next++;
            if (next == (1u << width) - 1 && width < 12) width++;
        }
        uint32_t l = e[code].len;
        uint64_t h = e[code].head;
        ts_lzw_put(out, op, cap, e[code]);
        prev = (int)code;
        prev_pos = op;
        prev_len = l;
        prev_head = h;
        op += l;
    }
    // A whole strip ends with the end code: one that does not (damaged, or a writer that
    // left it out) goes to libtiff, which decodes it again and says what it found.
    if (have < width) {
        while (have <= 56 && ip < n) { bits = bits << 8 | in[ip++]; have += 8; }
        if (have < width) return -1;
    }
    if (((uint32_t)(bits >> (have - width)) & ((1u << width) - 1)) != TS_LZW_END) return -1;
    return (long)(op < cap ? op : cap);
}

/// Undoes the horizontal predictor on 8-bit rows: each sample is the sum of those before it.
#if defined(__x86_64__)
#include <immintrin.h>
// A row's running sums 5 RGB pixels (15 bytes) or 4 RGBA pixels at a time: a prefix sum
// within the register in log steps, plus the last pixel so far spread over every lane.
__attribute__((target("ssse3")))
static size_t ts_undo_predictor8_ssse3(uint8_t *p, size_t row_bytes, int spp) {
    if (spp == 3 && row_bytes >= 3 + 31) {
        const __m128i spread = _mm_setr_epi8(12, 13, 14, 12, 13, 14, 12, 13, 14, 12, 13, 14, 12, 13, 14, -1);
        const __m128i keep = _mm_setr_epi8(-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0);
        __m128i carry = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)p),
                                         _mm_setr_epi8(0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2, -1));
        size_t i = 3;
        __m128i x = _mm_loadu_si128((const __m128i *)(p + i));
        // Byte 15 of each store is put back as it was: the next 15 bytes start there, and they
        // are loaded before the store (no load waits on a store it overlaps).
        for (; i + 31 <= row_bytes; i += 15) {
            __m128i next = _mm_loadu_si128((const __m128i *)(p + i + 15));
            __m128i y = _mm_add_epi8(x, _mm_slli_si128(x, 3));
            y = _mm_add_epi8(y, _mm_slli_si128(y, 6));
            y = _mm_add_epi8(y, _mm_slli_si128(y, 12));
            y = _mm_add_epi8(y, carry);
            carry = _mm_shuffle_epi8(y, spread);
            _mm_storeu_si128((__m128i *)(p + i), _mm_or_si128(_mm_and_si128(y, keep), _mm_andnot_si128(keep, x)));
            x = next;
        }
        return i;
    }
    if (spp == 4 && row_bytes >= 4 + 16) {
        __m128i carry = _mm_set1_epi32((int)(p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24));
        size_t i = 4;
        for (; i + 16 <= row_bytes; i += 16) {
            __m128i x = _mm_loadu_si128((const __m128i *)(p + i));
            x = _mm_add_epi8(x, _mm_slli_si128(x, 4));
            x = _mm_add_epi8(x, _mm_slli_si128(x, 8));
            x = _mm_add_epi8(x, carry);
            carry = _mm_shuffle_epi32(x, 0xff);
            _mm_storeu_si128((__m128i *)(p + i), x);
        }
        return i;
    }
    return (size_t)spp;
}
#endif

static void ts_undo_predictor8(uint8_t *p, size_t rows, size_t row_bytes, int spp) {
#if defined(__x86_64__)
    int ssse3 = (ts_cpu_features() & TS_CPU_SSSE3) != 0;
#endif
    for (size_t r = 0; r < rows; r++, p += row_bytes) {
        size_t i = (size_t)spp;
#if defined(__x86_64__)
        if (ssse3) i = ts_undo_predictor8_ssse3(p, row_bytes, spp);
#endif
        for (; i < row_bytes; i++) p[i] = (uint8_t)(p[i] + p[i - spp]);
    }
}

long ts_tiff_read_lzw(ts_tiff *t, uint32_t chunk, uint8_t *out, size_t size) {
    TIFF *tif = t->tif;
    uint16_t compression = 0, fill = 0, predictor = 1, bits = 0, planar = 0, spp = 1;
    TIFFGetFieldDefaulted(tif, TIFFTAG_COMPRESSION, &compression);
    // Only LZW has a predictor tag to ask for (asking another codec is an error libtiff reports).
    if (compression != COMPRESSION_LZW) return -1;
    TIFFGetFieldDefaulted(tif, TIFFTAG_FILLORDER, &fill);
    TIFFGetFieldDefaulted(tif, TIFFTAG_PREDICTOR, &predictor);
    TIFFGetFieldDefaulted(tif, TIFFTAG_BITSPERSAMPLE, &bits);
    TIFFGetFieldDefaulted(tif, TIFFTAG_PLANARCONFIG, &planar);
    TIFFGetFieldDefaulted(tif, TIFFTAG_SAMPLESPERPIXEL, &spp);
    if (compression != COMPRESSION_LZW || fill != FILLORDER_MSB2LSB || bits != 8 || (predictor != 1 && predictor != 2))
        return -1;
    int tiled = TIFFIsTiled(tif);
    if (chunk >= (tiled ? TIFFNumberOfTiles(tif) : TIFFNumberOfStrips(tif))) return -1;
    int err = 0;
    uint64_t offset = TIFFGetStrileOffsetWithErr(tif, chunk, &err);
    if (err) return -1;
    uint64_t count = TIFFGetStrileByteCountWithErr(tif, chunk, &err);
    if (err || count == 0 || offset >= t->size || count > t->size - offset) return -1;
    // What the chunk decodes to: a tile's every row; a strip's rows, fewer in the last one.
    uint32_t width = 0, rows = 0, height = 0;
    if (tiled) {
        TIFFGetField(tif, TIFFTAG_TILEWIDTH, &width);
        TIFFGetField(tif, TIFFTAG_TILELENGTH, &rows);
    } else {
        TIFFGetField(tif, TIFFTAG_IMAGEWIDTH, &width);
        TIFFGetField(tif, TIFFTAG_IMAGELENGTH, &height);
        uint32_t per = 0;
        TIFFGetFieldDefaulted(tif, TIFFTAG_ROWSPERSTRIP, &per);
        if (height == 0) return -1;
        if (per == 0 || per > height) per = height;
        uint32_t strips_per_plane = (height + per - 1) / per;
        uint32_t top = (chunk % strips_per_plane) * per;
        rows = height - top < per ? height - top : per;
    }
    int samples = planar == PLANARCONFIG_SEPARATE ? 1 : spp;
    size_t row_bytes = (size_t)width * (size_t)samples;
    if (width == 0 || rows == 0 || row_bytes / samples != width) return -1;
    size_t need = row_bytes * rows;
    if (need / rows != row_bytes || need > size) return -1;
    long got = ts_lzw_decode(t->data + offset, (size_t)count, out, need);
    if (got != (long)need) return -1;
    if (predictor == 2) ts_undo_predictor8(out, rows, row_bytes, samples);
    if (t->release_reads && count >= 16384) {
        static long page = 0;
        if (!page) page = sysconf(_SC_PAGESIZE);
        uintptr_t from = ((uintptr_t)(t->data + offset) + page - 1) & ~(uintptr_t)(page - 1);
        uintptr_t to = ((uintptr_t)(t->data + offset + count)) & ~(uintptr_t)(page - 1);
        if (to > from) madvise((void *)from, to - from, MADV_DONTNEED);
    }
    return got;
}

// MARK: - Writing a pyramid from compressed tiles

struct ts_tiff_writer {
    TIFF *tif;
    int failed;
    char message[256];
};

static int ts_on_write_error(TIFF *tif, void *user, const char *module, const char *fmt, va_list ap) {
    (void)tif;
    ts_tiff_writer *w = (ts_tiff_writer *)user;
    if (w && !w->message[0]) {
        char text[200];
        vsnprintf(text, sizeof text, fmt, ap);
        snprintf(w->message, sizeof w->message, "%s: %s", module && module[0] ? module : "libtiff", text);
    }
    if (w) w->failed = 1;
    return 1;
}

static int ts_on_write_warning(TIFF *tif, void *user, const char *module, const char *fmt, va_list ap) {
    (void)tif; (void)user; (void)module; (void)fmt; (void)ap;
    return 1;
}

ts_tiff_writer *ts_tiff_writer_open(int fd, int bigtiff) {
    pthread_once(&ts_tiff_once, ts_tiff_quiet);
    ts_tiff_writer *w = calloc(1, sizeof *w);
    if (!w) { close(fd); return NULL; }
    TIFFOpenOptions *opts = TIFFOpenOptionsAlloc();
    if (!opts) { free(w); close(fd); return NULL; }
    TIFFOpenOptionsSetErrorHandlerExtR(opts, ts_on_write_error, w);
    TIFFOpenOptionsSetWarningHandlerExtR(opts, ts_on_write_warning, w);
    w->tif = TIFFFdOpenExt(fd, "output", bigtiff ? "w8" : "w", opts);
    TIFFOpenOptionsFree(opts);
    if (!w->tif) {
        close(fd);  // libtiff closes it only once it has opened
        w->failed = 1;
        if (!w->message[0]) snprintf(w->message, sizeof w->message, "cannot start the TIFF");
    }
    return w;
}

const char *ts_tiff_writer_message(const ts_tiff_writer *w) { return w->message; }

int ts_tiff_writer_level(ts_tiff_writer *w, uint32_t width, uint32_t height, uint32_t tile, int channels,
                         int deflate, int reduced, int subifds, const uint8_t *tables, uint32_t tables_size) {
    if (!w->tif || w->failed) return -1;
    TIFF *t = w->tif;
    TIFFSetField(t, TIFFTAG_SUBFILETYPE, reduced ? FILETYPE_REDUCEDIMAGE : 0);
    TIFFSetField(t, TIFFTAG_IMAGEWIDTH, width);
    TIFFSetField(t, TIFFTAG_IMAGELENGTH, height);
    TIFFSetField(t, TIFFTAG_TILEWIDTH, tile);
    TIFFSetField(t, TIFFTAG_TILELENGTH, tile);
    TIFFSetField(t, TIFFTAG_BITSPERSAMPLE, 8);
    TIFFSetField(t, TIFFTAG_SAMPLESPERPIXEL, channels);
    TIFFSetField(t, TIFFTAG_PLANARCONFIG, PLANARCONFIG_CONTIG);
    TIFFSetField(t, TIFFTAG_COMPRESSION, deflate ? COMPRESSION_ADOBE_DEFLATE : COMPRESSION_JPEG);
    TIFFSetField(t, TIFFTAG_ORIENTATION, ORIENTATION_TOPLEFT);
    if (deflate) {
        TIFFSetField(t, TIFFTAG_PREDICTOR, PREDICTOR_HORIZONTAL);
        TIFFSetField(t, TIFFTAG_PHOTOMETRIC, channels >= 3 ? PHOTOMETRIC_RGB : PHOTOMETRIC_MINISBLACK);
        if (channels == 4) {
            uint16_t extra[1] = {EXTRASAMPLE_UNASSALPHA};
            TIFFSetField(t, TIFFTAG_EXTRASAMPLES, 1, extra);
        }
    } else if (channels == 3) {
        // The tiles are JFIF streams: full-range YCbCr, chroma halved both ways.
        TIFFSetField(t, TIFFTAG_PHOTOMETRIC, PHOTOMETRIC_YCBCR);
        TIFFSetField(t, TIFFTAG_YCBCRSUBSAMPLING, 2, 2);
        float ref[6] = {0, 255, 128, 255, 128, 255};
        TIFFSetField(t, TIFFTAG_REFERENCEBLACKWHITE, ref);
    } else {
        TIFFSetField(t, TIFFTAG_PHOTOMETRIC, PHOTOMETRIC_MINISBLACK);
    }
    if (tables && tables_size > 0) TIFFSetField(t, TIFFTAG_JPEGTABLES, tables_size, tables);
    if (subifds > 0) {
        uint64_t offsets[64] = {0};
        if (subifds > 64) subifds = 64;
        TIFFSetField(t, TIFFTAG_SUBIFD, (uint16_t)subifds, offsets);
    }
    return w->failed ? -1 : 0;
}

int ts_tiff_writer_tile(ts_tiff_writer *w, uint32_t index, const uint8_t *data, size_t size) {
    if (!w->tif || w->failed) return -1;
    if (TIFFWriteRawTile(w->tif, index, (void *)data, (tmsize_t)size) != (tmsize_t)size) {
        if (!w->message[0]) snprintf(w->message, sizeof w->message, "writing tile %u failed", index);
        w->failed = 1;
        return -1;
    }
    return 0;
}

int ts_tiff_writer_end_level(ts_tiff_writer *w) {
    if (!w->tif || w->failed) return -1;
    if (!TIFFWriteDirectory(w->tif)) {
        if (!w->message[0]) snprintf(w->message, sizeof w->message, "writing a directory failed");
        w->failed = 1;
        return -1;
    }
    return 0;
}

int ts_tiff_writer_close(ts_tiff_writer *w) {
    if (!w) return -1;
    int failed = w->failed;
    if (w->tif) {
        TIFFFlush(w->tif);
        TIFFClose(w->tif);
        failed = failed || w->failed;
    }
    free(w);
    return failed ? -1 : 0;
}

uint8_t *ts_tiff_deflate_tile(const uint8_t *pixels, int width, int rows, size_t stride, int channels, int level,
                              size_t *size) {
    size_t row_bytes = (size_t)width * channels, n = row_bytes * rows;
    uint8_t *diff = malloc(n ? n : 1);
    if (!diff) return NULL;
    for (int y = 0; y < rows; y++) {
        const uint8_t *src = pixels + (size_t)y * stride;
        uint8_t *dst = diff + (size_t)y * row_bytes;
        memcpy(dst, src, (size_t)channels);
        for (size_t i = channels; i < row_bytes; i++) dst[i] = (uint8_t)(src[i] - src[i - channels]);
    }
    uLongf bound = compressBound((uLong)n);
    uint8_t *out = malloc(bound);
    if (!out) { free(diff); return NULL; }
    int rc = compress2(out, &bound, diff, (uLong)n, level);
    free(diff);
    if (rc != Z_OK) { free(out); return NULL; }
    *size = bound;
    return out;
}
