#ifndef CSHIMS_H
#define CSHIMS_H
/* Only what Swift's C importer cannot take directly: function-like macros, casts to function
 * pointers, and variadic APIs. Each shim is logic-free and says why it exists. */
#include <stddef.h>
#include <libwebsockets.h>
#include <sqlite3.h>
#include <openssl/ssl.h>
/* CShims.h is the module's umbrella header, so per-area shim headers are listed here. */
#include "CShims_APNs.h"

/* LWS_PRE is built by the _LWS_PAD macro, which the importer drops. */
extern const size_t CShims_LWS_PRE;

/* SQLITE_TRANSIENT is a cast of -1 to a function pointer; the importer drops it. */
sqlite3_destructor_type CShims_SQLITE_TRANSIENT(void);
/* sqlite3_config is variadic: SQLITE_CONFIG_PAGECACHE with no buffer and no initial pages, before the first open. */
int CShims_sqlite_page_cache_on_demand(void);

/* lws_set_log_level's emit callback is fine, but lwsl_* levels are macros built from enums. */
int CShims_lws_log_levels(int errors_and_warnings_only);

/* SSL_CTX_set_min_proto_version is a macro over SSL_CTX_ctrl. */
int CShims_SSL_CTX_set_min_tls12(SSL_CTX *ctx);

/* SSL_set_tlsext_host_name is a macro over SSL_ctrl. */
int CShims_SSL_set_sni(SSL *ssl, const char *name);

/* OPENSSL_free is a macro that adds __FILE__/__LINE__. */
void CShims_OPENSSL_free(void *p);

/* prctl is variadic, which the importer drops. Returns prctl(PR_SET_DUMPABLE, 0)'s result. */
int CShims_prctl_set_not_dumpable(void);
/* pthread_setname_np on the calling thread: a GNU extension the Glibc module doesn't import. |name| is at most 15
   bytes (Linux's limit). Returns 0 or an errno value. */
int CShims_name_this_thread(const char *name);

/* The calling thread's kernel id (gettid(2)): cheap, and unique among live threads, unlike comparing pthread_t
   values another thread may still be writing. */
int CShims_thread_id(void);

/* glibc's mallopt(M_TRIM_THRESHOLD) and mallopt(M_MMAP_THRESHOLD): <malloc.h> is not in Swift's Glibc module.
   Returns 0 when both were taken, -1 otherwise. */
int CShims_malloc_set_thresholds(int trim_bytes, int mmap_bytes);

/* Bytes malloc has handed out and not had back, across every arena and mapped block (mallinfo2's uordblks +
   hblkhd). Unlike the resident size it excludes freed memory the arenas keep, so a leak shows here and
   fragmentation does not. Walks the arenas under their locks: for /metrics, not a hot path. */
size_t CShims_malloc_in_use(void);

/* accept(2) whose socket is close-on-exec from the start (and non-blocking if asked): a process that both accepts
   and spawns children (the tests' fake servers) must not let a child inherit a connection in the moment between
   accept and fcntl, or the connection outlives its server's close. accept4 needs _GNU_SOURCE, hence a shim. */
int CShims_accept_cloexec(int fd, int nonblocking);

#endif
