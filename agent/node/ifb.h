/* ifb.h — the ifb devices aiqos creates for its shapers (the download
 * tree's PLAN_IFB_NAME, downlink.h; the gated upload tree's
 * PLAN_IFB_UP_NAME, shaper.h): made to exist and be up, and deleted. A
 * device of that name that is not an ifb is never touched. */
#ifndef AIQOS_AGENT_IFB_H
#define AIQOS_AGENT_IFB_H

#include <stdbool.h>
#include <stdint.h>

#include "error.h"

struct nl_sock;

/* The ifb `name` exists and is up (created with mtu, 0 = the default, when
 * missing). *io_ifindex: the ifindex known so far (0 = none) in, the ifb's
 * out; *ret_renewed: the known one was replaced (deleted behind our back,
 * with its tree). -EEXIST when `name` is another kind of link. */
int ifb_ensure(struct nl_sock *sk, const char *name, uint32_t mtu, int *io_ifindex, bool *ret_renewed,
               struct error *err);
/* Delete the ifb `name`; gone already is fine. */
int ifb_delete(struct nl_sock *sk, const char *name, struct error *err);

#endif
