// AV1 still pictures through libaom directly: 10-bit images, which Debian's libheif 1.15
// cannot have aom encode (it asks for profile 2, and aom aborts). aom_codec_control is
// variadic: Swift cannot call it, so the whole encode is here.
#include "tessera_shim.h"
#include <aom/aom_encoder.h>
#include <aom/aomcx.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(char *message, size_t message_len, const char *what, aom_codec_ctx_t *ctx) {
    snprintf(message, message_len, "%s%s%s", what, ctx ? ": " : "", ctx ? aom_codec_error_detail(ctx) ? aom_codec_error_detail(ctx) : aom_codec_error(ctx) : "");
    return -1;
}

int ts_av1_encode_still(const uint16_t *y, const uint16_t *cb, const uint16_t *cr, int width, int height, int subsampled,
                        int quality, int speed, int primaries, int transfer, int matrix,
                        uint8_t **out, size_t *out_len, char *message, size_t message_len) {
    *out = NULL;
    *out_len = 0;
    aom_codec_iface_t *iface = aom_codec_av1_cx();
    aom_codec_enc_cfg_t cfg;
    if (aom_codec_enc_config_default(iface, &cfg, AOM_USAGE_ALL_INTRA) != AOM_CODEC_OK)
        return fail(message, message_len, "aom: no default configuration", NULL);
    int q = ((100 - (quality < 1 ? 1 : quality > 100 ? 100 : quality)) * 63 + 50) / 100;
    cfg.g_w = (unsigned)width;
    cfg.g_h = (unsigned)height;
    cfg.g_profile = subsampled ? 0 : 1;  // 10-bit 4:2:0: Main; 4:4:4: High
    cfg.g_bit_depth = AOM_BITS_10;
    cfg.g_input_bit_depth = 10;
    cfg.g_limit = 1;  // one frame: a still picture with a reduced sequence header
    cfg.g_lag_in_frames = 0;
    cfg.kf_mode = AOM_KF_DISABLED;
    cfg.kf_max_dist = 0;
    cfg.g_threads = 1;
    cfg.rc_end_usage = AOM_Q;
    cfg.rc_min_quantizer = (unsigned)q;
    cfg.rc_max_quantizer = (unsigned)q;
    aom_codec_ctx_t ctx;
    memset(&ctx, 0, sizeof ctx);
    if (aom_codec_enc_init(&ctx, iface, &cfg, AOM_CODEC_USE_HIGHBITDEPTH) != AOM_CODEC_OK)
        return fail(message, message_len, "aom: cannot start the encoder", &ctx);
    aom_codec_control(&ctx, AOME_SET_CPUUSED, speed < 0 ? 0 : speed > 9 ? 9 : speed);
    aom_codec_control(&ctx, AOME_SET_CQ_LEVEL, (unsigned)q);
    aom_codec_control(&ctx, AV1E_SET_COLOR_PRIMARIES, primaries);
    aom_codec_control(&ctx, AV1E_SET_TRANSFER_CHARACTERISTICS, transfer);
    aom_codec_control(&ctx, AV1E_SET_MATRIX_COEFFICIENTS, matrix);
    aom_codec_control(&ctx, AV1E_SET_COLOR_RANGE, 1);
    aom_image_t img;
    if (!aom_img_alloc(&img, subsampled ? AOM_IMG_FMT_I42016 : AOM_IMG_FMT_I44416, (unsigned)width, (unsigned)height, 16)) {
        aom_codec_destroy(&ctx);
        return fail(message, message_len, "aom: out of memory for the image", NULL);
    }
    img.bit_depth = 10;
    img.range = AOM_CR_FULL_RANGE;
    int cw = subsampled ? (width + 1) / 2 : width, ch = subsampled ? (height + 1) / 2 : height;
    for (int row = 0; row < height; row++)
        memcpy(img.planes[AOM_PLANE_Y] + (size_t)row * img.stride[AOM_PLANE_Y], y + (size_t)row * width, (size_t)width * 2);
    for (int row = 0; row < ch; row++) {
        memcpy(img.planes[AOM_PLANE_U] + (size_t)row * img.stride[AOM_PLANE_U], cb + (size_t)row * cw, (size_t)cw * 2);
        memcpy(img.planes[AOM_PLANE_V] + (size_t)row * img.stride[AOM_PLANE_V], cr + (size_t)row * cw, (size_t)cw * 2);
    }
    // Packets are read after each call: the next call drops what the last one left.
    int rc = 0;
    size_t cap = 0;
    for (int pass = 0; pass < 2 && rc == 0; pass++) {
        if (aom_codec_encode(&ctx, pass == 0 ? &img : NULL, 0, 1, 0) != AOM_CODEC_OK) {
            rc = fail(message, message_len, "aom: encoding failed", &ctx);
            break;
        }
        const aom_codec_cx_pkt_t *pkt;
        aom_codec_iter_t iter = NULL;
        while ((pkt = aom_codec_get_cx_data(&ctx, &iter)) != NULL) {
            if (pkt->kind != AOM_CODEC_CX_FRAME_PKT) continue;
            size_t n = pkt->data.frame.sz;
            if (*out_len + n > cap) {
                size_t grown = (*out_len + n) * 2;
                uint8_t *p = realloc(*out, grown);
                if (!p) { rc = fail(message, message_len, "aom: out of memory for the output", NULL); break; }
                *out = p;
                cap = grown;
            }
            memcpy(*out + *out_len, pkt->data.frame.buf, n);
            *out_len += n;
        }
    }
    aom_img_free(&img);
    aom_codec_destroy(&ctx);
    if (rc == 0 && *out_len == 0) rc = fail(message, message_len, "aom: no frame came out", NULL);
    if (rc != 0) { free(*out); *out = NULL; *out_len = 0; }
    return rc;
}
