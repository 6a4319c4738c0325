/* error.c — see error.h. */
#include <stdarg.h>

#include "error.h"

int error_set(struct error *err, int code, int errnum, const char *fmt, ...)
{
	if (errnum < 0)
		errnum = -errnum;
	if (err) {
		va_list ap;
		err->code = code;
		err->errnum = errnum;
		va_start(ap, fmt);
		vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
		va_end(ap);
	}
	return errnum ? -errnum : -EINVAL;
}

void error_prefix(struct error *err, const char *fmt, ...)
{
	char ctx[ERROR_MSG_MAX];
	char old[ERROR_MSG_MAX];
	va_list ap;

	if (!err)
		return;
	va_start(ap, fmt);
	vsnprintf(ctx, sizeof(ctx), fmt, ap);
	va_end(ap);
	memcpy(old, err->msg, sizeof(old));
	snprintf(err->msg, sizeof(err->msg), "%s: %s", ctx, old);
}

void error_clear(struct error *err)
{
	if (err) {
		err->code = 0;
		err->errnum = 0;
		err->msg[0] = '\0';
	}
}
