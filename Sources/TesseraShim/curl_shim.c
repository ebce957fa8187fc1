// libcurl's easy API is variadic (curl_easy_setopt, curl_easy_getinfo), which Swift
// cannot call: one request is described by a struct and performed here.
//
// libcurl is opened at the first transfer, not linked: it brings some 30 shared libraries
// (TLS, Kerberos, LDAP, SSH, ...) that every process loaded at start, 4 ms of each
// `tessera` start-up, while most runs never fetch a URL (docs/decisions/026-lazy-ffmpeg.md
// does the same for FFmpeg). Every curl function this file calls goes through the table.
#define CURL_DISABLE_TYPECHECK 1
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <curl/curl.h>

#include "tessera_shim.h"
#include "lazy_open.h"

static struct {
    __typeof__(&curl_easy_cleanup) curl_easy_cleanup;
    __typeof__(&curl_easy_getinfo) curl_easy_getinfo;
    __typeof__(&curl_easy_init) curl_easy_init;
    __typeof__(&curl_easy_perform) curl_easy_perform;
    __typeof__(&curl_easy_reset) curl_easy_reset;
    __typeof__(&curl_easy_setopt) curl_easy_setopt;
    __typeof__(&curl_easy_strerror) curl_easy_strerror;
    __typeof__(&curl_global_init) curl_global_init;
    __typeof__(&curl_slist_append) curl_slist_append;
    __typeof__(&curl_slist_free_all) curl_slist_free_all;
} cu;

static pthread_once_t cu_once = PTHREAD_ONCE_INIT;
static char cu_error[256];

static void cu_load(void) {
    // libcurl4 (the OpenSSL flavour the headers come from); its ABI has been 4 since 2006.
    static const char *const soname = "libcurl.so.4";
    static const ts_lazy_symbol symbols[] = {
        {"curl_easy_cleanup", (void **)&cu.curl_easy_cleanup},
        {"curl_easy_getinfo", (void **)&cu.curl_easy_getinfo},
        {"curl_easy_init", (void **)&cu.curl_easy_init},
        {"curl_easy_perform", (void **)&cu.curl_easy_perform},
        {"curl_easy_reset", (void **)&cu.curl_easy_reset},
        {"curl_easy_setopt", (void **)&cu.curl_easy_setopt},
        {"curl_easy_strerror", (void **)&cu.curl_easy_strerror},
        {"curl_global_init", (void **)&cu.curl_global_init},
        {"curl_slist_append", (void **)&cu.curl_slist_append},
        {"curl_slist_free_all", (void **)&cu.curl_slist_free_all},
    };
    ts_lazy_failure failed;
    if (ts_lazy_open(&soname, 1, symbols, sizeof symbols / sizeof symbols[0], &failed) != 0) {
        if (failed.soname) {
            snprintf(cu_error, sizeof cu_error, "HTTP transfers need libcurl, and %s could not be loaded (%s)", soname,
                     failed.reason);
        } else {
            snprintf(cu_error, sizeof cu_error, "HTTP transfers need libcurl, and %s lacks %s", soname, failed.missing);
        }
        return;
    }
    cu.curl_global_init(CURL_GLOBAL_DEFAULT);
}

// curl.h defines these two as macros (to check their argument count).
#undef curl_easy_getinfo
#undef curl_easy_setopt
#define curl_easy_cleanup (*cu.curl_easy_cleanup)
#define curl_easy_getinfo (*cu.curl_easy_getinfo)
#define curl_easy_init (*cu.curl_easy_init)
#define curl_easy_perform (*cu.curl_easy_perform)
#define curl_easy_reset (*cu.curl_easy_reset)
#define curl_easy_setopt (*cu.curl_easy_setopt)
#define curl_easy_strerror (*cu.curl_easy_strerror)
#define curl_slist_append (*cu.curl_slist_append)
#define curl_slist_free_all (*cu.curl_slist_free_all)

const char *ts_http_unavailable(void) {
    pthread_once(&cu_once, cu_load);
    return cu_error[0] ? cu_error : NULL;
}

void *ts_http_handle_new(void) {
    if (ts_http_unavailable()) return NULL;
    return curl_easy_init();
}

void ts_http_handle_free(void *handle) {
    if (handle) curl_easy_cleanup((CURL *)handle);
}

void ts_http_response_free(ts_http_response *r) {
    free(r->body);
    free(r->headers);
    r->body = NULL;
    r->headers = NULL;
    r->body_length = r->body_capacity = r->headers_length = r->headers_capacity = 0;
}

typedef struct {
    CURL *curl;
    ts_http_response *response;
    size_t max_body;
    const unsigned char *upload;
    size_t upload_length, upload_offset;
} transfer;

static int grow(unsigned char **buf, size_t *cap, size_t need) {
    if (need <= *cap) return 0;
    size_t n = *cap ? *cap : 16384;
    while (n < need) n *= 2;
    unsigned char *p = realloc(*buf, n);
    if (!p) return -1;
    *buf = p;
    *cap = n;
    return 0;
}

static size_t on_body(char *data, size_t size, size_t count, void *user) {
    transfer *t = user;
    ts_http_response *r = t->response;
    size_t n = size * count;
    // The limit is for what a success brings; an error's body (S3's XML) gets 64 kB.
    long status = 0;
    curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &status);
    size_t limit = status >= 300 ? 65536 : t->max_body;
    if (r->body_length + n > limit) {
        r->too_large = 1;
        return 0;  // curl stops with CURLE_WRITE_ERROR
    }
    if (grow(&r->body, &r->body_capacity, r->body_length + n) != 0) return 0;
    memcpy(r->body + r->body_length, data, n);
    r->body_length += n;
    return n;
}

static size_t on_header(char *data, size_t size, size_t count, void *user) {
    transfer *t = user;
    ts_http_response *r = t->response;
    size_t n = size * count;
    // A new status line (after 100 Continue or a redirect): keep only the last response's headers.
    if (n >= 5 && strncmp(data, "HTTP/", 5) == 0) r->headers_length = 0;
    if (r->headers_length + n > (1 << 20)) return 0;
    if (grow((unsigned char **)&r->headers, &r->headers_capacity, r->headers_length + n + 1) != 0) return 0;
    memcpy(r->headers + r->headers_length, data, n);
    r->headers_length += n;
    r->headers[r->headers_length] = 0;
    return n;
}

static size_t on_upload(char *buffer, size_t size, size_t count, void *user) {
    transfer *t = user;
    size_t left = t->upload_length - t->upload_offset, n = size * count;
    if (n > left) n = left;
    memcpy(buffer, t->upload + t->upload_offset, n);
    t->upload_offset += n;
    return n;
}

static int on_seek(void *user, curl_off_t offset, int origin) {
    transfer *t = user;
    if (origin != SEEK_SET || offset < 0 || (size_t)offset > t->upload_length) return CURL_SEEKFUNC_FAIL;
    t->upload_offset = (size_t)offset;
    return CURL_SEEKFUNC_OK;
}

int ts_http_perform(void *handle, const ts_http_request *q, ts_http_response *r) {
    CURL *c = handle;
    memset(r, 0, sizeof *r);
    // Reset options; the handle keeps its open connections, DNS and TLS session caches.
    curl_easy_reset(c);
    transfer t = {c, r, q->max_body, q->body, q->body_length, 0};
    struct curl_slist *headers = NULL;
    for (int i = 0; i < q->header_count; i++) headers = curl_slist_append(headers, q->headers[i]);

    curl_easy_setopt(c, CURLOPT_URL, q->url);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, r->error);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &t);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &t);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "tessera");
    // Large uploads ask "Expect: 100-continue" (removing the header would break the
    // signature, which covers it): don't wait long for a server that never answers it.
    curl_easy_setopt(c, CURLOPT_EXPECT_100_TIMEOUT_MS, 200L);
    if (q->connect_timeout_ms > 0) curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, q->connect_timeout_ms);
    if (q->timeout_ms > 0) curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, q->timeout_ms);
    if (q->low_speed_seconds > 0) {
        curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
        curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, q->low_speed_seconds);
    }
    if (q->follow_redirects) {
        curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
        curl_easy_setopt(c, CURLOPT_MAXREDIRS, 5L);
    }
    if (q->aws_sigv4 && q->userpwd) {
        curl_easy_setopt(c, CURLOPT_AWS_SIGV4, q->aws_sigv4);
        curl_easy_setopt(c, CURLOPT_USERPWD, q->userpwd);
    }
    if (strcmp(q->method, "HEAD") == 0) {
        curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    } else if (strcmp(q->method, "PUT") == 0) {
        curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
        curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, (curl_off_t)q->body_length);
        curl_easy_setopt(c, CURLOPT_READFUNCTION, on_upload);
        curl_easy_setopt(c, CURLOPT_READDATA, &t);
        curl_easy_setopt(c, CURLOPT_SEEKFUNCTION, on_seek);
        curl_easy_setopt(c, CURLOPT_SEEKDATA, &t);
    } else if (strcmp(q->method, "POST") == 0) {
        curl_easy_setopt(c, CURLOPT_POST, 1L);
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, q->body ? (const char *)q->body : "");
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)q->body_length);
    } else if (strcmp(q->method, "GET") != 0) {
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, q->method);
    }
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);

    CURLcode code = curl_easy_perform(c);
    curl_slist_free_all(headers);
    r->curl_code = (int)code;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
    if (code != CURLE_OK) {
        if (r->error[0] == 0) {
            strncpy(r->error, curl_easy_strerror(code), sizeof r->error - 1);
        }
        return -1;
    }
    return 0;
}
