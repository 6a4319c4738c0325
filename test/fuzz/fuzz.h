/* fuzz.h — helpers shared by the libFuzzer targets in test/fuzz/fuzz_*.c:
 * a NUL-terminated copy of the input, a JSON parse that refuses trailing
 * bytes, and an abort that names the broken property. Header-only. */
#ifndef AIQOS_FUZZ_H
#define AIQOS_FUZZ_H

#include <cjson/cJSON.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* stderr as it was at start: libFuzzer's -close_fd_mask=2 (which run.sh uses
 * to silence the plugin's logs) discards fd 2 before the first input. */
static int fuzz_report_fd = 2;
__attribute__((constructor)) static void fuzz_report_fd_init(void)
{
	int fd = fcntl(2, F_DUPFD_CLOEXEC, 3);
	if (fd >= 0)
		fuzz_report_fd = fd;
}

/* A property every input must keep: abort (libFuzzer saves the input). */
#define FUZZ_ASSERT(cond, ...)                                                         \
	do {                                                                           \
		if (!(cond)) {                                                         \
			dprintf(fuzz_report_fd, "fuzz: property broken: %s: ", #cond); \
			dprintf(fuzz_report_fd, __VA_ARGS__);                          \
			dprintf(fuzz_report_fd, "\n");                                 \
			abort();                                                       \
		}                                                                      \
	} while (0)

/* malloc'd copy of data with a terminating NUL (NULL on ENOMEM). Embedded
 * NULs are kept: C-string consumers see the first part only. */
static inline char *fuzz_strndup(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);
	if (!s)
		return NULL;
	memcpy(s, data, size);
	s[size] = '\0';
	return s;
}

/* Parse data as one JSON document (trailing garbage refused), as the
 * programs do. NULL when it is not JSON. */
static inline cJSON *fuzz_json_parse(const uint8_t *data, size_t size)
{
	_cleanup_free_ char *s = fuzz_strndup(data, size);
	if (!s)
		return NULL;
	return cJSON_ParseWithLengthOpts(s, size + 1, NULL, 1);
}

#endif
