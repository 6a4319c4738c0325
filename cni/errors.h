/* errors.h — the CNI error codes the plugin reports, and which failure gets
 * which. The library (shared/) returns a negative errno and a message
 * (shared/error.h) and never classifies; the plugin gives a failure its code
 * where it knows what it called: the verb that called the library (and,
 * for two steps, the errno). The one place that prints it is cni/run.c: an
 * error nobody classified is reported as 100.
 *
 *   what failed                                        code
 *   CNI_COMMAND (run.c); CNI_CONTAINERID/IFNAME/NETNS     4
 *     syntax, CNI_ARGS (conf.c); CNI_NETNS not a netns
 *     (attach.c: netns_open, or nl_open_in_netns EINVAL)
 *   stdin unreadable (run.c: file_read_stream, but EFBIG  5
 *     is 6); out of memory; writing the result
 *   network config too large, with a NUL, not JSON        6
 *   cniVersion not supported, verb too new for it         1
 *   any other network config key, prevResult (conf.c);    7
 *     no prevResult at ADD/CHECK, GC without
 *     cni.dev/valid-attachments
 *   the attachment's lock busy (run.c:                   11
 *     state_lock_attachment, but for the errnos that say
 *     no lock file can exist)
 *   STATUS: agentRequired and the agent does not answer  50
 *   ADD (failurePolicy closed): interfaces not usable,  100
 *     plan, apply (the kernel); CHECK: observing the
 *     kernel (observe_plan); anything unclassified
 *   CHECK: a difference, interfaces not found           101
 *   ADD (closed): the record not written (state_save);  102
 *     CHECK: no record, unreadable or pending record,
 *     its plan not rebuilt (state_load,
 *     attach_plan_restore); GC: listing the state
 *     directory, cleaning a stale attachment
 */
#ifndef AIQOS_CNI_ERRORS_H
#define AIQOS_CNI_ERRORS_H

#include "error.h"

/* CNI spec error codes (1-99 are the spec's, 100+ the plugin's). */
enum cni_code {
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

/* error_set() with the CNI code of the failure. */
static inline _printf_(4, 5) int cni_error_set(struct error *err, enum cni_code code, int errnum, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = error_setv(err, errnum, fmt, ap);
	va_end(ap);
	if (err)
		err->code = code;
	return r;
}

/* Give the error a library call returned (r < 0) the CNI code it means
 * here; returns r: `return cni_error_code(err, CNI_ERR_STATE, r);`. */
static inline int cni_error_code(struct error *err, enum cni_code code, int r)
{
	if (err)
		err->code = code;
	return r;
}

#endif
