// libpng wrappers with their setjmp guards. See include/tessera_shim.h.
#include "tessera_shim.h"

#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// MARK: - Decoder

struct ts_png_dec {
    png_structp png;
    png_infop info;
    const uint8_t *data;
    size_t size, pos;
    int has_icc;
    char warning[128];
    char message[256];
};

static void ts_png_error(png_structp png, png_const_charp msg) {
    ts_png_dec *d = png_get_error_ptr(png);
    // libpng reports the reason an IHDR is refused (e.g. over the user limits) as a
    // warning, then fails with a generic "Invalid IHDR data": keep both.
    if (d->warning[0])
        snprintf(d->message, sizeof d->message, "%s (%s)", msg, d->warning);
    else
        snprintf(d->message, sizeof d->message, "%s", msg);
    png_longjmp(png, 1);
}

static void ts_png_warning(png_structp png, png_const_charp msg) {
    ts_png_dec *d = png_get_error_ptr(png);
    if (d && !d->warning[0]) snprintf(d->warning, sizeof d->warning, "%s", msg);
}

static void ts_png_enc_warning(png_structp png, png_const_charp msg) {
    (void)png;
    (void)msg;
}

static void ts_png_read(png_structp png, png_bytep out, size_t n) {
    ts_png_dec *d = png_get_io_ptr(png);
    if (n > d->size - d->pos) png_error(png, "file is truncated");
    memcpy(out, d->data + d->pos, n);
    d->pos += n;
}

ts_png_dec *ts_png_dec_create(const uint8_t *data, size_t size) {
    ts_png_dec *d = calloc(1, sizeof *d);
    if (!d) return NULL;
    d->data = data;
    d->size = size;
    d->png = png_create_read_struct(PNG_LIBPNG_VER_STRING, d, ts_png_error, ts_png_warning);
    if (!d->png) { free(d); return NULL; }
    d->info = png_create_info_struct(d->png);
    if (!d->info) {
        png_destroy_read_struct(&d->png, NULL, NULL);
        free(d);
        return NULL;
    }
    png_set_read_fn(d->png, d, ts_png_read);
    return d;
}

void ts_png_dec_destroy(ts_png_dec *d) {
    if (!d) return;
    png_destroy_read_struct(&d->png, &d->info, NULL);
    free(d);
}

const char *ts_png_dec_message(const ts_png_dec *d) { return d->message; }

int ts_png_dec_read_header(ts_png_dec *d, uint32_t max_w, uint32_t max_h, ts_png_header *out) {
    if (setjmp(png_jmpbuf(d->png))) return -1;
    if (d->size < 8 || png_sig_cmp(d->data, 0, 8) != 0) {
        snprintf(d->message, sizeof d->message, "not a PNG file (bad signature)");
        return -1;
    }
    png_set_user_limits(d->png, max_w, max_h);
    png_set_chunk_cache_max(d->png, 1000);
    png_set_chunk_malloc_max(d->png, 64u << 20);
    png_read_info(d->png, d->info);
    memset(out, 0, sizeof *out);
    png_uint_32 w, h;
    int depth, color, interlace;
    png_get_IHDR(d->png, d->info, &w, &h, &depth, &color, &interlace, NULL, NULL);
    out->width = w;
    out->height = h;
    out->bit_depth = depth;
    out->color_type = color;
    out->interlaced = interlace != PNG_INTERLACE_NONE;
    out->has_trns = png_get_valid(d->png, d->info, PNG_INFO_tRNS) != 0;
    out->has_srgb = png_get_valid(d->png, d->info, PNG_INFO_sRGB) != 0;
    double g = 0;
    if (png_get_gAMA(d->png, d->info, &g)) {
        out->has_gama = 1;
        out->gama = g;
    }
    png_charp name;
    int comp;
    png_bytep profile;
    png_uint_32 plen;
    if (png_get_iCCP(d->png, d->info, &name, &comp, &profile, &plen) && plen > 0) {
        out->icc = profile;
        out->icc_len = plen;
        d->has_icc = 1;
    }
    png_uint_32 px = 0, py = 0;
    int punit = 0;
    if (png_get_pHYs(d->png, d->info, &px, &py, &punit)) {
        out->phys_x = px;
        out->phys_y = py;
        out->phys_unit = punit;
    }
#ifdef PNG_eXIf_SUPPORTED
    png_bytep exif;
    png_uint_32 elen;
    if (png_get_eXIf_1(d->png, d->info, &elen, &exif) && elen > 0) {
        out->exif = exif;
        out->exif_len = elen;
    }
#endif
    return 0;
}

int ts_png_dec_start(ts_png_dec *d, int correct_gamma, int *channels, int *needs_whole_image) {
    if (setjmp(png_jmpbuf(d->png))) return -1;
    png_structp png = d->png;
    png_infop info = d->info;
    int color = png_get_color_type(png, info);
    int depth = png_get_bit_depth(png, info);
    if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
    if (color == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
    if (png_get_valid(png, info, PNG_INFO_tRNS)) png_set_tRNS_to_alpha(png);
    if (depth == 16) png_set_scale_16(png);
    // Gray with alpha becomes RGBA: the pipeline handles 1, 3 and 4 channels.
    if (color == PNG_COLOR_TYPE_GRAY_ALPHA ||
        (color == PNG_COLOR_TYPE_GRAY && png_get_valid(png, info, PNG_INFO_tRNS)))
        png_set_gray_to_rgb(png);
    if (correct_gamma && !d->has_icc && !png_get_valid(png, info, PNG_INFO_sRGB)) {
        double g;
        // The second argument overrides the file gamma, so pass the gAMA value itself.
        if (png_get_gAMA(png, info, &g) && g > 0) png_set_gamma(png, PNG_DEFAULT_sRGB, g);
    }
    int passes = png_set_interlace_handling(png);
    png_read_update_info(png, info);
    *channels = png_get_channels(png, info);
    *needs_whole_image = passes > 1;
    if (png_get_bit_depth(png, info) != 8 ||
        (*channels != 1 && *channels != 3 && *channels != 4)) {
        snprintf(d->message, sizeof d->message, "unsupported PNG layout after expansion (%d channels, %d bits)",
                 *channels, png_get_bit_depth(png, info));
        return -1;
    }
    return 0;
}

int ts_png_dec_read_rows(ts_png_dec *d, uint8_t *buf, size_t stride, int rows) {
    volatile int done = 0;
    if (setjmp(png_jmpbuf(d->png))) return -1 - done;
    for (int i = 0; i < rows; i++) {
        png_read_row(d->png, buf + (size_t)i * stride, NULL);
        done = i + 1;
    }
    return rows;
}

void ts_png_dec_set_lenient(ts_png_dec *d) {
    // Image data read 512 bytes at a time (not 8 KB): a file cut short gives every row its
    // data completes, less at most 512 bytes' worth.
    png_set_compression_buffer_size(d->png, 512);
    // What a browser does: chunks with bad CRCs and image data with a bad Adler-32 used as they are.
    png_set_crc_action(d->png, PNG_CRC_QUIET_USE, PNG_CRC_QUIET_USE);
#ifdef PNG_IGNORE_ADLER32
    png_set_option(d->png, PNG_IGNORE_ADLER32, PNG_OPTION_ON);
#endif
}

int ts_png_dec_read_image(ts_png_dec *d, uint8_t *buf, size_t stride) {
    png_uint_32 h = png_get_image_height(d->png, d->info);
    png_bytep *rows = malloc(sizeof(png_bytep) * (h ? h : 1));
    if (!rows) {
        snprintf(d->message, sizeof d->message, "out of memory");
        return -1;
    }
    for (png_uint_32 y = 0; y < h; y++) rows[y] = buf + (size_t)y * stride;
    if (setjmp(png_jmpbuf(d->png))) {
        free(rows);
        return -1;
    }
    png_read_image(d->png, rows);
    free(rows);
    return 0;
}

int ts_png_dec_finish(ts_png_dec *d) {
    if (setjmp(png_jmpbuf(d->png))) return -1;
    png_read_end(d->png, NULL);
    return 0;
}

// MARK: - Encoder

typedef struct {
    uint8_t *data;
    size_t len, cap;
    int failed;
} ts_buffer;

static void ts_png_write(png_structp png, png_bytep bytes, size_t n) {
    ts_buffer *b = png_get_io_ptr(png);
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 65536;
        while (cap < b->len + n) cap *= 2;
        uint8_t *p = realloc(b->data, cap);
        if (!p) png_error(png, "out of memory");
        b->data = p;
        b->cap = cap;
    }
    memcpy(b->data + b->len, bytes, n);
    b->len += n;
}

static void ts_png_flush(png_structp png) { (void)png; }

typedef struct { char *buf; size_t len; } ts_errbuf;

static void ts_png_enc_error(png_structp png, png_const_charp msg) {
    ts_errbuf *e = png_get_error_ptr(png);
    snprintf(e->buf, e->len, "%s", msg);
    png_longjmp(png, 1);
}

int ts_png_encode(const uint8_t *pixels, int width, int height, size_t stride, int channels,
                  int compression_level, const uint8_t *icc, unsigned icc_len, uint32_t ppm_x, uint32_t ppm_y,
                  uint8_t **out, size_t *out_len, char *err, size_t err_len) {
    ts_errbuf e = {err, err_len};
    *out = NULL;
    *out_len = 0;
    // The output buffer is on the heap and only reached through this pointer, which
    // is not modified after setjmp.
    ts_buffer *b = calloc(1, sizeof *b);
    if (!b) { snprintf(err, err_len, "out of memory"); return -1; }
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &e, ts_png_enc_error, ts_png_enc_warning);
    if (!png) { free(b); snprintf(err, err_len, "out of memory"); return -1; }
    png_infop info = png_create_info_struct(png);
    if (!info) {
        png_destroy_write_struct(&png, NULL);
        free(b);
        snprintf(err, err_len, "out of memory");
        return -1;
    }
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_write_struct(&png, &info);
        free(b->data);
        free(b);
        return -1;
    }
    png_set_write_fn(png, b, ts_png_write, ts_png_flush);
    int color = channels == 1 ? PNG_COLOR_TYPE_GRAY
              : channels == 3 ? PNG_COLOR_TYPE_RGB : PNG_COLOR_TYPE_RGB_ALPHA;
    if (channels != 1 && channels != 3 && channels != 4) png_error(png, "unsupported channel count");
    png_set_IHDR(png, info, (png_uint_32)width, (png_uint_32)height, 8, color,
                 PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_set_compression_level(png, compression_level);
    if (icc && icc_len) png_set_iCCP(png, info, "icc", PNG_COMPRESSION_TYPE_BASE, icc, icc_len);
    if (ppm_x && ppm_y) png_set_pHYs(png, info, ppm_x, ppm_y, PNG_RESOLUTION_METER);
    png_write_info(png, info);
    for (int y = 0; y < height; y++) png_write_row(png, (png_const_bytep)(pixels + (size_t)y * stride));
    png_write_end(png, info);
    png_destroy_write_struct(&png, &info);
    *out = b->data;
    *out_len = b->len;
    free(b);
    return 0;
}
