// libtiff wrappers: a TIFF in memory, errors kept per handle (never printed), the
// variadic tag getters, and the RGBA reader for what Tessera does not unpack itself.
// See include/tessera_shim.h.
#include "tessera_shim.h"

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
    int rgba_started;
    int release_reads;
    TIFFRGBAImage rgba;
    char message[256];
    char warning[160];
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
    if (t && !t->message[0]) {
        char text[200];
        vsnprintf(text, sizeof text, fmt, ap);
        if (module && module[0]) snprintf(t->message, sizeof t->message, "%s: %s", module, text);
        else snprintf(t->message, sizeof t->message, "%s", text);
    }
    return 1;  // handled: libtiff's global handler (stderr) is not called
}

static int ts_on_warning(TIFF *tif, void *user, const char *module, const char *fmt, va_list ap) {
    (void)tif;
    ts_tiff *t = (ts_tiff *)user;
    if (t) {
        if (!t->warnings) {
            char text[120];
            vsnprintf(text, sizeof text, fmt, ap);
            snprintf(t->warning, sizeof t->warning, "%s: %s", module ? module : "libtiff", text);
        }
        t->warnings++;
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
