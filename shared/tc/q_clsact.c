/* q_clsact.c — the clsact pseudo-qdisc: the ingress/egress filter hooks
 * (parent TC_H_CLSACT, handle ffff:). It has no options; fill sends none so a
 * replace of an existing clsact is a no-op rather than a refused change. */
#include "tc_int.h"

const struct tc_kind tc_kind_clsact = {
        .name = "clsact",
        .type = TC_QDISC,
        TC_KIND_NO_OPTIONS,
};
