/* file.h — one bounded reader for the small files aiqos reads whole: the
 * agent's config, kubeconfigs and service-account files, state and record
 * files, the CNI chain's files. A file is read only if it is regular and at
 * most `max` bytes; a FIFO or device is refused without blocking. */
#ifndef AIQOS_FILE_H
#define AIQOS_FILE_H

#include <stdio.h>
#include <sys/stat.h>

#include "error.h"

#define FILE_READ_NOFOLLOW (1u << 0) /* a symlink as the last component is refused (ELOOP) */
#define FILE_READ_SECRET   (1u << 1) /* one buffer of max + 2 bytes, never copied, wiped when freed on failure */

/* Read the regular file at path (at most max bytes) into a NUL-terminated
 * heap buffer: *ret (the caller frees it; with FILE_READ_SECRET it is
 * max + 2 bytes), *ret_len its length without the NUL (may be NULL),
 * *ret_st the file's fstat (may be NULL). Returns 0 or a negative errno;
 * err's message says why but not which file (callers prefix the path):
 * strerror() of open, fstat or read ("No such file or directory"),
 * "not a regular file" (-EINVAL), "larger than <max> bytes" (-EFBIG),
 * "out of memory" (-ENOMEM). */
int file_read_bounded(const char *path, size_t max, unsigned flags, char **ret, size_t *ret_len, struct stat *ret_st,
                      struct error *err);
/* Read a stream to its end (stdin: the CNI network config, aiqosctl's
 * "--pods -"), at most max bytes, into a NUL-terminated heap buffer.
 * Returns 0 or a negative errno with err "larger than <max> bytes"
 * (-EFBIG), strerror() of the read, or "out of memory". */
int file_read_stream(FILE *in, size_t max, char **ret, size_t *ret_len, struct error *err);

#endif
