#ifndef CSHIMS_APNS_H
#define CSHIMS_APNS_H
/* For the APNs connection loop. No shim functions: Glibc's Swift module does not include
 * <sys/eventfd.h>, so this header only makes eventfd() and EFD_* visible to Swift. */
#include <sys/eventfd.h>

#endif
