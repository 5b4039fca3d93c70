/* curl_pool: the relay's REST client rebuilt on libcurl's multi interface, as a prototype to measure against
 * HTTPPool (docs/rest-client.md). One thread runs curl_multi_poll over every connection; other threads queue
 * requests and wake it with curl_multi_wakeup. It keeps what PrefectClient relies on from HTTPPool:
 *
 *   - kept-alive connections, up to |max_per_host| per origin; requests beyond that wait in libcurl's queue;
 *   - a request on a reused connection that the server closed before answering is sent again on a new one
 *     (libcurl does this itself);
 *   - at most |max_per_group| requests of one group (one run's reads) in flight at once;
 *   - a caller's deadline apart from the request's: past it the caller gets a timeout, but the request stays
 *     open for its answer up to |hold_ms| (the server is still working on it), as HTTPPool's abandoned calls;
 *   - a connect deadline covering DNS, TCP, a proxy's CONNECT and the TLS handshake;
 *   - the proxy decided per request by the caller (ProxyRule), always as a CONNECT tunnel, Basic credentials;
 *   - an extra CA file on top of the system roots; answers bounded at |max_body| bytes; Retry-After.
 *
 * Not carried over (HTTPPool has them): extra connections in place of slow requests, joining a re-asked request
 * to its abandoned copy, the stalled-read warning and gauges.
 */
#ifndef CURL_POOL_H
#define CURL_POOL_H

#include <stddef.h>

typedef struct curl_pool curl_pool;

typedef struct {
    int max_per_host;          /* kept-alive connections per origin (HTTPPool: 6) */
    int max_per_group;         /* requests of one group in flight at once (3) */
    long connect_timeout_ms;   /* DNS + TCP + CONNECT + TLS (5000) */
    long hold_ms;              /* how long a request whose caller gave up stays open (60000) */
    long idle_timeout_s;       /* a kept-alive connection unused this long is not reused (30) */
    size_t max_body;           /* larger answers fail (8 MiB) */
    const char *ca_file;       /* extra CA file, on top of the system's hashed directory; NULL for none */
    const char *user_agent;
} curl_pool_options;

/* What a request came to. |error| is NULL for an answer (any status); then |status| and |body| are set. */
typedef struct {
    const char *error;
    long status;
    const unsigned char *body;
    size_t body_len;
    long retry_after;          /* seconds from Retry-After (delay or date), -1 without one */
} curl_pool_reply;

/* Runs exactly once per submitted request, on the pool's thread; |reply| and its buffers are valid only
 * during the call. */
typedef void (*curl_pool_done)(void *context, const curl_pool_reply *reply);

/* One request. Every string is copied by curl_pool_submit. */
typedef struct {
    const char *method;        /* GET, POST, ... */
    const char *url;           /* http(s)://host[:port]/path */
    const char *const *headers; /* "name: value", |header_count| of them */
    size_t header_count;
    const void *body;          /* NULL for none */
    size_t body_len;
    long timeout_ms;           /* the caller's deadline, from now */
    const char *group;         /* NULL for none */
    const char *proxy;         /* "http://host:port" for a CONNECT tunnel; NULL or "" for a direct connection */
    const char *proxy_user;    /* Basic credentials for the proxy; NULL for none */
    const char *proxy_password;
} curl_pool_request;

/* A pool with its thread started. NULL on failure, with a reason in |error|. */
curl_pool *curl_pool_new(const curl_pool_options *options, char *error, size_t error_len);

/* Queues |request|; |done| gets its outcome. Any thread. After curl_pool_close, |done| is called at once with
 * an error. */
void curl_pool_submit(curl_pool *pool, const curl_pool_request *request, curl_pool_done done, void *context);

/* Connections opened since the pool started. Any thread. */
long curl_pool_connections_opened(curl_pool *pool);

/* Stops the thread: queued and open requests get an error, connections close. Then frees the pool. Once, from
 * any thread but the pool's, after every other thread has stopped submitting. */
void curl_pool_close(curl_pool *pool);

#endif
