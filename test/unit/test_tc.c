/* test_tc.c — the tc object model without a kernel: rate/size/time and
 * handle formatting, the kind registry, tc(8) command rendering, fill->parse
 * round trips of every kind, byte-for-byte equality of fill() with what
 * iproute2 6.1's tc sends for the same command (captured with strace, so the
 * kinds the CI kernel lacks are checked too), and match()/identity rules. */
#include <arpa/inet.h>
#include <linux/if_ether.h>
#include <linux/pkt_cls.h>
#include <sys/socket.h>

#include <netlink/attr.h>
#include <netlink/errno.h>
#include <netlink/msg.h>

#include "nl.h"
#include "t.h"
#include "tc/tc.h"

/* --- golden TCA_OPTIONS attributes sent by `tc` (iproute2 6.1) --- */
/* tc qdisc replace dev d0 root fq limit 100 flow_limit 10 quantum 3028 ce_threshold 1ms maxrate 1gbit pacing */
static const uint8_t golden_fq[] = {
        0x34, 0x00, 0x02, 0x00, 0x08, 0x00, 0x01, 0x00, 0x64, 0x00, 0x00, 0x00, 0x08, 0x00, 0x02, 0x00, 0x0a, 0x00,
        0x00, 0x00, 0x08, 0x00, 0x03, 0x00, 0xd4, 0x0b, 0x00, 0x00, 0x08, 0x00, 0x05, 0x00, 0x01, 0x00, 0x00, 0x00,
        0x08, 0x00, 0x07, 0x00, 0x40, 0x59, 0x73, 0x07, 0x08, 0x00, 0x0c, 0x00, 0xe8, 0x03, 0x00, 0x00,
};
/* tc qdisc replace dev d0 root fq_codel limit 100 flows 64 quantum 1514 target 1ms interval 10ms memory_limit 4mb ecn
 * ce_threshold 500us */
static const uint8_t golden_fq_codel[] = {
        0x44, 0x00, 0x02, 0x00, 0x08, 0x00, 0x02, 0x00, 0x64, 0x00, 0x00, 0x00, 0x08, 0x00, 0x05, 0x00, 0x40,
        0x00, 0x00, 0x00, 0x08, 0x00, 0x06, 0x00, 0xea, 0x05, 0x00, 0x00, 0x08, 0x00, 0x03, 0x00, 0x10, 0x27,
        0x00, 0x00, 0x08, 0x00, 0x01, 0x00, 0xe8, 0x03, 0x00, 0x00, 0x08, 0x00, 0x04, 0x00, 0x01, 0x00, 0x00,
        0x00, 0x08, 0x00, 0x07, 0x00, 0xf4, 0x01, 0x00, 0x00, 0x08, 0x00, 0x09, 0x00, 0x00, 0x00, 0x40, 0x00,
};
/* tc qdisc replace dev d0 root bfifo limit 150kb */
static const uint8_t golden_bfifo[] = {
        0x08, 0x00, 0x02, 0x00, 0x00, 0x58, 0x02, 0x00,
};
/* tc qdisc replace dev d0 root pfifo limit 100 */
static const uint8_t golden_pfifo[] = {
        0x08, 0x00, 0x02, 0x00, 0x64, 0x00, 0x00, 0x00,
};
/* tc qdisc replace dev d0 root prio bands 4 priomap 1 2 2 2 1 2 0 0 1 1 1 1 1 1 3 1 */
static const uint8_t golden_prio[] = {
        0x1c, 0x00, 0x02, 0x00, 0x04, 0x00, 0x00, 0x00, 0x01, 0x02, 0x02, 0x02, 0x01, 0x02,
        0x00, 0x00, 0x01, 0x01, 0x01, 0x01, 0x01, 0x01, 0x03, 0x01, 0x04, 0x00, 0x02, 0x00,
};
/* tc qdisc replace dev d0 root handle 1: htb default 10 r2q 10 */
static const uint8_t golden_htb[] = {
        0x1c, 0x00, 0x02, 0x00, 0x18, 0x00, 0x02, 0x00, 0x03, 0x00, 0x00, 0x00, 0x0a, 0x00,
        0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
};
/* tc filter replace dev d0 parent ffff:fff3 protocol ip prio 1 u32 match u32 0 0 action pedit ex munge ip dsfield set
 * 0xb8 retain 0xfc pipe action csum ip */
static const uint8_t golden_u32_pedit4[] = {
        0xbc, 0x00, 0x02, 0x00, 0x94, 0x00, 0x07, 0x00, 0x60, 0x00, 0x01, 0x00, 0x0a, 0x00, 0x01, 0x00, 0x70, 0x65,
        0x64, 0x69, 0x74, 0x00, 0x00, 0x00, 0x50, 0x00, 0x02, 0x80, 0x34, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00,
        0x00, 0x00, 0xff, 0x03, 0xff, 0xff, 0x00, 0xb8, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x18, 0x00, 0x05, 0x80, 0x14, 0x00, 0x06, 0x80, 0x06, 0x00,
        0x01, 0x00, 0x02, 0x00, 0x00, 0x00, 0x06, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x30, 0x00, 0x02, 0x00,
        0x09, 0x00, 0x01, 0x00, 0x63, 0x73, 0x75, 0x6d, 0x00, 0x00, 0x00, 0x00, 0x20, 0x00, 0x02, 0x80, 0x1c, 0x00,
        0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x24, 0x00, 0x05, 0x00, 0x01, 0x00, 0x01, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
};
/* tc filter replace dev d0 parent ffff:fff3 protocol ipv6 prio 2 u32 match u32 0 0 action pedit ex munge ip6
 * traffic_class set 0x28 retain 0xfc */
static const uint8_t golden_u32_pedit6[] = {
        0x8c, 0x00, 0x02, 0x00, 0x64, 0x00, 0x07, 0x00, 0x60, 0x00, 0x01, 0x00, 0x0a, 0x00, 0x01, 0x00, 0x70, 0x65,
        0x64, 0x69, 0x74, 0x00, 0x00, 0x00, 0x50, 0x00, 0x02, 0x80, 0x34, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00,
        0x00, 0x00, 0xf0, 0x3f, 0xff, 0xff, 0x02, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x18, 0x00, 0x05, 0x80, 0x14, 0x00, 0x06, 0x80, 0x06, 0x00,
        0x01, 0x00, 0x03, 0x00, 0x00, 0x00, 0x06, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x24, 0x00, 0x05, 0x00,
        0x01, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
};
/* tc filter add dev d0 parent 1: protocol ip prio 1 u32 match ip src 10.1.0.5/32 flowid 1:10 */
static const uint8_t golden_u32_src4[] = {
        0x30, 0x00, 0x02, 0x00, 0x08, 0x00, 0x01, 0x00, 0x10, 0x00, 0x01, 0x00, 0x24, 0x00, 0x05, 0x00,
        0x01, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0xff, 0xff, 0xff, 0xff, 0x0a, 0x01, 0x00, 0x05, 0x0c, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
};
/* tc filter add dev d0 parent 1: protocol ipv6 prio 3 u32 match ip6 dst 2001:db8::/40 flowid 1:10 */
static const uint8_t golden_u32_dst6[] = {
        0x40, 0x00, 0x02, 0x00, 0x08, 0x00, 0x01, 0x00, 0x10, 0x00, 0x01, 0x00, 0x34, 0x00, 0x05, 0x00,
        0x01, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0xff, 0xff, 0xff, 0xff, 0x20, 0x01, 0x0d, 0xb8, 0x18, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0xff, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x1c, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
};
/* tc filter add dev d0 parent 1: protocol ipv6 prio 3 u32 match ip6 src 2001:db8:1:2:3:4:5:6/128 flowid 1:30 */
static const uint8_t golden_u32_src6[] = {
        0x60, 0x00, 0x02, 0x00, 0x08, 0x00, 0x01, 0x00, 0x30, 0x00, 0x01, 0x00, 0x54, 0x00, 0x05, 0x00,
        0x01, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0xff, 0xff, 0xff, 0xff, 0x20, 0x01, 0x0d, 0xb8, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0xff, 0xff, 0xff, 0xff, 0x00, 0x01, 0x00, 0x02, 0x0c, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0xff, 0xff, 0xff, 0xff, 0x00, 0x03, 0x00, 0x04, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0xff, 0xff, 0xff, 0xff, 0x00, 0x05, 0x00, 0x06, 0x14, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
};
/* tc filter add dev d0 parent 1: protocol ip prio 4 u32 match ip dsfield 0xb8 0xfc flowid 1:10 */
static const uint8_t golden_u32_ds4[] = {
        0x30, 0x00, 0x02, 0x00, 0x08, 0x00, 0x01, 0x00, 0x10, 0x00, 0x01, 0x00, 0x24, 0x00, 0x05, 0x00,
        0x01, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0xfc, 0x00, 0x00, 0x00, 0xb8, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
};
/* tc filter add dev d0 parent 1: protocol ipv6 prio 5 u32 match ip6 priority 0x28 0xfc flowid 1:30 */
static const uint8_t golden_u32_ds6[] = {
        0x30, 0x00, 0x02, 0x00, 0x08, 0x00, 0x01, 0x00, 0x30, 0x00, 0x01, 0x00, 0x24, 0x00, 0x05, 0x00,
        0x01, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x0f, 0xc0, 0x00, 0x00, 0x02, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
};
/* tc filter add dev d0 parent ffff:fff3 protocol ip prio 6 u32 match ip src 10.0.0.0/8 flowid 1:10 action pedit ex
 * munge ip dsfield set 0x28 retain 0xfc pipe action csum ip */
static const uint8_t golden_u32_src4_pedit[] = {
        0xc4, 0x00, 0x02, 0x00, 0x08, 0x00, 0x01, 0x00, 0x10, 0x00, 0x01, 0x00, 0x94, 0x00, 0x07, 0x00, 0x60, 0x00,
        0x01, 0x00, 0x0a, 0x00, 0x01, 0x00, 0x70, 0x65, 0x64, 0x69, 0x74, 0x00, 0x00, 0x00, 0x50, 0x00, 0x02, 0x80,
        0x34, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0xff, 0x03, 0xff, 0xff, 0x00, 0x28, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x18, 0x00,
        0x05, 0x80, 0x14, 0x00, 0x06, 0x80, 0x06, 0x00, 0x01, 0x00, 0x02, 0x00, 0x00, 0x00, 0x06, 0x00, 0x02, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x30, 0x00, 0x02, 0x00, 0x09, 0x00, 0x01, 0x00, 0x63, 0x73, 0x75, 0x6d, 0x00, 0x00,
        0x00, 0x00, 0x20, 0x00, 0x02, 0x80, 0x1c, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x24, 0x00,
        0x05, 0x00, 0x01, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0xff, 0x00, 0x00, 0x00, 0x0a, 0x00, 0x00, 0x00, 0x0c, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
};

/* tc filter add dev d0 egress prio 1 protocol ip u32 match u32 0 0 action mirred egress redirect dev d1
 * (d1: ifindex 2) */
static const uint8_t golden_u32_mirred[] = {
        0x60, 0x00, 0x02, 0x00, 0x38, 0x00, 0x07, 0x00, 0x34, 0x00, 0x01, 0x00, 0x0b, 0x00, 0x01, 0x00,
        0x6d, 0x69, 0x72, 0x72, 0x65, 0x64, 0x00, 0x00, 0x24, 0x00, 0x02, 0x80, 0x20, 0x00, 0x02, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x24, 0x00, 0x05, 0x00,
        0x01, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
};

/* --- helpers --- */

static struct tc_spec qdisc(enum tc_kind_id kind, uint32_t parent, uint32_t handle)
{
	return (struct tc_spec){.type = TC_QDISC, .kind = kind, .parent = parent, .handle = handle};
}

static struct tc_spec u32_filter(uint32_t parent, uint16_t prio, uint16_t protocol)
{
	struct tc_spec s = {
	        .type = TC_FILTER, .kind = TC_KIND_U32, .parent = parent, .prio = prio, .protocol = protocol};
	s.u.u32.dscp = -1;
	s.u.u32.family = protocol == ETH_P_IPV6 ? AF_INET6 : AF_INET;
	return s;
}

static void set_addr(struct tc_spec *s, enum u32_match m, const char *addr, uint8_t prefix_len)
{
	s->u.u32.match = m;
	s->u.u32.prefix_len = prefix_len;
	if (inet_pton(s->u.u32.family, addr, s->u.u32.addr) != 1) {
		fprintf(stderr, "  bad test address %s\n", addr);
		t_failed_now = 1;
	}
}

/* Message with a tcmsg header and the kind's options; NULL on fill error (*r). */
static struct nl_msg *fill_msg(const struct tc_spec *s, int *r)
{
	struct nl_msg *msg = nlmsg_alloc_simple(RTM_NEWQDISC, 0);
	struct tcmsg t = {0};

	if (!msg || nlmsg_append(msg, &t, sizeof(t), NLMSG_ALIGNTO) < 0) {
		*r = -ENOMEM;
		nlmsg_free(msg);
		return NULL;
	}
	*r = tc_kind_get(s->kind)->fill(msg, s);
	if (*r < 0) {
		nlmsg_free(msg);
		return NULL;
	}
	return msg;
}

static struct nlattr *opts_of(struct nl_msg *msg)
{
	return nlmsg_find_attr(nlmsg_hdr(msg), sizeof(struct tcmsg), TCA_OPTIONS);
}

/* Fill s, parse its TCA_OPTIONS back into *ret (identity copied from s). */
static int round_trip(const struct tc_spec *s, struct tc_spec *ret)
{
	struct nl_msg *msg;
	int r;

	msg = fill_msg(s, &r);
	if (!msg)
		return r;
	*ret = (struct tc_spec){.type = s->type,
	                        .kind = s->kind,
	                        .parent = s->parent,
	                        .handle = s->handle,
	                        .prio = s->prio,
	                        .protocol = s->protocol};
	r = tc_kind_get(s->kind)->parse(opts_of(msg), ret);
	nlmsg_free(msg);
	return r;
}

/* fill(s) must produce exactly the golden TCA_OPTIONS attribute (first n
 * bytes of the payload when n > 0). */
static void check_golden(const struct tc_spec *s, const uint8_t *golden, size_t golden_len, size_t payload_prefix)
{
	struct nl_msg *msg;
	struct nlattr *a;
	int r;

	msg = fill_msg(s, &r);
	CHECK_INT(r, 0);
	if (!msg)
		return;
	a = opts_of(msg);
	CHECK(a != NULL);
	if (a && payload_prefix) {
		CHECK((size_t)nla_len(a) >= payload_prefix);
		CHECK(memcmp(nla_data(a), golden + NLA_HDRLEN, payload_prefix) == 0);
	} else if (a) {
		CHECK_INT(a->nla_len, golden_len);
		if (a->nla_len == golden_len && memcmp(a, golden, golden_len) != 0) {
			fprintf(stderr, "  %s: fill() differs from tc's bytes:\n   ", tc_kind_get(s->kind)->name);
			for (size_t i = 0; i < golden_len; i++)
				fprintf(stderr, "%s%02x/%02x", i % 12 ? " " : "\n   ", ((const uint8_t *)a)[i],
				        golden[i]);
			fprintf(stderr, "\n");
			t_failed_now = 1;
		}
	}
	nlmsg_free(msg);
}

/* parse() a golden attribute (copied to aligned memory). */
static int parse_golden(struct tc_spec *s, const uint8_t *golden, size_t len)
{
	uint32_t buf[128];

	if (len > sizeof(buf))
		return -E2BIG;
	memcpy(buf, golden, len);
	return tc_kind_get(s->kind)->parse((const struct nlattr *)buf, s);
}

/* --- rate.c --- */

TEST(rate_format)
{
	static const struct {
		uint64_t bps;
		const char *want;
	} cases[] = {
	        {500000000, "500mbit"},
	        {1000000000, "1gbit"},
	        {10000000000ULL, "10gbit"},
	        {123456, "123456bit"},
	        {1500, "1500bit"},
	        {64000, "64kbit"},
	        {0, "0bit"},
	        {2000000000000ULL, "2tbit"},
	        {1000000001, "1000000001bit"},
	};
	char buf[32];

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		CHECK_INT(tc_rate_format(cases[i].bps, buf, sizeof(buf)), 0);
		CHECK_STR(buf, cases[i].want);
	}
	CHECK_INT(tc_rate_format(500000000, buf, 4), -ENOBUFS);
}

TEST(size_format)
{
	static const struct {
		uint32_t bytes;
		const char *want;
	} cases[] = {
	        {65536, "64kb"}, {1500, "1500b"}, {1024, "1kb"},     {1048576, "1mb"},    {3145728, "3mb"},
	        {1025, "1025b"}, {0, "0b"},       {153600, "150kb"}, {1073741824, "1gb"},
	};
	char buf[32];

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		CHECK_INT(tc_size_format(cases[i].bytes, buf, sizeof(buf)), 0);
		CHECK_STR(buf, cases[i].want);
	}
	CHECK_INT(tc_size_format(65536, buf, 3), -ENOBUFS);
}

TEST(time_format)
{
	static const struct {
		uint32_t us;
		const char *want;
	} cases[] = {
	        {1000, "1ms"},   {500, "500us"}, {100000, "100ms"}, {1500, "1500us"},
	        {2000000, "2s"}, {0, "0us"},     {999, "999us"},
	};
	char buf[32];

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		CHECK_INT(tc_time_format(cases[i].us, buf, sizeof(buf)), 0);
		CHECK_STR(buf, cases[i].want);
	}
	CHECK_INT(tc_time_format(100000, buf, 2), -ENOBUFS);
}

TEST(ticks)
{
	/* 64 ns per tick */
	CHECK_INT(tc_time_to_ticks(0), 0);
	CHECK_INT(tc_time_to_ticks(64), 1);
	CHECK_INT(tc_time_to_ticks(1000000), 15625);
	CHECK_INT(tc_time_to_ticks(UINT64_MAX), UINT32_MAX);
	/* 64 KiB at 500 Mbit/s = 1048576 ns = 16384 ticks */
	CHECK_INT(tc_xmit_ticks(500000000, 65536), 16384);
	/* 1500 B at 1 Gbit/s = 12 us = 187.5 ticks, truncated */
	CHECK_INT(tc_xmit_ticks(1000000000, 1500), 187);
	CHECK_INT(tc_xmit_ticks(8, UINT32_MAX), UINT32_MAX); /* saturates */
	CHECK_INT(tc_xmit_ticks(0, 1500), UINT32_MAX);
}

/* --- registry and handles --- */

TEST(kind_registry)
{
	static const struct {
		const char *name;
		enum tc_type type;
		enum tc_kind_id want;
	} cases[] = {
	        {"htb", TC_QDISC, TC_KIND_HTB},
	        {"htb", TC_CLASS, TC_KIND_HTB_CLASS},
	        {"tbf", TC_QDISC, TC_KIND_TBF},
	        {"fq", TC_QDISC, TC_KIND_FQ},
	        {"fq_codel", TC_QDISC, TC_KIND_FQ_CODEL},
	        {"bfifo", TC_QDISC, TC_KIND_BFIFO},
	        {"pfifo", TC_QDISC, TC_KIND_PFIFO},
	        {"prio", TC_QDISC, TC_KIND_PRIO},
	        {"clsact", TC_QDISC, TC_KIND_CLSACT},
	        {"u32", TC_FILTER, TC_KIND_U32},
	        {"u32", TC_QDISC, _TC_KIND_INVALID},
	        {"pfifo_fast", TC_QDISC, TC_KIND_PFIFO_FAST},
	        {"mq", TC_QDISC, TC_KIND_MQ},
	        {"bpf", TC_FILTER, TC_KIND_BPF},
	        {"noqueue", TC_QDISC, _TC_KIND_INVALID},
	        {"tbf", TC_CLASS, _TC_KIND_INVALID},
	        {"", TC_QDISC, _TC_KIND_INVALID},
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++)
		CHECK_INT(tc_kind_from_name(cases[i].name, cases[i].type), cases[i].want);
	CHECK_INT(tc_kind_from_name(NULL, TC_QDISC), _TC_KIND_INVALID);
	for (int k = 0; k < _TC_KIND_MAX; k++) {
		const struct tc_kind *kind = tc_kind_get((enum tc_kind_id)k);
		CHECK(kind != NULL);
		if (kind) {
			CHECK(kind->fill && kind->parse && kind->format && kind->match);
			CHECK_INT(tc_kind_from_name(kind->name, kind->type), k);
		}
	}
	CHECK(tc_kind_get(_TC_KIND_INVALID) == NULL);
	CHECK(tc_kind_get(_TC_KIND_MAX) == NULL);
	CHECK_STR(tc_type_name(TC_QDISC), "qdisc");
	CHECK_STR(tc_type_name(TC_CLASS), "class");
	CHECK_STR(tc_type_name(TC_FILTER), "filter");
	CHECK_STR(tc_type_name(_TC_TYPE_INVALID), "unknown");
}

TEST(handle_format)
{
	static const struct {
		uint32_t h;
		const char *want;
	} cases[] = {
	        {TC_H_ROOT, "root"},
	        {0x10010, "1:10"},
	        {0x10000, "1:"},
	        {TC_H_MAKE(TC_H_CLSACT, TC_H_MIN_EGRESS), "ffff:fff3"},
	        {TC_H_MAKE(TC_H_CLSACT, TC_H_MIN_INGRESS), "ffff:fff2"},
	        {0, "none"},
	        {0x5, ":5"},
	        {0xabcd1234, "abcd:1234"},
	};
	char buf[16];

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		tc_handle_format(cases[i].h, buf, sizeof(buf));
		CHECK_STR(buf, cases[i].want);
	}
}

/* --- tc(8) rendering --- */

TEST(spec_format)
{
	struct tc_spec htb = qdisc(TC_KIND_HTB, TC_H_ROOT, 0x10000);
	struct tc_spec cls = {.type = TC_CLASS, .kind = TC_KIND_HTB_CLASS, .parent = 0x10000, .handle = 0x10010};
	struct tc_spec clsact = qdisc(TC_KIND_CLSACT, TC_H_CLSACT, 0);
	struct tc_spec fqc = qdisc(TC_KIND_FQ_CODEL, TC_H_ROOT, 0x10000);
	struct tc_spec fq = qdisc(TC_KIND_FQ, 0x10030, 0x300000);
	struct tc_spec tbf = qdisc(TC_KIND_TBF, TC_H_ROOT, 0x20000);
	struct tc_spec bfifo = qdisc(TC_KIND_BFIFO, 0x10010, 0x100000);
	struct tc_spec pfifo = qdisc(TC_KIND_PFIFO, TC_H_ROOT, 0);
	struct tc_spec prio = qdisc(TC_KIND_PRIO, TC_H_ROOT, 0x10000);
	struct tc_spec src = u32_filter(TC_H_MAKE(TC_H_CLSACT, TC_H_MIN_EGRESS), 1, ETH_P_IP);
	struct tc_spec dscp4 = u32_filter(TC_H_MAKE(TC_H_CLSACT, TC_H_MIN_EGRESS), 1, ETH_P_IP);
	struct tc_spec dscp6 = u32_filter(TC_H_MAKE(TC_H_CLSACT, TC_H_MIN_EGRESS), 2, ETH_P_IPV6);
	struct tc_spec src6 = u32_filter(0x10000, 11, ETH_P_IPV6);
	struct tc_spec ds4 = u32_filter(0x10000, 20, ETH_P_IP);
	struct tc_spec ds6 = u32_filter(0x10000, 21, ETH_P_IPV6);
	struct tc_spec all = u32_filter(0x10000, 5, ETH_P_ALL);
	char buf[TC_FORMAT_MAX];

	htb.u.htb = (struct tc_htb){.defcls = 0x10, .r2q = 10};
	cls.u.htb_class = (struct tc_htb_class){.rate_bps = 500000000,
	                                        .ceil_bps = 500000000,
	                                        .burst_bytes = 65536,
	                                        .cburst_bytes = 65536,
	                                        .quantum_bytes = 60000,
	                                        .prio = 0};
	fqc.u.fq_codel =
	        (struct tc_fq_codel){.target_us = 1000, .interval_us = 10000, .limit_pkts = 1024, .ecn = TRI_ON};
	fq.u.fq = (struct tc_fq){.limit_pkts = 10000,
	                         .flow_limit_pkts = 100,
	                         .quantum_bytes = 3028,
	                         .ce_threshold_us = 1000,
	                         .maxrate_bps = 1000000000,
	                         .pacing = TRI_ON};
	tbf.u.tbf.rate_bps = 100000000;
	bfifo.u.fifo.limit = 153600;
	pfifo.u.fifo.limit = 100;
	set_addr(&src, U32_MATCH_SRC, "10.1.0.5", 32);
	src.u.u32.classid = 0x10010;
	dscp4.u.u32.dscp = 46;
	dscp6.u.u32.dscp = 10;
	set_addr(&src6, U32_MATCH_SRC, "fd00::1:5", 128);
	src6.u.u32.classid = 0x10030;
	src6.handle = 0x123;
	ds4.u.u32.match = U32_MATCH_DSFIELD;
	ds4.u.u32.tos = 46 << 2;
	ds4.u.u32.classid = 0x10010;
	ds6.u.u32.match = U32_MATCH_DSFIELD;
	ds6.u.u32.tos = 10 << 2;
	ds6.u.u32.classid = 0x10030;
	all.u.u32.family = 0;
	all.u.u32.classid = 0x10020;

	const struct {
		const struct tc_spec *s;
		const char *verb;
		const char *want;
	} cases[] = {
	        {&htb, "replace", "qdisc replace dev eth0 root handle 1: htb default 10 r2q 10"},
	        {&cls, "replace",
	         "class replace dev eth0 parent 1: classid 1:10 htb rate 500mbit ceil 500mbit burst 64kb cburst 64kb "
	         "quantum 60000 prio 0"},
	        {&src, "replace",
	         "filter replace dev eth0 parent ffff:fff3 protocol ip prio 1 u32 match ip src 10.1.0.5/32 flowid "
	         "1:10"},
	        {&clsact, "replace", "qdisc replace dev eth0 clsact"},
	        {&clsact, "del", "qdisc del dev eth0 clsact"},
	        {&fqc, "replace",
	         "qdisc replace dev eth0 root handle 1: fq_codel limit 1024 target 1ms interval 10ms ecn"},
	        {&fq, "add",
	         "qdisc add dev eth0 parent 1:30 handle 30: fq limit 10000 flow_limit 100 quantum 3028 maxrate 1gbit "
	         "ce_threshold 1ms pacing"},
	        {&tbf, "replace", "qdisc replace dev eth0 root handle 2: tbf rate 100mbit burst 14100b limit 26600b"},
	        {&bfifo, "replace", "qdisc replace dev eth0 parent 1:10 handle 10: bfifo limit 150kb"},
	        {&pfifo, "replace", "qdisc replace dev eth0 root pfifo limit 100"},
	        {&prio, "replace",
	         "qdisc replace dev eth0 root handle 1: prio bands 3 priomap 1 2 2 2 1 2 0 0 1 1 1 1 1 1 1 1"},
	        {&dscp4, "replace",
	         "filter replace dev eth0 parent ffff:fff3 protocol ip prio 1 u32 match u32 0 0 action pedit ex munge "
	         "ip "
	         "dsfield set 0xb8 retain 0xfc pipe action csum ip"},
	        {&dscp6, "replace",
	         "filter replace dev eth0 parent ffff:fff3 protocol ipv6 prio 2 u32 match u32 0 0 action pedit ex "
	         "munge "
	         "ip6 traffic_class set 0x28 retain 0xfc"},
	        {&src6, "replace",
	         "filter replace dev eth0 parent 1: protocol ipv6 prio 11 handle ::123 u32 match ip6 src fd00::1:5/128 "
	         "flowid 1:30"},
	        {&ds4, "replace",
	         "filter replace dev eth0 parent 1: protocol ip prio 20 u32 match ip dsfield 0xb8 0xfc flowid 1:10"},
	        {&ds6, "replace",
	         "filter replace dev eth0 parent 1: protocol ipv6 prio 21 u32 match ip6 priority 0x28 0xfc flowid "
	         "1:30"},
	        {&all, "replace",
	         "filter replace dev eth0 parent 1: protocol all prio 5 u32 match u32 0 0 flowid 1:20"},
	        /* delete names only the object (tc refuses e.g. "htb" class options without rate) */
	        {&htb, "del", "qdisc del dev eth0 root handle 1:"},
	        {&cls, "delete", "class delete dev eth0 parent 1: classid 1:10"},
	        {&src6, "del", "filter del dev eth0 parent 1: protocol ipv6 prio 11 handle ::123 u32"},
	        {&src, "del", "filter del dev eth0 parent ffff:fff3 protocol ip prio 1"},
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		int r = tc_spec_format(cases[i].s, "eth0", cases[i].verb, buf, sizeof(buf));
		CHECK_INT(r, 0);
		CHECK_STR(buf, cases[i].want);
	}
	/* too small a buffer is reported, and the output stays terminated */
	CHECK_INT(tc_spec_format(&cls, "eth0", "replace", buf, 20), -ENOBUFS);
	CHECK_INT((long long)strlen(buf), 19);
	/* a kind that does not fit its type */
	struct tc_spec bad = cls;
	bad.kind = TC_KIND_FQ;
	CHECK_INT(tc_spec_format(&bad, "eth0", "replace", buf, sizeof(buf)), -EINVAL);
	bad.kind = _TC_KIND_INVALID;
	CHECK_INT(tc_spec_format(&bad, "eth0", "replace", buf, sizeof(buf)), -EINVAL);
}

/* The words errors name an object with (nl.c): tc_spec_format's, without
 * "dev"; the kind also on delete; never a failure. */
TEST(spec_describe)
{
	struct tc_spec htb = qdisc(TC_KIND_HTB, TC_H_ROOT, 0x10000);
	struct tc_spec tbf = qdisc(TC_KIND_TBF, TC_H_ROOT, 0x10000);
	struct tc_spec cls = {.type = TC_CLASS, .kind = TC_KIND_HTB_CLASS, .parent = 0x10000, .handle = 0x10010};
	struct tc_spec clsact = qdisc(TC_KIND_CLSACT, TC_H_CLSACT, 0);
	struct tc_spec src6 = u32_filter(0x10000, 11, ETH_P_IPV6);
	struct tc_spec all = u32_filter(0x10000, 10, ETH_P_IP);
	struct tc_spec bad_prefix = u32_filter(0x10000, 12, ETH_P_IP);
	struct tc_spec wrong_type = cls, no_kind = htb;
	char buf[TC_FORMAT_MAX], small[24];

	htb.u.htb = (struct tc_htb){.defcls = 0x10, .r2q = 10};
	tbf.u.tbf.rate_bps = 100000000;
	cls.u.htb_class = (struct tc_htb_class){.rate_bps = 500000000, .quantum_bytes = 60000};
	set_addr(&src6, U32_MATCH_SRC, "fd00::1:5", 128);
	src6.u.u32.classid = 0x10030;
	src6.handle = 0x123;
	all.handle = 0x80000123;
	set_addr(&bad_prefix, U32_MATCH_SRC, "10.1.0.5", 32);
	bad_prefix.u.u32.prefix_len = 40; /* format refuses: the options are left out */
	wrong_type.kind = TC_KIND_FQ;
	no_kind.kind = _TC_KIND_INVALID;

	const struct {
		const struct tc_spec *s;
		const char *verb;
		const char *want;
	} cases[] = {
	        {&htb, "replace", "qdisc replace root handle 1: htb default 10 r2q 10"},
	        {&tbf, "add", "qdisc add root handle 1: tbf rate 100mbit burst 14100b limit 26600b"},
	        {&cls, "replace", "class replace parent 1: classid 1:10 htb rate 500mbit quantum 60000 prio 0"},
	        {&clsact, "delete", "qdisc delete clsact"},
	        {&src6, "replace",
	         "filter replace parent 1: protocol ipv6 prio 11 handle ::123 u32 match ip6 src fd00::1:5/128 flowid "
	         "1:30"},
	        /* delete: the object and its kind, no options (what the request carries) */
	        {&htb, "delete", "qdisc delete root handle 1: htb"},
	        {&tbf, "delete", "qdisc delete root handle 1: tbf"},
	        {&cls, "delete", "class delete parent 1: classid 1:10 htb"},
	        {&all, "delete", "filter delete parent 1: protocol ip prio 10 handle 800::123 u32"},
	        /* what tc_spec_format refuses is still named */
	        {&bad_prefix, "replace", "filter replace parent 1: protocol ip prio 12 u32"},
	        {&wrong_type, "replace", "class replace parent 1: classid 1:10 fq"},
	        {&no_kind, "replace", "qdisc replace root handle 1:"},
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		tc_spec_describe(cases[i].s, cases[i].verb, buf, sizeof(buf));
		CHECK_STR(buf, cases[i].want);
	}
	CHECK_INT(tc_spec_format(&bad_prefix, "eth0", "replace", buf, sizeof(buf)), -EINVAL);
	CHECK_INT(tc_spec_format(&wrong_type, "eth0", "replace", buf, sizeof(buf)), -EINVAL);
	/* too small a buffer: cut, terminated */
	tc_spec_describe(&htb, "replace", small, sizeof(small));
	CHECK_STR(small, "qdisc replace root hand");
}

/* --- fill() against tc's own encoding --- */

TEST(fill_equals_tc_qdiscs)
{
	struct tc_spec fq = qdisc(TC_KIND_FQ, TC_H_ROOT, 0);
	struct tc_spec fqc = qdisc(TC_KIND_FQ_CODEL, TC_H_ROOT, 0);
	struct tc_spec bfifo = qdisc(TC_KIND_BFIFO, TC_H_ROOT, 0);
	struct tc_spec pfifo = qdisc(TC_KIND_PFIFO, TC_H_ROOT, 0);
	struct tc_spec prio = qdisc(TC_KIND_PRIO, TC_H_ROOT, 0);
	struct tc_spec htb = qdisc(TC_KIND_HTB, TC_H_ROOT, 0x10000);
	static const uint8_t map[TC_PRIO_MAX + 1] = {1, 2, 2, 2, 1, 2, 0, 0, 1, 1, 1, 1, 1, 1, 3, 1};

	fq.u.fq = (struct tc_fq){.limit_pkts = 100,
	                         .flow_limit_pkts = 10,
	                         .quantum_bytes = 3028,
	                         .ce_threshold_us = 1000,
	                         .maxrate_bps = 1000000000,
	                         .pacing = TRI_ON};
	check_golden(&fq, golden_fq, sizeof(golden_fq), 0);
	fqc.u.fq_codel = (struct tc_fq_codel){.limit_pkts = 100,
	                                      .flows = 64,
	                                      .quantum_bytes = 1514,
	                                      .target_us = 1000,
	                                      .interval_us = 10000,
	                                      .memory_limit_bytes = 4 << 20,
	                                      .ecn = TRI_ON,
	                                      .ce_threshold_us = 500};
	check_golden(&fqc, golden_fq_codel, sizeof(golden_fq_codel), 0);
	bfifo.u.fifo.limit = 150 * 1024;
	check_golden(&bfifo, golden_bfifo, sizeof(golden_bfifo), 0);
	pfifo.u.fifo.limit = 100;
	check_golden(&pfifo, golden_pfifo, sizeof(golden_pfifo), 0);
	prio.u.prio.bands = 4;
	memcpy(prio.u.prio.priomap, map, sizeof(map));
	/* tc appends an empty nest after the struct (addattr_nest_compat); the kernel reads the struct */
	check_golden(&prio, golden_prio, sizeof(golden_prio), sizeof(struct tc_prio_qopt));
	htb.u.htb = (struct tc_htb){.defcls = 0x10, .r2q = 10};
	check_golden(&htb, golden_htb, sizeof(golden_htb), 0);
}

TEST(fill_equals_tc_u32)
{
	struct tc_spec pedit4 = u32_filter(TC_H_MAKE(TC_H_CLSACT, TC_H_MIN_EGRESS), 1, ETH_P_IP);
	struct tc_spec pedit6 = u32_filter(TC_H_MAKE(TC_H_CLSACT, TC_H_MIN_EGRESS), 2, ETH_P_IPV6);
	struct tc_spec src4 = u32_filter(0x10000, 1, ETH_P_IP);
	struct tc_spec dst6 = u32_filter(0x10000, 3, ETH_P_IPV6);
	struct tc_spec src6 = u32_filter(0x10000, 3, ETH_P_IPV6);
	struct tc_spec ds4 = u32_filter(0x10000, 4, ETH_P_IP);
	struct tc_spec ds6 = u32_filter(0x10000, 5, ETH_P_IPV6);
	struct tc_spec src4_pedit = u32_filter(TC_H_MAKE(TC_H_CLSACT, TC_H_MIN_EGRESS), 6, ETH_P_IP);
	struct tc_spec mirred = u32_filter(TC_H_MAKE(TC_H_CLSACT, TC_H_MIN_EGRESS), 1, ETH_P_IP);

	pedit4.u.u32.dscp = 46;
	check_golden(&pedit4, golden_u32_pedit4, sizeof(golden_u32_pedit4), 0);
	pedit6.u.u32.dscp = 10;
	check_golden(&pedit6, golden_u32_pedit6, sizeof(golden_u32_pedit6), 0);
	set_addr(&src4, U32_MATCH_SRC, "10.1.0.5", 32);
	src4.u.u32.classid = 0x10010;
	check_golden(&src4, golden_u32_src4, sizeof(golden_u32_src4), 0);
	set_addr(&dst6, U32_MATCH_DST, "2001:db8::", 40);
	dst6.u.u32.classid = 0x10010;
	check_golden(&dst6, golden_u32_dst6, sizeof(golden_u32_dst6), 0);
	set_addr(&src6, U32_MATCH_SRC, "2001:db8:1:2:3:4:5:6", 128);
	src6.u.u32.classid = 0x10030;
	check_golden(&src6, golden_u32_src6, sizeof(golden_u32_src6), 0);
	ds4.u.u32.match = U32_MATCH_DSFIELD;
	ds4.u.u32.tos = 0xb8;
	ds4.u.u32.classid = 0x10010;
	check_golden(&ds4, golden_u32_ds4, sizeof(golden_u32_ds4), 0);
	ds6.u.u32.match = U32_MATCH_DSFIELD;
	ds6.u.u32.tos = 0x28;
	ds6.u.u32.classid = 0x10030;
	check_golden(&ds6, golden_u32_ds6, sizeof(golden_u32_ds6), 0);
	set_addr(&src4_pedit, U32_MATCH_SRC, "10.0.0.0", 8);
	src4_pedit.u.u32.classid = 0x10010;
	src4_pedit.u.u32.dscp = 10;
	check_golden(&src4_pedit, golden_u32_src4_pedit, sizeof(golden_u32_src4_pedit), 0);
	mirred.u.u32.redirect_ifindex = 2;
	check_golden(&mirred, golden_u32_mirred, sizeof(golden_u32_mirred), 0);
}

TEST(parse_tc_encoding)
{
	/* what tc sends decodes to the spec aiqos would have built */
	struct tc_spec s = u32_filter(TC_H_MAKE(TC_H_CLSACT, TC_H_MIN_EGRESS), 6, ETH_P_IP);
	char a[INET6_ADDRSTRLEN];

	CHECK_INT(parse_golden(&s, golden_u32_src4_pedit, sizeof(golden_u32_src4_pedit)), 0);
	CHECK_INT(s.u.u32.match, U32_MATCH_SRC);
	CHECK_INT(s.u.u32.family, AF_INET);
	CHECK_INT(s.u.u32.prefix_len, 8);
	CHECK_STR(inet_ntop(AF_INET, s.u.u32.addr, a, sizeof(a)), "10.0.0.0");
	CHECK_INT(s.u.u32.classid, 0x10010);
	CHECK_INT(s.u.u32.dscp, 10);

	s = u32_filter(0, 2, ETH_P_IPV6);
	CHECK_INT(parse_golden(&s, golden_u32_pedit6, sizeof(golden_u32_pedit6)), 0);
	CHECK_INT(s.u.u32.match, U32_MATCH_ALL);
	CHECK_INT(s.u.u32.dscp, 10);
	CHECK_INT(s.u.u32.classid, 0);

	s = u32_filter(0, 3, ETH_P_IPV6);
	CHECK_INT(parse_golden(&s, golden_u32_dst6, sizeof(golden_u32_dst6)), 0);
	CHECK_INT(s.u.u32.match, U32_MATCH_DST);
	CHECK_INT(s.u.u32.prefix_len, 40);
	CHECK_STR(inet_ntop(AF_INET6, s.u.u32.addr, a, sizeof(a)), "2001:db8::");
	CHECK_INT(s.u.u32.dscp, -1);

	s = u32_filter(0, 5, ETH_P_IPV6);
	CHECK_INT(parse_golden(&s, golden_u32_ds6, sizeof(golden_u32_ds6)), 0);
	CHECK_INT(s.u.u32.match, U32_MATCH_DSFIELD);
	CHECK_INT(s.u.u32.tos, 0x28);
	CHECK_INT(s.u.u32.classid, 0x10030);

	s = qdisc(TC_KIND_FQ_CODEL, TC_H_ROOT, 0);
	CHECK_INT(parse_golden(&s, golden_fq_codel, sizeof(golden_fq_codel)), 0);
	CHECK_INT(s.u.fq_codel.target_us, 1000);
	CHECK_INT(s.u.fq_codel.ce_threshold_us, 500);
	CHECK_INT(s.u.fq_codel.ecn, TRI_ON);

	s = qdisc(TC_KIND_PRIO, TC_H_ROOT, 0);
	CHECK_INT(parse_golden(&s, golden_prio, sizeof(golden_prio)), 0);
	CHECK_INT(s.u.prio.bands, 4);
	CHECK_INT(s.u.prio.priomap[14], 3);
}

/* --- fill -> parse round trips --- */

TEST(round_trip_qdiscs)
{
	struct tc_spec d, o = {0};

	d = qdisc(TC_KIND_HTB, TC_H_ROOT, 0x10000);
	d.u.htb = (struct tc_htb){.defcls = 0x20, .r2q = 50};
	CHECK_INT(round_trip(&d, &o), 0);
	CHECK_INT(o.u.htb.defcls, 0x20);
	CHECK_INT(o.u.htb.r2q, 50);
	CHECK(tc_spec_match(&d, &o));
	d.u.htb = (struct tc_htb){0}; /* r2q unset: tc's default 10 is sent */
	CHECK_INT(round_trip(&d, &o), 0);
	CHECK_INT(o.u.htb.r2q, 10);
	CHECK(tc_spec_match(&d, &o));

	d = qdisc(TC_KIND_TBF, TC_H_ROOT, 0x20000);
	d.u.tbf = (struct tc_tbf){.rate_bps = 400000000, .burst_bytes = 65536, .limit_bytes = 131072};
	CHECK_INT(round_trip(&d, &o), 0);
	CHECK_INT(o.u.tbf.rate_bps, 400000000);
	CHECK_INT(o.u.tbf.limit_bytes, 131072);
	CHECK(o.u.tbf.burst_bytes >= 65536 - 8 && o.u.tbf.burst_bytes <= 65536 + 8);
	CHECK(tc_spec_match(&d, &o));
	d.u.tbf = (struct tc_tbf){.rate_bps = 80ULL * 1000 * 1000 * 1000}; /* 10 GB/s: 64-bit rate */
	CHECK_INT(round_trip(&d, &o), 0);
	CHECK_INT(o.u.tbf.rate_bps, 80ULL * 1000 * 1000 * 1000);
	CHECK(o.u.tbf.limit_bytes > 0); /* the kernel needs a queue */
	CHECK(tc_spec_match(&d, &o));

	d = qdisc(TC_KIND_FQ, TC_H_ROOT, 0);
	d.u.fq = (struct tc_fq){.limit_pkts = 10000,
	                        .flow_limit_pkts = 100,
	                        .quantum_bytes = 3028,
	                        .ce_threshold_us = 1000,
	                        .maxrate_bps = 8000000000ULL,
	                        .pacing = TRI_OFF};
	CHECK_INT(round_trip(&d, &o), 0);
	CHECK_INT(o.u.fq.ce_threshold_us, 1000);
	CHECK_INT(o.u.fq.maxrate_bps, 8000000000ULL);
	CHECK_INT(o.u.fq.pacing, TRI_OFF);
	CHECK(tc_spec_match(&d, &o));

	d = qdisc(TC_KIND_FQ_CODEL, TC_H_ROOT, 0);
	d.u.fq_codel = (struct tc_fq_codel){.target_us = 1000,
	                                    .interval_us = 10000,
	                                    .limit_pkts = 1024,
	                                    .flows = 1024,
	                                    .quantum_bytes = 1514,
	                                    .ce_threshold_us = 1000,
	                                    .memory_limit_bytes = 8 << 20,
	                                    .ecn = TRI_OFF};
	CHECK_INT(round_trip(&d, &o), 0);
	CHECK_INT(o.u.fq_codel.interval_us, 10000);
	CHECK_INT(o.u.fq_codel.memory_limit_bytes, 8 << 20);
	CHECK_INT(o.u.fq_codel.ecn, TRI_OFF);
	CHECK(tc_spec_match(&d, &o));

	d = qdisc(TC_KIND_BFIFO, 0x10010, 0x100000);
	d.u.fifo.limit = 200000;
	CHECK_INT(round_trip(&d, &o), 0);
	CHECK_INT(o.u.fifo.limit, 200000);
	CHECK(tc_spec_match(&d, &o));
	d.kind = TC_KIND_PFIFO;
	d.u.fifo.limit = 100;
	CHECK_INT(round_trip(&d, &o), 0);
	CHECK_INT(o.u.fifo.limit, 100);
	CHECK(tc_spec_match(&d, &o));

	d = qdisc(TC_KIND_PRIO, TC_H_ROOT, 0x10000);
	d.u.prio.bands = 3;
	memset(d.u.prio.priomap, 1, sizeof(d.u.prio.priomap));
	CHECK_INT(round_trip(&d, &o), 0);
	CHECK_INT(o.u.prio.bands, 3);
	CHECK_INT(o.u.prio.priomap[0], 1);
	CHECK(tc_spec_match(&d, &o));

	d = qdisc(TC_KIND_CLSACT, TC_H_CLSACT, 0);
	CHECK_INT(round_trip(&d, &o), 0);
	CHECK(tc_spec_match(&d, &o));
}

TEST(round_trip_htb_class)
{
	static const struct tc_htb_class cases[] = {
	        {.rate_bps = 500000000,
	         .ceil_bps = 500000000,
	         .burst_bytes = 65536,
	         .cburst_bytes = 65536,
	         .quantum_bytes = 60000,
	         .prio = 0},
	        {.rate_bps = 50000000, .ceil_bps = 500000000, .burst_bytes = 131072, .cburst_bytes = 1600, .prio = 7},
	        {.rate_bps = 1000000, .prio = 3},                                     /* default ceil, bursts */
	        {.rate_bps = 40000000000ULL, .ceil_bps = 100000000000ULL, .prio = 1}, /* > 2^32 bytes/s: RATE64 */
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct tc_spec d = {.type = TC_CLASS, .kind = TC_KIND_HTB_CLASS, .parent = 0x10001, .handle = 0x10010};
		struct tc_spec o = {0};
		const struct tc_htb_class *c = &o.u.htb_class;

		d.u.htb_class = cases[i];
		CHECK_INT(round_trip(&d, &o), 0);
		CHECK_INT(c->rate_bps, cases[i].rate_bps);
		CHECK_INT(c->ceil_bps, cases[i].ceil_bps ? cases[i].ceil_bps : cases[i].rate_bps);
		CHECK_INT(c->prio, cases[i].prio);
		CHECK_INT(c->quantum_bytes, cases[i].quantum_bytes);
		if (!cases[i].burst_bytes)
			CHECK(c->burst_bytes >= cases[i].rate_bps / 8 / 1000 + 1600 - 2); /* tc's default bucket */
		CHECK(tc_spec_match(&d, &o));
	}
}

/* L4: the kernel keeps an HTB class's rate in bytes per second and its
 * buckets as u32 ticks (64 ns) exactly as sent (htb_change_class: buffer =
 * ticks << 6; htb_dump_class: ticks = buffer >> 6), so fill -> parse is what
 * a dump reads back. The desired class must match it at every rate: rates
 * that are not a multiple of 8 bit/s and buckets longer than 2^32 ticks
 * (512 KiB below ~15 kbit/s) included, else every drift repair re-applies. */
TEST(round_trip_htb_burst_at_any_rate)
{
	static const uint64_t rates[] = {
	        1000,    8000,    20000,   100000,   1000000,  1485001,     2970000,         3000000,
	        3000003, 7000000, 6930007, 10000000, 99999999, 25000000000, 400000000001ULL,
	};
	static const uint32_t bursts[] = {0, 1600, 131072, 262144, 524288, 16 << 20};

	for (size_t i = 0; i < ARRAY_SIZE(rates); i++)
		for (size_t k = 0; k < ARRAY_SIZE(bursts); k++) {
			struct tc_spec d = {
			        .type = TC_CLASS, .kind = TC_KIND_HTB_CLASS, .parent = 0x10001, .handle = 0x10010};
			struct tc_spec o = {0};

			d.u.htb_class = (struct tc_htb_class){.rate_bps = rates[i],
			                                      .ceil_bps = rates[i] * 3 + 1,
			                                      .burst_bytes = bursts[k],
			                                      .cburst_bytes = bursts[k],
			                                      .prio = 1};
			CHECK_INT(round_trip(&d, &o), 0);
			if (!tc_spec_match(&d, &o))
				fprintf(stderr,
				        "  rate %" PRIu64 " burst %" PRIu32 ": read back burst %" PRIu32
				        " cburst %" PRIu32 "\n",
				        rates[i], bursts[k], o.u.htb_class.burst_bytes, o.u.htb_class.cburst_bytes);
			CHECK(tc_spec_match(&d, &o));
		}
}

TEST(round_trip_u32)
{
	static const struct {
		uint16_t protocol;
		enum u32_match m;
		const char *addr;
		uint8_t prefix;
		uint8_t tos;
		uint32_t classid;
		int dscp;
	} cases[] = {
	        {ETH_P_IP, U32_MATCH_ALL, NULL, 0, 0, 0, 46},
	        {ETH_P_IP, U32_MATCH_ALL, NULL, 0, 0, 0x10010, -1},
	        {ETH_P_IP, U32_MATCH_SRC, "10.1.0.5", 32, 0, 0x10010, -1},
	        {ETH_P_IP, U32_MATCH_DST, "192.168.0.0", 16, 0, 0x10020, 10},
	        {ETH_P_IP, U32_MATCH_SRC, "10.128.0.0", 9, 0, 0x10010, 0},
	        {ETH_P_IPV6, U32_MATCH_SRC, "fd00::1:5", 128, 0, 0x10030, -1},
	        {ETH_P_IPV6, U32_MATCH_DST, "2001:db8:ff00::", 40, 0, 0x10030, 63},
	        {ETH_P_IPV6, U32_MATCH_SRC, "2001:db8::", 32, 0, 0x10030, -1},
	        {ETH_P_IPV6, U32_MATCH_SRC, "2001:db8:1:2:3::", 80, 0, 0x10030, -1},
	        {ETH_P_IPV6, U32_MATCH_ALL, NULL, 0, 0, 0, 10},
	        {ETH_P_IP, U32_MATCH_DSFIELD, NULL, 0, 0xb8, 0x10010, -1},
	        {ETH_P_IPV6, U32_MATCH_DSFIELD, NULL, 0, 0x28, 0x10030, -1},
	        {ETH_P_ALL, U32_MATCH_ALL, NULL, 0, 0, 0x10020, -1},
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct tc_spec d = u32_filter(0x10000, 10, cases[i].protocol), o = {0};

		d.u.u32.match = cases[i].m;
		if (cases[i].addr)
			set_addr(&d, cases[i].m, cases[i].addr, cases[i].prefix);
		d.u.u32.tos = cases[i].tos;
		d.u.u32.classid = cases[i].classid;
		d.u.u32.dscp = cases[i].dscp;
		CHECK_INT(round_trip(&d, &o), 0);
		CHECK_INT(o.u.u32.match, cases[i].m);
		CHECK_INT(o.u.u32.prefix_len, cases[i].prefix);
		CHECK(memcmp(o.u.u32.addr, d.u.u32.addr, 16) == 0);
		CHECK_INT(o.u.u32.tos, cases[i].tos);
		CHECK_INT(o.u.u32.classid, cases[i].classid);
		CHECK_INT(o.u.u32.dscp, cases[i].dscp);
		if (!tc_spec_match(&d, &o)) {
			fprintf(stderr, "  case %zu: round trip does not match\n", i);
			t_failed_now = 1;
		}
	}
}

/* --- unset fields emit nothing; the kernel-required ones are always there --- */

TEST(fill_unset_fields)
{
	struct tc_spec fq = qdisc(TC_KIND_FQ, TC_H_ROOT, 0), fqc = qdisc(TC_KIND_FQ_CODEL, TC_H_ROOT, 0);
	struct tc_spec fifo = qdisc(TC_KIND_BFIFO, TC_H_ROOT, 0), prio = qdisc(TC_KIND_PRIO, TC_H_ROOT, 0);
	struct tc_spec clsact = qdisc(TC_KIND_CLSACT, TC_H_CLSACT, 0);
	struct nlattr *tb[TCA_FQ_MAX + 1];
	struct nl_msg *msg;
	int r, n;

	/* fq with only pacing: one attribute */
	fq.u.fq.pacing = TRI_ON;
	msg = fill_msg(&fq, &r);
	CHECK(msg != NULL);
	if (msg) {
		struct nlattr *a, *opts = opts_of(msg);
		int rem;

		n = 0;
		nla_for_each_nested(a, opts, rem) n++;
		CHECK_INT(n, 1);
		CHECK_INT(nla_parse_nested(tb, TCA_FQ_MAX, opts, NULL), 0);
		CHECK(tb[TCA_FQ_RATE_ENABLE] && nla_get_u32(tb[TCA_FQ_RATE_ENABLE]) == 1);
		nlmsg_free(msg);
	}
	/* fq_codel all unset: nothing (libnl drops the empty nest) */
	msg = fill_msg(&fqc, &r);
	CHECK(msg && opts_of(msg) == NULL);
	nlmsg_free(msg);
	/* fifo without limit and clsact: no TCA_OPTIONS at all */
	msg = fill_msg(&fifo, &r);
	CHECK(msg && opts_of(msg) == NULL);
	nlmsg_free(msg);
	msg = fill_msg(&clsact, &r);
	CHECK(msg && opts_of(msg) == NULL);
	nlmsg_free(msg);
	/* prio needs its struct: defaults sent */
	msg = fill_msg(&prio, &r);
	CHECK(msg && opts_of(msg) && nla_len(opts_of(msg)) == sizeof(struct tc_prio_qopt));
	if (msg) {
		const struct tc_prio_qopt *q = nla_data(opts_of(msg));
		CHECK_INT(q->bands, 3);
		CHECK_INT(q->priomap[6], 0);
		nlmsg_free(msg);
	}
}

TEST(fill_rejects_invalid)
{
	struct tc_spec cls = {.type = TC_CLASS, .kind = TC_KIND_HTB_CLASS, .parent = 0x10000, .handle = 0x10010};
	struct tc_spec tbf = qdisc(TC_KIND_TBF, TC_H_ROOT, 0), prio = qdisc(TC_KIND_PRIO, TC_H_ROOT, 0);
	struct tc_spec u = u32_filter(0x10000, 1, ETH_P_IPV6);
	struct nl_msg *msg;
	int r;

	msg = fill_msg(&cls, &r); /* no rate */
	CHECK(msg == NULL);
	CHECK_INT(r, -EINVAL);
	cls.u.htb_class.rate_bps = 1000000;
	cls.u.htb_class.prio = 8;
	msg = fill_msg(&cls, &r);
	CHECK(msg == NULL);
	CHECK_INT(r, -ERANGE);
	msg = fill_msg(&tbf, &r);
	CHECK(msg == NULL);
	CHECK_INT(r, -EINVAL);
	prio.u.prio.bands = 1;
	msg = fill_msg(&prio, &r);
	CHECK(msg == NULL);
	CHECK_INT(r, -ERANGE);
	prio.u.prio.bands = 2;
	prio.u.prio.priomap[3] = 2; /* band out of range */
	msg = fill_msg(&prio, &r);
	CHECK(msg == NULL);
	CHECK_INT(r, -ERANGE);
	/* an IPv4 address match on an IPv6 filter would read the wrong offsets */
	u.u.u32.family = AF_INET;
	set_addr(&u, U32_MATCH_SRC, "10.0.0.1", 32);
	msg = fill_msg(&u, &r);
	CHECK(msg == NULL);
	CHECK_INT(r, -EINVAL);
	u = u32_filter(0x10000, 1, ETH_P_IP);
	set_addr(&u, U32_MATCH_SRC, "10.0.0.1", 33);
	msg = fill_msg(&u, &r);
	CHECK(msg == NULL);
	CHECK_INT(r, -ERANGE);
	u = u32_filter(0x10000, 1, ETH_P_IP);
	u.u.u32.dscp = 64;
	msg = fill_msg(&u, &r);
	CHECK(msg == NULL);
	CHECK_INT(r, -ERANGE);
	/* DSCP rewrite needs a family */
	u = u32_filter(0x10000, 1, ETH_P_ALL);
	u.u.u32.family = 0;
	u.u.u32.dscp = 10;
	msg = fill_msg(&u, &r);
	CHECK(msg == NULL);
	CHECK_INT(r, -EAFNOSUPPORT);
}

TEST(u32_parse_not_ours)
{
	struct tc_spec s = u32_filter(0x10000, 1, ETH_P_IP);
	uint32_t buf[64];
	struct nlattr *opts = (struct nlattr *)buf;
	struct tc_u32_sel *sel;
	struct nl_msg *msg;
	int r;

	/* no options / hash table entry (divisor only): -ENODATA */
	CHECK_INT(tc_kind_get(TC_KIND_U32)->parse(NULL, &s), -ENODATA);
	msg = nlmsg_alloc_simple(RTM_NEWTFILTER, 0);
	CHECK(msg != NULL);
	if (!msg)
		return;
	{
		struct tcmsg t = {0};
		struct nlattr *n;
		nlmsg_append(msg, &t, sizeof(t), NLMSG_ALIGNTO);
		n = nla_nest_start(msg, TCA_OPTIONS);
		nla_put_u32(msg, TCA_U32_DIVISOR, 1);
		nla_nest_end(msg, n);
		CHECK_INT(tc_kind_get(TC_KIND_U32)->parse(opts_of(msg), &s), -ENODATA);
	}
	nlmsg_free(msg);

	/* a selector with a key aiqos never makes (TCP port) is not representable */
	memcpy(buf, golden_u32_src4, sizeof(golden_u32_src4));
	sel = (struct tc_u32_sel *)((uint8_t *)buf + NLA_HDRLEN + 8 + NLA_HDRLEN); /* after CLASSID */
	CHECK_INT(sel->nkeys, 1);
	sel->keys[0].off = 20;
	r = tc_kind_get(TC_KIND_U32)->parse(opts, &s);
	CHECK_INT(r, -EOPNOTSUPP);
	sel->keys[0].off = 12;
	sel->keys[0].mask = htonl(0xff00ff00); /* not a prefix */
	CHECK_INT(tc_kind_get(TC_KIND_U32)->parse(opts, &s), -EOPNOTSUPP);
	sel->keys[0].mask = htonl(0xffffffff);
	sel->flags |= TC_U32_OFFSET;
	CHECK_INT(tc_kind_get(TC_KIND_U32)->parse(opts, &s), -EOPNOTSUPP);
	sel->flags = TC_U32_TERMINAL;
	CHECK_INT(tc_kind_get(TC_KIND_U32)->parse(opts, &s), 0);
}

/* --- match and identity --- */

TEST(match_unset_fields)
{
	struct tc_spec d = qdisc(TC_KIND_FQ_CODEL, TC_H_ROOT, 0x10000), o = d;

	/* observed has everything set (as a dump does), desired only some */
	o.u.fq_codel = (struct tc_fq_codel){.target_us = 999,
	                                    .interval_us = 9999,
	                                    .limit_pkts = 10240,
	                                    .flows = 1024,
	                                    .quantum_bytes = 1514,
	                                    .memory_limit_bytes = 32 << 20,
	                                    .ecn = TRI_ON};
	d.u.fq_codel = (struct tc_fq_codel){0};
	CHECK(tc_spec_match(&d, &o));
	d.u.fq_codel.target_us = 1000; /* kernel rounding: 1000us reads back as 999us */
	d.u.fq_codel.interval_us = 10000;
	d.u.fq_codel.ecn = TRI_ON;
	CHECK(tc_spec_match(&d, &o));
	d.u.fq_codel.target_us = 5000;
	CHECK(!tc_spec_match(&d, &o));
	d.u.fq_codel.target_us = 1000;
	d.u.fq_codel.ecn = TRI_OFF;
	CHECK(!tc_spec_match(&d, &o));
	d.u.fq_codel.ecn = TRI_UNSET;
	d.u.fq_codel.limit_pkts = 1000;
	CHECK(!tc_spec_match(&d, &o));
	d.u.fq_codel.limit_pkts = 0;
	d.u.fq_codel.ce_threshold_us = 1000; /* observed: disabled */
	CHECK(!tc_spec_match(&d, &o));

	/* fq: maxrate unlimited, pacing tristate */
	d = qdisc(TC_KIND_FQ, TC_H_ROOT, 0);
	o = d;
	o.u.fq = (struct tc_fq){.limit_pkts = 10000, .flow_limit_pkts = 100, .quantum_bytes = 3028, .pacing = TRI_ON};
	CHECK(tc_spec_match(&d, &o));
	d.u.fq.pacing = TRI_OFF;
	CHECK(!tc_spec_match(&d, &o));
	d.u.fq.pacing = TRI_UNSET;
	d.u.fq.maxrate_bps = 80ULL * 1000 * 1000 * 1000 * 1000; /* beyond u32 bytes/s = unlimited */
	CHECK(tc_spec_match(&d, &o));
	d.u.fq.maxrate_bps = 1000000000;
	CHECK(!tc_spec_match(&d, &o));

	/* kind must agree */
	o = qdisc(TC_KIND_FQ_CODEL, TC_H_ROOT, 0);
	CHECK(!tc_spec_match(&d, &o));
	o.kind = _TC_KIND_INVALID;
	CHECK(!tc_spec_match(&d, &o));
}

TEST(match_htb_class)
{
	struct tc_spec d = {.type = TC_CLASS, .kind = TC_KIND_HTB_CLASS, .parent = 0x10000, .handle = 0x10010};
	struct tc_spec o = d;

	o.parent = TC_H_ROOT; /* how the kernel reports a class made under "1:" */
	o.u.htb_class = (struct tc_htb_class){.rate_bps = 500000000,
	                                      .ceil_bps = 1000000000,
	                                      .burst_bytes = 65532,
	                                      .cburst_bytes = 126000,
	                                      .quantum_bytes = 62500,
	                                      .prio = 1};
	d.u.htb_class = (struct tc_htb_class){.rate_bps = 500000000, .prio = 1};
	CHECK(tc_spec_same_object(&d, &o));
	CHECK(tc_spec_match(&d, &o));       /* ceil, bursts, quantum unset: ignored */
	d.u.htb_class.rate_bps = 500000007; /* same bytes/s */
	CHECK(tc_spec_match(&d, &o));
	d.u.htb_class.rate_bps = 500000008;
	CHECK(!tc_spec_match(&d, &o));
	d.u.htb_class.rate_bps = 500000000;
	d.u.htb_class.burst_bytes = 65536; /* within a tick conversion */
	CHECK(tc_spec_match(&d, &o));
	d.u.htb_class.burst_bytes = 70000;
	CHECK(!tc_spec_match(&d, &o));
	d.u.htb_class.burst_bytes = 0;
	d.u.htb_class.quantum_bytes = 60000;
	CHECK(!tc_spec_match(&d, &o));
	d.u.htb_class.quantum_bytes = 0;
	d.u.htb_class.prio = 0; /* prio 0 is a real value */
	CHECK(!tc_spec_match(&d, &o));
	d.u.htb_class.prio = 1;
	d.handle = 0x10020;
	CHECK(!tc_spec_same_object(&d, &o));
}

TEST(match_u32)
{
	struct tc_spec d = u32_filter(0x10000, 10, ETH_P_IP), o;

	set_addr(&d, U32_MATCH_SRC, "10.1.0.5", 32);
	d.u.u32.classid = 0x10010;
	d.handle = 0x123; /* node id only: the kernel picks the hash table */
	o = d;
	o.handle = 0x80100123;
	o.u.u32.dscp = 46;
	CHECK(tc_spec_same_object(&d, &o));
	CHECK(tc_spec_match(&d, &o)); /* dscp -1 = unset */
	o.handle = 0x80100124;
	CHECK(!tc_spec_same_object(&d, &o));
	CHECK(!tc_spec_match(&d, &o));
	o.handle = 0x80100123;
	o.u.u32.classid = 0x10020;
	CHECK(!tc_spec_match(&d, &o));
	o.u.u32.classid = 0x10010;
	d.u.u32.dscp = 10;
	CHECK(!tc_spec_match(&d, &o));
	d.u.u32.dscp = 46;
	CHECK(tc_spec_match(&d, &o));
	/* other address or prefix, other match type */
	set_addr(&o, U32_MATCH_SRC, "10.1.0.6", 32);
	CHECK(!tc_spec_match(&d, &o));
	set_addr(&o, U32_MATCH_SRC, "10.1.0.5", 24);
	CHECK(!tc_spec_match(&d, &o));
	set_addr(&o, U32_MATCH_DST, "10.1.0.5", 32);
	CHECK(!tc_spec_match(&d, &o));
	o.u.u32.match = U32_MATCH_ALL;
	CHECK(!tc_spec_match(&d, &o));
	/* /0 is match-all */
	set_addr(&d, U32_MATCH_SRC, "0.0.0.0", 0);
	CHECK(tc_spec_match(&d, &o));
	/* classid unset: any */
	d.u.u32.classid = 0;
	o.u.u32.classid = 0x10030;
	CHECK(tc_spec_match(&d, &o));
	/* DS field */
	d.u.u32.match = U32_MATCH_DSFIELD;
	d.u.u32.tos = 0xb8;
	o.u.u32.match = U32_MATCH_DSFIELD;
	o.u.u32.tos = 0xb8;
	CHECK(tc_spec_match(&d, &o));
	o.u.u32.tos = 0x28;
	CHECK(!tc_spec_match(&d, &o));
	/* identity: prio, protocol, parent */
	o = d;
	o.prio = 11;
	CHECK(!tc_spec_same_object(&d, &o));
	o = d;
	o.protocol = ETH_P_IPV6;
	CHECK(!tc_spec_same_object(&d, &o));
	o = d;
	o.parent = TC_H_MAKE(TC_H_CLSACT, TC_H_MIN_EGRESS);
	CHECK(!tc_spec_same_object(&d, &o));
	/* full handles must be equal */
	d.handle = 0x80000800;
	o = d;
	o.handle = 0x80100800;
	CHECK(!tc_spec_same_object(&d, &o));
	/* a desired handle needs an observed one */
	o.handle = 0;
	CHECK(tc_spec_same_object(&d, &o));
	CHECK(!tc_spec_match(&d, &o));
}

TEST(identity_qdisc)
{
	struct tc_spec d = qdisc(TC_KIND_HTB, TC_H_ROOT, 0x10000), o = d;

	/* the default root qdisc (handle 0) holds the slot: same object, no match */
	o.kind = _TC_KIND_INVALID;
	o.handle = 0;
	CHECK(tc_spec_same_object(&d, &o));
	CHECK(!tc_spec_match(&d, &o));
	o = d;
	o.handle = 0x20000;
	CHECK(!tc_spec_same_object(&d, &o));
	o = d;
	o.parent = 0x10010;
	CHECK(!tc_spec_same_object(&d, &o));
	/* clsact: parent unset means its one place */
	{
		struct tc_spec c = qdisc(TC_KIND_CLSACT, 0, 0), oc = qdisc(TC_KIND_CLSACT, TC_H_CLSACT, 0xffff0000);
		CHECK(tc_spec_match(&c, &oc));
	}
	d.handle = 0; /* kernel picks: any handle */
	o = qdisc(TC_KIND_HTB, TC_H_ROOT, 0x8001);
	CHECK(tc_spec_match(&d, &o));
	o.type = TC_CLASS;
	CHECK(!tc_spec_same_object(&d, &o));
}

TEST(nl_errno)
{
	static const struct {
		int nle;
		int want;
	} cases[] = {
	        {0, 0},
	        {-NLE_NOMEM, -ENOMEM},
	        {-NLE_EXIST, -EEXIST},
	        {-NLE_OBJ_NOTFOUND, -ENOENT},
	        {-NLE_OPNOTSUPP, -EOPNOTSUPP},
	        {-NLE_INVAL, -EINVAL},
	        {-NLE_PERM, -EPERM},
	        {-NLE_NODEV, -ENODEV},
	        {-NLE_DUMP_INTR, -EINTR},
	        {-NLE_BUSY, -EBUSY},
	        {NLE_AGAIN, -EAGAIN},
	        {-9999, -EIO},
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++)
		CHECK_INT(nl_to_errno(cases[i].nle), cases[i].want);
}
