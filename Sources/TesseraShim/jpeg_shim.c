// libjpeg wrappers with their setjmp guards. See include/tessera_shim.h.
#include "tessera_shim.h"

#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <jpeglib.h>
#include <jerror.h>

#include "jpeg_internal.h"

void ts_free(void *p) { free(p); }

typedef struct {
    struct jpeg_error_mgr pub;
    jmp_buf jump;
    int strict;
    char message[JMSG_LENGTH_MAX + 64];
    // The first warning that lost pixels (lenient): its text, the rows output before it and
    // the scan it came in.
    int lost;
    int lost_row, lost_scan, lost_eof;
    char lost_message[JMSG_LENGTH_MAX];
} ts_error_mgr;

static void ts_error_exit(j_common_ptr cinfo) {
    ts_error_mgr *err = (ts_error_mgr *)cinfo->err;
    (*cinfo->err->format_message)(cinfo, err->message);
    longjmp(err->jump, 1);
}

/// Warnings that mean pixels were lost (truncation, corrupt entropy data):
/// in strict mode they end decoding instead of producing a grey-padded image.
static int ts_is_data_loss(int code) {
    return code == JWRN_JPEG_EOF || code == JWRN_HIT_MARKER || code == JWRN_MUST_RESYNC ||
           code == JWRN_HUFF_BAD_CODE || code == JWRN_NOT_SEQUENTIAL;
}

static void ts_emit_message(j_common_ptr cinfo, int level) {
    ts_error_mgr *err = (ts_error_mgr *)cinfo->err;
    if (level >= 0) return;  // trace messages
    cinfo->err->num_warnings++;
    if (err->strict && ts_is_data_loss(cinfo->err->msg_code)) {
        (*cinfo->err->format_message)(cinfo, err->message);
        longjmp(err->jump, 1);
    }
    if (!err->lost && ts_is_data_loss(cinfo->err->msg_code)) {
        err->lost = 1;
        err->lost_eof = cinfo->err->msg_code == JWRN_JPEG_EOF;
        (*cinfo->err->format_message)(cinfo, err->lost_message);
        if (cinfo->is_decompressor) {
            j_decompress_ptr dinfo = (j_decompress_ptr)cinfo;
            err->lost_row = (int)dinfo->output_scanline;
            err->lost_scan = dinfo->input_scan_number;
        }
    }
}

static void ts_output_message(j_common_ptr cinfo) { (void)cinfo; }

static void ts_error_init(ts_error_mgr *err, int strict) {
    jpeg_std_error(&err->pub);
    err->pub.error_exit = ts_error_exit;
    err->pub.emit_message = ts_emit_message;
    err->pub.output_message = ts_output_message;
    err->strict = strict;
    err->message[0] = 0;
    err->lost = 0;
    err->lost_message[0] = 0;
}

// MARK: - Decoder

// MARK: Whole-image coefficient arrays (progressive and multi-scan JPEGs)
//
// A progressive JPEG is decoded into a coefficient array of the whole image (2–3 bytes
// per pixel: 72 MB for 24 MP), which libjpeg allocates with malloc (mmap at that size)
// and zeroes. Faulting it in 4 KB pages, each zeroed by the kernel, then zeroed again, was
// about a quarter of such a decode. The decoder's memory manager is a table of methods
// that a program may replace (libjpeg's libjpeg.txt, "Memory management"): the image
// pool's block arrays come from here instead — one anonymous mapping each, already zero,
// marked for transparent huge pages, counted against the same memory limit, unmapped
// when the image pool is freed.

struct jvirt_barray_control {
    JBLOCKROW *rows;
    JDIMENSION rows_in_array, blocks_per_row;
    void *memory;
    size_t bytes;
    struct jvirt_barray_control *next;
};

typedef struct {
    struct jpeg_memory_mgr library;  // the methods replaced, for everything else
    struct jvirt_barray_control *arrays;
    size_t bytes;
} ts_block_arrays;

static void ts_arrays_release(ts_block_arrays *a) {
    while (a->arrays) {
        struct jvirt_barray_control *next = a->arrays->next;
        if (a->arrays->memory) munmap(a->arrays->memory, a->arrays->bytes);
        free(a->arrays->rows);
        free(a->arrays);
        a->arrays = next;
    }
    a->bytes = 0;
}

struct ts_jpeg_dec {
    struct jpeg_decompress_struct cinfo;
    ts_block_arrays block_arrays;
    ts_error_mgr err;
    struct jpeg_progress_mgr progress;
    int max_scans;
    int created, started;
    const uint8_t *data;
    size_t size;
    // Split source (ts_jpeg_dec_set_body): `data` is a header, `body` the entropy data after it.
    struct jpeg_source_mgr split;
    const uint8_t *body;
    size_t body_size;
    int body_given;
};

static void ts_progress(j_common_ptr cinfo) {
    ts_jpeg_dec *d = (ts_jpeg_dec *)((char *)cinfo - offsetof(ts_jpeg_dec, cinfo));
    if (cinfo->is_decompressor && d->max_scans > 0) {
        j_decompress_ptr dinfo = (j_decompress_ptr)cinfo;
        if (dinfo->input_scan_number > d->max_scans) {
            snprintf(d->err.message, sizeof d->err.message,
                     "progressive JPEG has more than %d scans", d->max_scans);
            longjmp(d->err.jump, 1);
        }
    }
}

static ts_block_arrays *ts_arrays_of(j_common_ptr cinfo) {
    ts_jpeg_dec *d = (ts_jpeg_dec *)((char *)cinfo - offsetof(ts_jpeg_dec, cinfo));
    return &d->block_arrays;
}

static jvirt_barray_ptr ts_request_barray(j_common_ptr cinfo, int pool, boolean pre_zero, JDIMENSION blocks_per_row,
                                          JDIMENSION rows, JDIMENSION max_access) {
    ts_block_arrays *a = ts_arrays_of(cinfo);
    if (pool != JPOOL_IMAGE)
        return a->library.request_virt_barray(cinfo, pool, pre_zero, blocks_per_row, rows, max_access);
    struct jvirt_barray_control *v = calloc(1, sizeof *v);
    if (!v) ERREXIT1(cinfo, JERR_OUT_OF_MEMORY, 11);
    v->rows_in_array = rows;
    v->blocks_per_row = blocks_per_row;
    v->next = a->arrays;
    a->arrays = v;
    return v;
}

static void ts_realize_arrays(j_common_ptr cinfo) {
    ts_block_arrays *a = ts_arrays_of(cinfo);
    size_t wanted = 0;
    for (struct jvirt_barray_control *v = a->arrays; v; v = v->next) {
        if (v->memory) continue;
        size_t row = (size_t)v->blocks_per_row * sizeof(JBLOCK);
        if (v->rows_in_array && row > SIZE_MAX / v->rows_in_array) ERREXIT1(cinfo, JERR_OUT_OF_MEMORY, 12);
        wanted += row * v->rows_in_array;
    }
    // The limit libjpeg applies to its own arrays (beyond it, it would need a backing store).
    long limit = cinfo->mem->max_memory_to_use;
    if (limit > 0 && a->bytes + wanted > (size_t)limit) ERREXIT(cinfo, JERR_NO_BACKING_STORE);
    for (struct jvirt_barray_control *v = a->arrays; v; v = v->next) {
        if (v->memory) continue;
        size_t row = (size_t)v->blocks_per_row * sizeof(JBLOCK);
        size_t bytes = row * v->rows_in_array;
        if (bytes == 0) bytes = 1;
        void *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) ERREXIT1(cinfo, JERR_OUT_OF_MEMORY, 13);
        v->memory = m;
        v->bytes = bytes;
        a->bytes += bytes;
#ifdef MADV_HUGEPAGE
        if (bytes >= (2u << 20)) (void)madvise(m, bytes, MADV_HUGEPAGE);
#endif
        v->rows = malloc(((size_t)v->rows_in_array + 1) * sizeof(JBLOCKROW));
        if (!v->rows) ERREXIT1(cinfo, JERR_OUT_OF_MEMORY, 14);
        for (JDIMENSION r = 0; r < v->rows_in_array; r++) v->rows[r] = (JBLOCKROW)((char *)m + (size_t)r * row);
    }
    a->library.realize_virt_arrays(cinfo);
}

static JBLOCKARRAY ts_access_barray(j_common_ptr cinfo, jvirt_barray_ptr ptr, JDIMENSION start, JDIMENSION count,
                                    boolean writable) {
    ts_block_arrays *a = ts_arrays_of(cinfo);
    for (struct jvirt_barray_control *v = a->arrays; v; v = v->next) {
        if (v != ptr) continue;
        if (!v->rows || start > v->rows_in_array || count > v->rows_in_array - start)
            ERREXIT(cinfo, JERR_BAD_VIRTUAL_ACCESS);
        return v->rows + start;
    }
    return a->library.access_virt_barray(cinfo, ptr, start, count, writable);
}

static void ts_free_pool(j_common_ptr cinfo, int pool) {
    ts_block_arrays *a = ts_arrays_of(cinfo);
    if (pool == JPOOL_IMAGE) ts_arrays_release(a);
    a->library.free_pool(cinfo, pool);
}

ts_jpeg_dec *ts_jpeg_dec_create(const uint8_t *data, size_t size, int strict,
                                int max_scans, long max_memory) {
    ts_jpeg_dec *d = calloc(1, sizeof *d);
    if (!d) return NULL;
    d->data = data;
    d->size = size;
    d->max_scans = max_scans;
    ts_error_init(&d->err, strict);
    d->cinfo.err = &d->err.pub;
    if (setjmp(d->err.jump)) {
        // jpeg_create_decompress can only fail on allocation.
        if (d->created) jpeg_destroy_decompress(&d->cinfo);
        free(d);
        return NULL;
    }
    jpeg_create_decompress(&d->cinfo);
    d->created = 1;
    d->block_arrays.library = *d->cinfo.mem;
    d->cinfo.mem->request_virt_barray = ts_request_barray;
    d->cinfo.mem->realize_virt_arrays = ts_realize_arrays;
    d->cinfo.mem->access_virt_barray = ts_access_barray;
    d->cinfo.mem->free_pool = ts_free_pool;
    if (max_memory > 0) d->cinfo.mem->max_memory_to_use = max_memory;
    d->progress.progress_monitor = ts_progress;
    d->cinfo.progress = &d->progress;
    return d;
}

void ts_jpeg_dec_destroy(ts_jpeg_dec *d) {
    if (!d) return;
    ts_arrays_release(&d->block_arrays);  // jpeg_destroy frees its pools without the method
    if (d->created) jpeg_destroy_decompress(&d->cinfo);
    free(d);
}

const char *ts_jpeg_dec_message(const ts_jpeg_dec *d) { return d->err.message; }

const char *ts_jpeg_dec_loss(const ts_jpeg_dec *d, int *row, int *scan, int *eof) {
    if (!d->err.lost) return NULL;
    *row = d->err.lost_row;
    *scan = d->err.lost_scan;
    *eof = d->err.lost_eof;
    return d->err.lost_message;
}

// MARK: Split source: a header buffer, then a body buffer, then a fake EOI (as jpeg_mem_src).

static const JOCTET ts_fake_eoi[2] = {0xFF, JPEG_EOI};

static void ts_split_init(j_decompress_ptr c) { (void)c; }

static boolean ts_split_fill(j_decompress_ptr c) {
    ts_jpeg_dec *d = (ts_jpeg_dec *)((char *)c - offsetof(ts_jpeg_dec, cinfo));
    if (!d->body_given && d->body_size > 0) {
        d->body_given = 1;
        d->split.next_input_byte = d->body;
        d->split.bytes_in_buffer = d->body_size;
        return TRUE;
    }
    WARNMS(c, JWRN_JPEG_EOF);
    d->split.next_input_byte = ts_fake_eoi;
    d->split.bytes_in_buffer = 2;
    return TRUE;
}

static void ts_split_skip(j_decompress_ptr c, long n) {
    ts_jpeg_dec *d = (ts_jpeg_dec *)((char *)c - offsetof(ts_jpeg_dec, cinfo));
    if (n <= 0) return;
    while ((size_t)n > d->split.bytes_in_buffer) {
        n -= (long)d->split.bytes_in_buffer;
        ts_split_fill(c);
    }
    d->split.next_input_byte += n;
    d->split.bytes_in_buffer -= (size_t)n;
}

static void ts_split_term(j_decompress_ptr c) { (void)c; }

void ts_jpeg_dec_set_body(ts_jpeg_dec *d, const uint8_t *body, size_t size) {
    d->body = body;
    d->body_size = size;
}

long ts_jpeg_dec_input_offset(const ts_jpeg_dec *d) {
    if (d->body || !d->cinfo.src) return -1;
    const JOCTET *p = d->cinfo.src->next_input_byte;
    // Not inside the file (the fake EOI a damaged file ends with): no offset.
    if (p < d->data || p > d->data + d->size) return -1;
    return (long)(p - d->data);
}

long ts_jpeg_nth_restart(const uint8_t *data, size_t size, size_t start, long n) {
    if (n <= 0) return (long)start;
    long seen = 0;
    const uint8_t *p = data + start, *end = data + size;
    while (p + 1 < end) {
        const uint8_t *ff = memchr(p, 0xFF, (size_t)(end - p) - 1);
        if (!ff) return -1;
        uint8_t m = ff[1];
        if (m >= 0xD0 && m <= 0xD7) {
            // Markers count RST0..RST7 in turn: a missing or extra one means the intervals
            // are not where the header says, so no start can be trusted.
            if (m != 0xD0 + (seen & 7)) return -1;
            if (++seen == n) return (long)(ff + 2 - data);
            p = ff + 2;
        } else if (m == 0x00 || m == 0xFF) {
            p = ff + 1;
        } else {
            return -1;  // another marker (EOI, DNL, a second scan): not a single restart-coded scan
        }
    }
    return -1;
}

int ts_jpeg_dec_read_header(ts_jpeg_dec *d, ts_jpeg_header *out) {
    if (setjmp(d->err.jump)) return -1;
    if (d->size == 0) {
        snprintf(d->err.message, sizeof d->err.message, "empty input");
        return -1;
    }
    if (d->body) {
        d->split.init_source = ts_split_init;
        d->split.fill_input_buffer = ts_split_fill;
        d->split.skip_input_data = ts_split_skip;
        d->split.resync_to_restart = jpeg_resync_to_restart;
        d->split.term_source = ts_split_term;
        d->split.next_input_byte = d->data;
        d->split.bytes_in_buffer = d->size;
        d->cinfo.src = &d->split;
    } else {
        jpeg_mem_src(&d->cinfo, d->data, (unsigned long)d->size);
        // A split-source decoder (a band restarted at a marker) needs no metadata.
        jpeg_save_markers(&d->cinfo, JPEG_APP0 + 1, 0xFFFF);
        jpeg_save_markers(&d->cinfo, JPEG_APP0 + 2, 0xFFFF);
    }
    if (jpeg_read_header(&d->cinfo, TRUE) != JPEG_HEADER_OK) {
        snprintf(d->err.message, sizeof d->err.message, "no image in JPEG data stream");
        return -1;
    }
    struct jpeg_decompress_struct *c = &d->cinfo;
    memset(out, 0, sizeof *out);
    out->width = (int)c->image_width;
    out->height = (int)c->image_height;
    out->num_components = c->num_components;
    out->jpeg_color_space = c->jpeg_color_space;
    out->progressive = c->progressive_mode;
    out->arith_code = c->arith_code;
    out->data_precision = c->data_precision;
    out->saw_adobe_marker = c->saw_Adobe_marker;
    out->adobe_transform = c->Adobe_transform;
    out->max_h_samp = c->max_h_samp_factor;
    out->max_v_samp = c->max_v_samp_factor;
    for (int i = 0; i < c->num_components && i < 4; i++) {
        out->h_samp[i] = c->comp_info[i].h_samp_factor;
        out->v_samp[i] = c->comp_info[i].v_samp_factor;
    }
    out->restart_interval = (int)c->restart_interval;
    out->comps_in_scan = c->comps_in_scan;
    return 0;
}

int ts_jpeg_dec_density(const ts_jpeg_dec *d, int *unit, int *x, int *y) {
    const struct jpeg_decompress_struct *c = &d->cinfo;
    if (!c->saw_JFIF_marker || (c->density_unit != 1 && c->density_unit != 2) || !c->X_density || !c->Y_density) return 0;
    *unit = c->density_unit;
    *x = c->X_density;
    *y = c->Y_density;
    return 1;
}

const uint8_t *ts_jpeg_dec_exif(const ts_jpeg_dec *d, unsigned *len) {
    for (jpeg_saved_marker_ptr m = d->cinfo.marker_list; m; m = m->next) {
        if (m->marker == JPEG_APP0 + 1 && m->data_length >= 6 &&
            memcmp(m->data, "Exif\0\0", 6) == 0) {
            *len = m->data_length - 6;
            return m->data + 6;
        }
    }
    *len = 0;
    return NULL;
}

int ts_jpeg_dec_icc(ts_jpeg_dec *d, uint8_t **icc, unsigned *len) {
    *icc = NULL;
    *len = 0;
    if (setjmp(d->err.jump)) return -1;
    JOCTET *p = NULL;
    unsigned int n = 0;
    if (jpeg_read_icc_profile(&d->cinfo, &p, &n) && p) {
        *icc = p;
        *len = n;
    }
    return 0;
}

int ts_jpeg_dec_start(ts_jpeg_dec *d, int scale_num, int scale_denom, int out_layout,
                      int fast, int *out_w, int *out_h, int *out_components) {
    if (setjmp(d->err.jump)) return -1;
    struct jpeg_decompress_struct *c = &d->cinfo;
    c->scale_num = (unsigned)scale_num;
    c->scale_denom = (unsigned)scale_denom;
    switch (out_layout) {
    case TS_OUT_GRAY: c->out_color_space = JCS_GRAYSCALE; break;
    case TS_OUT_RGB: c->out_color_space = JCS_EXT_RGB; break;
    case TS_OUT_RGBX: c->out_color_space = JCS_EXT_RGBX; break;
    case TS_OUT_CMYK: c->out_color_space = JCS_CMYK; break;
    default:
        snprintf(d->err.message, sizeof d->err.message, "unknown output layout %d", out_layout);
        return -1;
    }
    if (fast) {
        c->dct_method = JDCT_IFAST;
        c->do_fancy_upsampling = FALSE;
    }
    ts_jpeg_progressive_prepare(c);  // jpeg_entropy.c: a progressive file's scans
    jpeg_start_decompress(c);
    ts_jpeg_entropy_install(c);  // jpeg_entropy.c: a single-scan baseline file's Huffman decoding
    ts_jpeg_idct_install(c);     // jpeg_idct.c: the inverse DCTs libjpeg-turbo has only in C, in SIMD
    d->started = 1;
    *out_w = (int)c->output_width;
    *out_h = (int)c->output_height;
    *out_components = c->output_components;
    return 0;
}

int ts_jpeg_dec_read(ts_jpeg_dec *d, uint8_t *buf, size_t stride, int max_rows, int *rows) {
    *rows = 0;
    if (setjmp(d->err.jump)) return -1;
    struct jpeg_decompress_struct *c = &d->cinfo;
    JSAMPROW ptrs[16];
    int done = 0;
    while (done < max_rows && c->output_scanline < c->output_height) {
        int want = max_rows - done;
        if (want > 16) want = 16;
        for (int i = 0; i < want; i++) ptrs[i] = buf + (size_t)(done + i) * stride;
        JDIMENSION got = jpeg_read_scanlines(c, ptrs, (JDIMENSION)want);
        if (got == 0) {
            snprintf(d->err.message, sizeof d->err.message, "decoder made no progress");
            return -1;
        }
        done += (int)got;
        *rows = done;
    }
    return 0;
}

int ts_jpeg_dec_skip(ts_jpeg_dec *d, int rows, int *skipped) {
    *skipped = 0;
    if (setjmp(d->err.jump)) return -1;
    *skipped = (int)jpeg_skip_scanlines(&d->cinfo, (JDIMENSION)rows);
    return 0;
}

int ts_jpeg_dec_finish(ts_jpeg_dec *d) {
    if (setjmp(d->err.jump)) return -1;
    if (!d->started) return 0;
    if (d->cinfo.output_scanline < d->cinfo.output_height)
        jpeg_abort_decompress(&d->cinfo);
    else
        jpeg_finish_decompress(&d->cinfo);
    d->started = 0;
    return 0;
}

// MARK: - Encoder

/// Growable memory destination. Unlike jpeg_mem_dest, the live buffer is always
/// reachable from here, so the error path can free it exactly once.
typedef struct {
    struct jpeg_destination_mgr pub;
    uint8_t *buf;
    size_t cap;
} ts_mem_dest;

static void ts_dest_init(j_compress_ptr c) {
    ts_mem_dest *d = (ts_mem_dest *)c->dest;
    d->pub.next_output_byte = d->buf;
    d->pub.free_in_buffer = d->cap;
}

static boolean ts_dest_empty(j_compress_ptr c) {
    ts_mem_dest *d = (ts_mem_dest *)c->dest;
    size_t used = d->cap;
    uint8_t *grown = realloc(d->buf, d->cap * 2);
    if (!grown) ERREXIT1(c, JERR_OUT_OF_MEMORY, 1);
    d->buf = grown;
    d->cap *= 2;
    d->pub.next_output_byte = d->buf + used;
    d->pub.free_in_buffer = d->cap - used;
    return TRUE;
}

static void ts_dest_term(j_compress_ptr c) { (void)c; }

/// All encoder state lives here, on the heap: nothing a longjmp returns to is a
/// local modified after setjmp.
typedef struct {
    struct jpeg_compress_struct c;
    ts_error_mgr err;
    ts_mem_dest dest;
    int created;
} ts_jpeg_enc;

// jpeg_frontend.c: Tessera's quantisation tables, and its quantiser.
void ts_jpeg_tessera_tables(j_compress_ptr c, int quality);
void ts_jpeg_frontend_write(j_compress_ptr c, const uint8_t *pixels, size_t stride, int components, int trellis,
                            int own_tables);

int ts_jpeg_encode(const uint8_t *pixels, int width, int height, size_t stride,
                   int components, const ts_jpeg_enc_params *params,
                   const uint8_t *icc, unsigned icc_len,
                   const uint8_t *app1, unsigned app1_len,
                   uint8_t **out, unsigned long *out_len,
                   char *err_out, size_t err_len) {
    *out = NULL;
    *out_len = 0;
    ts_jpeg_enc *e = calloc(1, sizeof *e);
    if (!e) {
        snprintf(err_out, err_len, "out of memory");
        return -1;
    }
    e->dest.cap = 65536;
    e->dest.buf = malloc(e->dest.cap);
    if (!e->dest.buf) {
        free(e);
        snprintf(err_out, err_len, "out of memory");
        return -1;
    }
    ts_error_init(&e->err, 0);
    e->c.err = &e->err.pub;
    if (setjmp(e->err.jump)) {
        snprintf(err_out, err_len, "%s", e->err.message);
        if (e->created) jpeg_destroy_compress(&e->c);
        free(e->dest.buf);
        free(e);
        return -1;
    }
    struct jpeg_compress_struct *c = &e->c;
    jpeg_create_compress(c);
    e->created = 1;
    e->dest.pub.init_destination = ts_dest_init;
    e->dest.pub.empty_output_buffer = ts_dest_empty;
    e->dest.pub.term_destination = ts_dest_term;
    c->dest = &e->dest.pub;
    c->image_width = (JDIMENSION)width;
    c->image_height = (JDIMENSION)height;
    c->input_components = components;
    c->in_color_space = components == 1 ? JCS_GRAYSCALE : JCS_EXT_RGB;
    jpeg_set_defaults(c);
    jpeg_set_quality(c, params->quality, TRUE);
    if (params->effort >= 1) ts_jpeg_tessera_tables(c, params->quality);
    c->dct_method = JDCT_ISLOW;
    if (components == 3) {
        int h = params->subsampling == 2 ? 1 : 2;
        int v = params->subsampling == 0 ? 2 : 1;
        c->comp_info[0].h_samp_factor = h;
        c->comp_info[0].v_samp_factor = v;
        for (int i = 1; i < 3; i++) {
            c->comp_info[i].h_samp_factor = 1;
            c->comp_info[i].v_samp_factor = 1;
        }
    }
    c->optimize_coding = params->optimize ? TRUE : FALSE;
    if (params->x_density > 0 && params->y_density > 0) {
        c->density_unit = 1;
        c->X_density = (UINT16)(params->x_density > 65535 ? 65535 : params->x_density);
        c->Y_density = (UINT16)(params->y_density > 65535 ? 65535 : params->y_density);
    }
    c->restart_interval = (unsigned int)(params->restart_interval > 0 ? params->restart_interval : 0);
    if (params->progressive) jpeg_simple_progression(c);
    // Efforts 2 and 3: Tessera's own quantisers (jpeg_frontend.c), and for sequential JPEGs its
    // Huffman tables; libjpeg-turbo writes the coefficients.
    if (params->effort >= 2) {
        c->optimize_coding = TRUE;
        ts_jpeg_frontend_write(c, pixels, stride, components, params->effort >= 3,
                               !params->progressive && !params->libjpeg_huffman);
    } else {
        jpeg_start_compress(c, TRUE);
    }
    if (app1 && app1_len) jpeg_write_marker(c, JPEG_APP0 + 1, app1, app1_len);
    if (icc && icc_len) jpeg_write_icc_profile(c, icc, icc_len);
    JSAMPROW ptrs[16];
    while (params->effort < 2 && c->next_scanline < c->image_height) {
        int n = 0;
        while (n < 16 && c->next_scanline + n < c->image_height) {
            ptrs[n] = (JSAMPROW)(pixels + (size_t)(c->next_scanline + n) * stride);
            n++;
        }
        jpeg_write_scanlines(c, ptrs, (JDIMENSION)n);
    }
    jpeg_finish_compress(c);
    *out = e->dest.buf;
    *out_len = (unsigned long)(e->dest.cap - e->dest.pub.free_in_buffer);
    jpeg_destroy_compress(c);
    free(e);
    return 0;
}
