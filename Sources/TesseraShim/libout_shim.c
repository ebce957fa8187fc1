// What C libraries print on stderr (libjxl's JXL_FAILURE lines, x265's banners), caught
// while Tessera calls them: the lines become part of the error they explain, and never
// reach the terminal or a log raw. See include/tessera_shim.h.
#define _GNU_SOURCE
#include "tessera_shim.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static pthread_mutex_t ts_libout_lock = PTHREAD_MUTEX_INITIALIZER;
static int ts_libout_real = -1;  ///< the process's stderr, kept open for good once saved
static int ts_libout_file = -1;  ///< where fd 2 points while any capture is open
static int ts_libout_open = 0;   ///< captures open

int ts_stderr_fd(void) {
    pthread_mutex_lock(&ts_libout_lock);
    if (ts_libout_real < 0) ts_libout_real = dup(2);
    int fd = ts_libout_real >= 0 ? ts_libout_real : 2;
    pthread_mutex_unlock(&ts_libout_lock);
    return fd;
}

long ts_libout_begin(void) {
    pthread_mutex_lock(&ts_libout_lock);
    if (ts_libout_real < 0) ts_libout_real = dup(2);
    if (ts_libout_open == 0) {
        int fd = memfd_create("tessera-stderr", MFD_CLOEXEC);
        if (fd < 0 || ts_libout_real < 0 || dup2(fd, 2) < 0) {
            if (fd >= 0) close(fd);
            pthread_mutex_unlock(&ts_libout_lock);
            return -1;
        }
        ts_libout_file = fd;
    }
    ts_libout_open++;
    long start = (long)lseek(ts_libout_file, 0, SEEK_END);
    pthread_mutex_unlock(&ts_libout_lock);
    return start;
}

size_t ts_libout_end(long start, char *out, size_t cap) {
    size_t got = 0;
    pthread_mutex_lock(&ts_libout_lock);
    if (start < 0 || ts_libout_open == 0) {
        pthread_mutex_unlock(&ts_libout_lock);
        return 0;
    }
    off_t end = lseek(ts_libout_file, 0, SEEK_END);
    if (out && cap > 0 && end > start) {
        size_t want = (size_t)(end - start) < cap ? (size_t)(end - start) : cap;
        ssize_t n = pread(ts_libout_file, out, want, start);
        got = n > 0 ? (size_t)n : 0;
    }
    if (--ts_libout_open == 0) {
        dup2(ts_libout_real, 2);
        close(ts_libout_file);
        ts_libout_file = -1;
    }
    pthread_mutex_unlock(&ts_libout_lock);
    return got;
}
