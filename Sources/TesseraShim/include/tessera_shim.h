// TesseraShim: the only C in Tessera, for what Swift cannot express. libjpeg and
// libpng report errors by longjmp; every setjmp guard lives here, so no longjmp
// ever crosses a Swift frame. Each function returns 0 on success and -1 on failure,
// with the library's message available from the handle. Also the SIMD resampling
// kernels, prctl(2), which is variadic, and libcurl's variadic easy API.
#ifndef TESSERA_IMAGING_SHIM_H
#define TESSERA_IMAGING_SHIM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// MARK: - JPEG decoding (libjpeg API)

typedef struct ts_jpeg_dec ts_jpeg_dec;

/// What the frame header says, read before any pixel memory is allocated.
typedef struct {
    int width, height;
    int num_components;
    int jpeg_color_space;    ///< J_COLOR_SPACE of the stored data
    int progressive;
    int arith_code;
    int data_precision;
    int saw_adobe_marker;
    int adobe_transform;
    int max_h_samp, max_v_samp;
    int h_samp[4], v_samp[4];
    int restart_interval;
    int comps_in_scan;       ///< components in the first scan (== num_components: interleaved)
} ts_jpeg_header;

/// Output pixel layouts the decoder can produce.
enum { TS_OUT_GRAY = 0, TS_OUT_RGB = 1, TS_OUT_RGBX = 2, TS_OUT_CMYK = 3 };

/// Creates a decoder over `data` (not copied; must outlive the decoder).
/// `strict` turns data-loss warnings (truncation, corrupt entropy data) into errors.
/// `max_scans` bounds the number of progressive scans (0: no bound).
ts_jpeg_dec *ts_jpeg_dec_create(const uint8_t *data, size_t size, int strict,
                                int max_scans, long max_memory);
void ts_jpeg_dec_destroy(ts_jpeg_dec *d);
const char *ts_jpeg_dec_message(const ts_jpeg_dec *d);
/// Lenient: the first warning that lost pixels (NULL: none), the rows output before it, the
/// scan it came in and whether the data ended (else it went wrong).
const char *ts_jpeg_dec_loss(const ts_jpeg_dec *d, int *row, int *scan, int *eof);

/// Makes the decoder read `data` (then a header) followed by `body` (entropy-coded data),
/// without copying either: how a band decode starts at a restart marker. Call before
/// `ts_jpeg_dec_read_header`; `body` must outlive the decoder.
void ts_jpeg_dec_set_body(ts_jpeg_dec *d, const uint8_t *body, size_t size);
/// After `ts_jpeg_dec_read_header` of a single-buffer decoder: the offset of the first byte
/// after the header (for a baseline file, the start of its entropy-coded data).
long ts_jpeg_dec_input_offset(const ts_jpeg_dec *d);
/// The offset just after the `n`th restart marker (RST0-7) in entropy-coded data starting at
/// `start`, or -1 when there are fewer, or another marker comes first.
long ts_jpeg_nth_restart(const uint8_t *data, size_t size, size_t start, long n);
/// Wraps `jpeg_read_header`, saving APP1 and APP2 markers.
int ts_jpeg_dec_read_header(ts_jpeg_dec *d, ts_jpeg_header *out);
/// The EXIF payload of the first APP1 "Exif\0\0" marker (pointer into the decoder), or NULL.
const uint8_t *ts_jpeg_dec_exif(const ts_jpeg_dec *d, unsigned *len);
/// Wraps `jpeg_read_icc_profile`; `*icc` is malloc'd (free with ts_free), NULL when absent.
int ts_jpeg_dec_icc(ts_jpeg_dec *d, uint8_t **icc, unsigned *len);
/// The JFIF header's pixel density: 1 when it says one (`*unit` 1 per inch, 2 per cm), else 0.
int ts_jpeg_dec_density(const ts_jpeg_dec *d, int *unit, int *x, int *y);
/// Wraps `jpeg_start_decompress` at scale `num/denom` (libjpeg-turbo: num 1..16, denom 8).
int ts_jpeg_dec_start(ts_jpeg_dec *d, int scale_num, int scale_denom, int out_layout,
                      int fast, int *out_w, int *out_h, int *out_components);
/// Whether single-scan baseline JPEGs are Huffman-decoded by Tessera's decoder (jpeg_entropy.c,
/// the default) or libjpeg-turbo's (also `TESSERA_JPEG_ENTROPY=libjpeg`): for tests and benchmarks.
void ts_jpeg_own_entropy(int enable);
/// How many scans Tessera's Huffman decoder has decoded in this process (for tests).
long ts_jpeg_own_entropy_scans(void);
/// How many progressive images Tessera's Huffman decoder has decoded in this process (for tests).
long ts_jpeg_own_progressive_images(void);
/// Whether a 3/8-scaled component's inverse DCT is Tessera's SIMD one (jpeg_idct.c, the default
/// where the CPU has SSE4.1) or libjpeg-turbo's (also `TESSERA_JPEG_IDCT=libjpeg`).
void ts_jpeg_own_idct(int enable);
/// Whether the 5/8-7/8 (and 4:2:0 chroma 10/8-14/8) inverse DCTs are Tessera's float ones
/// (jpeg_idct.c, the default where the CPU has AVX2; `TESSERA_JPEG_IDCT=exact` keeps libjpeg's).
void ts_jpeg_float_idct(int enable);
/// How many components Tessera's inverse DCT has been installed for in this process (for tests).
long ts_jpeg_own_idct_components(void);
/// Wraps `jpeg_read_scanlines`: reads up to `max_rows` rows; `*rows` gets the count.
int ts_jpeg_dec_read(ts_jpeg_dec *d, uint8_t *buf, size_t stride, int max_rows, int *rows);
/// Wraps `jpeg_skip_scanlines`.
int ts_jpeg_dec_skip(ts_jpeg_dec *d, int rows, int *skipped);
/// Wraps `jpeg_finish_decompress` (or `jpeg_abort_decompress` when rows remain).
int ts_jpeg_dec_finish(ts_jpeg_dec *d);

// MARK: - JPEG encoding (libjpeg API)

typedef struct {
    int quality;       ///< 1...100
    int progressive;
    int optimize;      ///< optimised Huffman tables
    int subsampling;   ///< 0 = 4:2:0, 1 = 4:2:2, 2 = 4:4:4
    int restart_interval; ///< MCUs between restart markers (0: none)
    int x_density, y_density; ///< dots per inch written in the JFIF header (0: none said)
    int effort;        ///< 0: libjpeg-turbo as it comes; 1: Tessera's tables; 2: and its dead-zone
                       ///< quantiser and Huffman tables; 3: its trellis quantiser instead
    int libjpeg_huffman; ///< effort ≥ 2, for tests: libjpeg-turbo gathers the statistics and builds the tables
} ts_jpeg_enc_params;

/// One-shot encode of 1 (gray) or 3 (RGB) channel 8-bit pixels to memory.
/// `icc` (APP2 chunks) and `app1` (a complete EXIF payload, "Exif\0\0"...) may be NULL.
/// On success `*out` is malloc'd (free with ts_free).
int ts_jpeg_encode(const uint8_t *pixels, int width, int height, size_t stride,
                   int components, const ts_jpeg_enc_params *params,
                   const uint8_t *icc, unsigned icc_len,
                   const uint8_t *app1, unsigned app1_len,
                   uint8_t **out, unsigned long *out_len,
                   char *err, size_t err_len);

// MARK: - PNG decoding (libpng)

typedef struct ts_png_dec ts_png_dec;

typedef struct {
    uint32_t width, height;
    int bit_depth, color_type, interlaced;
    int has_trns;
    int has_gama; double gama;
    int has_srgb;
    const uint8_t *icc; uint32_t icc_len;    ///< valid while the decoder lives
    const uint8_t *exif; uint32_t exif_len;  ///< raw TIFF-structured eXIf payload
    uint32_t phys_x, phys_y; int phys_unit;  ///< pHYs (unit 1: per metre), 0 when absent
} ts_png_header;

ts_png_dec *ts_png_dec_create(const uint8_t *data, size_t size);
void ts_png_dec_destroy(ts_png_dec *d);
const char *ts_png_dec_message(const ts_png_dec *d);
/// Wraps `png_read_info` with dimension and chunk-size limits.
int ts_png_dec_read_header(ts_png_dec *d, uint32_t max_w, uint32_t max_h, ts_png_header *out);
/// Sets up expansion to 8-bit gray, RGB or RGBA (`*channels` 1, 3 or 4) and, when
/// `correct_gamma`, gAMA correction to sRGB. `*needs_whole_image` is 1 for interlaced files.
int ts_png_dec_start(ts_png_dec *d, int correct_gamma, int *channels, int *needs_whole_image);
/// Reads `rows` consecutive rows (non-interlaced files): `rows`, or -1 - the rows read before it failed.
int ts_png_dec_read_rows(ts_png_dec *d, uint8_t *buf, size_t stride, int rows);
/// Lenient reading (before the header): bad CRCs and Adler-32 sums do not stop it.
void ts_png_dec_set_lenient(ts_png_dec *d);
/// Reads the whole image (any file; required for interlaced ones).
int ts_png_dec_read_image(ts_png_dec *d, uint8_t *buf, size_t stride);
/// Wraps `png_read_end`: reads and checks the chunks after the image data up to IEND.
int ts_png_dec_finish(ts_png_dec *d);

// MARK: - PNG encoding (libpng)

/// One-shot encode of 1, 3 or 4 channel 8-bit pixels; `*out` is malloc'd.
/// `ppm_x`/`ppm_y`: pixels per metre for a pHYs chunk (0: none).
int ts_png_encode(const uint8_t *pixels, int width, int height, size_t stride, int channels,
                  int compression_level, const uint8_t *icc, unsigned icc_len, uint32_t ppm_x, uint32_t ppm_y,
                  uint8_t **out, size_t *out_len, char *err, size_t err_len);

// MARK: - GIF (giflib, low-level API: no frame raster kept by the library)

// MARK: - Camera raw (raw_shim.c: LibRaw, opened at the first raw file)

enum {
    TS_RAW_UNAVAILABLE = 1,  ///< LibRaw is not installed
    TS_RAW_UNSUPPORTED = 2,  ///< not a raw file LibRaw reads
    TS_RAW_CORRUPT = 3,
    TS_RAW_TRUNCATED = 4,    ///< a data error: bytes past the end, a stream that ends early
    TS_RAW_NOMEM = 5,
    TS_RAW_TOO_BIG = 6,
    TS_RAW_TIMEOUT = 7,
    TS_RAW_NO_PREVIEW = 8,
};

typedef struct ts_raw ts_raw;

typedef struct {
    int width, height;           ///< the image LibRaw makes (its crop, before `flip`)
    int raw_width, raw_height;   ///< the sensor's
    int flip;                    ///< LibRaw's orientation: 0, 3 (180), 5 (90 ccw), 6 (90 cw)
    int colors;
    unsigned filters;            ///< the CFA pattern (0: none, already RGB)
    int is_dng;
    int maximum;                 ///< the white level
    char make[64], model[64], lens[128], cdesc[8], decoder[64];
    float iso, shutter, aperture, focal;
    long long timestamp;
    int has_gps;
    double latitude, longitude, altitude;
    float baseline_exposure;     ///< DNG BaselineExposure, stops
    int thumb_format;            ///< 1 JPEG, 2 8-bit bitmap, 0 none (LibRaw's tformat)
    int thumb_width, thumb_height;
    unsigned thumb_length;
} ts_raw_info;

typedef struct {
    void *handle;                ///< LibRaw's output copy, or NULL: `pixels` is the handle's own image
    const uint16_t *pixels;      ///< `colors` 16-bit linear samples a pixel, `step` apart, rows packed
    int width, height, colors, step;
} ts_raw_image;

/// Whether LibRaw could be opened (once, at the first call); why not.
int ts_raw_available(void);
const char *ts_raw_unavailable_reason(void);
/// Opens `data` (kept, not copied): NULL only when memory runs out; `*code` 0 or a TS_RAW_ code
/// (the reason in `ts_raw_message`; close it either way).
ts_raw *ts_raw_open(const uint8_t *data, size_t size, int *code);
const char *ts_raw_message(const ts_raw *r);
void ts_raw_close(ts_raw *r);
void ts_raw_info_get(ts_raw *r, ts_raw_info *info);
/// The embedded preview LibRaw chose (its bytes stay the handle's): 0 or a TS_RAW_ code.
int ts_raw_preview(ts_raw *r, const uint8_t **bytes, size_t *length, int *format, int *width, int *height);
/// Unpacks and processes to 16-bit linear sRGB (`half`: one pixel per 2x2 block, no
/// demosaic; `quality`: LibRaw's demosaic, 3 AHD) within `cpu_seconds` of this thread's
/// processor time (0: no bound). Free the image with `ts_raw_image_free`.
int ts_raw_decode(ts_raw *r, int half, int quality, double cpu_seconds, ts_raw_image *out);
void ts_raw_image_free(ts_raw_image *image);
/// Reads the sensor data (once): 0 or a TS_RAW_ code.
int ts_raw_unpack(ts_raw *r, double cpu_seconds);
/// `release`: the input bytes map a file, whose pages may be handed back to the kernel while
/// and after LibRaw reads them (they are read again from the file if touched).
void ts_raw_release_input(ts_raw *r, int release);
/// Half size straight from a 2x2 Bayer mosaic, row by row (no image buffer): the mosaic's
/// blocks, black level subtracted, white balance as shot, through the camera-to-sRGB matrix,
/// as 16-bit linear sRGB — LibRaw's half size without its passes over a 4-channel copy.
/// 0 and the half size, -1 when the file is not such a mosaic (decode it with
/// `ts_raw_decode`), or a TS_RAW_ code.
int ts_raw_half_begin(ts_raw *r, double cpu_seconds, int *width, int *height);
/// `count` half-size rows from `first`, 3 samples a pixel, `stride` samples a row.
int ts_raw_half_rows(ts_raw *r, int first, int count, uint16_t *out, size_t stride);
const char *ts_raw_version(void);
int ts_raw_camera_count(void);
const char *ts_raw_camera(int i);

// MARK: - Library output (libout_shim.c)

/// The process's own stderr, whatever fd 2 points to: where Tessera writes its lines.
int ts_stderr_fd(void);
/// Starts catching what C libraries print on fd 2 (until the matching `ts_libout_end`;
/// captures may overlap, from any thread). Returns a position to end with, -1 when
/// nothing can be caught (fd 2 is then left alone).
long ts_libout_begin(void);
/// Ends a capture: what was printed since `start` (up to `cap` bytes) into `out`; the
/// byte count. The last capture to end points fd 2 back at stderr.
size_t ts_libout_end(long start, char *out, size_t cap);

typedef struct ts_gif ts_gif;

/// What a pass over every record says, without decoding a pixel.
typedef struct {
    int frames;                       ///< image descriptors with their data whole
    int loop;                         ///< NETSCAPE2.0 loop count (0: forever), -1 when absent
    int transparency, interlaced;     ///< some frame has a transparent index / is interlaced
    int unreadable_after;             ///< the file goes wrong after `frames` frames (counted so far)
    int ends_early;                   ///< ... because its data ends (no trailer, a frame cut short)
    uint32_t extent_width, extent_height; ///< the frames' furthest right and bottom edges
    uint64_t largest_frame;           ///< pixels of the largest frame rectangle
    uint64_t duration_cs;             ///< sum of the frame delays, in centiseconds
} ts_gif_scan_result;

/// Reads the signature and logical screen of `data` (kept, not copied). NULL only when memory
/// runs out; check `ts_gif_ok` (the reason in `ts_gif_message`).
ts_gif *ts_gif_open(const uint8_t *data, size_t size);
void ts_gif_close(ts_gif *t);
int ts_gif_ok(const ts_gif *t);
const char *ts_gif_message(const ts_gif *t);
/// The logical screen's size (0 when the file says 0).
void ts_gif_screen(const ts_gif *t, uint32_t *width, uint32_t *height);
/// Walks every record, skipping frame data undecoded. 0, or -1 when the file cannot be reread.
int ts_gif_scan(ts_gif *t, ts_gif_scan_result *out);
/// Composites frames 0...`frame` onto `canvas` (`cw`×`ch` RGBA, cleared to transparent by the
/// caller) as frame `frame` is shown: transparent indices leave what is below, disposal 2
/// clears to transparent, 3 restores what was there; frames are clipped to the canvas. Returns
/// frame + 1; -2 when the file has fewer frames, -3 when a frame's rectangle has more than
/// `max_frame_pixels`, -4 when the data ends inside a frame, -1 otherwise (the reason in the message).
int ts_gif_render(ts_gif *t, int frame, uint8_t *canvas, uint32_t cw, uint32_t ch, uint64_t max_frame_pixels);
/// Frame by frame (an animation): `ts_gif_begin` starts over on `canvas` (cleared by the
/// caller), each `ts_gif_next` composites the next frame onto it — the previous frame's
/// disposal first — and returns its index with its delay (centiseconds); -2 after the last,
/// -3/-4/-1 as `ts_gif_render`. The canvas must outlive the calls.
int ts_gif_begin(ts_gif *t, uint8_t *canvas, uint32_t cw, uint32_t ch, uint64_t max_frame_pixels);
int ts_gif_next(ts_gif *t, int *delay_cs);
/// Frames of up to `pixels` are decoded whole by Tessera's LZW decoder (64 M by default);
/// larger ones line by line through giflib.
void ts_gif_set_whole_frame_limit(ts_gif *t, size_t pixels);
/// Lenient reading: a frame whose data ends early or goes wrong keeps the rows that decoded
/// (the rest of the canvas as it was), an LZW code size below 2 is read as 2.
void ts_gif_set_lenient(ts_gif *t, int lenient);
/// Whether the last frame composited was cut short (lenient): the first canvas row that is
/// not wholly its (`row`), and why.
int ts_gif_cut(const ts_gif *t, uint32_t *row, const char **message);
/// GIF out (`gif_encode.c`): frames of `width` x `height`, each quantised to its own palette
/// (median cut, k-means, Floyd–Steinberg when `dither`), written by giflib. `loop`: 0 forever,
/// 1 once (no NETSCAPE2.0 block), N times. NULL: out of memory or a size GIF cannot hold.
typedef struct ts_gif_enc ts_gif_enc;
ts_gif_enc *ts_gif_enc_new(int width, int height, int loop);
/// Adds a frame (RGB or RGBA rows; alpha < 128 is transparent) shown for `delay_cs` centiseconds.
int ts_gif_enc_add(ts_gif_enc *e, const uint8_t *pixels, int channels, int stride, int delay_cs, int dither);
/// Ends the file; the bytes stay owned by the encoder until `ts_gif_enc_free`. NULL on failure.
const uint8_t *ts_gif_enc_finish(ts_gif_enc *e, size_t *size);
void ts_gif_enc_free(ts_gif_enc *e);
/// When every one of `pixels` RGBA pixels is opaque, writes them as RGB to `rgb` and returns 1; else 0.
int ts_rgba_to_rgb_if_opaque(const uint8_t *rgba, size_t pixels, uint8_t *rgb);

void ts_free(void *p);

#ifdef __cplusplus
}
#endif

// MARK: - Resampling kernels (SIMD, chosen at run time: AVX2+FMA where the CPU has it, else SSE2)
#ifdef __cplusplus
extern "C" {
#endif

/// 8-bit gray/RGB/RGBA (straight alpha) -> 4 floats per pixel in linear light through
/// `lut` (256 entries); RGBA is premultiplied, gray goes to lane 0, alpha lane is 1 without alpha.
void ts_linearise_row(const uint8_t *src, int width, int channels, const float *lut, float *dst);
/// 16-bit linear samples (1 or 3 a pixel) as 4 floats a pixel in 0...1, alpha 1.
void ts_linearise_row16(const uint16_t *src, int width, int channels, float *dst);

/// Full-range 8-bit Y'CbCr to interleaved RGB: one row, chroma co-sited and shared by
/// 2^chroma_shift_x luma samples (0 or 1). `coefficients` are Cr→R, Cb→G, Cr→G, Cb→B in
/// 16.16 fixed point.
void ts_ycbcr_row_to_rgb(const uint8_t *y, const uint8_t *cb, const uint8_t *cr, int chroma_shift_x,
                         uint8_t *dst, int width, const int32_t coefficients[4]);

/// Horizontal taps: out[x] (4 floats) = sum over k < lengths[x] of
/// weights[x * max_taps + k] * in[starts[x] + k] (4 floats). `expanded` holds each weight
/// repeated 4 times (count * max_taps * 4 floats).
void ts_filter_h(const float *in, float *out, int count, int max_taps, const int32_t *starts,
                 const int32_t *lengths, const float *expanded);

/// `ts_filter_h` on two rows at once (each weight load serves both).
void ts_filter_h2(const float *in0, const float *in1, float *out0, float *out1, int count, int max_taps,
                  const int32_t *starts, const int32_t *lengths, const float *expanded);

/// Vertical taps and conversion to 8-bit: for each of `width` pixels, sum w[k] * rows[k]
/// (4 floats per pixel), then linear -> sRGB through `lut` (65536 entries, index
/// round(v * 65535) of v clamped to 0...1), unpremultiplying when `channels` is 4.
void ts_filter_v_out(const float *const *rows, const float *w, int taps, int width, int channels,
                     const uint8_t *lut, uint8_t *out);

/// The x86 instruction sets the shim's kernels choose between, read from the CPU once: a mask
/// of TS_CPU_*; 0 on other architectures.
enum { TS_CPU_SSSE3 = 1, TS_CPU_SSE41 = 2, TS_CPU_AVX2_FMA = 4 };
int ts_cpu_features(void);

/// 1 when the AVX2+FMA kernels are in use.
int ts_kernels_avx2(void);

/// One row of a 2×2 box halving: out[x] = round(mean of r0 and r1 at columns 2x and 2x+1),
/// per channel, for `width` source pixels of `channels` bytes; an odd last column averages
/// the two it has when `keep_odd` (sizes rounded up), else is dropped. Pass r0 as r1 too for
/// a last row without a pair.
void ts_halve_rows(const uint8_t *r0, const uint8_t *r1, int width, int channels, int keep_odd, uint8_t *out);

// MARK: - TIFF (libtiff: TIFFGetField/TIFFSetField are variadic, its error handlers take a va_list)

typedef struct ts_tiff ts_tiff;

/// What one directory (page) says, read before any pixel memory is allocated.
typedef struct {
    uint32_t width, height;
    uint16_t bits_per_sample, samples_per_pixel, sample_format, photometric, planar, compression;
    uint16_t orientation, fill_order, ink_set, jpeg_quality_unused;
    uint16_t extra_samples, extra_sample_type;   ///< count, and the first's type (EXTRASAMPLE_*)
    uint16_t ycbcr_h, ycbcr_v;                   ///< YCbCr subsampling
    uint16_t resolution_unit;
    uint16_t has_photometric;                    ///< the tag is present
    int tiled;
    uint32_t tile_width, tile_height, rows_per_strip;
    uint32_t subfile_type;                       ///< NewSubfileType (1: a reduced-resolution image)
    uint32_t strips_or_tiles;
    uint16_t subifd_count;
    float x_resolution, y_resolution;
    const uint8_t *icc;                          ///< into libtiff's memory (valid until the next directory)
    uint32_t icc_length;
    const uint16_t *colormap[3];
} ts_tiff_info;

/// Opens a TIFF held in memory (not copied; `data` must outlive the handle). Errors and
/// warnings are kept in the handle, never printed; `max_alloc` bounds any one of libtiff's
/// allocations. NULL only when memory runs out; check `ts_tiff_ok`.
ts_tiff *ts_tiff_open(const uint8_t *data, size_t size, long max_alloc);
void ts_tiff_close(ts_tiff *t);
/// 1 when the file opened (its first directory read).
int ts_tiff_ok(const ts_tiff *t);
/// The first error libtiff reported (empty when none), and the number of warnings.
const char *ts_tiff_message(const ts_tiff *t);
int ts_tiff_warnings(const ts_tiff *t);
/// Errors and warnings libtiff reported for this file so far (a strip read that returns its
/// bytes may still have reported damaged data: CCITT's bad code words, LZW's missing end).
int ts_tiff_problems(const ts_tiff *t);
/// The latest of them.
const char *ts_tiff_last_problem(const ts_tiff *t);
const char *ts_tiff_first_warning(const ts_tiff *t);
/// Forgets the error so far (before an operation whose failure is to be told apart).
void ts_tiff_clear(ts_tiff *t);
/// libtiff's handle, for the non-variadic calls.
void *ts_tiff_handle(ts_tiff *t);
/// Fills `out` from the current directory.
int ts_tiff_info_read(ts_tiff *t, ts_tiff_info *out);
/// JPEG-compressed YCbCr: have libjpeg convert to RGB (TIFFTAG_JPEGCOLORMODE).
int ts_tiff_jpeg_rgb(ts_tiff *t);
/// The SubIFD offsets of the current directory (at most `max`); their count.
int ts_tiff_subifds(ts_tiff *t, uint64_t *offsets, int max);
/// 1 when the current directory is a page libtiff can convert to RGBA (its TIFFRGBAImage);
/// else 0 with the reason in `ts_tiff_message`.
int ts_tiff_rgba_ok(ts_tiff *t);
/// `data` is a read-only map of a file: drop the pages of each read from the process once
/// copied (madvise MADV_DONTNEED: the file stays in the page cache and reads back).
void ts_tiff_release_reads(ts_tiff *t, int on);
/// Reads `rows` rows from `row` of the current directory as packed RGBA (8 bits each,
/// alpha premultiplied), in stored order (no flips), `width` pixels each. 0 on success.
int ts_tiff_rgba_rows(ts_tiff *t, uint32_t row, uint32_t rows, uint32_t *out);

/// Decodes strip or tile `chunk` of the current directory into `out` (`size` bytes at least
/// the chunk's) when it is 8-bit LZW (no predictor or the horizontal one) read straight from
/// the bytes in memory; the bytes written. -1 when the chunk is anything else or anything about
/// it is unusual: read it with libtiff (TIFFReadEncodedStrip/Tile), which decides.
long ts_tiff_read_lzw(ts_tiff *t, uint32_t chunk, uint8_t *out, size_t size);

/// A tiled TIFF being written from tiles already compressed (a pyramid's JPEG tiles, each a
/// whole JPEG stream): a level is a directory, its tiles go in as they are
/// (`TIFFWriteRawTile`, no re-encoding). Errors are kept in the handle, never printed.
typedef struct ts_tiff_writer ts_tiff_writer;
/// Writes to `fd` (which `ts_tiff_writer_close` closes); `bigtiff` for offsets past 4 GB.
ts_tiff_writer *ts_tiff_writer_open(int fd, int bigtiff);
const char *ts_tiff_writer_message(const ts_tiff_writer *w);
/// Starts a level: `width` × `height` in `tile`-square tiles of `channels`; `deflate` 0: JPEG
/// tiles (1: gray, 3: YCbCr 4:2:0), 1: Adobe Deflate tiles with the horizontal predictor (1 gray,
/// 3 RGB, 4 RGBA unassociated); `reduced` marks a reduced-resolution image (NewSubfileType 1); on
/// the full-size level, `subifds` reduced levels follow as its SubIFDs instead of as pages;
/// `tables` (may be NULL) is the level's JPEGTables (SOI, DQT and DHT segments, EOI) its tiles
/// leave out. 0 on success.
int ts_tiff_writer_level(ts_tiff_writer *w, uint32_t width, uint32_t height, uint32_t tile, int channels,
                         int deflate, int reduced, int subifds, const uint8_t *tables, uint32_t tables_size);

/// A TIFF Deflate tile: each row of `rows` × `width` pixels of `channels` bytes differenced
/// horizontally (TIFF predictor 2), then zlib-compressed at `level`. Returns a malloc'd buffer
/// (free with ts_free) and its size, or NULL when memory runs out.
uint8_t *ts_tiff_deflate_tile(const uint8_t *pixels, int width, int rows, size_t stride, int channels, int level,
                              size_t *size);
/// Tile `index` (row-major) of the current level. 0 on success.
int ts_tiff_writer_tile(ts_tiff_writer *w, uint32_t index, const uint8_t *data, size_t size);
/// Ends the current level (writes its directory). 0 on success.
int ts_tiff_writer_end_level(ts_tiff_writer *w);
/// Finishes the file and frees the handle; 0 when everything was written.
int ts_tiff_writer_close(ts_tiff_writer *w);

// MARK: - HTTP (libcurl's easy API: curl_easy_setopt and curl_easy_getinfo are variadic)

/// One request. `headers` are "Name: value" lines. `aws_sigv4` ("aws:amz:REGION:s3") and
/// `userpwd` ("KEY:SECRET") sign it with AWS Signature V4; both NULL: unsigned.
typedef struct {
    const char *method;          ///< GET, HEAD, PUT, POST, DELETE
    const char *url;
    const char *const *headers;
    int header_count;
    const unsigned char *body;   ///< PUT/POST payload (not copied)
    size_t body_length;
    const char *aws_sigv4;
    const char *userpwd;
    long connect_timeout_ms;
    long timeout_ms;             ///< whole request; 0 = none
    long low_speed_seconds;      ///< abort when under 1 byte/s for this long; 0 = never
    int follow_redirects;        ///< up to 5 (plain HTTP inputs; never for signed requests)
    size_t max_body;             ///< a response body over this many bytes is refused
    /// The source policy (a confined job's fetches): when set, every address libcurl is about
    /// to connect to, or reuses a connection to, is judged before a byte is sent. Loopback,
    /// private (10/8, 172.16/12, 192.168/16, 100.64/10, fc00::/7) and — always refused —
    /// link-local, multicast, unspecified and reserved addresses, IPv4-mapped IPv6 judged as
    /// IPv4. A refusal sets `forbidden` in the response.
    int restrict_sources;
    int allow_private;           ///< loopback and private ranges allowed
    const char *const *allowed_hosts;  ///< "host" or "host:port": any address allowed
    int allowed_host_count;
} ts_http_request;

/// What came back. `body` and `headers` are malloc'ed (free with ts_http_response_free);
/// `headers` holds the last response's header lines (after 100-continue or redirects).
typedef struct {
    long status;                 ///< HTTP status, 0 when no response came
    int curl_code;               ///< CURLcode (0 = OK)
    int too_large;               ///< the body passed max_body (curl_code is a write error)
    int forbidden;               ///< the source policy refused an address (nothing was sent there)
    unsigned char *body;
    size_t body_length;
    size_t body_capacity;
    char *headers;
    size_t headers_length;
    size_t headers_capacity;
    char error[256];
} ts_http_response;

/// NULL when libheif / libjxl is loaded (opened at the first call), else why it cannot be
/// (lazy_codecs.c): every Swift entry point into either library asks first.
const char *ts_heif_unavailable(void);
const char *ts_jxl_unavailable(void);

/// NULL when libcurl is loaded (opened at the first call), else why it cannot be.
const char *ts_http_unavailable(void);
/// A reusable handle: its connections stay open between requests (one per thread).
void *ts_http_handle_new(void);
void ts_http_handle_free(void *handle);
/// Performs `request` on `handle`; 0 when a response came (any status), -1 otherwise
/// (`curl_code` and `error` say why).
int ts_http_perform(void *handle, const ts_http_request *request, ts_http_response *response);
void ts_http_response_free(ts_http_response *response);
/// The source policy's verdict on one address (IPv4 or IPv6 text): 0 allowed, 1 refused
/// unless private sources are allowed (loopback, private ranges), 2 always refused.
int ts_address_class(const char *address);

// MARK: - Processes

/// Asks the kernel to send `sig` to this process when its parent exits
/// (prctl(PR_SET_PDEATHSIG)); returns 0 or -1 with errno set.
int ts_set_parent_death_signal(int sig);

/// At most `arenas` glibc malloc arenas (mallopt(M_ARENA_MAX)); returns 1 on success.
int ts_limit_malloc_arenas(int arenas);

/// Allocations below `mmap_threshold` bytes come from malloc's heap, and up to
/// `trim_threshold` bytes freed at its top stay mapped (mallopt(M_MMAP_THRESHOLD,
/// M_TRIM_THRESHOLD)); returns 1 on success.
int ts_keep_freed_buffers(long mmap_threshold, long trim_threshold);

/// Caps each Little CMS allocation at 64 MB (a memory plugin in the global context);
/// returns 1 on success. Called once, before the first profile is opened.
int ts_lcms_limit_allocations(void);

// MARK: - Video (FFmpeg's libavformat, libavcodec, libswscale): poster frames and previews

typedef struct ts_video ts_video;

/// Containers, as Tessera's detection names them (each opens one demuxer, never a probe).
enum { TS_VIDEO_ISOBMFF = 1, TS_VIDEO_MATROSKA = 2, TS_VIDEO_AVI = 3 };
/// Results: 0 is success.
enum {
    TS_VIDEO_END = 1,                ///< no more frames (or the packet budget is spent)
    TS_VIDEO_CORRUPT = 2,
    TS_VIDEO_TRUNCATED = 3,          ///< failed after reading past the end of the bytes
    TS_VIDEO_UNSUPPORTED_CODEC = 4,
    TS_VIDEO_UNSUPPORTED = 5,        ///< this FFmpeg lacks the demuxer
    TS_VIDEO_TIMEOUT = 6,
    TS_VIDEO_NOMEM = 7,
    TS_VIDEO_UNAVAILABLE = 8,        ///< FFmpeg's libraries could not be loaded on this machine
};

/// What the container and the chosen video stream declare (before any frame is decoded).
typedef struct {
    int width, height;               ///< coded frame size
    int rotation;                    ///< clockwise degrees to turn the frame for display (0, 90, 180, 270)
    int mirrored;                    ///< the display matrix mirrors too
    double duration;                 ///< seconds; < 0 unknown
    double fps;                      ///< 0 unknown
    int64_t frames;                  ///< 0 unknown
    int bits;                        ///< bits per luma sample
    int primaries, transfer, matrix; ///< ITU-T H.273 codes (FFmpeg's AVCOL_*)
    int full_range;
    double red[2], green[2], blue[2], white[2];  ///< chromaticities of the primaries
    int max_lowres;                  ///< the decoder decodes at 1/2^n for n up to this
    char codec[32];
    char container[48];
    char pixel_format[32];
} ts_video_info;

/// Opens `data` (not copied; must outlive the handle) as `container`. Always returns a handle
/// (NULL only without memory) to close; `code` says whether it opened. `seconds` > 0 bounds
/// the time demuxing and decoding may take from now (TS_VIDEO_TIMEOUT after); `max_alloc` > 0
/// bounds every single allocation of FFmpeg's (`av_max_alloc`: process-wide).
ts_video *ts_video_open(const uint8_t *data, size_t size, int container, double seconds, size_t max_alloc, int *code);
const char *ts_video_message(const ts_video *v);
void ts_video_info_get(const ts_video *v, ts_video_info *info);
/// Opens the decoder: at 1/2^`lowres` where the codec can, on `threads` threads, refusing
/// frames of more than `max_pixels` (> 0) whatever the container said.
int ts_video_begin(ts_video *v, int lowres, int threads, int64_t max_pixels);
/// Seeks to the keyframe at or before `seconds` (from the stream's start); `forward`: to the
/// first at or after it where there is one.
int ts_video_seek(ts_video *v, double seconds, int forward);
/// What the decoder may skip: all but keyframes; frames no other frame refers to; deblocking.
void ts_video_set_skip(ts_video *v, int keyframes_only, int skip_nonref, int skip_loop_filter);
/// Decodes the next frame (its time in seconds from the start in `pts`); TS_VIDEO_END at the
/// end or after `max_packets` (> 0) packets since the last seek.
int ts_video_next(ts_video *v, int64_t max_packets, double *pts);
/// Whether the demuxer ever read past the end of the bytes (a file cut short).
int ts_video_hit_end(const ts_video *v);
/// Whether the container's own sizes (top-level boxes, the Matroska Segment, the RIFF chunk)
/// say it goes on past `size`: a file cut short.
int ts_video_declared_overrun(const uint8_t *data, size_t size, int container);
/// The time of the keyframe at or before `seconds` in the container's index (-1: no index entry).
double ts_video_keyframe_before(const ts_video *v, double seconds);
/// Whether a frame has been decoded (the current frame stays until another is).
int ts_video_has_frame(const ts_video *v);
/// The current frame's luma mean and standard deviation (0...1 of the nominal range,
/// from at most 64 x 64 samples) and its size.
void ts_video_frame_stats(const ts_video *v, double *mean, double *spread, int *width, int *height);
/// The current frame as RGB (8-bit, or 16-bit little-endian when `deep`) of `width` x `height`,
/// with the frame's own matrix and range.
int ts_video_convert(ts_video *v, int width, int height, int deep, uint8_t *dst, int stride);
void ts_video_close(ts_video *v);

/// One 10-bit AV1 still picture (libaom, all-intra) from Y'CbCr planes (samples 0...1023;
/// Cb and Cr at half size each way when `subsampled`, else full), full range, with the
/// given colour description: the OBUs in `*out` (free with ts_free). 0, or -1 with `message`.
int ts_av1_encode_still(const uint16_t *y, const uint16_t *cb, const uint16_t *cr, int width, int height, int subsampled,
                        int quality, int speed, int primaries, int transfer, int matrix,
                        uint8_t **out, size_t *out_len, char *message, size_t message_len);

#ifdef __cplusplus
}
#endif

#endif
