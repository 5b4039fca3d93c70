/* The size test binary (bench/rest-client/size.sh): what linking libcurl adds to a program that already has what
 * the relay links. Built twice: plain, it fetches an https URL with OpenSSL directly (TLS client, certificate and
 * host name verification, as TLSSocket does), plus, with -DWITH_NGHTTP2, references to the nghttp2 client calls the
 * APNs connection makes; with -DWITH_CURL it also fetches the same URL through curl_pool (the prototype engine).
 * The difference between the two builds is libcurl, the engine, and whatever of OpenSSL only libcurl uses.
 *
 *   size-test URL-HOST PORT PATH [CA_FILE]
 */
#include <netdb.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#ifdef WITH_NGHTTP2
#include <nghttp2/nghttp2.h>
#endif
#ifdef WITH_CURL
#include <pthread.h>
#include "curl_pool.h"
#endif

/* One GET over TLS with OpenSSL alone; the status line on stdout. */
static int tls_get(const char *host, const char *port, const char *path, const char *ca) {
    struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *list;
    if (getaddrinfo(host, port, &hints, &list) != 0) return 1;
    int fd = socket(list->ai_family, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, list->ai_addr, list->ai_addrlen) != 0) return 1;
    freeaddrinfo(list);
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    SSL_CTX_set_default_verify_paths(ctx);
    if (ca) SSL_CTX_load_verify_locations(ctx, ca, NULL);
    SSL *ssl = SSL_new(ctx);
    SSL_set_tlsext_host_name(ssl, host);
    SSL_set1_host(ssl, host);
    SSL_set_fd(ssl, fd);
    if (SSL_connect(ssl) != 1) return 1;
    char request[512], answer[4096];
    int n = snprintf(request, sizeof request, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", path, host);
    SSL_write(ssl, request, n);
    n = SSL_read(ssl, answer, sizeof answer - 1);
    answer[n > 0 ? n : 0] = 0;
    printf("openssl: %.*s\n", (int)strcspn(answer, "\r\n"), answer);
    SSL_free(ssl);
    SSL_CTX_free(ctx);
    close(fd);
    return 0;
}

#ifdef WITH_NGHTTP2
/* Never run (argc is never 99): keeps the nghttp2 client calls the relay makes in the link. */
static void nghttp2_calls(void) {
    nghttp2_session_callbacks *callbacks;
    nghttp2_session *session;
    nghttp2_session_callbacks_new(&callbacks);
    nghttp2_session_client_new(&session, callbacks, NULL);
    nghttp2_submit_settings(session, NGHTTP2_FLAG_NONE, NULL, 0);
    nghttp2_submit_request(session, NULL, NULL, 0, NULL, NULL);
    nghttp2_submit_ping(session, NGHTTP2_FLAG_NONE, NULL);
    nghttp2_session_send(session);
    nghttp2_session_mem_recv(session, NULL, 0);
    nghttp2_session_del(session);
    nghttp2_session_callbacks_del(callbacks);
}
#endif

#ifdef WITH_CURL
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t answered = PTHREAD_COND_INITIALIZER;
static int done_flag;

static void on_done(void *context, const curl_pool_reply *reply) {
    (void)context;
    if (reply->error) printf("curl_pool: %s\n", reply->error);
    else printf("curl_pool: HTTP %ld, %zu bytes\n", reply->status, reply->body_len);
    pthread_mutex_lock(&lock);
    done_flag = 1;
    pthread_cond_signal(&answered);
    pthread_mutex_unlock(&lock);
}

static void curl_get(const char *host, const char *port, const char *path, const char *ca) {
    char error[256], url[512];
    curl_pool_options options = { 6, 3, 5000, 60000, 30, 8 << 20, ca, "size-test" };
    curl_pool *pool = curl_pool_new(&options, error, sizeof error);
    if (!pool) { printf("curl_pool: %s\n", error); return; }
    snprintf(url, sizeof url, "https://%s:%s%s", host, port, path);
    const char *headers[] = { "accept: application/json" };
    curl_pool_request request = { "GET", url, headers, 1, NULL, 0, 10000, NULL, NULL, NULL, NULL };
    curl_pool_submit(pool, &request, on_done, NULL);
    pthread_mutex_lock(&lock);
    while (!done_flag) pthread_cond_wait(&answered, &lock);
    pthread_mutex_unlock(&lock);
    curl_pool_close(pool);
}
#endif

int main(int argc, char **argv) {
    if (argc < 4) { fprintf(stderr, "usage: size-test HOST PORT PATH [CA_FILE]\n"); return 2; }
#ifdef WITH_NGHTTP2
    if (argc == 99) nghttp2_calls();
#endif
    const char *ca = argc > 4 ? argv[4] : NULL;
    int rc = tls_get(argv[1], argv[2], argv[3], ca);
#ifdef WITH_CURL
    curl_get(argv[1], argv[2], argv[3], ca);
#endif
    return rc;
}
