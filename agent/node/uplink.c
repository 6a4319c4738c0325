/* uplink.c — the node's uplink as the agent sees it: which device ("auto" =
 * the default route's), its speed and whether it is virtual; the root qdisc
 * that was there before aiqos, recorded in <stateDir>/uplink.json before the
 * first change and put back on idle and --cleanup; and adoption: matching a
 * node plan against what the kernel already has (restart, drift repair), so
 * correct objects are kept and only differences, duplicates and orphans are
 * touched. */
#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <fcntl.h>
#include <linux/if_ether.h>
#include <linux/pkt_cls.h>
#include <linux/rtnetlink.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>

#include <netlink/cache.h>
#include <netlink/route/route.h>

#include "file.h"
#include "agent.h"
#include "bpf_cls.h"
#include "nl.h"
#include "node/uplink.h"

_Static_assert(sizeof(((struct uplink_record *)0)->options) == TC_RAW_OPTIONS_MAX, "record options size");

#define UPLINK_ROOT_HANDLE 0x10000u /* node.h: uplink.root is 1: */
#define RECORD_MAX_BYTES   (1024 * 1024)

/* ---- discovery ---- */

int uplink_default_route(struct nl_sock *sk, int family, int *ret_ifindex, struct error *err)
{
	struct nl_cache *cache = NULL;
	struct nl_object *o;
	uint32_t best_prio = UINT32_MAX;
	int best = 0, r;

	r = rtnl_route_alloc_cache(sk, family, 0, &cache);
	if (r < 0) {
		r = nl_to_errno(r);
		return error_set(err, -r, "dump %s routes: %s", family == AF_INET ? "IPv4" : "IPv6", strerror(-r));
	}
	for (o = nl_cache_get_first(cache); o; o = nl_cache_get_next(o)) {
		struct rtnl_route *rt = (struct rtnl_route *)o;
		struct nl_addr *dst = rtnl_route_get_dst(rt);
		struct rtnl_nexthop *nh;
		uint32_t prio = rtnl_route_get_priority(rt);
		int ifindex;

		if (rtnl_route_get_table(rt) != RT_TABLE_MAIN || rtnl_route_get_type(rt) != RTN_UNICAST)
			continue;
		if (dst && nl_addr_get_prefixlen(dst) != 0)
			continue;
		if (rtnl_route_get_nnexthops(rt) < 1 || !(nh = rtnl_route_nexthop_n(rt, 0)))
			continue;
		ifindex = rtnl_route_nh_get_ifindex(nh);
		if (ifindex > 0 && (best == 0 || prio < best_prio)) {
			best = ifindex;
			best_prio = prio;
		}
	}
	nl_cache_free(cache);
	if (!best)
		return -ENOENT;
	*ret_ifindex = best;
	return 0;
}

/* Link speed in bit/s from sysfs, 0 = unknown. sysfs shows the netns it
 * was mounted in: believe it only when its ifindex is ours. */
static uint64_t link_speed_bps(const char *ifname, int ifindex)
{
	char path[128], buf[32];
	long long v;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/class/net/%s/ifindex", ifname);
	f = fopen(path, "re");
	if (!f)
		return 0;
	if (!fgets(buf, sizeof(buf), f) || strtol(buf, NULL, 10) != ifindex) {
		fclose(f);
		return 0;
	}
	fclose(f);
	snprintf(path, sizeof(path), "/sys/class/net/%s/speed", ifname);
	f = fopen(path, "re");
	if (!f)
		return 0;
	/* reading speed fails (EINVAL) on links without one */
	if (!fgets(buf, sizeof(buf), f)) {
		fclose(f);
		return 0;
	}
	fclose(f);
	v = strtoll(buf, NULL, 10);
	return v > 0 ? (uint64_t)v * 1000000ULL : 0;
}

/* Kinds with a speed of their own (they aggregate or tag real NICs). */
static bool kind_is_physical_like(const char *kind)
{
	return !kind[0] || streq(kind, "bond") || streq(kind, "team") || streq(kind, "vlan");
}

int uplink_discover(struct nl_sock *sk, const char *want, struct uplink *ret, struct error *err)
{
	struct link_info li = {0};
	int ifindex = 0, r;

	if (!want || !want[0] || streq(want, NODE_UPLINK_AUTO)) {
		r = uplink_default_route(sk, AF_INET, &ifindex, err);
		if (r == -ENOENT)
			r = uplink_default_route(sk, AF_INET6, &ifindex, err);
		if (r == -ENOENT)
			return error_set(err, ENODEV, "uplink \"auto\": no default route (IPv4 or IPv6)");
		if (r < 0)
			return r;
		r = nl_link_get(sk, NULL, ifindex, &li, err);
	} else {
		r = nl_link_get(sk, want, 0, &li, err);
	}
	if (r < 0) {
		error_prefix(err, "uplink %s", want && want[0] ? want : NODE_UPLINK_AUTO);
		return r;
	}
	memset(ret, 0, sizeof(*ret));
	str_copy(ret->ifname, sizeof(ret->ifname), li.ifname);
	ret->ifindex = li.ifindex;
	str_copy(ret->kind, sizeof(ret->kind), li.kind);
	str_copy(ret->facts.ifname, sizeof(ret->facts.ifname), li.ifname);
	ret->facts.speed_bps = link_speed_bps(li.ifname, li.ifindex);
	ret->facts.is_virtual = !kind_is_physical_like(li.kind) || ret->facts.speed_bps == 0;
	ret->facts.tx_queues = li.tx_queues;
	ret->facts.mtu = li.mtu;
	return 0;
}

/* ---- the record of the original root qdisc ---- */

int uplink_record_path(const char *state_dir, char *buf, size_t size)
{
	int n = snprintf(buf, size, "%s/%s", state_dir, AGENT_UPLINK_RECORD);
	return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

static void hex_encode(const uint8_t *in, size_t len, char *out)
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < len; i++) {
		out[2 * i] = digits[in[i] >> 4];
		out[2 * i + 1] = digits[in[i] & 0xf];
	}
	out[2 * len] = '\0';
}

static int hex_decode(const char *in, uint8_t *out, size_t max, size_t *ret_len)
{
	size_t n = strlen(in);

	if (n % 2 || n / 2 > max)
		return -EINVAL;
	for (size_t i = 0; i < n / 2; i++) {
		unsigned v = 0;
		for (int k = 0; k < 2; k++) {
			char c = in[2 * i + k];
			v <<= 4;
			if (c >= '0' && c <= '9')
				v |= (unsigned)(c - '0');
			else if (c >= 'a' && c <= 'f')
				v |= (unsigned)(c - 'a' + 10);
			else
				return -EINVAL;
		}
		out[i] = (uint8_t)v;
	}
	*ret_len = n / 2;
	return 0;
}

cJSON *uplink_record_to_json(const struct uplink_record *r)
{
	cJSON *j = cJSON_CreateObject();
	char handle[32], hex[2 * sizeof(r->options) + 1];

	if (!j)
		return NULL;
	tc_handle_format(r->handle, handle, sizeof(handle));
	hex_encode(r->options, r->options_len < sizeof(r->options) ? r->options_len : sizeof(r->options), hex);
	if (!cJSON_AddNumberToObject(j, "version", 1) || !cJSON_AddStringToObject(j, "ifname", r->ifname) ||
	    !cJSON_AddNumberToObject(j, "ifindex", r->ifindex) || !cJSON_AddStringToObject(j, "kind", r->kind) ||
	    !cJSON_AddStringToObject(j, "handle", handle) || !cJSON_AddNumberToObject(j, "handleRaw", r->handle) ||
	    !cJSON_AddBoolToObject(j, "default", r->is_default) || !cJSON_AddStringToObject(j, "options", hex) ||
	    !cJSON_AddStringToObject(j, "rendered", r->rendered) ||
	    !cJSON_AddNumberToObject(j, "recorded", (double)r->recorded_unix) ||
	    !cJSON_AddStringToObject(j, "mode", node_mode_name(r->mode) ?: "idle") ||
	    !cJSON_AddNumberToObject(j, "modeSince", (double)r->mode_since_unix) ||
	    !cJSON_AddBoolToObject(j, "clsactBefore", r->clsact_before)) {
		cJSON_Delete(j);
		return NULL;
	}
	if (r->n_children) {
		cJSON *arr = cJSON_AddArrayToObject(j, "children");

		for (unsigned i = 0; arr && i < r->n_children && i < UPLINK_CHILDREN_MAX; i++) {
			const struct uplink_child *c = &r->children[i];
			char chex[2 * UPLINK_CHILD_OPTIONS_MAX + 1];
			cJSON *o = cJSON_CreateObject();

			hex_encode(c->options,
			           c->options_len < sizeof(c->options) ? c->options_len : sizeof(c->options), chex);
			if (!o || !cJSON_AddStringToObject(o, "kind", c->kind) ||
			    !cJSON_AddNumberToObject(o, "parent", c->parent) ||
			    !cJSON_AddNumberToObject(o, "handle", c->handle) ||
			    !cJSON_AddStringToObject(o, "options", chex)) {
				cJSON_Delete(o);
				cJSON_Delete(j);
				return NULL;
			}
			cJSON_AddItemToArray(arr, o);
		}
		if (!arr) {
			cJSON_Delete(j);
			return NULL;
		}
	}
	return j;
}

static const char *json_str(const cJSON *j, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
	return v && cJSON_IsString(v) ? v->valuestring : NULL;
}

static bool json_num(const cJSON *j, const char *key, double lo, double hi, double *ret)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);

	if (!cJSON_IsNumber(v) || v->valuedouble < lo || v->valuedouble > hi)
		return false;
	*ret = v->valuedouble;
	return true;
}

int uplink_record_from_json(const cJSON *j, struct uplink_record *ret, struct error *err)
{
	struct uplink_record r = {0};
	const char *s;
	double v;
	const cJSON *b;

	if (!cJSON_IsObject(j))
		return error_set(err, EINVAL, "not a JSON object");
	if (!json_num(j, "version", 1, 1, &v))
		return error_set(err, EINVAL, "field 'version' is missing or not 1");
	if (!(s = json_str(j, "ifname")) || !s[0] || str_copy(r.ifname, sizeof(r.ifname), s) < 0)
		return error_set(err, EINVAL, "field 'ifname' is missing or invalid");
	if (!json_num(j, "ifindex", 1, INT32_MAX, &v))
		return error_set(err, EINVAL, "field 'ifindex' is missing or invalid");
	r.ifindex = (int)v;
	if (!(s = json_str(j, "kind")) || !s[0] || str_copy(r.kind, sizeof(r.kind), s) < 0)
		return error_set(err, EINVAL, "field 'kind' is missing or invalid");
	if (!json_num(j, "handleRaw", 0, UINT32_MAX, &v))
		return error_set(err, EINVAL, "field 'handleRaw' is missing or invalid");
	r.handle = (uint32_t)v;
	b = cJSON_GetObjectItemCaseSensitive(j, "default");
	if (!cJSON_IsBool(b))
		return error_set(err, EINVAL, "field 'default' is missing or not a boolean");
	r.is_default = cJSON_IsTrue(b);
	if (!(s = json_str(j, "options")) || hex_decode(s, r.options, sizeof(r.options), &r.options_len) < 0)
		return error_set(err, EINVAL, "field 'options' is missing or not hex of at most %zu bytes",
		                 sizeof(r.options));
	if ((s = json_str(j, "rendered")))
		str_copy(r.rendered, sizeof(r.rendered), s);
	if (json_num(j, "recorded", 0, 1e15, &v))
		r.recorded_unix = (int64_t)v;
	r.mode = MODE_IDLE;
	if ((s = json_str(j, "mode")) && node_mode_from_name(s) != _MODE_INVALID)
		r.mode = node_mode_from_name(s);
	if (json_num(j, "modeSince", 0, 1e15, &v))
		r.mode_since_unix = (int64_t)v;
	b = cJSON_GetObjectItemCaseSensitive(j, "clsactBefore");
	r.clsact_before = cJSON_IsTrue(b);
	b = cJSON_GetObjectItemCaseSensitive(j, "children");
	if (b && !cJSON_IsArray(b))
		return error_set(err, EINVAL, "field 'children' is not an array");
	for (const cJSON *c = b ? b->child : NULL; c; c = c->next) {
		struct uplink_child *ch;

		if (r.n_children >= UPLINK_CHILDREN_MAX)
			return error_set(err, EINVAL, "field 'children': more than %d", UPLINK_CHILDREN_MAX);
		ch = &r.children[r.n_children];
		if (!(s = json_str(c, "kind")) || !s[0] || str_copy(ch->kind, sizeof(ch->kind), s) < 0 ||
		    !json_num(c, "parent", 1, UINT32_MAX, &v))
			return error_set(err, EINVAL, "children[%u]: 'kind' or 'parent' missing or invalid",
			                 r.n_children);
		ch->parent = (uint32_t)v;
		if (!json_num(c, "handle", 0, UINT32_MAX, &v))
			return error_set(err, EINVAL, "children[%u]: 'handle' missing or invalid", r.n_children);
		ch->handle = (uint32_t)v;
		if (!(s = json_str(c, "options")) ||
		    hex_decode(s, ch->options, sizeof(ch->options), &ch->options_len) < 0)
			return error_set(err, EINVAL, "children[%u]: 'options' is not hex of at most %d bytes",
			                 r.n_children, UPLINK_CHILD_OPTIONS_MAX);
		r.n_children++;
	}
	*ret = r;
	return 0;
}

int uplink_record_load(const char *path, struct uplink_record *ret, struct error *err)
{
	_cleanup_free_ char *buf = NULL;
	struct error e = {0};
	cJSON *j;
	size_t len = 0;
	int r;

	r = file_read_bounded(path, RECORD_MAX_BYTES, FILE_READ_NOFOLLOW, &buf, &len, NULL, &e);
	if (r == -ENOENT)
		return r;
	if (r < 0) {
		error_propagate(err, &e);
		error_prefix(err, "read %s", path);
		return r;
	}
	j = cJSON_ParseWithLength(buf, len);
	if (!j)
		return error_set(err, EINVAL, "%s: invalid JSON", path);
	r = uplink_record_from_json(j, ret, err);
	cJSON_Delete(j);
	if (r < 0)
		error_prefix(err, "%s", path);
	return r;
}

int uplink_record_write_json(const char *path, const char *what, cJSON *j, struct error *err)
{
	_cleanup_free_ char *text = NULL;

	if (!j)
		return error_set(err, ENOMEM, "write %s: out of memory", path);
	text = cJSON_PrintUnformatted(j);
	cJSON_Delete(j);
	if (!text)
		return error_set(err, ENOMEM, "write %s: out of memory", path);
	/* the record outlives crashes and reboots of the agent: durable */
	return state_write_atomic(NULL, path, what, text, true, err);
}

int uplink_record_save(const char *path, const struct uplink_record *rec, struct error *err)
{
	return uplink_record_write_json(path, "uplink record", uplink_record_to_json(rec), err);
}

int uplink_record_remove(const char *path, struct error *err)
{
	if (unlink(path) < 0 && errno != ENOENT)
		return error_set(err, errno, "remove %s: %s", path, strerror(errno));
	return 0;
}

/* Parse raw TCA_OPTIONS with the kind's vtable (for the rendered line). */
static int raw_to_spec(const struct tc_qdisc_raw *q, struct tc_spec *ret)
{
	_Alignas(8) uint8_t buf[NLA_HDRLEN + TC_RAW_OPTIONS_MAX];
	struct nlattr *nla = (struct nlattr *)buf;
	enum tc_kind_id kind = tc_kind_from_name(q->kind, TC_QDISC);
	const struct tc_kind *k = tc_kind_get(kind);

	if (!k || q->options_truncated)
		return -EOPNOTSUPP;
	memset(ret, 0, sizeof(*ret));
	ret->type = TC_QDISC;
	ret->kind = kind;
	ret->parent = TC_H_ROOT;
	ret->handle = q->handle;
	nla->nla_type = TCA_OPTIONS;
	nla->nla_len = (uint16_t)(NLA_HDRLEN + q->options_len);
	memcpy(buf + NLA_HDRLEN, q->options, q->options_len);
	return k->parse(q->options_len ? nla : NULL, ret);
}

/* Re-encode a known kind's options with its own encoder (a dump's options
 * are the kernel's view, not always what its init accepts). */
static int options_encode(const struct tc_spec *spec, uint8_t *buf, size_t max, size_t *ret_len)
{
	return tc_spec_encode_options(spec, buf, max, ret_len);
}

static bool parent_is_hook(uint32_t parent)
{
	return TC_H_MAJ(parent) == TC_H_MAJ(TC_H_CLSACT);
}

/* Walk the dump of the uplink: record an mq root's grafted children, note a
 * clsact, refuse what cannot be re-created whole. */
static int tree_scan(const struct tc_dump_list *d, const struct tc_qdisc_raw *root, const char *ifname,
                     struct uplink_record *rec, struct error *err)
{
	uint32_t root_major = TC_H_MAJ(root->handle);
	bool root_mq = streq(root->kind, "mq");
	char h[32], p[32];

	/* qdiscs first: a recorded child's own classes (tbf's 13:1) are its inside */
	for (unsigned k = 0; k < 2 * d->n; k++) {
		unsigned i = k % d->n; // NOLINT(clang-analyzer-core.DivideZero): k < 2 * d->n, so d->n > 0
		const struct tc_spec *o = &d->tc[i];
		const char *kind = d->kind_name[i][0] ? d->kind_name[i] : "?";
		bool child_inside = false;

		if ((k < d->n) != (o->type == TC_QDISC))
			continue;
		for (unsigned c = 0; c < rec->n_children; c++)
			child_inside |= TC_H_MAJ(rec->children[c].handle) == TC_H_MAJ(o->handle) && o->type == TC_CLASS;
		tc_handle_format(o->handle, h, sizeof(h));
		tc_handle_format(o->parent, p, sizeof(p));
		switch (o->type) {
		case TC_QDISC:
			if (o->parent == TC_H_ROOT)
				continue;
			if (o->parent == TC_H_CLSACT) {
				rec->clsact_before = true;
				continue;
			}
			if (root_mq && TC_H_MAJ(o->parent) == root_major && TC_H_MIN(o->parent) >= 1) {
				struct uplink_child *c;

				if (TC_H_MAJ(o->handle) == 0)
					continue; /* the kernel's default child: comes back with mq */
				if (o->kind < 0 || !tc_kind_get(o->kind))
					return error_set(err, EEXIST,
					                 "uplink %s: qdisc %s %s under mq %s is a kind aiqos cannot "
					                 "re-create",
					                 ifname, kind, h, p);
				if (rec->n_children >= UPLINK_CHILDREN_MAX)
					return error_set(err, EEXIST, "uplink %s: more than %d mq children", ifname,
					                 UPLINK_CHILDREN_MAX);
				c = &rec->children[rec->n_children];
				if (options_encode(o, c->options, sizeof(c->options), &c->options_len) < 0)
					return error_set(err, EEXIST,
					                 "uplink %s: qdisc %s %s under mq %s: options not re-encodable",
					                 ifname, kind, h, p);
				str_copy(c->kind, sizeof(c->kind), kind);
				c->parent = o->parent;
				c->handle = o->handle;
				rec->n_children++;
				continue;
			}
			return error_set(
			        err, EEXIST,
			        "uplink %s: qdisc %s %s (parent %s) below the root %s: a tree aiqos did not make",
			        ifname, kind, h, p, root->kind);
		case TC_CLASS:
			if ((root_mq && TC_H_MAJ(o->handle) == root_major) || child_inside)
				continue; /* mq's own per-queue classes, a child's inside */
			return error_set(err, EEXIST,
			                 "uplink %s: class %s %s under the root %s: a tree aiqos did not make", ifname,
			                 kind, h, root->kind);
		case TC_FILTER:
			if (parent_is_hook(o->parent))
				continue; /* clsact/ingress hooks are not the root tree */
			return error_set(err, EEXIST, "uplink %s: filter %s at %s prio %u: a tree aiqos did not make",
			                 ifname, kind, p, o->prio);
		default:
			continue;
		}
	}
	return 0;
}

int uplink_record_capture(struct nl_sock *sk, int ifindex, const char *ifname, struct uplink_record *ret,
                          struct error *err)
{
	_cleanup_free_ struct tc_qdisc_raw *q = calloc(1, sizeof(*q));
	_cleanup_free_ struct uplink_record *r = calloc(1, sizeof(*r));
	struct tc_dump_list d = {0};
	struct tc_spec spec;
	bool parsed;
	char h[32];
	int n;

	if (!q || !r)
		return error_set(err, ENOMEM, "out of memory");
	n = nl_qdisc_root_get(sk, ifindex, q, err);
	if (n < 0)
		return n;
	if (q->options_truncated)
		return error_set(err, EOVERFLOW, "root qdisc %s of %s: options larger than %d bytes", q->kind, ifname,
		                 TC_RAW_OPTIONS_MAX);
	n = nl_tc_dump_alloc(sk, ifindex, 0, &d, err);
	if (n < 0)
		return n;
	n = tree_scan(&d, q, ifname, r, err);
	tc_dump_list_free(&d);
	if (n < 0)
		return n;
	str_copy(r->ifname, sizeof(r->ifname), ifname);
	r->ifindex = ifindex;
	str_copy(r->kind, sizeof(r->kind), q->kind);
	r->handle = q->handle;
	r->is_default = TC_H_MAJ(q->handle) == 0;
	parsed = raw_to_spec(q, &spec) == 0;
	/* a kind aiqos knows is re-created from its own encoding; others from the raw dump */
	if (!parsed || options_encode(&spec, r->options, sizeof(r->options), &r->options_len) < 0) {
		r->options_len = q->options_len;
		memcpy(r->options, q->options, q->options_len);
	}
	if (!parsed || tc_spec_format(&spec, ifname, "add", r->rendered, sizeof(r->rendered)) < 0) {
		tc_handle_format(q->handle, h, sizeof(h));
		snprintf(r->rendered, sizeof(r->rendered), "qdisc %s %s root", q->kind, h);
	}
	if (r->n_children) {
		size_t len = strlen(r->rendered);
		snprintf(r->rendered + len, sizeof(r->rendered) - len, " + %u children", r->n_children);
	}
	r->recorded_unix = (int64_t)time(NULL);
	*ret = *r;
	return 0;
}

static int hook_kind(const struct tc_obj_stats *st, void *ud)
{
	if (st->type == TC_QDISC && st->parent == TC_H_CLSACT && !streq(st->kind, "clsact"))
		*(bool *)ud = true;
	return 0;
}

bool uplink_ingress_held(struct nl_sock *sk, int ifindex)
{
	bool held = false;

	if (ifindex > 0)
		(void)nl_tc_stats_dump(sk, ifindex, TC_QDISC, hook_kind, &held, NULL);
	return held;
}

bool uplink_no_queue(struct nl_sock *sk, const struct uplink *up)
{
	_cleanup_free_ struct tc_qdisc_raw *q = NULL;

	if (up->have_record)
		return streq(up->record.kind, "noqueue");
	q = calloc(1, sizeof(*q));
	if (!q || nl_qdisc_root_get(sk, up->ifindex, q, NULL) < 0)
		return false;
	return streq(q->kind, "noqueue");
}

unsigned uplink_gate_objects(struct nl_sock *sk, const struct tc_dump_list *dump, unsigned *ret)
{
	struct link_info li;
	int ifb = nl_link_get(sk, PLAN_IFB_UP_NAME, 0, &li, NULL) == 0 ? li.ifindex : 0;
	unsigned n = 0;

	for (unsigned i = 0; i < dump->n; i++) {
		const struct tc_spec *o = &dump->tc[i];

		if (o->type != TC_FILTER || o->parent != TC_H_MAKE(TC_H_CLSACT, TC_H_MIN_EGRESS))
			continue;
		if ((o->prio == NODE_FILTER_PRIO_UP_GATE && o->kind == TC_KIND_BPF &&
		     streq(o->u.bpf.name, BPF_GATE_UP_NAME)) ||
		    (o->prio == NODE_FILTER_PRIO_UP_REDIRECT && o->kind == TC_KIND_U32 &&
		     o->u.u32.redirect_ifindex > 0 &&
		     (o->u.u32.redirect_ifindex == ifb ||
		      nl_link_get(sk, NULL, o->u.u32.redirect_ifindex, &li, NULL) < 0))) /* to ours, or to none */
			ret[n++] = i;
	}
	return n;
}

bool uplink_filter_ours(struct nl_sock *sk, const struct tc_spec *o)
{
	bool egress = TC_H_MIN(o->parent) == TC_H_MIN_EGRESS;
	struct link_info li;

	if (o->type != TC_FILTER || !parent_is_hook(o->parent))
		return false;
	if (o->kind == TC_KIND_BPF)
		return strncmp(o->u.bpf.name, UPLINK_PROG_PREFIX, strlen(UPLINK_PROG_PREFIX)) == 0;
	if (o->kind != TC_KIND_U32 || o->u.u32.redirect_ifindex <= 0 ||
	    o->prio != (egress ? NODE_FILTER_PRIO_UP_REDIRECT : NODE_FILTER_PRIO_REDIRECT))
		return false;
	/* the match-all redirect to one of our ifbs (or to a device gone since) */
	if (nl_link_get(sk, NULL, o->u.u32.redirect_ifindex, &li, NULL) < 0)
		return true;
	return streq(li.ifname, PLAN_IFB_NAME) || streq(li.ifname, PLAN_IFB_UP_NAME);
}

void uplink_filter_describe(const struct tc_spec *o, const char *kind, char *buf, size_t size)
{
	bool bpf = o->kind == TC_KIND_BPF;

	snprintf(buf, size, "%s pref %u handle 0x%x %s%s%s%s",
	         TC_H_MIN(o->parent) == TC_H_MIN_EGRESS ? "egress" : "ingress", o->prio, o->handle,
	         kind && kind[0] ? kind : "?", bpf && o->u.bpf.name[0] ? " " : "", bpf ? o->u.bpf.name : "",
	         bpf && (o->u.bpf.flags & TCA_BPF_FLAG_ACT_DIRECT) ? " direct-action" : "");
}

unsigned uplink_hook_filters(struct nl_sock *sk, const struct tc_dump_list *d, unsigned hooks, bool *ret_clsact)
{
	unsigned foreign = 0;

	if (ret_clsact)
		*ret_clsact = false;
	for (unsigned i = 0; i < d->n; i++) {
		const struct tc_spec *o = &d->tc[i];

		if (ret_clsact && o->type == TC_QDISC && o->parent == TC_H_CLSACT && o->kind == TC_KIND_CLSACT)
			*ret_clsact = true;
		if (o->type == TC_FILTER && parent_is_hook(o->parent) &&
		    (hooks & (TC_H_MIN(o->parent) == TC_H_MIN_EGRESS ? UPLINK_HOOK_EGRESS : UPLINK_HOOK_INGRESS)) &&
		    !uplink_filter_ours(sk, o))
			foreign++;
	}
	return foreign;
}

int uplink_hooks_release(struct nl_sock *sk, int ifindex, unsigned hooks, bool keep_clsact, struct error *err)
{
	struct tc_dump_list d = {0};
	bool clsact = false;
	unsigned left = 0;
	int r;

	r = nl_tc_dump_alloc(sk, ifindex, 0, &d, err);
	if (r < 0)
		return r;
	for (unsigned i = 0; i < d.n; i++) {
		const struct tc_spec *o = &d.tc[i];
		unsigned hook;

		if (o->type == TC_QDISC && o->parent == TC_H_CLSACT && o->kind == TC_KIND_CLSACT)
			clsact = true;
		if (o->type != TC_FILTER || !parent_is_hook(o->parent))
			continue;
		hook = TC_H_MIN(o->parent) == TC_H_MIN_EGRESS ? UPLINK_HOOK_EGRESS : UPLINK_HOOK_INGRESS;
		if (!(hooks & hook) || !uplink_filter_ours(sk, o)) {
			left++; /* another tool's, or ours on the hook not given back */
			continue;
		}
		r = nl_tc_delete(sk, ifindex, o, err);
		if (r < 0 && r != -ENOENT && r != -EINVAL) {
			tc_dump_list_free(&d);
			return r;
		}
		error_clear(err);
	}
	tc_dump_list_free(&d);
	/* the clsact goes only when aiqos made it and nothing is left on it */
	if (clsact && !keep_clsact && !left) {
		const struct tc_spec c = {
		        .type = TC_QDISC, .kind = TC_KIND_CLSACT, .parent = TC_H_CLSACT, .handle = TC_H_CLSACT};

		r = nl_tc_delete(sk, ifindex, &c, err);
		if (r < 0 && r != -ENOENT && r != -EINVAL)
			return r;
		error_clear(err);
	} else if (clsact && !keep_clsact) {
		log_msg(LOG_LVL_INFO, "clsact kept: it holds other filters", "ifindex", LOG_FMT("%d", ifindex),
		        "filters", LOG_FMT("%u", left), (char *)NULL);
	}
	return 0;
}

bool uplink_clsact_in_use(struct nl_sock *sk, int ifindex)
{
	struct tc_dump_list d = {0};
	bool used = false;

	if (nl_tc_dump_alloc(sk, ifindex, 0, &d, NULL) < 0)
		return true; /* unknown: keep it */
	for (unsigned i = 0; i < d.n; i++)
		used |= d.tc[i].type == TC_FILTER && parent_is_hook(d.tc[i].parent);
	tc_dump_list_free(&d);
	return used;
}

int uplink_restore(struct nl_sock *sk, int ifindex, const struct uplink_record *rec, const struct tc_spec *ours_root,
                   struct error *err)
{
	_cleanup_free_ struct tc_qdisc_raw *cur = calloc(1, sizeof(*cur));
	_cleanup_free_ struct tc_qdisc_raw *want = calloc(1, sizeof(*want));
	int r;

	if (!cur || !want)
		return error_set(err, ENOMEM, "out of memory");
	/* our filters at the egress hook (the classifier; the upload gate and
	 * redirect, GATED HTB); the clsact when aiqos made it and nothing else
	 * is on it. Other tools' filters stay. */
	r = uplink_hooks_release(sk, ifindex, UPLINK_HOOK_EGRESS, rec->clsact_before, err);
	if (r < 0)
		return r;
	r = nl_qdisc_root_get(sk, ifindex, cur, err);
	if (r < 0)
		return r;
	/* Ours is the root with aiqos's handle. Delete it (its classes,
	 * leaves and filters go with it); the kernel attaches its default. */
	if (cur->handle == UPLINK_ROOT_HANDLE) {
		struct tc_spec del = {.type = TC_QDISC, .parent = TC_H_ROOT, .handle = UPLINK_ROOT_HANDLE};

		if (ours_root && ours_root->handle == UPLINK_ROOT_HANDLE)
			del = *ours_root;
		else
			del.kind = tc_kind_from_name(cur->kind, TC_QDISC);
		/* an unknown kind at our handle is not ours: leave it */
		if (del.kind < 0 || !tc_kind_get(del.kind))
			return error_set(err, EEXIST,
			                 "root qdisc %s 1: on ifindex %d is not one aiqos makes; left alone", cur->kind,
			                 ifindex);
		r = nl_tc_delete(sk, ifindex, &del, err);
		if (r < 0 && r != -ENOENT)
			return r;
		error_clear(err);
	}
	if (rec->is_default)
		return 0;
	/* never replaced (GATED HTB keeps the root): nothing to put back */
	if (cur->handle != UPLINK_ROOT_HANDLE && cur->handle == rec->handle && streq(cur->kind, rec->kind))
		return 0;
	want->handle = rec->handle;
	want->parent = TC_H_ROOT;
	str_copy(want->kind, sizeof(want->kind), rec->kind);
	want->options_len = rec->options_len;
	memcpy(want->options, rec->options, rec->options_len);
	r = nl_qdisc_create_raw(sk, ifindex, want, err);
	if (r < 0) {
		error_prefix(err, "re-create the original root qdisc (%s)", rec->rendered);
		return r;
	}
	for (unsigned i = 0; i < rec->n_children && i < UPLINK_CHILDREN_MAX; i++) {
		const struct uplink_child *c = &rec->children[i];

		memset(want, 0, sizeof(*want));
		want->handle = c->handle;
		want->parent = c->parent;
		str_copy(want->kind, sizeof(want->kind), c->kind);
		want->options_len = c->options_len;
		memcpy(want->options, c->options, c->options_len);
		r = nl_qdisc_create_raw(sk, ifindex, want, err);
		if (r < 0) {
			error_prefix(err, "re-create child %u of the original root qdisc (%s)", i, rec->rendered);
			return r;
		}
	}
	return 0;
}

/* ---- adoption ---- */

static bool prio_is_ours(uint16_t prio)
{
	return prio == NODE_FILTER_PRIO_SRC_V4 || prio == NODE_FILTER_PRIO_SRC_V6 || prio == NODE_FILTER_PRIO_DSCP_V4 ||
	       prio == NODE_FILTER_PRIO_DSCP_V6;
}

static bool obs_is_u32(const struct tc_dump_list *d, unsigned i)
{
	return d->tc[i].type == TC_FILTER && streq(d->kind_name[i], "u32");
}

/* Does observed object o hold an item's object, and which alternative? */
static int item_match_alt(const struct plan_item *it, const struct tc_spec *o)
{
	for (unsigned a = 0; a < it->n_alt && a < PLAN_ALT_MAX; a++)
		if (tc_spec_match(&it->tc[a], o))
			return (int)a;
	return -1;
}

int uplink_adopt_match(struct plan *plan, const struct tc_dump_list *dump, bool root_is_ours, unsigned **ret_orphans,
                       unsigned *ret_n_orphans)
{
	_cleanup_free_ bool *used = calloc(dump->n ? dump->n : 1, sizeof(bool));
	_cleanup_free_ bool *present = calloc(plan->n ? plan->n : 1, sizeof(bool));
	_cleanup_free_ unsigned *orphans = calloc(dump->n ? dump->n : 1, sizeof(unsigned));
	unsigned n_orph = 0;
	int found = 0;

	if (!used || !present || !orphans)
		return -ENOMEM;
	for (unsigned k = 0; k < plan->n; k++) {
		struct plan_item *it = &plan->items[k];

		it->status = ITEM_PENDING;
		it->chosen = -1;
		it->err = 0;
		if (it->type != ITEM_TC || it->n_alt == 0)
			continue;
		for (unsigned i = 0; i < dump->n; i++) {
			int a;

			if (used[i] || !tc_spec_same_object(&it->tc[0], &dump->tc[i]))
				continue;
			/* a filter slot is one key node: the handle must be the planned one */
			if (it->tc[0].type == TC_FILTER &&
			    (!dump->tc[i].handle || TC_U32_KEY(dump->tc[i].handle) != TC_U32_KEY(it->tc[0].handle)))
				continue;
			used[i] = true;
			a = item_match_alt(it, &dump->tc[i]);
			/* the object is there (maybe with other parameters, re-applied in place) */
			present[k] = a >= 0 || dump->tc[i].kind == it->tc[0].kind ||
			             (it->tc[0].type != TC_QDISC && dump->tc[i].kind >= 0);
			if (a >= 0) {
				it->chosen = a;
				it->status = a == 0 ? ITEM_APPLIED : ITEM_DEGRADED;
				found++;
			}
			break;
		}
	}
	/* A child is in force only under the planned parent object: when the
	 * parent slot holds another kind of qdisc (or nothing), the child will
	 * be recreated with it. Plan order puts parents first. */
	for (unsigned k = 0; k < plan->n; k++) {
		struct plan_item *it = &plan->items[k];
		const struct plan_item *dep;
		unsigned d;

		if (!it->depends[0])
			continue;
		dep = plan_find_const(plan, it->depends);
		d = dep ? (unsigned)(dep - plan->items) : 0;
		if (dep && present[d])
			continue;
		present[k] = false;
		if (it->status != ITEM_PENDING) {
			it->status = ITEM_PENDING;
			it->chosen = -1;
			found--;
		}
	}
	if (root_is_ours) {
		/* filters first (they point at classes), then child classes, then their parents */
		for (unsigned i = 0; i < dump->n; i++)
			if (!used[i] && obs_is_u32(dump, i) && dump->tc[i].parent == UPLINK_ROOT_HANDLE &&
			    prio_is_ours(dump->tc[i].prio))
				orphans[n_orph++] = i;
		for (int pass = 0; pass < 2; pass++)
			for (unsigned i = 0; i < dump->n; i++) {
				const struct tc_spec *o = &dump->tc[i];
				bool top = o->parent == TC_H_ROOT || o->parent == UPLINK_ROOT_HANDLE;

				if (used[i] || o->type != TC_CLASS || TC_H_MAJ(o->handle) != UPLINK_ROOT_HANDLE)
					continue;
				if ((pass == 0 && !top) || (pass == 1 && top))
					orphans[n_orph++] = i;
			}
	}
	*ret_orphans = TAKE_PTR(orphans);
	*ret_n_orphans = n_orph;
	return found;
}

int uplink_prev_from_dump(const struct tc_dump_list *dump, const struct node_pod *pods, unsigned n, struct plan *ret)
{
	struct plan_item *items;
	unsigned k = 0;

	plan_free(ret);
	items = calloc(dump->n ? dump->n : 1, sizeof(*items));
	if (!items)
		return -ENOMEM;
	for (unsigned i = 0; i < dump->n; i++) {
		const struct tc_spec *o = &dump->tc[i];
		const struct tc_u32 *u = &o->u.u32;

		if (!obs_is_u32(dump, i) || o->kind != TC_KIND_U32 || o->parent != UPLINK_ROOT_HANDLE ||
		    (o->prio != NODE_FILTER_PRIO_SRC_V4 && o->prio != NODE_FILTER_PRIO_SRC_V6) ||
		    u->match != U32_MATCH_SRC || TC_U32_NODE(o->handle) == 0)
			continue;
		for (unsigned p = 0; p < n; p++)
			for (unsigned a = 0; a < pods[p].n_ips; a++) {
				const struct node_ip *ip = &pods[p].ips[a];
				unsigned len = ip->family == AF_INET ? 4 : 16;
				struct plan_item *it = &items[k];
				char id[PLAN_ID_MAX];
				bool dup = false;

				if (ip->family != u->family || memcmp(ip->addr, u->addr, len) != 0 ||
				    node_pod_item_id(pods[p].uid, a, id, sizeof(id)) < 0)
					continue;
				for (unsigned j = 0; j < k; j++)
					dup |= streq(items[j].id, id);
				if (dup)
					continue; /* a duplicate filter: the first one keeps its handle */
				memset(it, 0, sizeof(*it));
				it->type = ITEM_TC;
				it->dev = DEV_UPLINK;
				str_copy(it->id, sizeof(it->id), id);
				it->n_alt = 1;
				it->tc[0] = *o;
				it->tc[0].handle = TC_U32_NODE(o->handle);
				k++;
			}
	}
	ret->items = items;
	ret->n = k;
	ret->cap = dump->n ? dump->n : 1;
	return 0;
}
