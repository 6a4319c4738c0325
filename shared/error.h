/* error.h — the error contract of the library (after crun's libcrun_error_t).
 * Fallible functions return a negative errno and, when given a non-NULL
 * struct error, fill it with a message that callers may prefix with context
 * ("apply plan on 'veth12': replace qdisc fq_codel: Operation not supported").
 * Only the programs (cni/, agent/) print errors. */
#ifndef AIQOS_ERROR_H
#define AIQOS_ERROR_H

#include "util.h"

#define ERROR_MSG_MAX 1024

/* CNI spec error codes; the library uses them to classify failures, the
 * plugin prints them. 0 = not classified (the plugin maps it to 100+). */
enum cni_code {
	CNI_ERR_NONE = 0,
	CNI_ERR_VERSION = 1,
	CNI_ERR_UNSUPPORTED_FIELD = 2,
	CNI_ERR_UNKNOWN_CONTAINER = 3,
	CNI_ERR_ENV = 4,
	CNI_ERR_IO = 5,
	CNI_ERR_DECODE = 6,
	CNI_ERR_INVALID_CONFIG = 7,
	CNI_ERR_TRY_LATER = 11,
	CNI_ERR_NOT_AVAILABLE = 50,
	CNI_ERR_LIMITED = 51,
	/* plugin-specific (>= 100) */
	CNI_ERR_TUNE_FAILED = 100, /* kernel refused the tuning (failurePolicy closed) */
	CNI_ERR_CHECK_DRIFT = 101, /* CHECK: kernel differs from the plan */
	CNI_ERR_STATE = 102,       /* state store unreadable/unwritable */
};

struct error {
	int code;   /* enum cni_code */
	int errnum; /* positive errno, 0 if none */
	char msg[ERROR_MSG_MAX];
};

/* Set err (if non-NULL) and return -errnum (or -EINVAL when errnum is 0),
 * so callers can write `return error_set(err, CNI_ERR_DECODE, EINVAL, "...")`. */
int error_set(struct error *err, int code, int errnum, const char *fmt, ...) _printf_(4, 5);
/* Prefix the message with context: "<ctx>: <old message>". Keeps code/errnum. */
void error_prefix(struct error *err, const char *fmt, ...) _printf_(2, 3);
void error_clear(struct error *err);
/* Hand an error filled in a local struct to the caller's err (if non-NULL):
 * `error_propagate(err, &e);` for `if (err) *err = e;`. */
static inline void error_propagate(struct error *err, const struct error *e)
{
	if (err && err != e)
		*err = *e;
}

#endif
