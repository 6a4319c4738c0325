/* nl.c — the rtnetlink mechanism (see nl.h): libnl core sockets with our own
 * callbacks so the kernel's exact errno and extended ack survive, tc requests
 * built from the kind vtables, dumps retried on NLM_F_DUMP_INTR, RTM_GETLINK. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/gen_stats.h>
#include <linux/if_link.h>
#include <sched.h>
#include <sys/socket.h>

#include <netlink/attr.h>
#include <netlink/errno.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <netlink/socket.h>

#include "nl.h"
#include "tc/tc_int.h"

#ifndef SOL_NETLINK
#define SOL_NETLINK 270
#endif

#define NL_DUMP_TRIES    5
#define NL_RECV_BYTES    (32 * 1024)
#define NL_EXTACK_MAX    256
#define TC_DUMP_MAX      ARRAY_SIZE(((struct tc_dump *)0)->tc)
#define TC_KIND_NAME_MAX sizeof(((struct tc_dump *)0)->kind_name[0])

static void nl_msg_freep(struct nl_msg **m)
{
	if (*m)
		nlmsg_free(*m);
}
#define _cleanup_nlmsg_ _cleanup_(nl_msg_freep)

static void nl_cb_putp(struct nl_cb **cb)
{
	if (*cb)
		nl_cb_put(*cb);
}
#define _cleanup_nlcb_ _cleanup_(nl_cb_putp)

int nl_to_errno(int nle)
{
	static const int map[] = {
	        [NLE_SUCCESS] = 0,
	        [NLE_FAILURE] = EIO,
	        [NLE_INTR] = EINTR,
	        [NLE_BAD_SOCK] = EBADF,
	        [NLE_AGAIN] = EAGAIN,
	        [NLE_NOMEM] = ENOMEM,
	        [NLE_EXIST] = EEXIST,
	        [NLE_INVAL] = EINVAL,
	        [NLE_RANGE] = ERANGE,
	        [NLE_MSGSIZE] = EMSGSIZE,
	        [NLE_OPNOTSUPP] = EOPNOTSUPP,
	        [NLE_AF_NOSUPPORT] = EAFNOSUPPORT,
	        [NLE_OBJ_NOTFOUND] = ENOENT,
	        [NLE_NOATTR] = ENODATA,
	        [NLE_MISSING_ATTR] = EINVAL,
	        [NLE_AF_MISMATCH] = EINVAL,
	        [NLE_SEQ_MISMATCH] = EPROTO,
	        [NLE_MSG_OVERFLOW] = EOVERFLOW,
	        [NLE_MSG_TRUNC] = EMSGSIZE,
	        [NLE_NOADDR] = EADDRNOTAVAIL,
	        [NLE_SRCRT_NOSUPPORT] = EOPNOTSUPP,
	        [NLE_MSG_TOOSHORT] = EBADMSG,
	        [NLE_MSGTYPE_NOSUPPORT] = EOPNOTSUPP,
	        [NLE_OBJ_MISMATCH] = EINVAL,
	        [NLE_NOCACHE] = ENOENT,
	        [NLE_BUSY] = EBUSY,
	        [NLE_PROTO_MISMATCH] = EPROTONOSUPPORT,
	        [NLE_NOACCESS] = EACCES,
	        [NLE_PERM] = EPERM,
	        [NLE_PKTLOC_FILE] = ENOENT,
	        [NLE_PARSE_ERR] = EINVAL,
	        [NLE_NODEV] = ENODEV,
	        [NLE_IMMUTABLE] = EPERM,
	        [NLE_DUMP_INTR] = EINTR,
	        [NLE_ATTRSIZE] = EINVAL,
	};
	int code = nle < 0 ? -nle : nle;

	if (code == 0)
		return 0;
	if ((size_t)code >= ARRAY_SIZE(map) || map[code] == 0)
		return -EIO;
	return -map[code];
}

/* --- sockets --- */

int nl_open(struct nl_sock **ret, struct error *err)
{
	struct nl_sock *sk;
	int one = 1, fd, r;

	sk = nl_socket_alloc();
	if (!sk)
		return error_set(err, ENOMEM, "allocate netlink socket");
	r = nl_connect(sk, NETLINK_ROUTE);
	if (r < 0) {
		nl_socket_free(sk);
		r = nl_to_errno(r);
		return error_set(err, -r, "connect rtnetlink socket: %s", strerror(-r));
	}
	fd = nl_socket_get_fd(sk);
	/* libnl opens with SOCK_CLOEXEC; make sure of it */
	if (fcntl(fd, F_SETFD, FD_CLOEXEC) < 0) {
		r = -errno;
		nl_socket_free(sk);
		return error_set(err, -r, "set FD_CLOEXEC on rtnetlink socket: %s", strerror(-r));
	}
	/* Optional on old kernels: error text from the kernel, and acks without
	 * a copy of the request. */
	(void)setsockopt(fd, SOL_NETLINK, NETLINK_EXT_ACK, &one, sizeof(one));
	(void)setsockopt(fd, SOL_NETLINK, NETLINK_CAP_ACK, &one, sizeof(one));
	/* One recvmsg per reply, no MSG_PEEK probe first: a dump part is at
	 * most 32 KiB (the kernel caps its dump skbs there) and the replies
	 * aiqos asks for (a link, acks) are far smaller; a larger one would
	 * fail with EMSGSIZE, never be cut. */
	r = nl_socket_set_msg_buf_size(sk, NL_RECV_BYTES);
	if (r < 0) {
		nl_socket_free(sk);
		r = nl_to_errno(r);
		return error_set(err, -r, "set rtnetlink receive buffer: %s", strerror(-r));
	}
	nl_socket_disable_msg_peek(sk);
	*ret = sk;
	return 0;
}

int nl_open_in_netns(int nsfd, struct nl_sock **ret, struct error *err)
{
	_cleanup_close_ int self = -1;
	struct nl_sock *sk = NULL;
	int r;

	self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (self < 0)
		return error_set(err, errno, "open current netns: %s", strerror(errno));
	if (setns(nsfd, CLONE_NEWNET) < 0)
		return error_set(err, errno, "enter netns (fd %d): %s", nsfd, strerror(errno));
	r = nl_open(&sk, err);
	if (setns(self, CLONE_NEWNET) < 0) {
		int e = errno;
		if (sk)
			nl_close(sk);
		return error_set(err, e, "return to the original netns: %s", strerror(e));
	}
	if (r < 0)
		return r;
	*ret = sk;
	return 0;
}

void nl_close(struct nl_sock *sk)
{
	nl_socket_free(sk);
}

/* --- one request, its replies and its ack --- */

struct nl_req {
	/* called for every data message; a negative return is remembered (first
	 * one wins) but the reply is still read to its end */
	int (*on_msg)(const struct nlmsghdr *hdr, void *arg);
	void *arg;
	bool done;
	bool intr;    /* NLM_F_DUMP_INTR seen */
	int error;    /* negative errno from NLMSG_ERROR/NLMSG_DONE */
	int cb_error; /* first error returned by on_msg */
	char ext[NL_EXTACK_MAX];
};

/* Copy NLMSGERR_ATTR_MSG out of the TLVs that follow an error payload. */
static void extack_parse(struct nl_req *req, const struct nlmsghdr *hdr, size_t payload)
{
	struct nlattr *tb[NLMSGERR_ATTR_MAX + 1];
	size_t off = NLMSG_HDRLEN + NLMSG_ALIGN(payload);

	if (!(hdr->nlmsg_flags & NLM_F_ACK_TLVS) || hdr->nlmsg_len <= off)
		return;
	if (nla_parse(tb, NLMSGERR_ATTR_MAX, (struct nlattr *)((uintptr_t)hdr + off), (int)(hdr->nlmsg_len - off),
	              NULL) < 0)
		return;
	if (tb[NLMSGERR_ATTR_MSG])
		nla_strlcpy(req->ext, tb[NLMSGERR_ATTR_MSG], sizeof(req->ext));
}

static int cb_error(struct sockaddr_nl *nla, struct nlmsgerr *e, void *arg)
{
	struct nl_req *req = arg;
	/* libnl hands us nlmsg_data() of the NLMSG_ERROR message */
	const struct nlmsghdr *hdr = (const struct nlmsghdr *)((const char *)e - NLMSG_HDRLEN);

	req->error = e->error < 0 ? e->error : -e->error;
	if (hdr->nlmsg_type == NLMSG_ERROR) {
		size_t payload = sizeof(*e);
		if (!(hdr->nlmsg_flags & NLM_F_CAPPED) && e->msg.nlmsg_len >= NLMSG_HDRLEN)
			payload += e->msg.nlmsg_len - NLMSG_HDRLEN;
		extack_parse(req, hdr, payload);
	}
	req->done = true;
	return NL_STOP;
}

static int cb_ack(struct nl_msg *msg, void *arg)
{
	struct nl_req *req = arg;
	req->done = true;
	return NL_STOP;
}

static int cb_finish(struct nl_msg *msg, void *arg)
{
	struct nl_req *req = arg;
	const struct nlmsghdr *hdr = nlmsg_hdr(msg);
	int e;

	if (hdr->nlmsg_len >= NLMSG_HDRLEN + sizeof(int)) {
		memcpy(&e, nlmsg_data(hdr), sizeof(e));
		if (e < 0) {
			req->error = e;
			extack_parse(req, hdr, sizeof(int));
		}
	}
	req->done = true;
	return NL_STOP;
}

static int cb_valid(struct nl_msg *msg, void *arg)
{
	struct nl_req *req = arg;

	if (req->on_msg) {
		int r = req->on_msg(nlmsg_hdr(msg), req->arg);
		if (r < 0 && req->cb_error == 0)
			req->cb_error = r;
	}
	return NL_OK;
}

static int cb_intr(struct nl_msg *msg, void *arg)
{
	struct nl_req *req = arg;
	req->intr = true;
	return NL_OK; /* keep reading to NLMSG_DONE, the caller retries */
}

/* Send msg and read until its ack, error or end of dump, passing data
 * messages to on_msg (may be NULL). Returns the kernel's negative errno
 * (details in req->ext), or on_msg's first error. Every request carries
 * NLM_F_ACK: libnl's own sequence tracking on the socket (which callers
 * such as libnl-route caches rely on) stays as it expects. */
static int nl_transact(struct nl_sock *sk, struct nl_msg *msg, int (*on_msg)(const struct nlmsghdr *hdr, void *arg),
                       void *arg, struct nl_req *req)
{
	_cleanup_nlcb_ struct nl_cb *cb = nl_cb_alloc(NL_CB_DEFAULT);
	int r;

	if (!cb)
		return -ENOMEM;
	req->on_msg = on_msg;
	req->arg = arg;
	req->done = false;
	req->intr = false;
	req->error = 0;
	req->cb_error = 0;
	req->ext[0] = '\0';
	nl_cb_set(cb, NL_CB_VALID, NL_CB_CUSTOM, cb_valid, req);
	nl_cb_set(cb, NL_CB_FINISH, NL_CB_CUSTOM, cb_finish, req);
	nl_cb_set(cb, NL_CB_ACK, NL_CB_CUSTOM, cb_ack, req);
	nl_cb_set(cb, NL_CB_DUMP_INTR, NL_CB_CUSTOM, cb_intr, req);
	nl_cb_err(cb, NL_CB_CUSTOM, cb_error, req);

	r = nl_send_auto(sk, msg);
	if (r < 0) {
		r = nl_to_errno(r);
		goto out;
	}
	while (!req->done) {
		r = nl_recvmsgs(sk, cb);
		if (r < 0 && !req->done) {
			r = nl_to_errno(r);
			goto out;
		}
	}
	r = req->error < 0 ? req->error : req->cb_error;
out:
	req->on_msg = NULL;
	req->arg = NULL;
	return r;
}

/* Set err for a failed request: "<what>: <strerror>[ (<kernel message>)]". */
static int req_error(struct error *err, int r, const struct nl_req *req, const char *what)
{
	if (req && req->ext[0])
		return error_set(err, -r, "%s: %s (%s)", what, strerror(-r), req->ext);
	return error_set(err, -r, "%s: %s", what, strerror(-r));
}

/* --- links --- */

struct link_ctx {
	struct link_info info;
	bool found;
};

static int link_on_msg(const struct nlmsghdr *hdr, void *arg)
{
	struct link_ctx *ctx = arg;
	struct nlattr *tb[IFLA_MAX + 1], *li[IFLA_INFO_MAX + 1];
	const struct ifinfomsg *ifi;
	struct link_info *l = &ctx->info;

	if (hdr->nlmsg_type != RTM_NEWLINK || !nlmsg_valid_hdr(hdr, sizeof(*ifi)))
		return 0;
	ifi = nlmsg_data(hdr);
	if (nlmsg_parse((struct nlmsghdr *)(uintptr_t)hdr, sizeof(*ifi), tb, IFLA_MAX, NULL) < 0)
		return -EBADMSG;
	*l = (struct link_info){.ifindex = ifi->ifi_index, .link_netnsid = -1};
	if (tb[IFLA_IFNAME])
		nla_strlcpy(l->ifname, tb[IFLA_IFNAME], sizeof(l->ifname));
	tc_nla_u32(tb[IFLA_MTU], &l->mtu);
	tc_nla_u32(tb[IFLA_NUM_TX_QUEUES], &l->tx_queues);
	if (tb[IFLA_LINK]) {
		uint32_t v;
		if (tc_nla_u32(tb[IFLA_LINK], &v))
			l->peer_ifindex = (int)v;
	}
	if (tb[IFLA_LINK_NETNSID]) {
		uint32_t v;
		if (tc_nla_u32(tb[IFLA_LINK_NETNSID], &v))
			l->link_netnsid = (int32_t)v;
	}
	if (tb[IFLA_LINKINFO] && tc_nla_parse_nested(li, IFLA_INFO_MAX, tb[IFLA_LINKINFO]) == 0 && li[IFLA_INFO_KIND])
		nla_strlcpy(l->kind, li[IFLA_INFO_KIND], sizeof(l->kind));
	if (tb[IFLA_STATS64] && nla_len(tb[IFLA_STATS64]) >= (int)sizeof(struct rtnl_link_stats64)) {
		struct rtnl_link_stats64 st;

		memcpy(&st, nla_data(tb[IFLA_STATS64]), sizeof(st));
		l->rx_packets = st.rx_packets;
	}
	ctx->found = true;
	return 0;
}

static int link_get(struct nl_sock *sk, const char *ifname, int ifindex, bool stats, struct link_info *ret,
                    struct error *err)
{
	_cleanup_nlmsg_ struct nl_msg *msg = NULL;
	struct ifinfomsg ifi = {.ifi_family = AF_UNSPEC};
	struct link_ctx ctx = {0};
	struct nl_req req = {0};
	char what[64];
	int r;

	if (ifname)
		snprintf(what, sizeof(what), "get link '%s'", ifname);
	else
		snprintf(what, sizeof(what), "get link ifindex %d", ifindex);
	if (ifname && (ifname[0] == '\0' || strlen(ifname) >= sizeof(ret->ifname)))
		return error_set(err, EINVAL, "%s: invalid interface name", what);
	if (!ifname && ifindex <= 0)
		return error_set(err, EINVAL, "%s: invalid interface index", what);
	ifi.ifi_index = ifname ? 0 : ifindex;

	msg = nlmsg_alloc_simple(RTM_GETLINK, 0);
	if (!msg)
		return error_set(err, ENOMEM, "%s: allocate message", what);
	if (nlmsg_append(msg, &ifi, sizeof(ifi), NLMSG_ALIGNTO) < 0 ||
	    (!stats && nla_put_u32(msg, IFLA_EXT_MASK, RTEXT_FILTER_SKIP_STATS) < 0) ||
	    (ifname && nla_put_string(msg, IFLA_IFNAME, ifname) < 0))
		return error_set(err, EMSGSIZE, "%s: build message", what);
	r = nl_transact(sk, msg, link_on_msg, &ctx, &req);
	if (r < 0)
		return req_error(err, r, &req, what);
	if (!ctx.found)
		return error_set(err, ENODEV, "%s: no reply", what);
	*ret = ctx.info;
	return 0;
}

int nl_link_get(struct nl_sock *sk, const char *ifname, int ifindex, struct link_info *ret, struct error *err)
{
	return link_get(sk, ifname, ifindex, false, ret, err);
}

int nl_link_get_stats(struct nl_sock *sk, int ifindex, struct link_info *ret, struct error *err)
{
	return link_get(sk, NULL, ifindex, true, ret, err);
}

/* --- tc messages --- */

/* The rtnetlink message of each operation on each object type. */
enum tc_op { TC_OP_NEW, TC_OP_DEL, TC_OP_GET, _TC_OP_MAX };
static const int tc_rtm[_TC_TYPE_MAX][_TC_OP_MAX] = {
        [TC_QDISC] = {RTM_NEWQDISC, RTM_DELQDISC, RTM_GETQDISC},
        [TC_CLASS] = {RTM_NEWTCLASS, RTM_DELTCLASS, RTM_GETTCLASS},
        [TC_FILTER] = {RTM_NEWTFILTER, RTM_DELTFILTER, RTM_GETTFILTER},
};

static uint32_t tc_filter_info(const struct tc_spec *s)
{
	return TC_H_MAKE((uint32_t)s->prio << 16, htons(s->protocol));
}

/* Build a tc request for s (with handle instead of s->handle). */
static int tc_msg_build(struct nl_msg **ret, int type, int flags, int ifindex, const struct tc_spec *s, uint32_t handle,
                        bool options)
{
	_cleanup_nlmsg_ struct nl_msg *msg = NULL;
	const struct tc_kind *k = tc_kind_get(s->kind);
	struct tcmsg t = {
	        .tcm_family = AF_UNSPEC,
	        .tcm_ifindex = ifindex,
	        .tcm_handle = handle,
	        .tcm_parent = s->parent,
	};
	int r;

	if (!k || k->type != s->type)
		return -EINVAL;
	if (s->kind == TC_KIND_CLSACT) {
		/* the only place clsact can live */
		t.tcm_parent = TC_H_CLSACT;
		t.tcm_handle = TC_H_MAKE(TC_H_CLSACT, 0);
	}
	if (s->type == TC_FILTER)
		t.tcm_info = tc_filter_info(s);

	msg = nlmsg_alloc_simple(type, flags);
	if (!msg)
		return -ENOMEM;
	if (nlmsg_append(msg, &t, sizeof(t), NLMSG_ALIGNTO) < 0 || nla_put_string(msg, TCA_KIND, k->name) < 0)
		return -EMSGSIZE;
	if (options) {
		r = k->fill(msg, s);
		if (r < 0)
			return r;
	}
	*ret = TAKE_PTR(msg);
	return 0;
}

/* --- tc dumps --- */

typedef int (*tc_visit_fn)(const struct tc_spec *s, const char *kind_name, void *arg);

struct tc_dump_ctx {
	int ifindex;
	enum tc_type type;
	tc_visit_fn visit;
	void *arg;
};

static int tc_on_msg(const struct nlmsghdr *hdr, void *arg)
{
	struct tc_dump_ctx *ctx = arg;
	struct nlattr *tb[TCA_MAX + 1];
	const struct tcmsg *t;
	const struct tc_kind *k;
	struct tc_spec s = {0};
	char name[TC_KIND_NAME_MAX] = "";

	if (!nlmsg_valid_hdr(hdr, sizeof(*t)))
		return 0;
	t = nlmsg_data(hdr);
	if (t->tcm_ifindex != ctx->ifindex)
		return 0; /* qdisc dumps cover every device */
	if (nlmsg_parse((struct nlmsghdr *)(uintptr_t)hdr, sizeof(*t), tb, TCA_MAX, NULL) < 0)
		return -EBADMSG;
	if (tb[TCA_KIND])
		nla_strlcpy(name, tb[TCA_KIND], sizeof(name));

	s.type = ctx->type;
	s.parent = t->tcm_parent;
	s.handle = t->tcm_handle;
	if (s.type == TC_FILTER) {
		/* chain heads (one per prio/protocol) have no handle: not filters */
		if (t->tcm_handle == 0)
			return 0;
		s.prio = (uint16_t)(TC_H_MAJ(t->tcm_info) >> 16);
		s.protocol = ntohs((uint16_t)TC_H_MIN(t->tcm_info));
	}
	s.kind = tc_kind_from_name(name, s.type);
	k = tc_kind_get(s.kind);
	if (k) {
		int r = k->parse(tb[TCA_OPTIONS], &s);
		if (r == -ENODATA)
			return 0; /* not an object (u32 hash table) */
		if (r < 0) {
			/* options aiqos cannot represent: report as unknown */
			s.kind = _TC_KIND_INVALID;
			memset(&s.u, 0, sizeof(s.u));
		}
	}
	return ctx->visit(&s, name, ctx->arg);
}

/* The dump request of objects of `type` on ifindex (filters: of parent,
 * optionally only one prio/protocol via info): -ENOMEM or -EMSGSIZE. */
static int tc_dump_msg(struct nl_msg **ret, enum tc_type type, int ifindex, uint32_t parent, uint32_t info)
{
	_cleanup_nlmsg_ struct nl_msg *msg = NULL;
	struct tcmsg t = {.tcm_family = AF_UNSPEC, .tcm_ifindex = ifindex, .tcm_parent = parent, .tcm_info = info};

	msg = nlmsg_alloc_simple(tc_rtm[type][TC_OP_GET], NLM_F_DUMP);
	if (!msg)
		return -ENOMEM;
	if (nlmsg_append(msg, &t, sizeof(t), NLMSG_ALIGNTO) < 0)
		return -EMSGSIZE;
	*ret = TAKE_PTR(msg);
	return 0;
}

/* A whole dump of objects of `type` on ifindex, each reply to on_msg; err
 * says "<what>: ..." */
static int tc_dump_all(struct nl_sock *sk, enum tc_type type, int ifindex,
                       int (*on_msg)(const struct nlmsghdr *hdr, void *arg), void *arg, struct nl_req *req,
                       const char *what, struct error *err)
{
	_cleanup_nlmsg_ struct nl_msg *msg = NULL;
	int r;

	r = tc_dump_msg(&msg, type, ifindex, 0, 0);
	if (r < 0)
		return error_set(err, -r, "%s: %s", what, r == -ENOMEM ? "allocate message" : "build message");
	r = nl_transact(sk, msg, on_msg, arg, req);
	if (r < 0)
		return req_error(err, r, req, what);
	return 0;
}

/* One dump request of objects of `type` on ifindex (tc_dump_msg). */
static int tc_dump_one(struct nl_sock *sk, int ifindex, enum tc_type type, uint32_t parent, uint32_t info,
                       tc_visit_fn visit, void *arg, bool *intr, struct nl_req *req)
{
	_cleanup_nlmsg_ struct nl_msg *msg = NULL;
	struct tc_dump_ctx ctx = {.ifindex = ifindex, .type = type, .visit = visit, .arg = arg};
	int r;

	r = tc_dump_msg(&msg, type, ifindex, parent, info);
	if (r < 0)
		return r;
	r = nl_transact(sk, msg, tc_on_msg, &ctx, req);
	if (req->intr)
		*intr = true;
	return r;
}

static void parent_add(uint32_t *parents, unsigned *n, unsigned max, uint32_t p)
{
	for (unsigned i = 0; i < *n; i++)
		if (parents[i] == p)
			return;
	if (*n < max)
		parents[(*n)++] = p;
}

int nl_tc_dump(struct nl_sock *sk, int ifindex, struct tc_dump *ret, struct error *err)
{
	struct tc_dump_list l = {0};
	int r;

	_Static_assert(sizeof(ret->kind_name[0]) == TC_DUMP_KIND_NAME_MAX, "kind names of both dumps");
	/* the list dump, bounded to what struct tc_dump holds */
	r = nl_tc_dump_alloc(sk, ifindex, TC_DUMP_MAX, &l, err);
	if (r < 0)
		return r;
	memset(ret, 0, sizeof(*ret));
	ret->n = l.n;
	if (l.n) {
		memcpy(ret->tc, l.tc, l.n * sizeof(l.tc[0]));
		memcpy(ret->kind_name, l.kind_name, l.n * sizeof(l.kind_name[0]));
	}
	tc_dump_list_free(&l);
	return 0;
}

/* --- u32 handles ---
 * A planner may address a u32 key node by hash:node only (htid 0): the kernel
 * gives each prio its own root table (800:, 801:, ... in creation order), but
 * rejects such a handle on delete (ENOENT) and on a second create (ENOSPC).
 * Replace and delete resolve it to the full handle with a filtered dump. And
 * a u32 replace keeps the old selector (only flowid/actions change), so a
 * changed selector is applied as delete + create under the same handle. */

struct u32_find {
	uint32_t key; /* hash:node */
	bool found;
	struct tc_spec spec;
};

static int u32_find_visit(const struct tc_spec *s, const char *kind_name, void *arg)
{
	struct u32_find *f = arg;

	if (!f->found && streq(kind_name, "u32") && TC_U32_KEY(s->handle) == f->key) {
		f->found = true;
		f->spec = *s;
	}
	return 0;
}

/* Look up the key node with s's hash:node at s's parent/prio/protocol. */
static int u32_lookup(struct nl_sock *sk, int ifindex, const struct tc_spec *s, struct u32_find *ret,
                      struct nl_req *req)
{
	bool intr = false;
	int r = 0;

	for (int attempt = 0; attempt < NL_DUMP_TRIES; attempt++) {
		*ret = (struct u32_find){.key = TC_U32_KEY(s->handle)};
		intr = false;
		r = tc_dump_one(sk, ifindex, TC_FILTER, s->parent, tc_filter_info(s), u32_find_visit, ret, &intr, req);
		if (r < 0 || !intr)
			return r;
	}
	return -EAGAIN;
}

/* Does the u32 key node o have the selector (match/address/DS field) of s? */
static bool u32_same_selector(const struct tc_spec *s, const struct tc_spec *o)
{
	struct tc_spec sel = *s;

	if (o->kind != TC_KIND_U32)
		return false;
	sel.u.u32.classid = 0;
	sel.u.u32.dscp = -1;
	return tc_kind_u32.match(&sel, o);
}

/* --- qdisc lookup --- */

struct qdisc_find {
	const struct tc_spec *want;
	bool matched;
};

static int qdisc_find_visit(const struct tc_spec *s, const char *kind_name, void *arg)
{
	struct qdisc_find *f = arg;

	if (tc_spec_match(f->want, s))
		f->matched = true;
	return 0;
}

/* Is there a qdisc that already satisfies s? (qdiscs without a change
 * operation, htb for one, refuse any replace that carries options.) */
static bool qdisc_already_there(struct nl_sock *sk, int ifindex, const struct tc_spec *s)
{
	struct qdisc_find f = {.want = s};
	struct nl_req req = {0};

	for (int attempt = 0; attempt < NL_DUMP_TRIES; attempt++) {
		bool intr = false;

		f.matched = false;
		if (tc_dump_one(sk, ifindex, TC_QDISC, 0, 0, qdisc_find_visit, &f, &intr, &req) < 0)
			return false;
		if (!intr)
			return f.matched;
	}
	return false;
}

/* --- create/replace/delete --- */

/* What a request is about in tc(8) words ("qdisc replace root handle 1:
 * htb default 10 on ifindex 3", tc_spec_describe), put into words only when
 * an error message needs it. */
struct tc_what {
	const char *verb;
	const struct tc_spec *s;
	int ifindex;
	char text[TC_FORMAT_MAX + 32];
};

static const char *tc_what_str(struct tc_what *w)
{
	char desc[TC_FORMAT_MAX];

	if (!w->text[0]) {
		tc_spec_describe(w->s, w->verb, desc, sizeof(desc));
		snprintf(w->text, sizeof(w->text), "%s on ifindex %d", desc, w->ifindex);
	}
	return w->text;
}

/* The kind must exist and be one of the object's type. */
static int tc_what_check(struct tc_what *what, struct error *err)
{
	const struct tc_spec *s = what->s;
	const struct tc_kind *k = tc_kind_get(s->kind);

	if (!k || k->type != s->type || (int)s->type < 0 || s->type >= _TC_TYPE_MAX)
		return error_set(err, EINVAL, "%s: kind %d is not a %s kind", tc_what_str(what), (int)s->kind,
		                 tc_type_name(s->type));
	return 0;
}

static int tc_send(struct nl_sock *sk, int type, int flags, int ifindex, const struct tc_spec *s, uint32_t handle,
                   bool options, struct nl_req *req, struct tc_what *what, struct error *err)
{
	_cleanup_nlmsg_ struct nl_msg *msg = NULL;
	int r;

	r = tc_msg_build(&msg, type, flags, ifindex, s, handle, options);
	if (r < 0)
		return error_set(err, -r, "%s: encode options: %s", tc_what_str(what), strerror(-r));
	*req = (struct nl_req){0};
	r = nl_transact(sk, msg, NULL, NULL, req);
	if (r < 0)
		return req_error(err, r, req, tc_what_str(what));
	return 0;
}

/* A bpf filter in the slot (parent, pref, protocol, handle) that aiqos did
 * not make: its name in ret_name. */
static int bpf_slot_foreign(struct nl_sock *sk, int ifindex, const struct tc_spec *s, char *ret_name, size_t size)
{
	struct tc_dump_list d = {0};
	int r = nl_tc_dump_alloc(sk, ifindex, 0, &d, NULL);

	if (r < 0)
		return r == -ENODEV ? 0 : r;
	r = 0;
	for (unsigned i = 0; i < d.n && !r; i++) {
		const struct tc_spec *o = &d.tc[i];

		bool bpf = o->kind == TC_KIND_BPF;

		if (o->type == TC_FILTER && o->parent == s->parent && o->prio == s->prio && o->handle == s->handle &&
		    (!bpf || strncmp(o->u.bpf.name, TC_BPF_OURS_PREFIX, strlen(TC_BPF_OURS_PREFIX)) != 0)) {
			snprintf(ret_name, size, "%s%s%s", d.kind_name[i], bpf && o->u.bpf.name[0] ? " " : "",
			         bpf ? o->u.bpf.name : "");
			r = 1;
		}
	}
	tc_dump_list_free(&d);
	return r;
}

int nl_tc_replace(struct nl_sock *sk, int ifindex, const struct tc_spec *s, struct error *err)
{
	struct tc_what what = {.verb = "replace", .s = s, .ifindex = ifindex};
	struct nl_req req = {0};
	uint32_t handle = s->handle;
	int flags = NLM_F_CREATE | NLM_F_REPLACE;
	int r;

	r = tc_what_check(&what, err);
	if (r < 0)
		return r;

	if (s->type == TC_FILTER) {
		if (!handle)
			flags = NLM_F_CREATE | NLM_F_EXCL;
		if (s->kind == TC_KIND_BPF && handle) {
			char other[TC_BPF_NAME_MAX + 16];

			r = bpf_slot_foreign(sk, ifindex, s, other, sizeof(other));
			if (r < 0)
				return error_set(err, -r, "%s: read the slot: %s", tc_what_str(&what), strerror(-r));
			if (r > 0)
				return error_set(err, EEXIST,
				                 "%s: the slot holds another tool's filter (%s): not replaced",
				                 tc_what_str(&what), other);
		}
		if (s->kind == TC_KIND_U32 && handle) {
			struct u32_find f;

			r = u32_lookup(sk, ifindex, s, &f, &req);
			if (r < 0)
				return req_error(err, r, &req, tc_what_str(&what));
			if (f.found) {
				handle = f.spec.handle;
				if (!u32_same_selector(s, &f.spec)) {
					/* replace would keep the old selector */
					r = tc_send(sk, RTM_DELTFILTER, 0, ifindex, s, handle, false, &req, &what, err);
					if (r < 0 && r != -ENOENT)
						return r;
				}
			}
		}
	}
	r = tc_send(sk, tc_rtm[s->type][TC_OP_NEW], flags, ifindex, s, handle, true, &req, &what, err);
	/* "Change operation not supported": fine when nothing would change */
	if (r == -EINVAL && s->type == TC_QDISC && qdisc_already_there(sk, ifindex, s)) {
		error_clear(err);
		return 0;
	}
	return r;
}

/* After an EINVAL from a delete: is the object there at all? */
static int tc_object_present(struct nl_sock *sk, int ifindex, const struct tc_spec *s, bool *ret)
{
	_cleanup_free_ struct tc_dump *d = calloc(1, sizeof(*d));
	int r;

	if (!d)
		return -ENOMEM;
	r = nl_tc_dump(sk, ifindex, d, NULL);
	if (r < 0)
		return r;
	*ret = false;
	for (unsigned i = 0; i < d->n; i++)
		if (tc_spec_same_object(s, &d->tc[i]) && streq(d->kind_name[i], tc_kind_get(s->kind)->name))
			*ret = true;
	return 0;
}

int nl_tc_delete(struct nl_sock *sk, int ifindex, const struct tc_spec *s, struct error *err)
{
	struct tc_what what = {.verb = "delete", .s = s, .ifindex = ifindex};
	struct nl_req req = {0};
	uint32_t handle = s->handle;
	bool present = true;
	int r;

	r = tc_what_check(&what, err);
	if (r < 0)
		return r;

	if (s->type == TC_FILTER && s->kind == TC_KIND_U32 && handle) {
		struct u32_find f;

		r = u32_lookup(sk, ifindex, s, &f, &req);
		if (r < 0)
			return req_error(err, r, &req, tc_what_str(&what));
		if (!f.found)
			return error_set(err, ENOENT, "%s: %s", tc_what_str(&what), strerror(ENOENT));
		handle = f.spec.handle;
	}
	r = tc_send(sk, tc_rtm[s->type][TC_OP_DEL], 0, ifindex, s, handle, false, &req, &what, err);
	/* The kernel answers EINVAL ("Invalid handle", "Invalid qdisc name") when
	 * another object holds the slot: for the caller ours is absent. */
	if (r == -EINVAL && s->type != TC_CLASS && tc_object_present(sk, ifindex, s, &present) == 0 && !present)
		return error_set(err, ENOENT, "%s: %s (%s)", tc_what_str(&what), strerror(ENOENT),
		                 req.ext[0] ? req.ext : "not present");
	return r;
}

/* --- dumps of any size (the agent's uplink: one filter per pod address) --- */

struct dump_grow {
	struct tc_dump_list *d;
	unsigned max;
	bool overflow;
	bool nomem;
};

static int grow_visit(const struct tc_spec *s, const char *kind_name, void *arg)
{
	struct dump_grow *g = arg;
	struct tc_dump_list *d = g->d;

	if (d->n >= g->max) {
		g->overflow = true;
		return 0;
	}
	if (d->n == d->cap) {
		unsigned cap = d->cap ? d->cap * 2 : 64;
		struct tc_spec *tc;
		char(*names)[TC_DUMP_KIND_NAME_MAX];

		if (cap > g->max)
			cap = g->max;
		tc = realloc(d->tc, (size_t)cap * sizeof(*tc));
		if (!tc) {
			g->nomem = true;
			return -ENOMEM;
		}
		d->tc = tc;
		names = realloc(d->kind_name, (size_t)cap * sizeof(*names));
		if (!names) {
			g->nomem = true;
			return -ENOMEM;
		}
		d->kind_name = names;
		d->cap = cap;
	}
	d->tc[d->n] = *s;
	str_copy(d->kind_name[d->n], TC_DUMP_KIND_NAME_MAX, kind_name);
	d->n++;
	return 0;
}

void tc_dump_list_free(struct tc_dump_list *d)
{
	if (!d)
		return;
	free(d->tc);
	free(d->kind_name);
	memset(d, 0, sizeof(*d));
}

/* Filter parents of a dump: every qdisc with a handle, every class, and the
 * two clsact hooks (ingress qdisc: its one hook). Heap array of at most
 * d->n + 2 entries. */
static uint32_t *list_filter_parents(const struct tc_dump_list *d, unsigned *ret_n)
{
	uint32_t *parents = calloc((size_t)d->n + 2, sizeof(*parents));
	unsigned n = 0, max = d->n + 2;

	if (!parents)
		return NULL;
	for (unsigned i = 0; i < d->n; i++) {
		const struct tc_spec *s = &d->tc[i];

		if (s->type == TC_QDISC && s->parent == TC_H_CLSACT) {
			parent_add(parents, &n, max, TC_H_MAKE(TC_H_CLSACT, TC_H_MIN_INGRESS));
			if (streq(d->kind_name[i], "clsact"))
				parent_add(parents, &n, max, TC_H_MAKE(TC_H_CLSACT, TC_H_MIN_EGRESS));
		} else if ((s->type == TC_QDISC || s->type == TC_CLASS) && s->handle) {
			parent_add(parents, &n, max, s->handle);
		}
	}
	*ret_n = n;
	return parents;
}

int nl_tc_dump_alloc(struct nl_sock *sk, int ifindex, unsigned max_objects, struct tc_dump_list *ret, struct error *err)
{
	struct tc_dump_list d = {0};
	struct nl_req req = {0};
	char what[96] = "";
	unsigned max = max_objects ? max_objects : TC_DUMP_LIST_MAX_DEFAULT;
	int r;

	for (int attempt = 0; attempt < NL_DUMP_TRIES; attempt++) {
		struct dump_grow g = {.d = &d, .max = max};
		_cleanup_free_ uint32_t *parents = NULL;
		unsigned n_parents = 0;
		bool intr = false;

		d.n = 0;
		snprintf(what, sizeof(what), "dump qdiscs of ifindex %d", ifindex);
		r = tc_dump_one(sk, ifindex, TC_QDISC, 0, 0, grow_visit, &g, &intr, &req);
		if (r >= 0) {
			snprintf(what, sizeof(what), "dump classes of ifindex %d", ifindex);
			r = tc_dump_one(sk, ifindex, TC_CLASS, 0, 0, grow_visit, &g, &intr, &req);
		}
		if (r >= 0) {
			parents = list_filter_parents(&d, &n_parents);
			if (!parents)
				r = -ENOMEM;
		}
		for (unsigned i = 0; r >= 0 && i < n_parents; i++) {
			char h[32];

			tc_handle_format(parents[i], h, sizeof(h));
			snprintf(what, sizeof(what), "dump filters of ifindex %d parent %s", ifindex, h);
			r = tc_dump_one(sk, ifindex, TC_FILTER, parents[i], 0, grow_visit, &g, &intr, &req);
		}
		if (r < 0 || g.nomem) {
			tc_dump_list_free(&d);
			if (g.nomem || r == -ENOMEM)
				return error_set(err, ENOMEM, "%s: out of memory", what);
			return req_error(err, r, &req, what);
		}
		if (intr)
			continue;
		if (g.overflow) {
			tc_dump_list_free(&d);
			return error_set(err, E2BIG, "dump tc objects of ifindex %d: more than %u objects", ifindex,
			                 max);
		}
		if (d.n == 0) {
			struct link_info li;
			r = nl_link_get(sk, NULL, ifindex, &li, err);
			if (r < 0) {
				tc_dump_list_free(&d);
				return r;
			}
		}
		*ret = d;
		return 0;
	}
	tc_dump_list_free(&d);
	return error_set(err, EAGAIN, "dump tc objects of ifindex %d: interrupted %d times by concurrent changes",
	                 ifindex, NL_DUMP_TRIES);
}

/* --- queue statistics --- */

struct stats_ctx {
	int ifindex;
	enum tc_type type;
	int (*cb)(const struct tc_obj_stats *st, void *ud);
	void *ud;
};

static void stats_xstats(struct tc_obj_stats *st, const struct nlattr *x)
{
	if (!x)
		return;
	if (streq(st->kind, "fq_codel") && nla_len(x) >= (int)sizeof(struct tc_fq_codel_xstats)) {
		struct tc_fq_codel_xstats xs;

		memcpy(&xs, nla_data(x), sizeof(xs));
		if (xs.type == TCA_FQ_CODEL_XSTATS_QDISC)
			st->ecn_marks = (uint64_t)xs.qdisc_stats.ecn_mark + xs.qdisc_stats.ce_mark;
	} else if (streq(st->kind, "fq") && nla_len(x) >= (int)sizeof(struct tc_fq_qd_stats)) {
		struct tc_fq_qd_stats fs;

		memcpy(&fs, nla_data(x), sizeof(fs));
		st->ecn_marks = fs.ce_mark;
	}
}

static int stats_on_msg(const struct nlmsghdr *hdr, void *arg)
{
	struct stats_ctx *ctx = arg;
	struct nlattr *tb[TCA_MAX + 1], *sb[TCA_STATS_MAX + 1] = {0};
	const struct tcmsg *t;
	struct tc_obj_stats st = {0};

	if (!nlmsg_valid_hdr(hdr, sizeof(*t)))
		return 0;
	t = nlmsg_data(hdr);
	if (t->tcm_ifindex != ctx->ifindex)
		return 0;
	if (nlmsg_parse((struct nlmsghdr *)(uintptr_t)hdr, sizeof(*t), tb, TCA_MAX, NULL) < 0)
		return -EBADMSG;
	st.type = ctx->type;
	st.parent = t->tcm_parent;
	st.handle = t->tcm_handle;
	if (tb[TCA_KIND])
		nla_strlcpy(st.kind, tb[TCA_KIND], sizeof(st.kind));
	if (tb[TCA_STATS2] && tc_nla_parse_nested(sb, TCA_STATS_MAX, tb[TCA_STATS2]) == 0) {
		if (sb[TCA_STATS_BASIC] && nla_len(sb[TCA_STATS_BASIC]) >= (int)sizeof(struct gnet_stats_basic)) {
			struct gnet_stats_basic b;

			memcpy(&b, nla_data(sb[TCA_STATS_BASIC]), sizeof(b));
			st.bytes = b.bytes;
			st.packets = b.packets;
		}
		if (sb[TCA_STATS_PKT64] && nla_len(sb[TCA_STATS_PKT64]) >= (int)sizeof(uint64_t))
			memcpy(&st.packets, nla_data(sb[TCA_STATS_PKT64]), sizeof(uint64_t));
		if (sb[TCA_STATS_QUEUE] && nla_len(sb[TCA_STATS_QUEUE]) >= (int)sizeof(struct gnet_stats_queue)) {
			struct gnet_stats_queue q;

			memcpy(&q, nla_data(sb[TCA_STATS_QUEUE]), sizeof(q));
			st.qlen = q.qlen;
			st.backlog_bytes = q.backlog;
			st.drops = q.drops;
			st.requeues = q.requeues;
			st.overlimits = q.overlimits;
		}
		stats_xstats(&st, sb[TCA_STATS_APP]);
	}
	if (!sb[TCA_STATS_APP] || !tb[TCA_STATS2])
		stats_xstats(&st, tb[TCA_XSTATS]);
	return ctx->cb(&st, ctx->ud);
}

int nl_tc_stats_dump(struct nl_sock *sk, int ifindex, enum tc_type type,
                     int (*cb)(const struct tc_obj_stats *st, void *ud), void *ud, struct error *err)
{
	struct stats_ctx ctx = {.ifindex = ifindex, .type = type, .cb = cb, .ud = ud};
	struct nl_req req = {0};
	char what[64];

	snprintf(what, sizeof(what), "dump %s statistics of ifindex %d", tc_type_name(type), ifindex);
	if (type != TC_QDISC && type != TC_CLASS)
		return error_set(err, EINVAL, "%s: only qdiscs and classes", what);
	return tc_dump_all(sk, type, ifindex, stats_on_msg, &ctx, &req, what, err);
}

/* --- root qdisc, raw (record and restore what was there before aiqos) --- */

struct root_raw_ctx {
	int ifindex;
	struct tc_qdisc_raw *q;
	bool found;
};

static int root_raw_on_msg(const struct nlmsghdr *hdr, void *arg)
{
	struct root_raw_ctx *ctx = arg;
	struct nlattr *tb[TCA_MAX + 1];
	const struct tcmsg *t;
	struct tc_qdisc_raw *q = ctx->q;

	if (ctx->found || !nlmsg_valid_hdr(hdr, sizeof(*t)))
		return 0;
	t = nlmsg_data(hdr);
	if (t->tcm_ifindex != ctx->ifindex || t->tcm_parent != TC_H_ROOT)
		return 0;
	if (nlmsg_parse((struct nlmsghdr *)(uintptr_t)hdr, sizeof(*t), tb, TCA_MAX, NULL) < 0)
		return -EBADMSG;
	memset(q, 0, sizeof(*q));
	if (tb[TCA_KIND])
		nla_strlcpy(q->kind, tb[TCA_KIND], sizeof(q->kind));
	q->handle = t->tcm_handle;
	q->parent = t->tcm_parent;
	if (tb[TCA_OPTIONS]) {
		size_t len = (size_t)nla_len(tb[TCA_OPTIONS]);

		if (len > sizeof(q->options)) {
			q->options_truncated = true;
			len = sizeof(q->options);
		}
		memcpy(q->options, nla_data(tb[TCA_OPTIONS]), len);
		q->options_len = len;
	}
	ctx->found = true;
	return 0;
}

int nl_qdisc_root_get(struct nl_sock *sk, int ifindex, struct tc_qdisc_raw *ret, struct error *err)
{
	_cleanup_free_ struct tc_qdisc_raw *q = calloc(1, sizeof(*q));
	struct nl_req req = {0};
	char what[64];
	int r;

	snprintf(what, sizeof(what), "get the root qdisc of ifindex %d", ifindex);
	if (!q)
		return error_set(err, ENOMEM, "%s: out of memory", what);
	for (int attempt = 0; attempt < NL_DUMP_TRIES; attempt++) {
		struct root_raw_ctx ctx = {.ifindex = ifindex, .q = q};

		r = tc_dump_all(sk, TC_QDISC, ifindex, root_raw_on_msg, &ctx, &req, what, err);
		if (r < 0)
			return r;
		if (req.intr)
			continue;
		if (!ctx.found) {
			struct link_info li;
			r = nl_link_get(sk, NULL, ifindex, &li, err);
			if (r < 0)
				return r;
			return error_set(err, ENOENT, "%s: no root qdisc reported", what);
		}
		memcpy(ret, q, sizeof(*q));
		return 0;
	}
	return error_set(err, EAGAIN, "%s: interrupted %d times by concurrent changes", what, NL_DUMP_TRIES);
}

int nl_qdisc_create_raw(struct nl_sock *sk, int ifindex, const struct tc_qdisc_raw *q, struct error *err)
{
	_cleanup_nlmsg_ struct nl_msg *msg = NULL;
	struct tcmsg t = {
	        .tcm_family = AF_UNSPEC,
	        .tcm_ifindex = ifindex,
	        .tcm_handle = q->handle,
	        .tcm_parent = q->parent ? q->parent : TC_H_ROOT,
	};
	struct nl_req req = {0};
	char what[96], h[32];
	int r;

	tc_handle_format(q->handle, h, sizeof(h));
	snprintf(what, sizeof(what), "create qdisc %s root handle %s on ifindex %d", q->kind, h, ifindex);
	if (!q->kind[0] || q->options_truncated)
		return error_set(err, EINVAL, "%s: %s", what, q->kind[0] ? "options were truncated" : "no kind");
	msg = nlmsg_alloc_simple(RTM_NEWQDISC, NLM_F_CREATE | NLM_F_REPLACE);
	if (!msg)
		return error_set(err, ENOMEM, "%s: allocate message", what);
	if (nlmsg_append(msg, &t, sizeof(t), NLMSG_ALIGNTO) < 0 || nla_put_string(msg, TCA_KIND, q->kind) < 0 ||
	    (q->options_len && nla_put(msg, TCA_OPTIONS, (int)q->options_len, q->options) < 0))
		return error_set(err, EMSGSIZE, "%s: build message", what);
	r = nl_transact(sk, msg, NULL, NULL, &req);
	if (r < 0)
		return req_error(err, r, &req, what);
	return 0;
}

/* --- create without looking first (the caller knows the slot is free) --- */

int nl_tc_create(struct nl_sock *sk, int ifindex, const struct tc_spec *s, struct error *err)
{
	struct tc_what what = {.verb = "add", .s = s, .ifindex = ifindex};
	struct nl_req req = {0};
	int r;

	r = tc_what_check(&what, err);
	if (r < 0)
		return r;
	r = tc_send(sk, tc_rtm[s->type][TC_OP_NEW], NLM_F_CREATE | NLM_F_EXCL, ifindex, s, s->handle, true, &req, &what,
	            err);
	/* u32 answers a taken node id with ENOSPC */
	if (r == -ENOSPC && s->type == TC_FILTER && s->kind == TC_KIND_U32) {
		error_clear(err);
		return error_set(err, EEXIST, "%s: %s", tc_what_str(&what), strerror(EEXIST));
	}
	return r;
}
