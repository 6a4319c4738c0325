/* status.c — STATUS (spec 1.1.0): the plugin is ready unless the config says
 * the agent is required and it does not answer (code 50). */
#include "cni.h"

int cni_cmd_status(struct cni_ctx *ctx, struct error *err)
{
	const struct cni_conf *c = &ctx->conf;
	int r;

	if (!c->agent_required)
		return 0;
	r = cni_agent_status(c, err);
	return r < 0 ? cni_error_code(err, CNI_ERR_NOT_AVAILABLE, r) : r;
}
