// libcurl's easy API is variadic (curl_easy_setopt, curl_easy_getinfo), which Swift
// cannot call: one request is described by a struct and performed here.
//
// libcurl is opened at the first transfer, not linked: it brings some 30 shared libraries
// (TLS, Kerberos, LDAP, SSH, ...) that every process loaded at start, 4 ms of each
// `tessera` start-up, while most runs never fetch a URL (docs/decisions/026-lazy-ffmpeg.md
// does the same for FFmpeg). Every curl function this file calls goes through the table.
#define CURL_DISABLE_TYPECHECK 1
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>
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
    const ts_http_request *request;
} transfer;

// MARK: The source policy

// 0: an address anyone may fetch from; 1: loopback or private (open with allow_private);
// 2: link-local (the metadata service), multicast, unspecified, broadcast, reserved.
static int ipv4_class(const unsigned char a[4]) {
    if (a[0] == 127) return 1;                                 // loopback
    if (a[0] == 10) return 1;                                  // private
    if (a[0] == 172 && (a[1] & 0xF0) == 16) return 1;
    if (a[0] == 192 && a[1] == 168) return 1;
    if (a[0] == 100 && (a[1] & 0xC0) == 64) return 1;          // shared address space (CGNAT)
    if (a[0] == 169 && a[1] == 254) return 2;                  // link-local: 169.254.169.254
    if (a[0] == 0) return 2;                                   // "this network", unspecified
    if (a[0] >= 224) return 2;                                 // multicast, reserved, broadcast
    if (a[0] == 192 && a[1] == 0 && a[2] == 0) return 2;       // IETF protocol assignments
    if (a[0] == 198 && (a[1] & 0xFE) == 18) return 2;          // benchmarking
    return 0;
}

static int ipv6_class(const unsigned char a[16]) {
    static const unsigned char zero[16] = {0};
    static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF};
    static const unsigned char nat64[12] = {0, 0x64, 0xFF, 0x9B, 0, 0, 0, 0, 0, 0, 0, 0};
    if (memcmp(a, mapped, 12) == 0 || memcmp(a, nat64, 12) == 0) return ipv4_class(a + 12);
    if (memcmp(a, zero, 15) == 0) return a[15] == 1 ? 1 : 2;   // ::1 loopback, :: unspecified
    if (memcmp(a, zero, 12) == 0) return ipv4_class(a + 12);   // IPv4-compatible (deprecated)
    if (a[0] == 0xFE && (a[1] & 0xC0) == 0x80) return 2;      // fe80::/10 link-local
    if (a[0] == 0xFE && (a[1] & 0xC0) == 0xC0) return 2;      // fec0::/10 site-local (deprecated)
    if (a[0] == 0xFF) return 2;                                // multicast
    if ((a[0] & 0xFE) == 0xFC) return 1;                       // fc00::/7 unique local
    if (a[0] == 0x20 && a[1] == 0x02) {                        // 6to4: the IPv4 inside
        unsigned char v4[4] = {a[2], a[3], a[4], a[5]};
        return ipv4_class(v4);
    }
    return 0;
}

static int sockaddr_class(const struct sockaddr *sa) {
    if (sa->sa_family == AF_INET) return ipv4_class((const unsigned char *)&((const struct sockaddr_in *)sa)->sin_addr);
    if (sa->sa_family == AF_INET6) return ipv6_class(((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr);
    return 2;  // not an internet address: never a source
}

int ts_address_class(const char *text) {
    unsigned char buf[16];
    if (inet_pton(AF_INET, text, buf) == 1) return ipv4_class(buf);
    if (inet_pton(AF_INET6, text, buf) == 1) return ipv6_class(buf);
    return 2;
}

// Whether the URL being fetched now (after redirects) names a host the policy lets reach any
// address: an entry "host" matches any port, "host:port" that port (80/443 by scheme).
static int host_allowed(transfer *t) {
    const ts_http_request *q = t->request;
    if (q->allowed_host_count <= 0) return 0;
    char *url = NULL;
    if (curl_easy_getinfo(t->curl, CURLINFO_EFFECTIVE_URL, &url) != CURLE_OK || !url) return 0;
    const char *scheme_end = strstr(url, "://");
    if (!scheme_end) return 0;
    int https = (scheme_end - url == 5 && strncasecmp(url, "https", 5) == 0);
    const char *start = scheme_end + 3, *end = start;
    while (*end && *end != '/' && *end != '?' && *end != '#') end++;
    const char *at = NULL;
    for (const char *p = start; p < end; p++) if (*p == '@') at = p;
    if (at) start = at + 1;
    char host[300];
    size_t n = (size_t)(end - start);
    if (n == 0 || n >= sizeof host) return 0;
    memcpy(host, start, n);
    host[n] = 0;
    // Split host and port ("[v6]:port", "name:port", "name").
    char *port = NULL;
    if (host[0] == '[') {
        char *close = strchr(host, ']');
        if (!close) return 0;
        if (close[1] == ':') port = close + 2;
        close[1] = 0;
    } else {
        char *colon = strrchr(host, ':');
        if (colon) {
            *colon = 0;
            port = colon + 1;
        }
    }
    const char *effective_port = port && *port ? port : (https ? "443" : "80");
    for (int i = 0; i < q->allowed_host_count; i++) {
        const char *entry = q->allowed_hosts[i];
        const char *colon = entry[0] == '[' ? strstr(entry, "]:") : strrchr(entry, ':');
        if (colon && entry[0] == '[') colon++;
        size_t host_length = colon ? (size_t)(colon - entry) : strlen(entry);
        if (host_length != strlen(host) || strncasecmp(entry, host, host_length) != 0) continue;
        if (!colon || strcmp(colon + 1, effective_port) == 0) return 1;
    }
    return 0;
}

static int address_refused(transfer *t, int klass) {
    if (klass == 0 || (klass == 1 && t->request->allow_private)) return 0;
    if (host_allowed(t)) return 0;
    t->response->forbidden = 1;
    return 1;
}

// Before each connection (every address of a name, every redirect): refused addresses are
// never dialled, so a refusal says nothing about what listens there.
static curl_socket_t on_open_socket(void *user, curlsocktype purpose, struct curl_sockaddr *address) {
    transfer *t = user;
    (void)purpose;
    if (address_refused(t, sockaddr_class(&address->addr))) return CURL_SOCKET_BAD;
    return socket(address->family, address->socktype | SOCK_CLOEXEC, address->protocol);
}

// Before each request, on a new or a reused connection (a connection one unconfined
// transfer opened stays in the handle's cache; a confined one must not ride it).
static int on_prerequest(void *user, char *primary_ip, char *local_ip, int primary_port, int local_port) {
    transfer *t = user;
    (void)local_ip;
    (void)primary_port;
    (void)local_port;
    return address_refused(t, ts_address_class(primary_ip)) ? CURL_PREREQFUNC_ABORT : CURL_PREREQFUNC_OK;
}

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
    transfer t = {c, r, q->max_body, q->body, q->body_length, 0, q};
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
    if (q->restrict_sources) {
        curl_easy_setopt(c, CURLOPT_OPENSOCKETFUNCTION, on_open_socket);
        curl_easy_setopt(c, CURLOPT_OPENSOCKETDATA, &t);
        curl_easy_setopt(c, CURLOPT_PREREQFUNCTION, on_prerequest);
        curl_easy_setopt(c, CURLOPT_PREREQDATA, &t);
    }

    CURLcode code = curl_easy_perform(c);
    curl_slist_free_all(headers);
    r->curl_code = (int)code;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
    if (code != CURLE_OK) {
        if (r->forbidden) {
            snprintf(r->error, sizeof r->error, "the source policy refuses this address");
            return -1;
        }
        if (r->error[0] == 0) {
            strncpy(r->error, curl_easy_strerror(code), sizeof r->error - 1);
        }
        return -1;
    }
    return 0;
}
