// Times libjpeg-turbo's Huffman decoding against Tessera's (Sources/TesseraShim/jpeg_entropy.c)
// on the same files, at one DCT scale: read each file, put Tessera's progressive decoder in
// front of the first scan or not, jpeg_start_decompress at SCALE/8, swap in Tessera's baseline
// decoder or not, read every row. Other multi-scan files are skipped. The inverse DCTs are
// libjpeg's on both sides. Prints the time and a checksum of the pixels (the same for both
// decoders). Built and run by Benchmarks/entropy.sh.
//
//   entropy_loop OWN(0|1) SCALE(1..16) REPEATS FILE...
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <jpeglib.h>

void ts_jpeg_own_entropy(int enable);
int ts_jpeg_entropy_install(j_decompress_ptr cinfo);
int ts_jpeg_progressive_prepare(j_decompress_ptr cinfo);

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: entropy_loop OWN SCALE REPEATS FILE...\n");
        return 2;
    }
    int own = atoi(argv[1]), scale = atoi(argv[2]), repeats = atoi(argv[3]);
    ts_jpeg_own_entropy(own);
    unsigned char *rows = malloc((size_t)65536 * 4 * 16);
    unsigned long sum = 0, files = 0;
    double decoding = 0;
    for (int r = 0; r < repeats; r++) {
        for (int i = 4; i < argc; i++) {
            FILE *f = fopen(argv[i], "rb");
            if (!f) continue;
            fseek(f, 0, SEEK_END);
            long n = ftell(f);
            fseek(f, 0, SEEK_SET);
            unsigned char *b = malloc((size_t)n);
            if (fread(b, 1, (size_t)n, f) != (size_t)n) n = 0;
            fclose(f);
            struct jpeg_decompress_struct c;
            struct jpeg_error_mgr e;
            c.err = jpeg_std_error(&e);
            jpeg_create_decompress(&c);
            jpeg_mem_src(&c, b, (unsigned long)n);
            double t0 = now();
            if (n == 0 || jpeg_read_header(&c, TRUE) != JPEG_HEADER_OK || (!c.progressive_mode && c.comps_in_scan != c.num_components)) {
                jpeg_destroy_decompress(&c);
                free(b);
                continue;
            }
            c.scale_num = (unsigned)scale;
            c.scale_denom = 8;
            c.out_color_space = c.num_components == 1 ? JCS_GRAYSCALE : JCS_EXT_RGB;
            ts_jpeg_progressive_prepare(&c);
            jpeg_start_decompress(&c);
            ts_jpeg_entropy_install(&c);
            while (c.output_scanline < c.output_height) {
                JSAMPROW p[16];
                for (int k = 0; k < 16; k++) p[k] = rows + (size_t)k * c.output_width * 3;
                JDIMENSION got = jpeg_read_scanlines(&c, p, 16);
                for (JDIMENSION k = 0; k < got; k++)
                    for (JDIMENSION x = 0; x < c.output_width * (JDIMENSION)c.output_components; x += 61) sum += p[k][x];
            }
            jpeg_finish_decompress(&c);
            decoding += now() - t0;
            files++;
            jpeg_destroy_decompress(&c);
            free(b);
        }
    }
    printf("%s %d/8: %lu decodes in %.3f s, checksum %lu\n", own ? "tessera" : "libjpeg", scale, files, decoding, sum);
    return 0;
}
