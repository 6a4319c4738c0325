/* q_mq.c — the mq qdisc: the multi-queue root that gives every tx queue of a
 * device its own child qdisc (and lock). It has no options; its classes
 * 1:1 .. 1:N (one per tx queue) exist by themselves and are not modelled as
 * objects: children are grafted with "parent <mq handle>:<queue + 1>". */
#include "tc_int.h"

const struct tc_kind tc_kind_mq = {
        .name = "mq",
        .type = TC_QDISC,
        TC_KIND_NO_OPTIONS,
};
