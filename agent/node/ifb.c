/* ifb.c — creating, raising and deleting aiqos's ifb devices (ifb.h). */
#include <linux/if.h>

#include <netlink/route/link.h>

#include "log.h"
#include "node/ifb.h"
#include "nl.h"
#include "util.h"

static int ifb_create(struct nl_sock *sk, const char *name, uint32_t mtu, int *ret_ifindex, struct error *err)
{
	struct rtnl_link *l = rtnl_link_alloc();
	struct link_info li;
	int r;

	if (!l)
		return error_set(err, ENOMEM, "create %s: out of memory", name);
	rtnl_link_set_name(l, name);
	r = rtnl_link_set_type(l, "ifb");
	if (r >= 0) {
		rtnl_link_set_flags(l, IFF_UP);
		if (mtu)
			rtnl_link_set_mtu(l, mtu);
		r = rtnl_link_add(sk, l, NLM_F_CREATE | NLM_F_EXCL);
	}
	rtnl_link_put(l);
	if (r < 0) {
		r = nl_to_errno(r);
		return error_set(err, -r, "create the ifb %s: %s", name, strerror(-r));
	}
	r = nl_link_get(sk, name, 0, &li, err);
	if (r < 0)
		return r;
	*ret_ifindex = li.ifindex;
	return 0;
}

/* Up, and the uplink's MTU when mtu != 0 (someone may have set it down or
 * changed it: mirred drops what it redirects to a device that is down). */
static int ifb_set_up(struct nl_sock *sk, const char *name, int ifindex, uint32_t mtu, struct error *err)
{
	struct rtnl_link *orig = rtnl_link_alloc(), *chg = rtnl_link_alloc();
	int r = -ENOMEM;

	if (orig && chg) {
		rtnl_link_set_ifindex(orig, ifindex);
		rtnl_link_set_flags(chg, IFF_UP);
		if (mtu)
			rtnl_link_set_mtu(chg, mtu);
		r = rtnl_link_change(sk, orig, chg, 0);
		r = r < 0 ? nl_to_errno(r) : 0;
	}
	if (orig)
		rtnl_link_put(orig);
	if (chg)
		rtnl_link_put(chg);
	if (r < 0)
		return error_set(err, -r, "set %s up: %s", name, strerror(-r));
	return 0;
}

/* Our ifb (kind ifb at ifindex) renamed behind our back gets its name back
 * (a device is renamed down; the caller sets it up), its tree with it. */
static int ifb_rename_back(struct nl_sock *sk, const char *name, int ifindex)
{
	struct rtnl_link *orig = rtnl_link_alloc(), *chg = rtnl_link_alloc();
	struct link_info li;
	int r = -ENOMEM;

	if (nl_link_get(sk, NULL, ifindex, &li, NULL) < 0 || !streq(li.kind, "ifb")) {
		r = -ENODEV;
	} else if (orig && chg) {
		rtnl_link_set_ifindex(orig, ifindex);
		rtnl_link_set_name(chg, name);
		r = rtnl_link_change(sk, orig, chg, 0);
		r = r < 0 ? nl_to_errno(r) : 0;
		if (r == 0)
			log_msg(LOG_LVL_WARN, "ifb renamed behind our back: its name given back", "ifb", name, "was",
			        li.ifname, (char *)NULL);
	}
	if (orig)
		rtnl_link_put(orig);
	if (chg)
		rtnl_link_put(chg);
	return r;
}

int ifb_ensure(struct nl_sock *sk, const char *name, uint32_t mtu, int *io_ifindex, bool *ret_renewed,
               struct error *err)
{
	struct link_info li;
	int r, ifindex = 0;

	*ret_renewed = false;
	r = nl_link_get(sk, name, 0, &li, NULL);
	if (r < 0 && *io_ifindex > 0 && ifb_rename_back(sk, name, *io_ifindex) == 0)
		r = nl_link_get(sk, name, 0, &li, NULL);
	if (r == 0 && !streq(li.kind, "ifb"))
		return error_set(err, EEXIST, "%s exists and is not an ifb (%s)", name,
		                 li.kind[0] ? li.kind : "physical");
	if (r < 0) {
		r = ifb_create(sk, name, mtu, &ifindex, err);
		if (r < 0)
			return r;
		log_msg(LOG_LVL_INFO, "ifb created", "ifb", name, (char *)NULL);
	} else {
		ifindex = li.ifindex;
		r = ifb_set_up(sk, name, ifindex, mtu && li.mtu != mtu ? mtu : 0, err);
		if (r < 0)
			return r;
	}
	*ret_renewed = *io_ifindex && *io_ifindex != ifindex;
	*io_ifindex = ifindex;
	return 0;
}

int ifb_delete(struct nl_sock *sk, const char *name, struct error *err)
{
	struct rtnl_link *l;
	struct link_info li;
	int r;

	if (nl_link_get(sk, name, 0, &li, NULL) < 0)
		return 0; /* gone already */
	if (!streq(li.kind, "ifb"))
		return error_set(err, EEXIST, "%s is a %s link, not an ifb: left alone", name,
		                 li.kind[0] ? li.kind : "physical");
	l = rtnl_link_alloc();
	if (!l)
		return error_set(err, ENOMEM, "delete %s: out of memory", name);
	rtnl_link_set_ifindex(l, li.ifindex);
	r = rtnl_link_delete(sk, l);
	rtnl_link_put(l);
	if (r < 0 && (r = nl_to_errno(r)) != -ENODEV)
		return error_set(err, -r, "delete %s: %s", name, strerror(-r));
	return 0;
}
