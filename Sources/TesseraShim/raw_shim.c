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
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

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
    __typeof__(&libraw_COLOR) color;
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
        {"libraw_COLOR", (void **)&lr.color},
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
    int unpacked;
    int release_input;  ///< the input maps a file: its pages go back to the kernel as LibRaw reads them
    // Half size straight from the mosaic (ts_raw_half_*): per CFA colour its black level and
    // scale to 16 bits with the white balance, the camera-to-sRGB matrix, the 2x2 pattern.
    float black[4], scale[4], matrix[3][3];
    int pattern[2][2];
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
    if (err == LIBRAW_IO_ERROR && !r->msg[0])
        snprintf(r->msg, sizeof r->msg, "the file ends before what its header points to");
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

// LibRaw 0.20's metadata parsers copy strings from the file into fixed buffers (a hostile
// Hasselblad model overflowed one: glibc's fortify check aborts the process). The header is
// first read in a child process: one that dies there costs this file a typed error, not the
// worker and the other tasks it runs. The child only parses (no pixels), under a processor
// time limit; LibRaw's parse is deterministic, so what the child survives the parent does.
static int ts_raw_probe(const uint8_t *data, size_t size, double cpu_seconds, int *signal_number) {
    *signal_number = 0;
    pid_t pid = fork();
    if (pid < 0) return 0;  // no process to spare: parsed in place, as before
    if (pid == 0) {
        // A crash here ends this process by its signal: the parent's handlers (the Swift
        // runtime's backtracer, a sanitizer's report) are not inherited into the parse.
        static const int fatal[] = {SIGABRT, SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP, SIGSYS};
        for (size_t i = 0; i < sizeof fatal / sizeof *fatal; i++) signal(fatal[i], SIG_DFL);
        struct rlimit cpu = {.rlim_cur = (rlim_t)(cpu_seconds > 0 ? cpu_seconds + 1 : 10), .rlim_max = RLIM_INFINITY};
        cpu.rlim_max = cpu.rlim_cur + 1;
        setrlimit(RLIMIT_CPU, &cpu);
        int devnull = open("/dev/null", O_WRONLY);
        if (devnull >= 0) { dup2(devnull, 2); dup2(devnull, 1); }
        libraw_data_t *d = lr.init(LIBRAW_OPIONS_NO_DATAERR_CALLBACK);
        if (!d) _exit(0);
        lr.open_buffer(d, (void *)data, size);
        _exit(0);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) return 0;
    }
    if (WIFSIGNALED(status)) {
        *signal_number = WTERMSIG(status);
        return -1;
    }
    // The child ends with 0 when the parse returns; anything else (a sanitizer's exit code)
    // is a parse that did not.
    if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
        *signal_number = -WEXITSTATUS(status);
        return -1;
    }
    return 0;
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
    int sig = 0;
    if (ts_raw_probe(data, size, 0, &sig) != 0) {
        if (sig == SIGXCPU)
            snprintf(r->msg, sizeof r->msg, "LibRaw %s read this file's header for 10 s of processor time without an end", lr.version());
        else if (sig < 0)
            snprintf(r->msg, sizeof r->msg, "LibRaw %s failed on this file's header (exit %d)", lr.version(), -sig);
        else
            snprintf(r->msg, sizeof r->msg, "LibRaw %s failed on this file's header (%s)", lr.version(), strsignal(sig));
        *code = sig == SIGXCPU ? TS_RAW_TIMEOUT : TS_RAW_CORRUPT;
        return r;
    }
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

void ts_raw_release_input(ts_raw *r, int release) { r->release_input = release; }

// While LibRaw copies the sensor data out of a file mapping, a second thread hands the
// mapping's pages back every few milliseconds: a page LibRaw still reads faults in again
// from the page cache (the mapping is never written), so at most what LibRaw reads between
// two passes stays resident besides its own copy, not the whole file (decision 030).
struct ts_raw_releaser {
    void *start;
    size_t length;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    int done;
};

static void *ts_raw_release_loop(void *context) {
    struct ts_raw_releaser *x = context;
    pthread_mutex_lock(&x->lock);
    while (!x->done) {
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        t.tv_nsec += 4 * 1000 * 1000;
        if (t.tv_nsec >= 1000000000L) { t.tv_sec++; t.tv_nsec -= 1000000000L; }
        pthread_cond_timedwait(&x->wake, &x->lock, &t);
        if (!x->done) madvise(x->start, x->length, MADV_DONTNEED);
    }
    pthread_mutex_unlock(&x->lock);
    return NULL;
}

int ts_raw_unpack(ts_raw *r, double cpu_seconds) {
    if (r->unpacked) return 0;
    r->data_errors = 0;
    r->cancelled = 0;
    r->msg[0] = 0;
    r->cpu_deadline = cpu_seconds > 0 ? ts_thread_seconds() + cpu_seconds : 0;
    struct ts_raw_releaser x = {.lock = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER};
    pthread_t releaser;
    int releasing = 0;
    long page = sysconf(_SC_PAGESIZE);
    if (r->release_input && page > 0 && r->size >= (size_t)8 << 20) {
        uintptr_t a = ((uintptr_t)r->data + (uintptr_t)page - 1) / (uintptr_t)page * (uintptr_t)page;
        uintptr_t b = ((uintptr_t)r->data + r->size) / (uintptr_t)page * (uintptr_t)page;
        x.start = (void *)a;
        x.length = b > a ? b - a : 0;
        releasing = x.length > 0 && pthread_create(&releaser, NULL, ts_raw_release_loop, &x) == 0;
    }
    int code = ts_raw_code(r, lr.unpack(r->d));
    if (releasing) {
        pthread_mutex_lock(&x.lock);
        x.done = 1;
        pthread_cond_signal(&x.wake);
        pthread_mutex_unlock(&x.lock);
        pthread_join(releaser, NULL);
        madvise(x.start, x.length, MADV_DONTNEED);
    }
    if (!code) r->unpacked = 1;
    return code;
}

int ts_raw_half_begin(ts_raw *r, double cpu_seconds, int *width, int *height) {
    int code = ts_raw_unpack(r, cpu_seconds);
    if (code) return code;
    libraw_data_t *d = r->d;
    // A 2x2 Bayer mosaic of three colours with the sensor data as 16-bit values; anything
    // else (X-Trans, four colours, linear DNGs, a black-level pattern) goes through LibRaw.
    unsigned f = d->idata.filters;
    if (!d->rawdata.raw_image || d->idata.colors != 3 || f < 1000 || d->color.cblack[4] * d->color.cblack[5] > 0) return -1;
    if (d->sizes.width < 2 || d->sizes.height < 2) return -1;
    for (int y = 0; y < 2; y++)
        for (int x = 0; x < 2; x++) r->pattern[y][x] = lr.color(d, y, x);
    int seen[4] = {0};
    for (int y = 0; y < 2; y++) for (int x = 0; x < 2; x++) if (r->pattern[y][x] >= 0 && r->pattern[y][x] < 4) seen[r->pattern[y][x]]++;
    if (seen[0] != 1 || seen[2] != 1 || seen[1] + seen[3] != 2) return -1;
    // White balance as shot (else the camera's daylight), normalised as LibRaw does with
    // highlights clipped: the smallest multiplier 1, the white level to 65535.
    float mul[4];
    int camera = d->color.cam_mul[0] > 0 && d->color.cam_mul[1] > 0 && d->color.cam_mul[2] > 0;
    for (int c = 0; c < 4; c++) mul[c] = camera ? d->color.cam_mul[c] : d->color.pre_mul[c];
    if (mul[1] <= 0) mul[1] = 1;
    if (mul[3] <= 0) mul[3] = mul[1];
    float least = mul[0];
    for (int c = 1; c < 4; c++) if (mul[c] < least) least = mul[c];
    if (!(least > 0)) return -1;
    for (int c = 0; c < 4; c++) {
        r->black[c] = (float)(d->color.black + d->color.cblack[c]);
        float range = (float)d->color.maximum - r->black[c];
        if (!(range > 0)) return -1;
        r->scale[c] = mul[c] / least * 65535.0f / range;
    }
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) r->matrix[i][j] = d->color.rgb_cam[i][j];
    *width = d->sizes.width / 2;
    *height = d->sizes.height / 2;
    return 0;
}

static inline float ts_clip16(float v) { return v < 0 ? 0 : v > 65535 ? 65535 : v; }

int ts_raw_half_rows(ts_raw *r, int first, int count, uint16_t *out, size_t stride) {
    libraw_data_t *d = r->d;
    if (r->cpu_deadline > 0 && ts_thread_seconds() > r->cpu_deadline) {
        snprintf(r->msg, sizeof r->msg, "decoding took longer than the task may");
        return TS_RAW_TIMEOUT;
    }
    const int w = d->sizes.width / 2, top = d->sizes.top_margin, left = d->sizes.left_margin;
    const size_t pitch = d->sizes.raw_pitch / 2;
    for (int k = 0; k < count; k++) {
        int y = (first + k) * 2;
        const uint16_t *rows[2] = {d->rawdata.raw_image + (size_t)(top + y) * pitch + left,
                                   d->rawdata.raw_image + (size_t)(top + y + 1) * pitch + left};
        uint16_t *o = out + (size_t)k * stride;
        for (int x = 0; x < w; x++) {
            float rgb[3] = {0, 0, 0};
            for (int dy = 0; dy < 2; dy++)
                for (int dx = 0; dx < 2; dx++) {
                    int c = r->pattern[dy][dx];
                    float v = ts_clip16(((float)rows[dy][2 * x + dx] - r->black[c]) * r->scale[c]);
                    rgb[c == 3 ? 1 : c] += c == 1 || c == 3 ? v * 0.5f : v;
                }
            for (int i = 0; i < 3; i++) {
                float v = r->matrix[i][0] * rgb[0] + r->matrix[i][1] * rgb[1] + r->matrix[i][2] * rgb[2];
                o[3 * x + i] = (uint16_t)(ts_clip16(v) + 0.5f);
            }
        }
    }
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
    int code = ts_raw_unpack(r, cpu_seconds);
    if (code) return code;
    r->cpu_deadline = cpu_seconds > 0 ? ts_thread_seconds() + cpu_seconds : 0;
    int err = lr.dcraw_process(d);
    code = ts_raw_code(r, err);
    if (code) return code;
    // A three-colour (or one-colour) image unturned is read where LibRaw made it, 4 samples a
    // pixel: with no automatic brightening and gamma 1 its output curve is the identity, so
    // `dcraw_make_mem_image` would only copy it (150 MB for 24 MP).
    if (d->image && (d->idata.colors == 3 || d->idata.colors == 1) && d->sizes.flip == 0 &&
        d->sizes.iwidth > 0 && d->sizes.iheight > 0) {
        out->handle = NULL;
        out->pixels = (const uint16_t *)d->image;
        out->width = d->sizes.iwidth;
        out->height = d->sizes.iheight;
        out->colors = d->idata.colors;
        out->step = 4;
        return 0;
    }
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
    out->step = img->colors;
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
