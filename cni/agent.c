/* agent.c — the plugin's side of the agent protocol (proto.h): ask for a
 * pod's annotations at ADD, tell the agent about attachments coming and
 * going, and probe it for STATUS. Every call is bounded by a timeout; the
 * agent is optional unless agentRequired says otherwise. */
#include "cni.h"

static void request_fill(struct proto_request *r, enum proto_op op, const struct cni_args *a)
{
	memset(r, 0, sizeof(*r));
	r->op = op;
	if (a) {
		str_copy(r->namespace_, sizeof(r->namespace_), a->pod_namespace);
		str_copy(r->name, sizeof(r->name), a->pod_name);
		str_copy(r->uid, sizeof(r->uid), a->pod_uid);
	}
}

/* The agent is optional: when nothing is at its socket path, fail the way
 * a connect would, without building a request and a socket first. */
static int agent_absent(const struct cni_conf *c, struct error *err)
{
	if (!c->agent_socket[0] || access(c->agent_socket, F_OK) == 0 || errno != ENOENT)
		return 0;
	return error_set(err, ENOENT, "connect to agent at '%s': %s", c->agent_socket, strerror(ENOENT));
}

/* {"ok":false,"error":"..."} -> error; {"ok":true,...} -> 0. */
static int response_check(const cJSON *resp, const struct cni_conf *c, struct error *err)
{
	const cJSON *ok = cJSON_GetObjectItemCaseSensitive(resp, "ok");
	const cJSON *msg;

	if (!cJSON_IsObject(resp) || !cJSON_IsBool(ok))
		return cni_error_set(err, CNI_ERR_NOT_AVAILABLE, EPROTO, "agent at %s: malformed response",
		                     c->agent_socket);
	if (cJSON_IsTrue(ok))
		return 0;
	msg = cJSON_GetObjectItemCaseSensitive(resp, "error");
	return cni_error_set(err, CNI_ERR_NOT_AVAILABLE, EPROTO, "agent at %s: %s", c->agent_socket,
	                     cJSON_IsString(msg) && msg->valuestring ? msg->valuestring : "request refused");
}

int cni_agent_pod_annotations(const struct cni_conf *c, const struct cni_args *a, cJSON **ret, struct error *err)
{
	_cleanup_cjson_ cJSON *resp = NULL;
	struct proto_request req;
	cJSON *found, *ann;
	int r;

	*ret = NULL;
	if (!a->pod_namespace[0] || !a->pod_name[0])
		return 0; /* nothing to ask about */
	r = agent_absent(c, err);
	if (r < 0)
		return r;
	request_fill(&req, PROTO_OP_POD, a);
	r = proto_call(c->agent_socket, &req, c->agent_timeout_ms, &resp, err);
	if (r < 0)
		return r;
	r = response_check(resp, c, err);
	if (r < 0)
		return r;
	found = cJSON_GetObjectItemCaseSensitive(resp, "found");
	if (!cJSON_IsTrue(found))
		return 0;
	ann = cJSON_GetObjectItemCaseSensitive(resp, "annotations");
	if (!cJSON_IsObject(ann))
		return cni_error_set(err, CNI_ERR_NOT_AVAILABLE, EPROTO,
		                     "agent at %s: pod found but no annotations object", c->agent_socket);
	*ret = cJSON_DetachItemViaPointer(resp, ann);
	return 1;
}

void cni_agent_notify(const struct cni_conf *c, enum proto_op op, const char *container_id, const char *ifname,
                      const struct cni_args *a, const struct attach_state *unsaved)
{
	_cleanup_cjson_ cJSON *resp = NULL, *record = NULL;
	struct proto_request req;
	struct error e = {0};
	int r;

	request_fill(&req, op, a);
	str_copy(req.container_id, sizeof(req.container_id), container_id ? container_id : "");
	str_copy(req.ifname, sizeof(req.ifname), ifname ? ifname : "");
	r = agent_absent(c, &e);
	if (r == 0 && unsaved) {
		/* the record the stateDir could not take: the agent writes it
		 * when it can (a record too large for one line is not sent) */
		record = state_to_json(unsaved);
		req.attachment = record;
		r = proto_call(c->agent_socket, &req, CNI_AGENT_NOTIFY_TIMEOUT_MS, &resp, &e);
		if (r == -EMSGSIZE) {
			log_msg(LOG_LVL_WARN, "record too large to hand to the agent", "container", req.container_id,
			        "error", e.msg, (char *)NULL);
			req.attachment = NULL;
			error_clear(&e);
			r = proto_call(c->agent_socket, &req, CNI_AGENT_NOTIFY_TIMEOUT_MS, &resp, &e);
		}
	} else if (r == 0) {
		r = proto_call(c->agent_socket, &req, CNI_AGENT_NOTIFY_TIMEOUT_MS, &resp, &e);
	}
	if (r >= 0)
		r = response_check(resp, c, &e);
	if (r < 0)
		log_msg(unsaved ? LOG_LVL_WARN : LOG_LVL_DEBUG,
		        unsaved ? "agent not notified: the unsaved record is lost" : "agent not notified", "op",
		        proto_op_name(op) ?: "?", "container", req.container_id, "error", e.msg, (char *)NULL);
}

int cni_agent_status(const struct cni_conf *c, struct error *err)
{
	_cleanup_cjson_ cJSON *resp = NULL;
	struct proto_request req;
	struct error e = {0};
	int r;

	request_fill(&req, PROTO_OP_STATUS, NULL);
	r = proto_call(c->agent_socket, &req, c->agent_timeout_ms, &resp, &e);
	if (r == -EREMOTEIO || r == -EPROTO)
		return cni_error_set(err, CNI_ERR_NOT_AVAILABLE, -r, "agent at %s is not ready: %s", c->agent_socket,
		                     e.msg);
	if (r < 0)
		return cni_error_set(err, CNI_ERR_NOT_AVAILABLE, -r, "agent not reachable at %s: %s", c->agent_socket,
		                     strerror(-r));
	return response_check(resp, c, err);
}
