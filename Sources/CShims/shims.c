#ifndef _GNU_SOURCE
#define _GNU_SOURCE  /* accept4, pthread_setname_np, gettid */
#endif
#include "CShims.h"
#include <malloc.h>
#include <pthread.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

const size_t CShims_LWS_PRE = LWS_PRE;

sqlite3_destructor_type CShims_SQLITE_TRANSIENT(void) { return SQLITE_TRANSIENT; }

int CShims_sqlite_page_cache_on_demand(void) { return sqlite3_config(SQLITE_CONFIG_PAGECACHE, (void *)0, 0, 0); }

int CShims_lws_log_levels(int errors_and_warnings_only) {
    return errors_and_warnings_only ? (LLL_ERR | LLL_WARN) : (LLL_ERR | LLL_WARN | LLL_NOTICE);
}

int CShims_SSL_CTX_set_min_tls12(SSL_CTX *ctx) { return (int)SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION); }

int CShims_SSL_set_sni(SSL *ssl, const char *name) { return (int)SSL_set_tlsext_host_name(ssl, name); }

void CShims_OPENSSL_free(void *p) { OPENSSL_free(p); }

int CShims_prctl_set_not_dumpable(void) { return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0); }

int CShims_name_this_thread(const char *name) { return pthread_setname_np(pthread_self(), name); }

int CShims_thread_id(void) { return (int)gettid(); }

int CShims_malloc_set_thresholds(int trim_bytes, int mmap_bytes) {
    return mallopt(M_TRIM_THRESHOLD, trim_bytes) == 1 && mallopt(M_MMAP_THRESHOLD, mmap_bytes) == 1 ? 0 : -1;
}

size_t CShims_malloc_in_use(void) {
    struct mallinfo2 info = mallinfo2();
    return info.uordblks + info.hblkhd;
}

int CShims_accept_cloexec(int fd, int nonblocking) {
    return accept4(fd, NULL, NULL, SOCK_CLOEXEC | (nonblocking ? SOCK_NONBLOCK : 0));
}
