/* Release builds only (deploy/static-libs.sh puts this object, as a one-member archive, ahead of Debian's
 * libsqlite3.a in the same linker GROUP, so these definitions are the ones the linker finds first).
 *
 * Debian builds SQLite with FTS3/4, FTS5, R*Tree, dbstat and the sqlite_stmt virtual table, and sqlite3_open
 * registers each of them through these functions, so the linker pulls their code (about 330 kB) from the archive
 * even though the relay's store never uses them. Defining the registration functions here as "nothing to
 * register" keeps those archive members out. Should anything else in SQLite ever need them, the link fails with a
 * duplicate symbol rather than running without them. The debug and test builds link the shared library and never
 * see this file. */
typedef struct sqlite3 sqlite3;

int sqlite3Fts3Init(sqlite3 *db) { (void)db; return 0; }
int sqlite3Fts5Init(sqlite3 *db) { (void)db; return 0; }
int sqlite3RtreeInit(sqlite3 *db) { (void)db; return 0; }
int sqlite3DbstatRegister(sqlite3 *db) { (void)db; return 0; }
int sqlite3StmtVtabInit(sqlite3 *db) { (void)db; return 0; }
