/* q_pfifo_fast.c — pfifo_fast: the kernel's default per-queue qdisc, three
 * FIFO bands served in strict priority, the band chosen by skb->priority
 * through a fixed priomap (1 2 2 2 1 2 0 0 1 1 1 1 1 1 1 1: TC_PRIO_INTERACTIVE
 * 6 -> band 0, TC_PRIO_BESTEFFORT 0 -> band 1, TC_PRIO_BULK 2 -> band 2). It
 * takes no options (init ignores them, change is unsupported); the kernel
 * dumps bands + priomap, which parse ignores. Present on every kernel, so it
 * is the per-queue priority qdisc of last resort under mq. */
#include "tc_int.h"

const struct tc_kind tc_kind_pfifo_fast = {
        .name = "pfifo_fast",
        .type = TC_QDISC,
        TC_KIND_NO_OPTIONS,
};
