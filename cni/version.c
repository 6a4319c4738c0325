/* version.c — VERSION: the spec versions this plugin speaks. The answer does
 * not depend on the request. */
#include "cni.h"

int cni_cmd_version(struct cni_ctx *ctx, struct error *err)
{
	int r = cni_version_print(ctx->out);

	if (r < 0)
		return cni_error_set(err, CNI_ERR_IO, -r, "cannot write the version result: %s", strerror(-r));
	return 0;
}
