// Camera raw through LibRaw (the thread-safe libraw_r), opened at the first raw file like
// FFmpeg (lazy_open.c), fed from memory: the header and metadata, the embedded preview, and
// a decode — half size (one RGB pixel per 2x2 CFA block, no demosaic) or a full demosaic —
// to 16-bit linear sRGB. LibRaw's data errors, memory errors and progress come through its
// callbacks: a data error (bytes past the end, a bad stream) fails the decode, the progress
// callback ends a decode past its processor-time budget. See include/tessera_shim.h.
#define _GNU_SOURCE
#include "tessera_shim.h"
#include "lazy_open.h"

#include <libraw/libraw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static struct {
    __typeof__(&libraw_init) init;
    __typeof__(&libraw_open_buffer) open_buffer;
    __typeof__(&libraw_unpack) unpack;
    __typeof__(&libraw_unpack_thumb) unpack_thumb;
    __typeof__(&libraw_dcraw_process) dcraw_process;
    __typeof__(&libraw_dcraw_make_mem_image) make_mem_image;
    __typeof__(&libraw_dcraw_clear_mem) clear_mem;
    __typeof__(&libraw_close) close;
    __typeof__(&libraw_strerror) strerror;
    __typeof__(&libraw_set_dataerror_handler) set_dataerror_handler;
    __typeof__(&libraw_set_memerror_handler) set_memerror_handler;
    __typeof__(&libraw_set_progress_handler) set_progress_handler;
    __typeof__(&libraw_version) version;
    __typeof__(&libraw_cameraCount) camera_count;
    __typeof__(&libraw_cameraList) camera_list;
    __typeof__(&libraw_unpack_function_name) unpack_function_name;
} lr;

static pthread_once_t ts_raw_once = PTHREAD_ONCE_INIT;
static int ts_raw_loaded = 0;
static char ts_raw_why[256];

static void ts_raw_load(void) {
    static const char *const sonames[] = {"libraw_r.so.20"};
    const ts_lazy_symbol symbols[] = {
        {"libraw_init", (void **)&lr.init},
        {"libraw_open_buffer", (void **)&lr.open_buffer},
        {"libraw_unpack", (void **)&lr.unpack},
        {"libraw_unpack_thumb", (void **)&lr.unpack_thumb},
        {"libraw_dcraw_process", (void **)&lr.dcraw_process},
        {"libraw_dcraw_make_mem_image", (void **)&lr.make_mem_image},
        {"libraw_dcraw_clear_mem", (void **)&lr.clear_mem},
        {"libraw_close", (void **)&lr.close},
        {"libraw_strerror", (void **)&lr.strerror},
        {"libraw_set_dataerror_handler", (void **)&lr.set_dataerror_handler},
        {"libraw_set_memerror_handler", (void **)&lr.set_memerror_handler},
        {"libraw_set_progress_handler", (void **)&lr.set_progress_handler},
        {"libraw_version", (void **)&lr.version},
        {"libraw_cameraCount", (void **)&lr.camera_count},
        {"libraw_cameraList", (void **)&lr.camera_list},
        {"libraw_unpack_function_name", (void **)&lr.unpack_function_name},
    };
    ts_lazy_failure f;
    if (ts_lazy_open(sonames, 1, symbols, sizeof symbols / sizeof symbols[0], &f) != 0) {
        if (f.missing)
            snprintf(ts_raw_why, sizeof ts_raw_why, "this LibRaw has no %s", f.missing);
        else
            snprintf(ts_raw_why, sizeof ts_raw_why, "LibRaw (%s) is not installed: %s (Debian: apt-get install libraw20)",
                     f.soname, f.reason);
        return;
    }
    ts_raw_loaded = 1;
}

int ts_raw_available(void) {
    pthread_once(&ts_raw_once, ts_raw_load);
    return ts_raw_loaded;
}

const char *ts_raw_unavailable_reason(void) { return ts_raw_why; }

struct ts_raw {
    libraw_data_t *d;
    const uint8_t *data;
    size_t size;
    int data_errors;
    int memory_errors;
    double cpu_deadline;  ///< thread processor seconds after which a decode is cancelled (0: none)
    int cancelled;
    char msg[256];
};

static double ts_thread_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

// LibRaw's defaults print these on stderr; here they are counted (and said in the error).
static void ts_raw_data_error(void *context, const char *file, const int offset) {
    (void)file;
    ts_raw *r = context;
    if (r->data_errors++ == 0)
        snprintf(r->msg, sizeof r->msg, "the sensor data is damaged or ends early (at byte %d)", offset);
}

static void ts_raw_memory_error(void *context, const char *file, const char *where) {
    (void)file;
    ts_raw *r = context;
    if (r->memory_errors++ == 0) snprintf(r->msg, sizeof r->msg, "out of memory (%s)", where ? where : "LibRaw");
}

static int ts_raw_progress(void *context, enum LibRaw_progress stage, int iteration, int expected) {
    (void)stage; (void)iteration; (void)expected;
    ts_raw *r = context;
    if (r->cpu_deadline > 0 && ts_thread_seconds() > r->cpu_deadline) {
        r->cancelled = 1;
        return 1;  // LibRaw stops: LIBRAW_CANCELLED_BY_CALLBACK
    }
    return 0;
}

static int ts_raw_code(ts_raw *r, int err) {
    if (err == LIBRAW_SUCCESS) return r->data_errors ? TS_RAW_TRUNCATED : 0;
    if (r->cancelled || err == LIBRAW_CANCELLED_BY_CALLBACK) {
        snprintf(r->msg, sizeof r->msg, "decoding took longer than the task may");
        return TS_RAW_TIMEOUT;
    }
    if (!r->msg[0] || err == LIBRAW_FILE_UNSUPPORTED) snprintf(r->msg, sizeof r->msg, "%s", lr.strerror(err));
    switch (err) {
    case LIBRAW_FILE_UNSUPPORTED: return TS_RAW_UNSUPPORTED;
    case LIBRAW_UNSUFFICIENT_MEMORY: case LIBRAW_MEMPOOL_OVERFLOW: return TS_RAW_NOMEM;
    case LIBRAW_TOO_BIG: return TS_RAW_TOO_BIG;
    case LIBRAW_IO_ERROR: return TS_RAW_TRUNCATED;
    case LIBRAW_NO_THUMBNAIL: case LIBRAW_UNSUPPORTED_THUMBNAIL: return TS_RAW_NO_PREVIEW;
    case LIBRAW_DATA_ERROR: return r->data_errors ? TS_RAW_TRUNCATED : TS_RAW_CORRUPT;
    default: return r->memory_errors ? TS_RAW_NOMEM : TS_RAW_CORRUPT;
    }
}

ts_raw *ts_raw_open(const uint8_t *data, size_t size, int *code) {
    *code = 0;
    ts_raw *r = calloc(1, sizeof *r);
    if (!r) { *code = TS_RAW_NOMEM; return NULL; }
    if (!ts_raw_available()) {
        snprintf(r->msg, sizeof r->msg, "%s", ts_raw_why);
        *code = TS_RAW_UNAVAILABLE;
        return r;
    }
    r->data = data;
    r->size = size;
    r->d = lr.init(LIBRAW_OPIONS_NO_DATAERR_CALLBACK);
    if (!r->d) { snprintf(r->msg, sizeof r->msg, "out of memory"); *code = TS_RAW_NOMEM; return r; }
    lr.set_dataerror_handler(r->d, ts_raw_data_error, r);
    lr.set_memerror_handler(r->d, ts_raw_memory_error, r);
    lr.set_progress_handler(r->d, ts_raw_progress, r);
    int err = lr.open_buffer(r->d, (void *)data, size);
    *code = ts_raw_code(r, err);
    return r;
}

const char *ts_raw_message(const ts_raw *r) { return r->msg; }

void ts_raw_close(ts_raw *r) {
    if (!r) return;
    if (r->d) lr.close(r->d);
    free(r);
}

static double ts_raw_dms(const float v[3]) { return (double)v[0] + (double)v[1] / 60.0 + (double)v[2] / 3600.0; }

void ts_raw_info_get(ts_raw *r, ts_raw_info *info) {
    memset(info, 0, sizeof *info);
    if (!r->d) return;
    libraw_data_t *d = r->d;
    info->width = d->sizes.width;
    info->height = d->sizes.height;
    info->raw_width = d->sizes.raw_width;
    info->raw_height = d->sizes.raw_height;
    info->flip = d->sizes.flip;
    info->colors = d->idata.colors;
    info->filters = d->idata.filters;
    info->is_dng = d->idata.dng_version != 0;
    info->maximum = (int)d->color.maximum;
    snprintf(info->make, sizeof info->make, "%s", d->idata.make);
    snprintf(info->model, sizeof info->model, "%s", d->idata.model);
    snprintf(info->lens, sizeof info->lens, "%s", d->lens.Lens);
    snprintf(info->cdesc, sizeof info->cdesc, "%s", d->idata.cdesc);
    info->iso = d->other.iso_speed;
    info->shutter = d->other.shutter;
    info->aperture = d->other.aperture;
    info->focal = d->other.focal_len;
    info->timestamp = (long long)d->other.timestamp;
    if (d->other.parsed_gps.gpsparsed) {
        info->has_gps = 1;
        double lat = ts_raw_dms(d->other.parsed_gps.latitude), lon = ts_raw_dms(d->other.parsed_gps.longitude);
        info->latitude = d->other.parsed_gps.latref == 'S' ? -lat : lat;
        info->longitude = d->other.parsed_gps.longref == 'W' ? -lon : lon;
        info->altitude = d->other.parsed_gps.altitude;
    }
    info->baseline_exposure = d->color.dng_levels.baseline_exposure;
    info->thumb_format = (int)d->thumbnail.tformat;
    info->thumb_width = d->thumbnail.twidth;
    info->thumb_height = d->thumbnail.theight;
    info->thumb_length = d->thumbnail.tlength;
    const char *f = lr.unpack_function_name(d);
    snprintf(info->decoder, sizeof info->decoder, "%s", f ? f : "");
}

int ts_raw_preview(ts_raw *r, const uint8_t **bytes, size_t *length, int *format, int *width, int *height) {
    *bytes = NULL;
    *length = 0;
    int err = lr.unpack_thumb(r->d);
    int code = ts_raw_code(r, err);
    if (code) return code;
    libraw_thumbnail_t *t = &r->d->thumbnail;
    if (!t->thumb || t->tlength == 0) {
        snprintf(r->msg, sizeof r->msg, "no embedded preview");
        return TS_RAW_NO_PREVIEW;
    }
    *bytes = (const uint8_t *)t->thumb;
    *length = t->tlength;
    *format = (int)t->tformat;
    *width = t->twidth;
    *height = t->theight;
    return 0;
}

int ts_raw_decode(ts_raw *r, int half, int quality, double cpu_seconds, ts_raw_image *out) {
    memset(out, 0, sizeof *out);
    libraw_data_t *d = r->d;
    r->data_errors = 0;
    r->cancelled = 0;
    r->msg[0] = 0;
    r->cpu_deadline = cpu_seconds > 0 ? ts_thread_seconds() + cpu_seconds : 0;
    // 16-bit linear sRGB: the camera's colours through LibRaw's matrices, white balance as
    // shot, no automatic brightening, highlights clipped (LibRaw's default, -H 0).
    d->params.half_size = half ? 1 : 0;
    d->params.user_qual = quality;
    d->params.use_camera_wb = 1;
    d->params.use_camera_matrix = 1;
    d->params.output_color = 1;
    d->params.output_bps = 16;
    d->params.gamm[0] = 1.0;
    d->params.gamm[1] = 1.0;
    d->params.no_auto_bright = 1;
    d->params.highlight = 0;
    d->params.user_flip = 0;  // orientation is the pipeline's
    int err = lr.unpack(d);
    int code = ts_raw_code(r, err);
    if (code) return code;
    err = lr.dcraw_process(d);
    code = ts_raw_code(r, err);
    if (code) return code;
    int e = 0;
    libraw_processed_image_t *img = lr.make_mem_image(d, &e);
    if (!img) return ts_raw_code(r, e ? e : LIBRAW_UNSUFFICIENT_MEMORY);
    if (img->type != LIBRAW_IMAGE_BITMAP || img->bits != 16 || (img->colors != 3 && img->colors != 1)) {
        snprintf(r->msg, sizeof r->msg, "LibRaw gave a %d-bit image of %d colours", img->bits, img->colors);
        lr.clear_mem(img);
        return TS_RAW_CORRUPT;
    }
    out->handle = img;
    out->pixels = (const uint16_t *)img->data;
    out->width = img->width;
    out->height = img->height;
    out->colors = img->colors;
    return 0;
}

void ts_raw_image_free(ts_raw_image *image) {
    if (image && image->handle) lr.clear_mem((libraw_processed_image_t *)image->handle);
    if (image) memset(image, 0, sizeof *image);
}

const char *ts_raw_version(void) { return ts_raw_available() ? lr.version() : ""; }
int ts_raw_camera_count(void) { return ts_raw_available() ? lr.camera_count() : 0; }
const char *ts_raw_camera(int i) {
    if (!ts_raw_available() || i < 0 || i >= lr.camera_count()) return NULL;
    return lr.camera_list()[i];
}
