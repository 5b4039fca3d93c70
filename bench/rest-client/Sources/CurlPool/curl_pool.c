/* curl_pool: see curl_pool.h. One loop thread owns the multi handle, every easy handle and the waiting and
 * active lists; other threads touch only the inbox, under |lock|, and curl_multi_wakeup. */
#include "curl_pool.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* One request, from submit to its answer (or, abandoned, to the end of its hold). */
struct transfer {
    struct transfer *next;
    CURL *easy;
    struct curl_slist *headers;
    char *method, *url, *group, *proxy, *proxy_user, *proxy_password;
    void *body;
    size_t body_len;
    long timeout_ms;
    long long deadline;           /* monotonic ms; past it the caller gets a timeout */
    curl_pool_done done;          /* NULL once the caller has its answer (abandoned, if still open) */
    void *context;
    unsigned char *buf;           /* the answer's body so far */
    size_t len, cap, max_body;
    int too_large;
    char error[CURL_ERROR_SIZE];
};

struct curl_pool {
    curl_pool_options options;    /* strings owned (copied) */
    CURLM *multi;
    pthread_t thread;
    pthread_mutex_t lock;
    struct transfer *inbox, *inbox_tail;   /* under |lock| */
    int closing;                           /* under |lock| */
    struct transfer *waiting, *waiting_tail, *active;  /* loop thread */
    CURL *spare[16];                       /* easy handles kept for reuse; loop thread */
    int spares;
    atomic_long opened;
};

static long long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static char *copy(const char *s) { return s ? strdup(s) : NULL; }

static void transfer_free(struct transfer *t) {
    curl_slist_free_all(t->headers);
    free(t->method); free(t->url); free(t->group); free(t->proxy); free(t->proxy_user); free(t->proxy_password);
    free(t->body); free(t->buf);
    free(t);
}

/* Hands the caller its outcome, once. */
static void answer(struct transfer *t, const char *error, long status, long retry_after) {
    if (!t->done) return;
    curl_pool_reply reply = { error, status, t->buf, t->len, retry_after };
    curl_pool_done done = t->done;
    t->done = NULL;
    done(t->context, &reply);
}

static size_t on_body(char *data, size_t size, size_t count, void *user) {
    struct transfer *t = user;
    size_t n = size * count;
    if (t->len + n > t->max_body) { t->too_large = 1; return 0; }  /* 0: libcurl fails the transfer */
    if (t->len + n > t->cap) {
        size_t cap = t->cap ? t->cap : 16384;
        while (cap < t->len + n) cap *= 2;
        unsigned char *grown = realloc(t->buf, cap);
        if (!grown) return 0;
        t->buf = grown;
        t->cap = cap;
    }
    memcpy(t->buf + t->len, data, n);
    t->len += n;
    return n;
}

/* MARK: - Loop thread */

static int in_flight(curl_pool *pool, const char *group) {
    int n = 0;
    for (struct transfer *t = pool->active; t; t = t->next) n += t->group && strcmp(t->group, group) == 0;
    return n;
}

/* Sets up |t|'s easy handle and hands it to libcurl, which sends it on an idle kept-alive connection, opens one
 * (up to max_per_host) or queues it. */
static int start(curl_pool *pool, struct transfer *t) {
    CURL *e = pool->spares ? pool->spare[--pool->spares] : curl_easy_init();
    if (!e) return -1;
    t->easy = e;
    const curl_pool_options *o = &pool->options;
    curl_easy_setopt(e, CURLOPT_PRIVATE, t);
    curl_easy_setopt(e, CURLOPT_URL, t->url);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, t->headers);
    curl_easy_setopt(e, CURLOPT_USERAGENT, o->user_agent);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, t->error);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, t);
    curl_easy_setopt(e, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)o->max_body);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, o->connect_timeout_ms);
    /* The whole exchange may outlive its caller's deadline by the hold (see expire). */
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, t->timeout_ms > o->hold_ms ? t->timeout_ms : o->hold_ms);
    curl_easy_setopt(e, CURLOPT_MAXAGE_CONN, o->idle_timeout_s);
    curl_easy_setopt(e, CURLOPT_PIPEWAIT, 1L);  /* HTTP/2: wait to multiplex on a connection being opened */
    /* NULL: the system roots only from the hashed directory, read when a chain needs them (as the relay does),
     * not the whole bundle parsed at the first connect. */
    curl_easy_setopt(e, CURLOPT_CAINFO, o->ca_file);
    curl_easy_setopt(e, CURLOPT_PROXY, t->proxy ? t->proxy : "");  /* "": direct, and the environment ignored */
    if (t->proxy && *t->proxy) {
        curl_easy_setopt(e, CURLOPT_HTTPPROXYTUNNEL, 1L);
        curl_easy_setopt(e, CURLOPT_PROXYAUTH, (long)CURLAUTH_BASIC);
        curl_easy_setopt(e, CURLOPT_PROXYUSERNAME, t->proxy_user);
        curl_easy_setopt(e, CURLOPT_PROXYPASSWORD, t->proxy_password);
    }
    if (strcmp(t->method, "GET") != 0) curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, t->method);
    if (t->body || strcmp(t->method, "POST") == 0) {
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)t->body_len);
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, t->body ? t->body : "");
    }
    return curl_multi_add_handle(pool->multi, e) == CURLM_OK ? 0 : -1;
}

/* Gives |t|'s easy handle back for reuse and frees it. */
static void retire(curl_pool *pool, struct transfer *t) {
    if (t->easy) {
        curl_multi_remove_handle(pool->multi, t->easy);
        long connects = 0;
        curl_easy_getinfo(t->easy, CURLINFO_NUM_CONNECTS, &connects);
        atomic_fetch_add(&pool->opened, connects);
        curl_easy_reset(t->easy);
        if (pool->spares < (int)(sizeof pool->spare / sizeof *pool->spare)) pool->spare[pool->spares++] = t->easy;
        else curl_easy_cleanup(t->easy);
    }
    transfer_free(t);
}

static void unlink_active(curl_pool *pool, struct transfer *t) {
    for (struct transfer **p = &pool->active; *p; p = &(*p)->next)
        if (*p == t) { *p = t->next; return; }
}

/* Waiting calls past their deadline fail. An open request past its caller's deadline is answered with a timeout
 * but stays open (abandoned) unless it was never sent: libcurl still had it queued for a connection. */
static void expire(curl_pool *pool, long long now) {
    char text[160];
    struct transfer **p = &pool->waiting, *last = NULL;
    while (*p) {
        struct transfer *t = *p;
        if (now < t->deadline) { last = t; p = &t->next; continue; }
        *p = t->next;
        snprintf(text, sizeof text, "no connection free within %ld ms", t->timeout_ms);
        answer(t, text, 0, -1);
        transfer_free(t);
    }
    pool->waiting_tail = last;
    for (struct transfer *t = pool->active, *next; t; t = next) {
        next = t->next;
        if (!t->done || now < t->deadline) continue;
        snprintf(text, sizeof text, "no answer within %ld ms (the request stays open)", t->timeout_ms);
        answer(t, text, 0, -1);
        curl_off_t sent = 0;
        curl_easy_getinfo(t->easy, CURLINFO_PRETRANSFER_TIME_T, &sent);
        if (sent == 0) { unlink_active(pool, t); retire(pool, t); }
    }
}

/* Starts waiting calls, oldest first, as their group's limit allows. */
static void dispatch(curl_pool *pool) {
    struct transfer **p = &pool->waiting, *last = NULL;
    while (*p) {
        struct transfer *t = *p;
        if (t->group && in_flight(pool, t->group) >= pool->options.max_per_group) {
            last = t; p = &t->next; continue;
        }
        *p = t->next;
        if (start(pool, t) != 0) {
            answer(t, "could not start the request", 0, -1);
            retire(pool, t);
            continue;
        }
        t->next = pool->active;
        pool->active = t;
    }
    pool->waiting_tail = last;
}

/* Transfers libcurl has finished: their answers (if the caller still waits), then their handles back. */
static void collect(curl_pool *pool) {
    CURLMsg *msg;
    int left;
    while ((msg = curl_multi_info_read(pool->multi, &left))) {
        if (msg->msg != CURLMSG_DONE) continue;
        struct transfer *t = NULL;
        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&t);
        CURLcode code = msg->data.result;
        if (code == CURLE_OK) {
            long status = 0;
            curl_off_t retry = -1;
            curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &status);
            curl_easy_getinfo(t->easy, CURLINFO_RETRY_AFTER, &retry);
            answer(t, NULL, status, retry > 0 ? (long)retry : -1);
        } else {
            char text[CURL_ERROR_SIZE + 64];
            if (t->too_large || code == CURLE_FILESIZE_EXCEEDED)
                snprintf(text, sizeof text, "answer larger than %zu bytes", t->max_body);
            else
                snprintf(text, sizeof text, "%s", t->error[0] ? t->error : curl_easy_strerror(code));
            answer(t, text, 0, -1);
        }
        unlink_active(pool, t);
        retire(pool, t);
    }
}

/* How long poll may sleep: until the nearest caller deadline, at most 1 s (libcurl shortens it for its own). */
static int wait_ms(curl_pool *pool, long long now) {
    long long soonest = now + 1000;
    for (struct transfer *t = pool->waiting; t; t = t->next) if (t->deadline < soonest) soonest = t->deadline;
    for (struct transfer *t = pool->active; t; t = t->next) if (t->done && t->deadline < soonest) soonest = t->deadline;
    return soonest > now ? (int)(soonest - now) : 0;
}

static void shut_down(curl_pool *pool, struct transfer *inbox) {
    struct transfer *lists[] = { inbox, pool->waiting, pool->active };
    for (size_t i = 0; i < 3; i++) {
        for (struct transfer *t = lists[i], *next; t; t = next) {
            next = t->next;
            answer(t, "the relay is shutting down", 0, -1);
            retire(pool, t);
        }
    }
    pool->waiting = pool->active = NULL;
}

static void *loop(void *argument) {
    curl_pool *pool = argument;
    for (;;) {
        pthread_mutex_lock(&pool->lock);
        struct transfer *taken = pool->inbox;
        struct transfer *taken_tail = pool->inbox_tail;
        int closing = pool->closing;
        pool->inbox = pool->inbox_tail = NULL;
        pthread_mutex_unlock(&pool->lock);
        if (closing) { shut_down(pool, taken); return NULL; }
        if (taken) {
            if (pool->waiting_tail) pool->waiting_tail->next = taken; else pool->waiting = taken;
            pool->waiting_tail = taken_tail;
        }
        long long now = now_ms();
        expire(pool, now);
        dispatch(pool);
        int running = 0;
        curl_multi_perform(pool->multi, &running);
        collect(pool);
        curl_multi_poll(pool->multi, NULL, 0, wait_ms(pool, now_ms()), NULL);
    }
}

/* MARK: - Any thread */

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static void global_init(void) { curl_global_init(CURL_GLOBAL_DEFAULT); }

curl_pool *curl_pool_new(const curl_pool_options *options, char *error, size_t error_len) {
    pthread_once(&global_once, global_init);
    curl_pool *pool = calloc(1, sizeof *pool);
    if (!pool) { snprintf(error, error_len, "out of memory"); return NULL; }
    pool->options = *options;
    pool->options.ca_file = copy(options->ca_file);
    pool->options.user_agent = copy(options->user_agent);
    pthread_mutex_init(&pool->lock, NULL);
    pool->multi = curl_multi_init();
    if (pool->multi) {
        curl_multi_setopt(pool->multi, CURLMOPT_MAX_HOST_CONNECTIONS, (long)options->max_per_host);
        curl_multi_setopt(pool->multi, CURLMOPT_MAXCONNECTS, (long)options->max_per_host * 2);
    }
    if (!pool->multi || pthread_create(&pool->thread, NULL, loop, pool) != 0) {
        snprintf(error, error_len, pool->multi ? "pthread_create failed" : "curl_multi_init failed");
        if (pool->multi) curl_multi_cleanup(pool->multi);
        free((char *)pool->options.ca_file); free((char *)pool->options.user_agent);
        free(pool);
        return NULL;
    }
    return pool;
}

void curl_pool_submit(curl_pool *pool, const curl_pool_request *r, curl_pool_done done, void *context) {
    struct transfer *t = calloc(1, sizeof *t);
    if (!t) { curl_pool_reply reply = { "out of memory", 0, NULL, 0, -1 }; done(context, &reply); return; }
    t->method = copy(r->method); t->url = copy(r->url); t->group = copy(r->group);
    t->proxy = copy(r->proxy); t->proxy_user = copy(r->proxy_user); t->proxy_password = copy(r->proxy_password);
    if (r->body) { t->body = malloc(r->body_len ? r->body_len : 1); memcpy(t->body, r->body, r->body_len); }
    t->body_len = r->body_len;
    for (size_t i = 0; i < r->header_count; i++) t->headers = curl_slist_append(t->headers, r->headers[i]);
    t->headers = curl_slist_append(t->headers, "Expect:");  /* no 100-continue round trip before a body */
    t->timeout_ms = r->timeout_ms;
    t->deadline = now_ms() + r->timeout_ms;
    t->max_body = pool->options.max_body;
    t->done = done;
    t->context = context;
    pthread_mutex_lock(&pool->lock);
    int closing = pool->closing, first = !pool->inbox;
    if (!closing) {
        if (pool->inbox_tail) pool->inbox_tail->next = t; else pool->inbox = t;
        pool->inbox_tail = t;
    }
    pthread_mutex_unlock(&pool->lock);
    if (closing) { answer(t, "the relay is shutting down", 0, -1); transfer_free(t); return; }
    if (first) curl_multi_wakeup(pool->multi);  /* a wake-up for this batch is already on its way otherwise */
}

long curl_pool_connections_opened(curl_pool *pool) { return atomic_load(&pool->opened); }

void curl_pool_close(curl_pool *pool) {
    pthread_mutex_lock(&pool->lock);
    pool->closing = 1;
    pthread_mutex_unlock(&pool->lock);
    curl_multi_wakeup(pool->multi);
    pthread_join(pool->thread, NULL);
    while (pool->spares) curl_easy_cleanup(pool->spare[--pool->spares]);
    curl_multi_cleanup(pool->multi);
    pthread_mutex_destroy(&pool->lock);
    free((char *)pool->options.ca_file); free((char *)pool->options.user_agent);
    free(pool);
}
