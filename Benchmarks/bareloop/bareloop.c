// The near-floor reference for thumbnailing with libjpeg-turbo: for each file,
// decode at the smallest TurboJPEG scaling factor whose output still covers the
// box, shrink with a plain box (area) filter to fit the box, encode at quality Q
// (4:2:0). With --decode-only, just the scaled decode. Written for the benchmark;
// no error recovery beyond skipping a file.
//
//   bareloop [--decode-only] WIDTH HEIGHT QUALITY OUTDIR FILE...
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <turbojpeg.h>

static unsigned char *slurp(const char *path, unsigned long *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc(n > 0 ? n : 1);
    if (fread(buf, 1, n, f) != (size_t)n) { free(buf); fclose(f); return NULL; }
    fclose(f);
    *size = (unsigned long)n;
    return buf;
}

int main(int argc, char **argv) {
    int decodeOnly = 0, a = 1;
    if (argc > 1 && strcmp(argv[1], "--decode-only") == 0) { decodeOnly = 1; a = 2; }
    if (argc - a < 5) {
        fprintf(stderr, "usage: bareloop [--decode-only] WIDTH HEIGHT QUALITY OUTDIR FILE...\n");
        return 2;
    }
    int boxW = atoi(argv[a]), boxH = atoi(argv[a + 1]), quality = atoi(argv[a + 2]);
    const char *outdir = argv[a + 3];
    int nsf = 0;
    tjscalingfactor *sf = tjGetScalingFactors(&nsf);
    int failures = 0;
    for (int i = a + 4; i < argc; i++) {
        tjhandle d = tjInitDecompress();
        unsigned long size = 0;
        unsigned char *jpeg = slurp(argv[i], &size);
        int w, h, sub, cs;
        if (!jpeg || tjDecompressHeader3(d, jpeg, size, &w, &h, &sub, &cs) != 0) {
            failures++; free(jpeg); tjDestroy(d); continue;
        }
        // Fit inside the box (no upscaling).
        double f = (double)boxW / w < (double)boxH / h ? (double)boxW / w : (double)boxH / h;
        if (f > 1) f = 1;
        int ow = (int)(w * f + 0.5), oh = (int)(h * f + 0.5);
        if (ow < 1) ow = 1;
        if (oh < 1) oh = 1;
        // Smallest scaling factor whose output covers the target.
        int bw = w, bh = h;
        for (int k = 0; k < nsf; k++) {
            int sw = TJSCALED(w, sf[k]), sh = TJSCALED(h, sf[k]);
            if (sw >= ow && sh >= oh && sw * sh < bw * bh) { bw = sw; bh = sh; }
        }
        unsigned char *pix = malloc((size_t)bw * bh * 3);
        if (tjDecompress2(d, jpeg, size, pix, bw, 0, bh, TJPF_RGB, 0) != 0) {
            failures++; free(pix); free(jpeg); tjDestroy(d); continue;
        }
        tjDestroy(d);
        free(jpeg);
        if (decodeOnly) { free(pix); continue; }
        // Box filter: each output pixel is the area-weighted mean of the input pixels
        // its footprint covers (fractional coverage at the edges), separably.
        float *tmp = malloc(sizeof(float) * (size_t)ow * bh * 3);
        double sx = (double)bw / ow, sy = (double)bh / oh;
        for (int y = 0; y < bh; y++) {
            const unsigned char *row = pix + (size_t)y * bw * 3;
            for (int x = 0; x < ow; x++) {
                double a = x * sx, b = (x + 1) * sx;
                float acc[3] = {0, 0, 0};
                for (int xx = (int)a; xx < bw && xx < b; xx++) {
                    double lo = xx > a ? xx : a, hi = xx + 1 < b ? xx + 1 : b;
                    float wgt = (float)(hi - lo);
                    acc[0] += wgt * row[xx * 3]; acc[1] += wgt * row[xx * 3 + 1]; acc[2] += wgt * row[xx * 3 + 2];
                }
                float *t = tmp + ((size_t)y * ow + x) * 3;
                t[0] = acc[0] / (float)sx; t[1] = acc[1] / (float)sx; t[2] = acc[2] / (float)sx;
            }
        }
        unsigned char *out = malloc((size_t)ow * oh * 3);
        for (int y = 0; y < oh; y++) {
            double a = y * sy, b = (y + 1) * sy;
            for (int x = 0; x < ow * 3; x++) {
                float acc = 0;
                for (int yy = (int)a; yy < bh && yy < b; yy++) {
                    double lo = yy > a ? yy : a, hi = yy + 1 < b ? yy + 1 : b;
                    acc += (float)(hi - lo) * tmp[(size_t)yy * ow * 3 + x];
                }
                float v = acc / (float)sy + 0.5f;
                out[(size_t)y * ow * 3 + x] = v < 0 ? 0 : v > 255 ? 255 : (unsigned char)v;
            }
        }
        free(tmp);
        free(pix);
        tjhandle c = tjInitCompress();
        unsigned char *jout = NULL;
        unsigned long jsize = 0;
        if (tjCompress2(c, out, ow, 0, oh, TJPF_RGB, &jout, &jsize, TJSAMP_420, quality, 0) == 0) {
            const char *base = strrchr(argv[i], '/');
            base = base ? base + 1 : argv[i];
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", outdir, base);
            FILE *fo = fopen(path, "wb");
            if (fo) { fwrite(jout, 1, jsize, fo); fclose(fo); }
        } else {
            failures++;
        }
        tjFree(jout);
        tjDestroy(c);
        free(out);
    }
    return failures ? 1 : 0;
}
