// Video poster frames and previews through FFmpeg's libraries (libavformat, libavcodec,
// libswscale), in the worker process. The container is read from memory only: a custom
// AVIOContext over the caller's bytes, the demuxer named by Tessera's own detection (no
// probing of other demuxers), and io_open refused, so no playlist, reference or URL inside
// a file can make FFmpeg open anything else. Every call returns 0 or a TS_VIDEO_* code with
// a message; nothing here aborts.
#include "tessera_shim.h"
#include "lazy_open.h"

#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/csp.h>
#include <libavutil/display.h>
#include <libavutil/imgutils.h>
#include <libavutil/pixdesc.h>
#include <libavutil/time.h>
#include <libswscale/swscale.h>
#include <libavformat/version.h>
#include <libavcodec/version.h>
#include <libswscale/version.h>
#include <libavutil/version.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

// MARK: FFmpeg, loaded at the first video
//
// FFmpeg's four libraries bring about 90 shared libraries with them (codecs, TLS, network,
// Blu-ray, ...): linked, they were half of every `tessera` process's start-up (31 ms of
// loading against 15 without them), paid by each worker, each `render` and each client
// command, most of which never open a video. They are opened here at the first video
// instead, by the sonames of the headers this was compiled against, and every function
// this file calls goes through the table below (the defines after it). A machine without
// them fails video inputs with `unsupported-feature`, and only those.

static struct {
    __typeof__(&av_csp_primaries_desc_from_id) av_csp_primaries_desc_from_id;
    __typeof__(&av_display_rotation_get) av_display_rotation_get;
    __typeof__(&av_frame_alloc) av_frame_alloc;
    __typeof__(&av_frame_free) av_frame_free;
    __typeof__(&av_frame_unref) av_frame_unref;
    __typeof__(&av_free) av_free;
    __typeof__(&av_freep) av_freep;
    __typeof__(&av_gettime_relative) av_gettime_relative;
    __typeof__(&av_log_set_level) av_log_set_level;
    __typeof__(&av_malloc) av_malloc;
    __typeof__(&av_max_alloc) av_max_alloc;
    __typeof__(&av_pix_fmt_desc_get) av_pix_fmt_desc_get;
    __typeof__(&av_strdup) av_strdup;
    __typeof__(&av_strerror) av_strerror;
    __typeof__(&av_packet_alloc) av_packet_alloc;
    __typeof__(&av_packet_free) av_packet_free;
    __typeof__(&av_packet_unref) av_packet_unref;
    __typeof__(&avcodec_alloc_context3) avcodec_alloc_context3;
    __typeof__(&avcodec_flush_buffers) avcodec_flush_buffers;
    __typeof__(&avcodec_free_context) avcodec_free_context;
    __typeof__(&avcodec_get_name) avcodec_get_name;
    __typeof__(&avcodec_open2) avcodec_open2;
    __typeof__(&avcodec_parameters_to_context) avcodec_parameters_to_context;
    __typeof__(&avcodec_receive_frame) avcodec_receive_frame;
    __typeof__(&avcodec_send_packet) avcodec_send_packet;
    __typeof__(&av_find_best_stream) av_find_best_stream;
    __typeof__(&av_find_input_format) av_find_input_format;
    __typeof__(&av_read_frame) av_read_frame;
    __typeof__(&av_seek_frame) av_seek_frame;
    __typeof__(&av_stream_get_side_data) av_stream_get_side_data;
    __typeof__(&avformat_alloc_context) avformat_alloc_context;
    __typeof__(&avformat_close_input) avformat_close_input;
    __typeof__(&avformat_find_stream_info) avformat_find_stream_info;
    __typeof__(&avformat_index_get_entry_from_timestamp) avformat_index_get_entry_from_timestamp;
    __typeof__(&avformat_open_input) avformat_open_input;
    __typeof__(&avio_alloc_context) avio_alloc_context;
    __typeof__(&avio_context_free) avio_context_free;
    __typeof__(&avio_feof) avio_feof;
    __typeof__(&sws_freeContext) sws_freeContext;
    __typeof__(&sws_getCachedContext) sws_getCachedContext;
    __typeof__(&sws_getCoefficients) sws_getCoefficients;
    __typeof__(&sws_scale) sws_scale;
    __typeof__(&sws_setColorspaceDetails) sws_setColorspaceDetails;
} ff;

static pthread_once_t ff_once = PTHREAD_ONCE_INIT;
static char ff_error[256];

static void ff_load(void) {
    static const char *const sonames[] = {
        "libavutil.so." AV_STRINGIFY(LIBAVUTIL_VERSION_MAJOR),
        "libavcodec.so." AV_STRINGIFY(LIBAVCODEC_VERSION_MAJOR),
        "libavformat.so." AV_STRINGIFY(LIBAVFORMAT_VERSION_MAJOR),
        "libswscale.so." AV_STRINGIFY(LIBSWSCALE_VERSION_MAJOR),
    };
    static const ts_lazy_symbol symbols[] = {
    {"av_csp_primaries_desc_from_id", (void **)&ff.av_csp_primaries_desc_from_id},
    {"av_display_rotation_get", (void **)&ff.av_display_rotation_get},
    {"av_frame_alloc", (void **)&ff.av_frame_alloc},
    {"av_frame_free", (void **)&ff.av_frame_free},
    {"av_frame_unref", (void **)&ff.av_frame_unref},
    {"av_free", (void **)&ff.av_free},
    {"av_freep", (void **)&ff.av_freep},
    {"av_gettime_relative", (void **)&ff.av_gettime_relative},
    {"av_log_set_level", (void **)&ff.av_log_set_level},
    {"av_malloc", (void **)&ff.av_malloc},
    {"av_max_alloc", (void **)&ff.av_max_alloc},
    {"av_pix_fmt_desc_get", (void **)&ff.av_pix_fmt_desc_get},
    {"av_strdup", (void **)&ff.av_strdup},
    {"av_strerror", (void **)&ff.av_strerror},
    {"av_packet_alloc", (void **)&ff.av_packet_alloc},
    {"av_packet_free", (void **)&ff.av_packet_free},
    {"av_packet_unref", (void **)&ff.av_packet_unref},
    {"avcodec_alloc_context3", (void **)&ff.avcodec_alloc_context3},
    {"avcodec_flush_buffers", (void **)&ff.avcodec_flush_buffers},
    {"avcodec_free_context", (void **)&ff.avcodec_free_context},
    {"avcodec_get_name", (void **)&ff.avcodec_get_name},
    {"avcodec_open2", (void **)&ff.avcodec_open2},
    {"avcodec_parameters_to_context", (void **)&ff.avcodec_parameters_to_context},
    {"avcodec_receive_frame", (void **)&ff.avcodec_receive_frame},
    {"avcodec_send_packet", (void **)&ff.avcodec_send_packet},
    {"av_find_best_stream", (void **)&ff.av_find_best_stream},
    {"av_find_input_format", (void **)&ff.av_find_input_format},
    {"av_read_frame", (void **)&ff.av_read_frame},
    {"av_seek_frame", (void **)&ff.av_seek_frame},
    {"av_stream_get_side_data", (void **)&ff.av_stream_get_side_data},
    {"avformat_alloc_context", (void **)&ff.avformat_alloc_context},
    {"avformat_close_input", (void **)&ff.avformat_close_input},
    {"avformat_find_stream_info", (void **)&ff.avformat_find_stream_info},
    {"avformat_index_get_entry_from_timestamp", (void **)&ff.avformat_index_get_entry_from_timestamp},
    {"avformat_open_input", (void **)&ff.avformat_open_input},
    {"avio_alloc_context", (void **)&ff.avio_alloc_context},
    {"avio_context_free", (void **)&ff.avio_context_free},
    {"avio_feof", (void **)&ff.avio_feof},
    {"sws_freeContext", (void **)&ff.sws_freeContext},
    {"sws_getCachedContext", (void **)&ff.sws_getCachedContext},
    {"sws_getCoefficients", (void **)&ff.sws_getCoefficients},
    {"sws_scale", (void **)&ff.sws_scale},
    {"sws_setColorspaceDetails", (void **)&ff.sws_setColorspaceDetails},
    };
    ts_lazy_failure failed;
    if (ts_lazy_open(sonames, 4, symbols, sizeof symbols / sizeof symbols[0], &failed) == 0) return;
    if (failed.soname) {
        snprintf(ff_error, sizeof ff_error, "video inputs need FFmpeg's libraries, and %s could not be loaded (%s)",
                 failed.soname, failed.reason);
    } else {
        snprintf(ff_error, sizeof ff_error, "video inputs need FFmpeg's libraries, and they lack %s", failed.missing);
    }
}

/// Loads FFmpeg once per process; NULL when it is there, else why not.
static const char *ff_ready(void) {
    pthread_once(&ff_once, ff_load);
    return ff_error[0] ? ff_error : NULL;
}

#define av_csp_primaries_desc_from_id (*ff.av_csp_primaries_desc_from_id)
#define av_display_rotation_get (*ff.av_display_rotation_get)
#define av_frame_alloc (*ff.av_frame_alloc)
#define av_frame_free (*ff.av_frame_free)
#define av_frame_unref (*ff.av_frame_unref)
#define av_free (*ff.av_free)
#define av_freep (*ff.av_freep)
#define av_gettime_relative (*ff.av_gettime_relative)
#define av_log_set_level (*ff.av_log_set_level)
#define av_malloc (*ff.av_malloc)
#define av_max_alloc (*ff.av_max_alloc)
#define av_pix_fmt_desc_get (*ff.av_pix_fmt_desc_get)
#define av_strdup (*ff.av_strdup)
#define av_strerror (*ff.av_strerror)
#define av_packet_alloc (*ff.av_packet_alloc)
#define av_packet_free (*ff.av_packet_free)
#define av_packet_unref (*ff.av_packet_unref)
#define avcodec_alloc_context3 (*ff.avcodec_alloc_context3)
#define avcodec_flush_buffers (*ff.avcodec_flush_buffers)
#define avcodec_free_context (*ff.avcodec_free_context)
#define avcodec_get_name (*ff.avcodec_get_name)
#define avcodec_open2 (*ff.avcodec_open2)
#define avcodec_parameters_to_context (*ff.avcodec_parameters_to_context)
#define avcodec_receive_frame (*ff.avcodec_receive_frame)
#define avcodec_send_packet (*ff.avcodec_send_packet)
#define av_find_best_stream (*ff.av_find_best_stream)
#define av_find_input_format (*ff.av_find_input_format)
#define av_read_frame (*ff.av_read_frame)
#define av_seek_frame (*ff.av_seek_frame)
#define av_stream_get_side_data (*ff.av_stream_get_side_data)
#define avformat_alloc_context (*ff.avformat_alloc_context)
#define avformat_close_input (*ff.avformat_close_input)
#define avformat_find_stream_info (*ff.avformat_find_stream_info)
#define avformat_index_get_entry_from_timestamp (*ff.avformat_index_get_entry_from_timestamp)
#define avformat_open_input (*ff.avformat_open_input)
#define avio_alloc_context (*ff.avio_alloc_context)
#define avio_context_free (*ff.avio_context_free)
#define avio_feof (*ff.avio_feof)
#define sws_freeContext (*ff.sws_freeContext)
#define sws_getCachedContext (*ff.sws_getCachedContext)
#define sws_getCoefficients (*ff.sws_getCoefficients)
#define sws_scale (*ff.sws_scale)
#define sws_setColorspaceDetails (*ff.sws_setColorspaceDetails)

struct ts_video {
    const uint8_t *data;
    size_t size;
    int64_t pos;
    int hit_end;            // a read or seek reached past the end of the bytes
    int64_t deadline_us;    // av_gettime_relative() limit for demuxing; 0: none
    int timed_out;
    AVIOContext *io;
    AVFormatContext *fmt;
    AVCodecContext *dec;
    const AVCodec *codec;
    int stream;
    AVFrame *frame;         // the current frame (after ts_video_next): kept until another decodes
    AVFrame *next;          // what the decoder fills
    AVPacket *pkt;
    struct SwsContext *sws;
    int draining;           // the demuxer ended: the decoder is being drained
    int ended;
    int64_t packets;        // packets sent since the last seek
    char msg[256];
};

static int fail(ts_video *v, int code, const char *what, int averr) {
    char e[128] = "";
    if (averr) av_strerror(averr, e, sizeof e);
    if (averr && what) snprintf(v->msg, sizeof v->msg, "%s: %s", what, e);
    else if (what) snprintf(v->msg, sizeof v->msg, "%s", what);
    else snprintf(v->msg, sizeof v->msg, "%s", e);
    if (v->timed_out) return TS_VIDEO_TIMEOUT;
    // A file cut short: the demuxer asked for bytes past its end before failing.
    if (code == TS_VIDEO_CORRUPT && v->hit_end) return TS_VIDEO_TRUNCATED;
    return code;
}

const char *ts_video_message(const ts_video *v) { return v->msg; }

static int read_bytes(void *opaque, uint8_t *buf, int n) {
    ts_video *v = opaque;
    if (v->pos >= (int64_t)v->size) {
        v->hit_end = 1;
        return AVERROR_EOF;
    }
    size_t left = v->size - (size_t)v->pos;
    if ((size_t)n > left) n = (int)left;
    memcpy(buf, v->data + v->pos, (size_t)n);
    v->pos += n;
    return n;
}

static int64_t seek_bytes(void *opaque, int64_t offset, int whence) {
    ts_video *v = opaque;
    whence &= ~AVSEEK_FORCE;
    if (whence == AVSEEK_SIZE) return (int64_t)v->size;
    int64_t p;
    if (whence == SEEK_SET) p = offset;
    else if (whence == SEEK_CUR) p = v->pos + offset;
    else if (whence == SEEK_END) p = (int64_t)v->size + offset;
    else return AVERROR(EINVAL);
    if (p < 0) return AVERROR(EINVAL);
    if (p > (int64_t)v->size) v->hit_end = 1;
    v->pos = p;
    return p;
}

static int interrupted(void *opaque) {
    ts_video *v = opaque;
    if (v->deadline_us && av_gettime_relative() > v->deadline_us) {
        v->timed_out = 1;
        return 1;
    }
    return 0;
}

// Nothing inside a file may open another file or URL (HLS, DASH, concat, mov drefs, ...).
static int refuse_open(struct AVFormatContext *s, AVIOContext **pb, const char *url, int flags, AVDictionary **options) {
    (void)s; (void)pb; (void)url; (void)flags; (void)options;
    return AVERROR(EPERM);
}

static const char *demuxer_name(int container) {
    switch (container) {
    case TS_VIDEO_ISOBMFF: return "mov";
    case TS_VIDEO_MATROSKA: return "matroska";
    case TS_VIDEO_AVI: return "avi";
    default: return NULL;
    }
}

ts_video *ts_video_open(const uint8_t *data, size_t size, int container, double seconds, size_t max_alloc, int *code) {
    ts_video *v = calloc(1, sizeof *v);
    if (!v) { *code = TS_VIDEO_NOMEM; return NULL; }
    v->data = data;
    v->size = size;
    v->stream = -1;
    *code = 0;
    const char *missing = ff_ready();
    if (missing) {
        snprintf(v->msg, sizeof v->msg, "%s", missing);
        *code = TS_VIDEO_UNAVAILABLE;
        return v;
    }
    av_log_set_level(AV_LOG_QUIET);
    // No single allocation of FFmpeg's over this (a few bytes may declare a huge element:
    // the fuzzer found a 10 kB Matroska file whose demuxer asked for 300 MB). Process-wide.
    if (max_alloc > 0) av_max_alloc(max_alloc);
    if (seconds > 0) v->deadline_us = av_gettime_relative() + (int64_t)(seconds * 1e6);
    const char *name = demuxer_name(container);
    const AVInputFormat *input = name ? av_find_input_format(name) : NULL;
    if (!input) { *code = fail(v, TS_VIDEO_UNSUPPORTED, "this FFmpeg has no demuxer for the container", 0); return v; }
    unsigned char *buffer = av_malloc(65536);
    v->io = buffer ? avio_alloc_context(buffer, 65536, 0, v, read_bytes, NULL, seek_bytes) : NULL;
    v->fmt = avformat_alloc_context();
    v->frame = av_frame_alloc();
    v->next = av_frame_alloc();
    v->pkt = av_packet_alloc();
    if (!v->io || !v->fmt || !v->frame || !v->next || !v->pkt) {
        if (!v->io) av_free(buffer);
        *code = fail(v, TS_VIDEO_NOMEM, "out of memory", 0);
        return v;
    }
    v->fmt->pb = v->io;
    v->fmt->flags |= AVFMT_FLAG_CUSTOM_IO;
    v->fmt->io_open = refuse_open;
    v->fmt->interrupt_callback.callback = interrupted;
    v->fmt->interrupt_callback.opaque = v;
    v->fmt->protocol_whitelist = av_strdup("none");
    v->fmt->format_whitelist = av_strdup(name);
    int err = avformat_open_input(&v->fmt, NULL, input, NULL);
    if (err < 0) {
        v->fmt = NULL;  // freed by avformat_open_input
        *code = fail(v, TS_VIDEO_CORRUPT, "not a readable container", err);
        return v;
    }
    const AVCodec *codec = NULL;
    int s = av_find_best_stream(v->fmt, AVMEDIA_TYPE_VIDEO, -1, -1, &codec, 0);
    if (s == AVERROR_DECODER_NOT_FOUND) {
        *code = fail(v, TS_VIDEO_UNSUPPORTED_CODEC, NULL, 0);
        for (unsigned i = 0; i < v->fmt->nb_streams; i++) {
            if (v->fmt->streams[i]->codecpar->codec_type == AVMEDIA_TYPE_VIDEO) {
                snprintf(v->msg, sizeof v->msg, "no decoder for the video codec %s in this FFmpeg",
                         avcodec_get_name(v->fmt->streams[i]->codecpar->codec_id));
                break;
            }
        }
        return v;
    }
    AVCodecParameters *par = s >= 0 ? v->fmt->streams[s]->codecpar : NULL;
    if (s >= 0 && (par->width <= 0 || par->height <= 0 || par->format < 0)) {
        // Some containers (AVI) leave the frame format to the stream: probe a little.
        v->fmt->max_analyze_duration = 2 * AV_TIME_BASE;
        err = avformat_find_stream_info(v->fmt, NULL);
        if (err < 0) { *code = fail(v, TS_VIDEO_CORRUPT, "stream information", err); return v; }
        s = av_find_best_stream(v->fmt, AVMEDIA_TYPE_VIDEO, -1, -1, &codec, 0);
        par = s >= 0 ? v->fmt->streams[s]->codecpar : NULL;
    }
    if (s < 0 || !codec) {
        *code = fail(v, s == AVERROR_DECODER_NOT_FOUND ? TS_VIDEO_UNSUPPORTED_CODEC : TS_VIDEO_CORRUPT,
                     s == AVERROR_DECODER_NOT_FOUND ? "no decoder for the video codec" : "no video stream", 0);
        return v;
    }
    if (par->width <= 0 || par->height <= 0) {
        // Not a file cut short: a size missing, or one FFmpeg refused (over 2^28 pixels).
        v->hit_end = 0;
        *code = fail(v, TS_VIDEO_CORRUPT, "the video stream declares no usable frame size (none, or over FFmpeg's 2^28 pixels)", 0);
        return v;
    }
    v->stream = s;
    v->codec = codec;
    // Only the chosen stream's packets are read.
    for (unsigned i = 0; i < v->fmt->nb_streams; i++)
        if ((int)i != s) v->fmt->streams[i]->discard = AVDISCARD_ALL;
    return v;
}

void ts_video_info_get(const ts_video *v, ts_video_info *info) {
    memset(info, 0, sizeof *info);
    info->duration = -1;
    if (!v->fmt || v->stream < 0) return;
    const AVStream *st = v->fmt->streams[v->stream];
    const AVCodecParameters *par = st->codecpar;
    info->width = par->width;
    info->height = par->height;
    snprintf(info->codec, sizeof info->codec, "%s", avcodec_get_name(par->codec_id));
    snprintf(info->container, sizeof info->container, "%s", v->fmt->iformat->name);
    if (v->fmt->duration > 0) info->duration = (double)v->fmt->duration / AV_TIME_BASE;
    if (st->duration > 0 && st->time_base.den > 0) info->duration = st->duration * av_q2d(st->time_base);
    AVRational rate = st->avg_frame_rate.num > 0 ? st->avg_frame_rate : st->r_frame_rate;
    info->fps = rate.num > 0 && rate.den > 0 ? av_q2d(rate) : 0;
    info->frames = st->nb_frames;
    const AVPixFmtDescriptor *desc = av_pix_fmt_desc_get(par->format);
    info->bits = desc ? desc->comp[0].depth : 8;
    snprintf(info->pixel_format, sizeof info->pixel_format, "%s", desc ? desc->name : "unknown");
    info->primaries = par->color_primaries;
    info->transfer = par->color_trc;
    info->matrix = par->color_space;
    info->full_range = par->color_range == AVCOL_RANGE_JPEG || par->format == AV_PIX_FMT_YUVJ420P
        || par->format == AV_PIX_FMT_YUVJ422P || par->format == AV_PIX_FMT_YUVJ444P;
    const AVColorPrimariesDesc *p = av_csp_primaries_desc_from_id(par->color_primaries);
    if (!p) p = av_csp_primaries_desc_from_id(AVCOL_PRI_BT709);
    if (p) {
        info->red[0] = av_q2d(p->prim.r.x); info->red[1] = av_q2d(p->prim.r.y);
        info->green[0] = av_q2d(p->prim.g.x); info->green[1] = av_q2d(p->prim.g.y);
        info->blue[0] = av_q2d(p->prim.b.x); info->blue[1] = av_q2d(p->prim.b.y);
        info->white[0] = av_q2d(p->wp.x); info->white[1] = av_q2d(p->wp.y);
    }
    // The display matrix: how the stored frame is turned to be shown (clockwise degrees).
    const uint8_t *sd = av_stream_get_side_data(st, AV_PKT_DATA_DISPLAYMATRIX, NULL);
    if (sd) {
        const int32_t *m = (const int32_t *)sd;
        double theta = -av_display_rotation_get(m);
        if (!isnan(theta)) {
            theta = fmod(theta, 360);
            if (theta < 0) theta += 360;
            info->rotation = ((int)lround(theta / 90) % 4) * 90;
        }
        // A negative determinant: the matrix mirrors as well.
        double det = (double)m[0] * m[4] - (double)m[1] * m[3];
        info->mirrored = det < 0;
    }
    info->max_lowres = v->codec ? v->codec->max_lowres : 0;
}

int ts_video_begin(ts_video *v, int lowres, int threads, int64_t max_pixels) {
    if (!v->fmt || v->stream < 0 || !v->codec) return fail(v, TS_VIDEO_CORRUPT, "no video stream", 0);
    v->dec = avcodec_alloc_context3(v->codec);
    if (!v->dec) return fail(v, TS_VIDEO_NOMEM, "out of memory", 0);
    int err = avcodec_parameters_to_context(v->dec, v->fmt->streams[v->stream]->codecpar);
    if (err < 0) return fail(v, TS_VIDEO_CORRUPT, "codec parameters", err);
    v->dec->thread_count = threads > 0 ? threads : 1;
    v->dec->lowres = lowres < 0 ? 0 : lowres > v->codec->max_lowres ? v->codec->max_lowres : lowres;
    v->dec->pkt_timebase = v->fmt->streams[v->stream]->time_base;
    // The coded size may differ from what the container declared: the decoder itself refuses
    // a frame over the pixel limit before allocating it.
    if (max_pixels > 0) v->dec->max_pixels = max_pixels;
    err = avcodec_open2(v->dec, v->codec, NULL);
    if (err < 0) return fail(v, err == AVERROR_PATCHWELCOME ? TS_VIDEO_UNSUPPORTED_CODEC : TS_VIDEO_CORRUPT, "opening the decoder", err);
    return 0;
}

int ts_video_seek(ts_video *v, double seconds, int forward) {
    if (!v->dec) return fail(v, TS_VIDEO_CORRUPT, "decoder not started", 0);
    AVStream *st = v->fmt->streams[v->stream];
    int64_t ts = (int64_t)(seconds / av_q2d(st->time_base));
    if (st->start_time != AV_NOPTS_VALUE) ts += st->start_time;
    int err = forward ? av_seek_frame(v->fmt, v->stream, ts, 0) : -1;
    if (err < 0) err = av_seek_frame(v->fmt, v->stream, ts, AVSEEK_FLAG_BACKWARD);
    if (err < 0) {
        // Not seekable there (no index): from the start.
        err = av_seek_frame(v->fmt, v->stream, st->start_time != AV_NOPTS_VALUE ? st->start_time : 0,
                            AVSEEK_FLAG_BACKWARD | AVSEEK_FLAG_ANY);
        if (err < 0 && v->timed_out) return fail(v, TS_VIDEO_TIMEOUT, "seeking", err);
    }
    avcodec_flush_buffers(v->dec);
    v->draining = 0;
    v->ended = 0;
    v->packets = 0;
    return 0;
}

void ts_video_set_skip(ts_video *v, int keyframes_only, int skip_nonref, int skip_loop_filter) {
    if (!v->dec) return;
    v->dec->skip_frame = keyframes_only ? AVDISCARD_NONKEY : skip_nonref ? AVDISCARD_NONREF : AVDISCARD_DEFAULT;
    v->dec->skip_loop_filter = skip_loop_filter ? AVDISCARD_ALL : AVDISCARD_DEFAULT;
}

int ts_video_next(ts_video *v, int64_t max_packets, double *pts) {
    if (!v->dec) return fail(v, TS_VIDEO_CORRUPT, "decoder not started", 0);
    AVStream *st = v->fmt->streams[v->stream];
    for (;;) {
        int err = avcodec_receive_frame(v->dec, v->next);
        if (err == 0) {
            AVFrame *t = v->frame;
            v->frame = v->next;
            v->next = t;
            av_frame_unref(v->next);
            int64_t when = v->frame->best_effort_timestamp;
            if (when == AV_NOPTS_VALUE) when = v->frame->pts;
            if (when == AV_NOPTS_VALUE) when = 0;
            if (st->start_time != AV_NOPTS_VALUE) when -= st->start_time;
            *pts = when * av_q2d(st->time_base);
            return 0;
        }
        if (err == AVERROR_EOF) { v->ended = 1; return TS_VIDEO_END; }
        if (err != AVERROR(EAGAIN)) return fail(v, TS_VIDEO_CORRUPT, "decoding", err);
        if (v->draining) { v->ended = 1; return TS_VIDEO_END; }
        if (max_packets > 0 && v->packets >= max_packets) return TS_VIDEO_END;
        if (v->deadline_us && av_gettime_relative() > v->deadline_us) {
            v->timed_out = 1;
            return fail(v, TS_VIDEO_TIMEOUT, "decoding took longer than the task may", 0);
        }
        err = av_read_frame(v->fmt, v->pkt);
        if (err == AVERROR_EOF || (err < 0 && avio_feof(v->fmt->pb) && !v->timed_out)) {
            v->draining = 1;
            err = avcodec_send_packet(v->dec, NULL);
            if (err < 0 && err != AVERROR_EOF) return fail(v, TS_VIDEO_CORRUPT, "decoding", err);
            continue;
        }
        if (err < 0) return fail(v, TS_VIDEO_CORRUPT, "reading the container", err);
        if (v->pkt->stream_index != v->stream) { av_packet_unref(v->pkt); continue; }
        v->packets++;
        err = avcodec_send_packet(v->dec, v->pkt);
        av_packet_unref(v->pkt);
        // A damaged packet: the decoder says so and goes on with the next (as players do);
        // only a stream that never gives a frame fails (TS_VIDEO_END with none decoded).
        if (err < 0 && err != AVERROR(EAGAIN) && err != AVERROR_INVALIDDATA) return fail(v, TS_VIDEO_CORRUPT, "decoding", err);
    }
}

int ts_video_hit_end(const ts_video *v) { return v->hit_end; }

// An EBML variable-length integer at data[*i]: its value (all-ones: unknown, -1) and length.
static int64_t ebml_vint(const uint8_t *data, size_t size, size_t *i, int keep_marker) {
    if (*i >= size || data[*i] == 0) return -2;
    int len = 1;
    while (!(data[*i] & (0x80 >> (len - 1)))) len++;
    if (*i + (size_t)len > size) return -2;
    uint64_t value = keep_marker ? data[*i] : data[*i] & (0xFF >> len);
    int ones = (data[*i] & (0xFF >> len)) == (0xFF >> len);
    for (int k = 1; k < len; k++) {
        value = value << 8 | data[*i + k];
        ones = ones && data[*i + k] == 0xFF;
    }
    *i += (size_t)len;
    return !keep_marker && ones ? -1 : (int64_t)value;
}

int ts_video_declared_overrun(const uint8_t *data, size_t size, int container) {
    if (container == TS_VIDEO_ISOBMFF) {
        // Top-level boxes: one that claims more bytes than remain was cut short.
        size_t at = 0;
        while (at + 8 <= size) {
            uint64_t box = (uint64_t)data[at] << 24 | data[at + 1] << 16 | data[at + 2] << 8 | data[at + 3];
            if (box == 1) {
                if (at + 16 > size) return 1;
                box = 0;
                for (int k = 8; k < 16; k++) box = box << 8 | data[at + k];
                if (box < 16) return 0;
            } else if (box == 0) {
                return 0;  // to the end of the file
            } else if (box < 8) {
                return 0;  // not a box: the demuxer will say what it is
            }
            if (box > size - at) return 1;
            at += box;
        }
        return at < size && size - at < 8 && at > 0 ? 1 : 0;
    }
    if (container == TS_VIDEO_MATROSKA) {
        // The EBML header, then the Segment: a known Segment size past the end was cut short.
        size_t i = 0;
        if (ebml_vint(data, size, &i, 1) != 0x1A45DFA3) return 0;
        int64_t header = ebml_vint(data, size, &i, 0);
        if (header < 0 || (uint64_t)header > size - i) return header == -2 || header >= 0;
        i += (size_t)header;
        if (ebml_vint(data, size, &i, 1) != 0x18538067) return i >= size;
        int64_t segment = ebml_vint(data, size, &i, 0);
        if (segment == -2) return 1;
        return segment >= 0 && (uint64_t)segment > size - i;
    }
    if (container == TS_VIDEO_AVI && size >= 8) {
        uint64_t riff = (uint64_t)data[4] | data[5] << 8 | data[6] << 16 | (uint64_t)data[7] << 24;
        return riff > size - 8;
    }
    return 0;
}

double ts_video_keyframe_before(const ts_video *v, double seconds) {
    if (!v->fmt || v->stream < 0) return -1;
    AVStream *st = v->fmt->streams[v->stream];
    int64_t ts = (int64_t)(seconds / av_q2d(st->time_base));
    int64_t start = st->start_time != AV_NOPTS_VALUE ? st->start_time : 0;
    const AVIndexEntry *e = avformat_index_get_entry_from_timestamp(st, ts + start, AVSEEK_FLAG_BACKWARD);
    return e ? (e->timestamp - start) * av_q2d(st->time_base) : -1;
}

int ts_video_has_frame(const ts_video *v) { return v->frame && v->frame->data[0] != NULL; }

void ts_video_frame_stats(const ts_video *v, double *mean, double *spread, int *width, int *height) {
    const AVFrame *f = v->frame;
    *width = f->width;
    *height = f->height;
    const AVPixFmtDescriptor *d = av_pix_fmt_desc_get(f->format);
    if (!d || (d->flags & (AV_PIX_FMT_FLAG_RGB | AV_PIX_FMT_FLAG_PAL | AV_PIX_FMT_FLAG_HWACCEL | AV_PIX_FMT_FLAG_BITSTREAM))
        || !(d->flags & AV_PIX_FMT_FLAG_PLANAR) || !f->data[0] || f->width <= 0 || f->height <= 0) {
        *mean = 0.5;  // not a planar YUV frame: no verdict (taken as it is)
        *spread = 1;
        return;
    }
    int depth = d->comp[0].depth, bytes = depth > 8 ? 2 : 1;
    int full = f->color_range == AVCOL_RANGE_JPEG || f->format == AV_PIX_FMT_YUVJ420P || f->format == AV_PIX_FMT_YUVJ422P
        || f->format == AV_PIX_FMT_YUVJ444P || (d->flags & AV_PIX_FMT_FLAG_ALPHA && 0);
    double lo = full ? 0 : 16 << (depth - 8), hi = full ? (1 << depth) - 1 : 235 << (depth - 8);
    // A grid of at most 64 x 64 samples.
    int sx = f->width > 64 ? f->width / 64 : 1, sy = f->height > 64 ? f->height / 64 : 1;
    double sum = 0, sum2 = 0;
    long n = 0;
    for (int y = sy / 2; y < f->height; y += sy) {
        const uint8_t *row = f->data[0] + (ptrdiff_t)y * f->linesize[0];
        for (int x = sx / 2; x < f->width; x += sx) {
            double s = bytes == 2 ? (double)(row[2 * x] | row[2 * x + 1] << 8) : row[x];
            s = (s - lo) / (hi - lo);
            sum += s;
            sum2 += s * s;
            n++;
        }
    }
    if (n == 0) { *mean = 0.5; *spread = 1; return; }
    double m = sum / n;
    *mean = m;
    *spread = sqrt(fmax(0, sum2 / n - m * m));
}

static int sws_matrix(const AVFrame *f) {
    switch (f->colorspace) {
    case AVCOL_SPC_BT709: return SWS_CS_ITU709;
    case AVCOL_SPC_BT470BG: case AVCOL_SPC_SMPTE170M: return SWS_CS_ITU601;
    case AVCOL_SPC_SMPTE240M: return SWS_CS_SMPTE240M;
    case AVCOL_SPC_FCC: return SWS_CS_FCC;
    case AVCOL_SPC_BT2020_NCL: case AVCOL_SPC_BT2020_CL: return SWS_CS_BT2020;
    default:
        // Unspecified: what players assume, HD by its size.
        return f->height >= 720 || f->width >= 1280 ? SWS_CS_ITU709 : SWS_CS_ITU601;
    }
}

int ts_video_convert(ts_video *v, int width, int height, int deep, uint8_t *dst, int stride) {
    const AVFrame *f = v->frame;
    if (!f->data[0] || f->width <= 0 || f->height <= 0) return fail(v, TS_VIDEO_CORRUPT, "no frame decoded", 0);
    enum AVPixelFormat out = deep ? AV_PIX_FMT_RGB48LE : AV_PIX_FMT_RGB24;
    // Area averaging for reductions (each output pixel the mean of what it covers),
    // bicubic otherwise; Tessera's resampler makes the output size from this.
    int flags = (width * 2 <= f->width ? SWS_AREA : SWS_BICUBIC) | SWS_ACCURATE_RND | SWS_FULL_CHR_H_INT;
    v->sws = sws_getCachedContext(v->sws, f->width, f->height, f->format, width, height, out, flags, NULL, NULL, NULL);
    if (!v->sws) return fail(v, TS_VIDEO_UNSUPPORTED_CODEC, "no conversion from this pixel format", 0);
    int full = f->color_range == AVCOL_RANGE_JPEG || f->format == AV_PIX_FMT_YUVJ420P || f->format == AV_PIX_FMT_YUVJ422P
        || f->format == AV_PIX_FMT_YUVJ444P;
    const int *coefficients = sws_getCoefficients(sws_matrix(f));
    sws_setColorspaceDetails(v->sws, coefficients, full, sws_getCoefficients(SWS_CS_DEFAULT), 1, 0, 1 << 16, 1 << 16);
    uint8_t *planes[4] = {dst, NULL, NULL, NULL};
    int strides[4] = {stride, 0, 0, 0};
    int rows = sws_scale(v->sws, (const uint8_t *const *)f->data, f->linesize, 0, f->height, planes, strides);
    if (rows != height) return fail(v, TS_VIDEO_CORRUPT, "converting the frame", rows < 0 ? rows : 0);
    return 0;
}

void ts_video_close(ts_video *v) {
    if (!v) return;
    if (ff_ready()) {  // FFmpeg could not be loaded: nothing of it was allocated
        free(v);
        return;
    }
    sws_freeContext(v->sws);
    avcodec_free_context(&v->dec);
    if (v->fmt) avformat_close_input(&v->fmt);
    if (v->io) {
        av_freep(&v->io->buffer);
        avio_context_free(&v->io);
    }
    av_frame_free(&v->frame);
    av_frame_free(&v->next);
    av_packet_free(&v->pkt);
    free(v);
}
