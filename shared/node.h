/* node.h — the node planner of the agent: (pods on the node, agent config,
 * uplink facts, kernel capabilities) -> the node mode and the uplink plan
 * (qdiscs, HTB classes, u32 classifiers on DEV_UPLINK). Pure: no I/O, no
 * clock (callers pass now_ms), deterministic for equal inputs.
 *
 * MODE (docs/design.md §4). desired = idle (no inference and no
 * training pod), training (training [+default] only), inference (inference
 * [+default] only), mixed (both). node_mode_decide() adds hysteresis:
 * entering mixed is immediate; leaving it waits until mixed has not been
 * needed for hold_s seconds (flapping within the hold stays mixed). Every
 * other transition is immediate. The agent debounces pod events separately.
 *
 * SHARES (mixed; node_shares_compute): inference first, training a floor.
 * HTB serves every class its rate first and orders only the excess by prio,
 * so a class's rate is what it gets even when the others saturate: a
 * guaranteed share is also a cap under load. So the training class gets
 * only a floor (protection from starvation) and inference everything else:
 *   training  = floor, inference = 100% - floor - default, default = 5%
 *   prio: inference 0, default 1, training 2; ceil = the whole shaped rate
 * Work conserving both ways: idle inference capacity goes to training (prio
 * orders the excess, training borrows up to ceil), and inference borrows
 * what training leaves below its floor. The floor moves with the dominant
 * workload (weight w per class):
 *   - requested GPUs (sum) when any inference or training pod requests GPUs;
 *   - else declared egress bandwidth (sum) when every inference and training
 *     pod declares kubernetes.io/egress-bandwidth;
 *   - else the pod count.
 *   t     = w_train / (w_inf + w_train)   (0.5 without weights)
 *   floor = trainingFloor * (0.5 + t)     (0.5x .. 1.5x of trainingFloor)
 *   floor = min(floor, 100% - default - inferenceShare), clamped to 1..90 %
 * The floor holds at every instant (HTB serves it before any borrowing), so
 * it is also what an inference burst can never have: at trainingFloor 0.2
 * (23 % for 1 inference vs 2 training pods) Poisson bursts at 70 % of the
 * link met a 77 % ceiling and queued (p99 2 ms against 0.35 ms idle); the
 * default 0.05 keeps the inference ceiling within ~7 % of the link while
 * training keeps enough to never starve (docs/benchmarks.md P4).
 * inferenceShare (the old "guaranteed share of inference") is the minimum
 * guarantee of inference: it lowers the floor, never raises it. Rounded to
 * 0.1 % (per mille) so rates are exact integers. In training mode the
 * classes are default 5% / training 95%, in inference mode inference 95% /
 * default 5%.
 *
 * RATE. R = uplinkRate when configured, else the link speed (0 = unknown).
 * Every HTB class counts overhead_bytes (uplinkOverhead, default 24: the
 * Ethernet framing the kernel does not see) per packet on top of its
 * length, so a shaped rate stays below the wire's.
 * Shaping (HTB parent class at Rp = R * 99 %, "slightly below the rate so the
 * queue lives where aiqos manages it": the framing overhead is counted, and
 * aiqos is the only sender into that link, its output never above Rp) is used
 * when uplinkRate is configured,
 * when the link is virtual and R is known, or in mixed mode when the kernel
 * is known to lack the work-conserving `prio` (R known). Without a known R no
 * rate can be set and HTB cannot prioritise, so:
 *   training  -> root fq [ce_threshold] | fq_codel ecn [ce_threshold]
 *   inference -> root fq_codel target 1ms interval 10ms ecn limit 1024
 *   mixed     -> root prio (3 bands, AQM leaves) when prio is not known to be
 *                missing; else the inference-style root fq_codel: flow
 *                isolation (sparse flows first) protects request/response
 *                flows from bulk flows without any rate. A warning says to
 *                set uplinkRate.
 * A real NIC with a known speed and no uplinkRate is not shaped: training and
 * inference get the root AQM above; mixed gets prio (strict priority with AQM
 * leaves, work conserving at line rate) or, when prio is known to be missing,
 * the HTB tree at 99 % of the link speed. HTB itself known missing -> the
 * unshaped layout. Alternatives of a kind known to be missing are dropped
 * unless none would remain (then all are kept and the applier records the
 * failure: the item is skipped and the original qdisc stays), as plan_pod()
 * does. Caps also choose between structures (prio vs HTB): when the applier
 * learns a missing kind (e.g. prio on first contact), plan again.
 *
 * NO QUEUE. An uplink whose original root is `noqueue` (a veth, bond, VLAN
 * or macvlan: the driver hands each packet straight on, so no packet ever
 * waits there) gets no unshaped tree in any mode: a qdisc there would cost
 * CPU per packet at line rate and have nothing to order (the queue forms at
 * the slower link beyond, or at the NIC below). Only a configured uplinkRate
 * makes a queue there (HTB). A warning says what to set. The download tree
 * does not depend on it.
 *
 * A virtual link's reported speed (veth, virtio, bridge, dummy: 10000 Mb/s
 * whatever it carries) is never used as a rate: without uplinkRate such a
 * link is not shaped (speed_untrusted, and a warning with the config to set).
 *
 * MULTI-QUEUE (plan_node_mq.c). Unless shaping was configured (uplinkRate:
 * HTB, one lock), a device with several tx queues (and a queue: not
 * noqueue, above) keeps `mq` and every queue
 * gets its own child (its own lock): training fq [ce] | fq_codel; inference
 * fq_codel 1ms/10ms ecn; mixed prio (3 bands, pfifo_fast's priomap) with AQM
 * leaves | pfifo_fast (3 strict-priority bands, every kernel). In mixed mode
 * a BPF classifier at the clsact egress hook (bpf_cls.h) sets skb->priority
 * once per packet, before the queue is picked: inference 6 (band 0), default
 * 0 (band 1), training 2 (band 2); pods are entries of its map, not tc
 * objects (node_cls_entries). Objects: O(queues) + 2. Chosen only when a
 * child is available (kinds not known missing; training needs fq or fq_codel,
 * inference fq_codel, mixed prio or pfifo_fast plus clsact and bpf);
 * otherwise the single-queue structures below apply.
 *   uplink.root              mq 1: root
 *   uplink.q.<i>             child of queue i at 1:<i+1>, handle <0x100+i>:
 *   uplink.q.<i>.<class>     prio leaves at <0x100+i>:1..3, handle <0x1000+4i+band>:
 *   uplink.clsact            clsact (mixed)
 *   uplink.classifier        bpf aiqos_cls direct-action, clsact egress, pref 1, handle 1
 *
 * ITEMS (dev DEV_UPLINK, ids stable; parents before children):
 *   uplink.root               htb 1: default 20 r2q 10 | prio 1: bands 3 priomap all 1
 *                             | fq/fq_codel (unshaped)
 *   uplink.class.parent       htb 1:1  rate = ceil = Rp
 *   uplink.class.inference    htb 1:10 prio 0 rate share*Rp ceil Rp
 *   uplink.class.default      htb 1:20 prio 1
 *   uplink.class.training     htb 1:30 prio 2
 *   uplink.leaf.inference     10: under 1:10 (prio: 1:1) fq_codel 1ms/10ms ecn limit 1024 | bfifo 20 ms
 *   uplink.leaf.default       20: under 1:20 (prio: 1:2) fq_codel ecn | bfifo 5 ms
 *   uplink.leaf.training      30: under 1:30 (prio: 1:3) fq [ce] | fq_codel ecn [ce] | bfifo 20 ms
 *   uplink.pod.<H>.<n>        u32 on 1: prio 10 (ip) / 11 (ipv6), src addr/32|/128 -> class
 *   uplink.dscp.<class>.v4|v6 u32 on 1: prio 20 (ip) / 21 (ipv6), DS field & 0xfc -> class
 *   uplink.clsact, uplink.classifier   (HTB, clsact and bpf not known missing) the
 *                             CLASSIFIER: as in MULTI-QUEUE, last
 * Only the classes of the mode exist (mixed: 10 20 30; training: 20 30;
 * inference: 10 20); pods of a class without a class (and default pods) get
 * no filter: unclassified traffic goes to the default class (HTB default 20,
 * prio priomap -> band index 1 = class 1:2). FIFOs are sized in bytes (GSO
 * super-packets make packet limits meaningless) by time at the LINK rate
 * (Rp; the rate that drains a class when the others are idle, and the rate a
 * response burst arrives at): limit = clamp(Rp * queue time, min, 16 MiB),
 * min 512 KiB for inference (two 256 KiB responses: a burst is absorbed,
 * not dropped), 128 KiB default, 256 KiB training; without a known rate
 * they are sized for a nominal 1 Gbit/s. HTB quantum = clamp(class rate in bytes/s / 1000,
 * MTU + 14, 200000) (no "quantum of class is big" warning); burst = cburst =
 * clamp(2 ms at the rate (ceil for cburst), 128 KiB, 16 MiB). CE threshold
 * on training queues: 1 ms when any training pod runs a CE-marking profile
 * (training-dctcp).
 *
 * EDT (plan_node_mq.c). Shaping configured (uplinkRate) on a device with
 * several tx queues, where fq, mq, clsact and bpf are not known missing: no
 * HTB (one lock, and its per-packet class work: docs/lab/line-rate.md). `mq`
 * with fq on every queue, and the CLASSIFIER below with its EDT map
 * (bpf_cls.h) at Rp: it stamps each packet's departure time from one
 * shared link clock, fq holds it until then. Inference is stamped on its
 * own clock at its HTB guaranteed rate (everything but training's floor and
 * default's share: node_edt_config), or the link clock where that is
 * earlier (no bulk waiting: the full rate, as HTB lets it borrow), and
 * advances the link clock, so bulk waits behind it and training keeps its
 * floor; a start more than
 * NODE_EDT_HORIZON_US ahead is dropped (the queue's limit). fq bands, where
 * the kernel has them, also serve skb->priority 6 (inference) first.
 *   uplink.root              mq 1: root
 *   uplink.q.<i>             fq [ce] of queue i at 1:<i+1>, handle <0x100+i>:
 *   uplink.clsact, uplink.classifier   as in MULTI-QUEUE
 * Where fq is missing the stamps would be ignored: HTB instead.
 *
 * GATED HTB (SHAPE_HTB_IFB). Shaping configured on a device with several tx
 * queues where EDT is not usable (no fq: the CI kernel) but htb, clsact,
 * bpf and u32 are: HTB at the root would put every queue behind one lock at
 * every rate (0.8 of the default's goodput at line rate, docs/lab/line-rate.md).
 * The root stays as it is (noqueue, or the mq tree); the HTB tree of SHAPE_HTB
 * lives on the ifb PLAN_IFB_UP_NAME (created, recorded and removed by the
 * agent) and the uplink's clsact egress hook carries, in order:
 *   uplink.classifier  the CLASSIFIER (skb->priority = the class's handle)
 *   uplink.gate        bpf aiqos_ugate (bpf_gate.h), pref 27, handle 1: while
 *                      the bytes leaving stay under NODE_GATE_PERCENT of Rp
 *                      packets go straight to the root (TC_ACT_OK: no HTB
 *                      lock); from a window over it until the hold
 *                      (NODE_GATE_HOLD_MS or more) without one, on
 *   uplink.redirect    u32 match-all, pref 28, mirred egress redirect to the
 *                      ifb, whose HTB shapes and ranks them exactly as at the
 *                      root; the ifb sends them back out of the uplink (the
 *                      gate passes them: their ingress ifindex is the ifb's)
 *   shaper.root, shaper.class.*, shaper.leaf.*   [ifb-up] the HTB tree, no
 *                      filters (the classifier names every packet's class)
 * Below half of Rp no class can reach its ceiling, so HTB would not hold a
 * packet back for long. Unlike arrivals (the download gate's, paced by the
 * link), the node sends at memory speed, so what passes reaches the link
 * unpaced: a window holds half the parent class's cburst (2 ms at Rp, at
 * least 128 KiB), so the most that passes back to back, two windows' worth,
 * is the burst HTB itself lets out at once (node_up_gate_config). The agent
 * falls back to SHAPE_HTB when it cannot create the ifb (up->ifb_up_failed).
 *
 * CLASSIFIER (HTB). The multi-queue layout's BPF classifier (bpf_cls.h) in
 * front of HTB: its map gives each pod address (or class DSCP) the class's
 * handle as skb->priority (info.cls_priority: 1:10 / 1:20 / 1:30; a class
 * the mode lacks -> 1:20), and htb_classify takes a priority naming one of
 * its leaves without walking a filter: classification is O(1) and outside
 * HTB's lock at any pod count. The u32 filters below stay as the fallback
 * for a packet whose priority names no class (the program not attached:
 * the agent learns a refused program missing and plans without it).
 *
 * CLASSIFICATION. classify "src-ip": one u32 filter per pod address. The item
 * id is "uplink.pod.<H>.<n>": H = 16 hex digits of a 64-bit FNV-1a hash of the
 * pod UID (UIDs are up to 63 chars, PLAN_ID_MAX is 32), n = index of the
 * address in the pod's list; node_pod_item_id() maps a pod back to its ids.
 * Two different UIDs with the same 64-bit hash are refused (-ENOTUNIQ) rather
 * than silently merged. Adding or removing one pod adds or removes exactly its
 * items. Filter handles: the u32 handle is htid:hash:node (12:8:12 bits); the
 * kernel gives each (prio, protocol) its own root hash table (htid 800, 801,
 * ... in creation order, so not predictable), so the planner sets only the
 * node id (handle = node id, htid 0 = "the root table of this prio"); a
 * desired handle with htid 0 matches an observed one on hash:node (tc.c).
 * The kernel looks existing u32 filters up by their full handle, so deleting
 * or changing one needs the observed handle (with its htid). Node ids 1..0xfff come from
 * a 32-bit FNV-1a hash of (uid, n); collisions are resolved by linear probing
 * in pod-UID order, and ids already used by `prev` (the plan in force) are
 * kept first, so a new pod never renumbers an existing pod's filter. Without
 * `prev` (fresh start) the result is a pure function of the pod set. At most
 * NODE_FILTERS_MAX filters (-E2BIG beyond).
 * classify "dscp": four fixed filters instead (inference/training x v4/v6,
 * DSCP from the config, default EF 46 / AF11 10), matching the DS field under
 * mask 0xfc (IPv4 TOS byte, IPv6 traffic class). DSCP survives SNAT; source
 * addresses do not (pod traffic masqueraded to the node address before the
 * uplink qdisc falls into the default class with src-ip).
 * The caller must not list host-network pods' addresses (they are the node's).
 *
 * DOWNLOAD (docs/design.md §4). Traffic toward the pods queues at
 * the switch port, out of reach, unless the node shapes its ingress just
 * below the downlink rate so the queue forms where aiqos ranks it. Planned
 * when node_downlink_wanted(): mode not idle, "downlink" on, a rate known
 * (downlinkRate, else uplinkRate: never a link's reported speed, a veth's
 * 10000 Mb/s is fiction; otherwise a warning names the key to set), htb,
 * clsact and u32 not known missing, and the uplink's ingress hook free
 * (up->ingress_foreign: an ingress qdisc aiqos did not create is left alone,
 * with a warning). Items, after the uplink's (same planner, same builders):
 *   down.hook                 [uplink] clsact (parent ffff:fff1)
 *   down.classifier           [uplink] bpf aiqos_dcls on ffff:fff2 prio 26 protocol all,
 *                             direct-action (dcls.bpf.c), where bpf is not known missing:
 *                             skb->priority = the ifb tree's class of the pod a packet is
 *                             for (its destination, inside an overlay's encapsulation too;
 *                             entries: node_down_cls_entries), which HTB on the ifb takes
 *                             without a filter walk; the u32 filters below are the fallback
 *   down.gate                 [uplink] bpf aiqos_gate on ffff:fff2 prio 29 protocol all,
 *                             direct-action (bpf_gate.h), where bpf is not known missing:
 *                             while the arrivals stay under NODE_GATE_PERCENT of
 *                             Rd * 98 % (bytes per window: node_gate_config) packets skip
 *                             the ifb (nothing can queue there); over it, and for
 *                             the hold after (NODE_GATE_HOLD_MS or more), every packet takes the redirect
 *   down.redirect             [uplink] u32 on ffff:fff2 prio 30 protocol all, match-all,
 *                             action mirred egress redirect dev PLAN_IFB_NAME (up->ifb_ifindex)
 *   down.root, down.class.*, down.leaf.*   [ifb] the HTB tree of the mode at Rd * 98 %,
 *                             the same shares, prio, ceilings and AQM leaves (fq_codel ecn
 *                             first, byte FIFOs sized at Rd) as the uplink's HTB tree, but
 *                             training's leaf is fq_codel ecn [ce] | bfifo 7 ms (no fq:
 *                             forwarded traffic is not paced; a short FIFO makes senders
 *                             back off before the upstream queue builds)
 *   down.pod.<H>.<n>          [ifb] u32 prio 10/11 on 1:, DESTINATION addr/32|/128 -> class,
 *                             whatever `classify` says: a DS mark that arrives was set
 *                             beyond the node, where trust.c vets nothing
 * Handles of the download filters follow the uplink's rules (their own
 * namespace on the ifb). The agent creates, records and removes the ifb.
 * The receive window of training pods (info->down.rcv_window_bytes): the
 * ifb ranks what reaches the node, but a sender's in-flight beyond what the
 * ifb holds queues upstream (a FIFO inference shares). Only the receiver
 * bounds any sender (bbr ignores the ifb's drops): while the tree is planned,
 * training pods' tcp_rmem maximum is Rd * 98 % x downlinkRttUs / 8 +
 * NODE_DOWN_QUEUE_BUDGET_BYTES,
 * per socket; "trainingRcvWindow": "off" or a byte count overrides it. The
 * agent lowers the training profiles' rmemMax to it once the tree is in
 * force (never raises it: an unset rmemMax counts as the kernel's tcp_rmem
 * maximum, left alone when that is smaller). With the bands on in the
 * download direction (below) inference pods are bounded too, at twice
 * training's bound (NODE_DOWN_INF_RCV_FACTOR, node_down_rcv_bound): their
 * bulk (a model load over many connections) shares with training on the
 * ifb, and unbounded it fills the upstream queue as training would (the
 * pod's own requests 13-31 ms at p99 against 0.3 ms). At training's bound
 * the window a sender sees (the buffer less the kernel's overhead: 66 KB of
 * 74.7) holds one 64 KiB burst: a 256 KiB response waits on its reader 20-30
 * % of the time, and bbr takes those stalls for the path's rate (5-21 ms
 * against 4.6 ms with twice the bound). The band's leaf on the ifb holds
 * what those windows let in flight (inference's FIFO size, 20 ms, not
 * training's shorter one: 8 connections x 150 KB at 500 Mbit/s): drops
 * there sent the load's senders into recovery bursts upstream.
 *
 * BANDS (interactive first, bulk shares, inside a class; docs/concepts.md).
 * In mixed mode with bulkThreshold on (cfg->bulk_threshold_bytes > 0, the
 * default: NODE_BULK_THRESHOLD_DEFAULT), the
 * classifiers (bpf_cls.h, shared/bpf/bands.h) count each inference flow's
 * recent bytes (an LRU of BPF_FLOW_MAP_MAX flows per program; the count
 * restarts after bulkIdleMs of silence and at each request the flow's TCP
 * peer sends, and drains at bulkThreshold bytes per second) and give a flow
 * beyond bulkThreshold the inference-bulk band's priority until its peer's
 * next request or until it has been quiet for BPF_BAND_PROMOTE_IDLE_MS (a
 * demoted flow that slowed down, or stalls on a loss, stays: it would come
 * back and starve the band): token events, requests and responses up to a few
 * hundred KiB stay first, a model load or a KV-cache transfer shares. Pods
 * annotated ai.workload/bulk: "true" are in the band from their first byte
 * (their addresses map to it). The band, by structure:
 *   HTB trees with the classifier (SHAPE_HTB, SHAPE_HTB_IFB, the download
 *   tree with its classifier):
 *     <pfx>.class.inference-bulk  htb 1:11 prio 2 (training's: they share
 *                                 the excess by quantum), rate = training's
 *                                 floor (taken from inference's rate: never
 *                                 below training's floor), ceil Rp, quantum
 *                                 = training's x bulkWeight (both raised so
 *                                 neither is below a 64 KiB GSO/GRO
 *                                 aggregate: HTB serves a class at least a
 *                                 packet per turn, so quanta under the
 *                                 packets share per packet, not by weight)
 *     <pfx>.leaf.inference-bulk   11: under 1:11, training's leaf kinds
 *                                 without a CE threshold
 *   SHAPE_EDT and SHAPE_MQ: no object: the band is training's priority (a
 *   demoted flow is stamped on the link clock like bulk / queued in
 *   training's band); bulkWeight does not apply.
 *   Other structures (no classifier): no band.
 * The u32 fallback filters do not know flows: a packet they classify stays
 * in its pod's class.
 *
 * CAPACITY. A node plan has one filter per pod address: 250 dual-stack pods
 * need ~510 items, in the same heap container as a pod's plan (struct plan,
 * plan_free()). Applying is incremental (node_plan_delta: only added/changed
 * items, removals first): apply_plan() with the delta's index list. */
#ifndef AIQOS_NODE_H
#define AIQOS_NODE_H

#include "bpf_cls.h"
#include "bpf_gate.h"
#include "plan.h"

#define NODE_POD_IPS_MAX 4
#define NODE_UPLINK_AUTO "auto"
#define NODE_FILTERS_MAX 0xfffU /* u32 node ids 1..0xfff */
#define NODE_WARN_MAX    4
#define NODE_WARN_LEN    256

/* Defaults of the agent config (agent/config.h) */
#define NODE_INFERENCE_SHARE_DEFAULT 0.3
#define NODE_TRAINING_FLOOR_DEFAULT  0.05
#define NODE_MIXED_HOLD_S_DEFAULT    30
#define NODE_DEBOUNCE_MS_DEFAULT     200
#define NODE_DSCP_INFERENCE_DEFAULT  46 /* EF */
#define NODE_DSCP_TRAINING_DEFAULT   10 /* AF11 */
#define NODE_OVERHEAD_DEFAULT        24 /* Ethernet: preamble+SFD 8 + FCS 4 + inter-frame gap 12 */
#define NODE_OVERHEAD_MAX            256
/* BANDS: bulkThreshold (bytes; 0 = "off"): 4 x the matrix's 256 KiB
 * response, ~17 ms at 500 Mbit/s; bulkIdleMs; bulkWeight (the band's share
 * of the excess against training's 1: 0.25, the pod's bulk a fifth of the
 * link while training is busy too, about one more flow next to training's
 * four where TCP shares per flow) */
#define NODE_BULK_THRESHOLD_DEFAULT (1U << 20) /* 1 MiB; "off" disables the band */
#define NODE_BULK_THRESHOLD_MIN     65536U
#define NODE_BULK_THRESHOLD_MAX     (1U << 30)
#define NODE_BULK_IDLE_MS_DEFAULT   20
#define NODE_BULK_IDLE_MS_MAX       1000
#define NODE_BULK_WEIGHT_DEFAULT    0.25
#define NODE_BULK_WEIGHT_MIN        0.1
#define NODE_BULK_WEIGHT_MAX        10.0
/* the smaller of the band's and training's HTB quanta: a 64 KiB GSO/GRO
 * aggregate as a qdisc counts it (45 segments, each with its headers) */
#define NODE_BAND_QUANTUM_MIN_BYTES 70000U

/* Policy constants (see the comment above) */
#define NODE_SHAPE_PERCENT 99 /* egress: aiqos's HTB is the only sender into the link */
/* download: remote senders burst into the port upstream of the node; a wider
 * margin drains what lands there sooner */
#define NODE_DOWN_SHAPE_PERCENT 98
#define NODE_SHARE_DEFAULT_PM   50 /* default class guarantee, per mille */
#define NODE_FLOOR_MIN_PM       10 /* training floor clamp, per mille */
#define NODE_FLOOR_MAX_PM       900
#define NODE_CE_THRESHOLD_US    1000
#define NODE_INF_TARGET_US      1000
#define NODE_INF_INTERVAL_US    10000
#define NODE_INF_LIMIT_PKTS     1024
#define NODE_HTB_R2Q            10
#define NODE_FIFO_MIN_BYTES     (2U * 65536)
/* the inference FIFO (kernels without fq_codel) holds a response-sized
 * burst: NODE_INF_QUEUE_MS at the link rate, at least two 256 KiB responses */
#define NODE_INF_QUEUE_MS 20
/* the download tree's training FIFO: shorter, so that senders back off
 * before the queue upstream of the node (which drains only at the 3 %
 * margin) builds */
#define NODE_DOWN_TRAINING_QUEUE_MS 7
/* the training receive window while the download tree is planned (DOWNLOAD):
 * a BDP at the base RTT of the downlink path (downlinkRttUs: by default one
 * inside a cluster's fabric) plus a queue budget per socket: one TSO burst
 * (64 KiB) for the ifb to hold and rank. A budget in time (it was 500 us)
 * grows with the rate: at 10 Gbit/s 4 sockets kept 4 MB in the ifb, and
 * what the ifb releases queued behind it where nothing ranks (the CPUs'
 * input queues): inference p99 1.5-2.5 ms against 0.6-0.8 ms with 256 KiB
 * windows, the same training goodput; 188 KB ones cost bbr 5-12 % of it:
 * docs/lab/download.md) */
#define NODE_DOWN_RTT_US_DEFAULT     150
#define NODE_DOWN_RTT_US_MAX         1000000
#define NODE_DOWN_QUEUE_BUDGET_BYTES 65536U
/* inference pods' bound with the bands on: twice training's */
#define NODE_DOWN_INF_RCV_FACTOR 2U
/* the gates (DOWNLOAD and GATED HTB, bpf_gate.h): packets skip the ifb while
 * the traffic stays under this share of the shaped rate; once over, the ifb
 * takes everything for the hold: NODE_GATE_HOLD_MS, or twice the time the
 * tree's leaves take to drain their byte FIFOs at the shaped rate when that
 * is longer (below ~40 Mbit/s: their floors), so the tree has drained
 * before packets bypass it again. The download gate counts in
 * windows of at least 1 ms and at least 4 x 64 KiB at that share (a GRO
 * burst is not a rate); the upload gate's hold half of HTB's cburst
 * (node_up_gate_config) */
#define NODE_GATE_PERCENT             50
#define NODE_GATE_WINDOW_MIN_US       1000
#define NODE_GATE_WINDOW_BYTES        (4U * 65536)
#define NODE_GATE_HOLD_MS             100
#define NODE_DOWN_RCV_WINDOW_MIN      32768U
#define NODE_DOWN_RCV_WINDOW_MAX      2147483647U
#define NODE_DOWN_RCV_WINDOW_AUTO     0U         /* trainingRcvWindow "auto" */
#define NODE_DOWN_RCV_WINDOW_OFF      UINT32_MAX /* trainingRcvWindow "off" */
#define NODE_FIFO_MIN_INFERENCE_BYTES (8U * 65536)
#define NODE_FIFO_MIN_TRAINING_BYTES  (4U * 65536)
#define NODE_FIFO_MAX_BYTES           (16U << 20)
#define NODE_NOMINAL_RATE_BPS         1000000000ULL /* FIFO sizing when no rate is known */
#define NODE_FILTER_PRIO_SRC_V4       10
#define NODE_FILTER_PRIO_SRC_V6       11
#define NODE_FILTER_PRIO_DSCP_V4      20
#define NODE_FILTER_PRIO_DSCP_V6      21
#define NODE_FILTER_PRIO_DOWN_CLS     26 /* the uplink ingress hook: the download classifier (dcls.bpf.c) */
#define NODE_FILTER_PRIO_GATE         29 /* the uplink ingress hook: the download gate (bpf_gate.h) */
#define NODE_FILTER_PRIO_REDIRECT     30 /* the uplink ingress hook: match-all -> mirred to the ifb */
/* the uplink egress hook (GATED HTB): other prios than the ingress hook's,
 * as u32 keeps one set of hash tables per qdisc and shows a prio's tables
 * of both hooks under each */
#define NODE_FILTER_PRIO_UP_GATE     27
#define NODE_FILTER_PRIO_UP_REDIRECT 28
#define NODE_REDIRECT_HANDLE         1 /* its u32 node id */

/* The multi-queue layout (plan_node_mq.c, see "MULTI-QUEUE" above) */
#define NODE_MQ_QUEUES_MAX   256 /* per-queue children planned for at most this many tx queues */
#define NODE_FILTER_PRIO_CLS 1   /* the classifier's pref at the clsact egress hook */
/* Its handle: aiqos's own in that slot. Pref 1 is where other tools put
 * their egress program too (Cilium's legacy-tc cil_to_netdev: pref 1,
 * handle 1, protocol all). A bpf filter with another handle joins their
 * slot at the head of its list (cls_bpf_change: list_add_rcu), so the
 * classifier (TC_ACT_UNSPEC) runs first and hands on; a filter aiqos does
 * not own is never replaced or deleted (uplink.h, UPLINK_PROG_PREFIX). */
#define NODE_CLS_HANDLE         0xa10u
#define NODE_CLS_PRIO_INFERENCE 6     /* skb->priority TC_PRIO_INTERACTIVE: band 0 of pfifo_fast's priomap */
#define NODE_CLS_PRIO_DEFAULT   0     /* TC_PRIO_BESTEFFORT: band 1 */
#define NODE_CLS_PRIO_TRAINING  2     /* TC_PRIO_BULK: band 2 */
#define NODE_EDT_HORIZON_US     20000 /* EDT: a packet that would wait longer is dropped (the FIFOs' 20 ms) */

enum node_mode {
	MODE_IDLE,
	MODE_TRAINING,
	MODE_INFERENCE,
	MODE_MIXED,
	_MODE_MAX,
	_MODE_INVALID = -1,
};

enum node_classify {
	CLASSIFY_SRC_IP,
	CLASSIFY_DSCP,
	_CLASSIFY_MAX,
	_CLASSIFY_INVALID = -1,
};

/* The queueing structure the planner chose for the uplink. */
enum node_shape {
	SHAPE_NONE,     /* idle: nothing planned, the original qdisc stays */
	SHAPE_ROOT_AQM, /* classless root fq / fq_codel */
	SHAPE_PRIO,     /* prio bands with AQM leaves, line rate */
	SHAPE_HTB,      /* HTB at Rp with guaranteed shares */
	SHAPE_MQ,       /* mq with a child per tx queue (+ the BPF classifier in mixed), line rate */
	SHAPE_EDT,      /* mq with fq per tx queue, the BPF classifier stamping departure times at Rp */
	SHAPE_HTB_IFB,  /* the root left as it is; HTB at Rp on PLAN_IFB_UP_NAME, behind the upload gate */
	_SHAPE_MAX,
	_SHAPE_INVALID = -1,
};

/* How class weights were derived (mixed mode). */
enum node_weight_basis {
	WEIGHT_PODS,
	WEIGHT_GPUS,
	WEIGHT_BANDWIDTH,
	_WEIGHT_MAX,
	_WEIGHT_INVALID = -1,
};

struct node_ip {
	int family;       /* AF_INET or AF_INET6 */
	uint8_t addr[16]; /* network byte order; v4 in the first 4 bytes */
};

struct node_pod {
	char namespace_[64];
	char name[254];
	char uid[64];
	enum workload_class class;
	char profile[PROFILE_NAME_MAX]; /* resolved profile name (informational) */
	bool ce_marking;                /* its profile sets ce_threshold_us (training-dctcp) */
	unsigned n_ips;
	struct node_ip ips[NODE_POD_IPS_MAX];
	uint32_t gpus;       /* requested GPUs (nvidia.com/gpu etc.), 0 = none */
	uint64_t egress_bps; /* kubernetes.io/egress-bandwidth, 0 = none */
	bool bulk;           /* ai.workload/bulk: its flows skip the interactive band (BANDS) */
};

struct node_config {
	char uplink[IFNAME_LEN];    /* interface name or "auto" (default route); used by the agent */
	uint64_t uplink_rate_bps;   /* 0 = link speed */
	uint64_t downlink_rate_bps; /* downlinkRate; 0 = uplink_rate_bps (none: no download shaping) */
	bool downlink;              /* "downlink": false turns the download tree off */
	double inference_share;     /* 0..1, minimum guarantee of inference in mixed (lowers the floor) */
	double training_floor;      /* 0..1, trainingFloor: training's guarantee in mixed (before weights) */
	uint32_t mixed_hold_s;
	uint32_t debounce_ms; /* used by the agent */
	enum node_classify classify;
	int dscp_inference; /* 0..63, DSCP the inference profile marks (classify dscp) */
	int dscp_training;  /* 0..63 */
	/* link-layer bytes per packet the shaper counts beyond the frame it
	 * sees (uplinkOverhead; Ethernet: preamble+SFD 8, FCS 4, gap 12) */
	uint32_t overhead_bytes;
	/* the download direction's training receive window (DOWNLOAD) */
	uint32_t down_rtt_us;         /* downlinkRttUs: base RTT of the path toward the node */
	uint32_t training_rcv_window; /* trainingRcvWindow: bytes, _AUTO or _OFF */
	/* BANDS */
	uint32_t bulk_threshold_bytes; /* bulkThreshold: bytes, 0 = off */
	uint32_t bulk_idle_ms;         /* bulkIdleMs */
	double bulk_weight;            /* bulkWeight */
};

struct uplink_facts {
	char ifname[IFNAME_LEN];
	uint64_t speed_bps; /* 0 = unknown */
	bool is_virtual;    /* veth/bridge/dummy, or speed unknown */
	uint32_t tx_queues; /* informational (mq + fq per queue needs an mq kind in tc.h) */
	uint32_t mtu;       /* 0 = 1500 */
	/* its root before aiqos was `noqueue` (IFF_NO_QUEUE devices: veth,
	 * bond, VLAN, macvlan, ...): nothing ever waits there */
	bool no_queue;
	/* the download direction */
	int ifb_ifindex;      /* PLAN_IFB_NAME's ifindex (the redirect target), 0 = not created (dry run) */
	bool ingress_foreign; /* the uplink has an ingress/clsact qdisc aiqos did not create */
	bool ingress_held;    /* an `ingress` qdisc holds the hook: no clsact, so no classifier */
	/* the gated upload tree (GATED HTB) */
	int ifb_up_ifindex; /* PLAN_IFB_UP_NAME's ifindex (the redirect target), 0 = not created (dry run) */
	bool ifb_up_failed; /* the agent could not create it: HTB at the root instead */
	/* another tool's filter at the egress hook after the gate and redirect
	 * (pref > NODE_FILTER_PRIO_UP_REDIRECT): they would end the hook before
	 * it ever ran (the gate's TC_ACT_OK, the redirect's STOLEN, the ifb's
	 * packets passed by the redirect's action): HTB at the root instead */
	bool egress_foreign_after;
};

struct node_counts {
	unsigned n_pods;
	unsigned n[_CLASS_MAX];          /* pods per class */
	unsigned n_dctcp_training;       /* training pods with ce_marking */
	uint64_t gpus[_CLASS_MAX];       /* requested GPUs per class */
	uint64_t egress_bps[_CLASS_MAX]; /* declared egress bandwidth per class */
	unsigned n_egress[_CLASS_MAX];   /* pods declaring egress bandwidth per class */
};

struct node_shares {
	enum node_weight_basis basis;
	double weight[_CLASS_MAX];     /* inputs of the formula (mixed) */
	unsigned share_pm[_CLASS_MAX]; /* guaranteed share, per mille; 0 = class absent */
};

/* Hysteresis state of the mode decision. mixed_last_needed_ms: last time
 * (monotonic ms) the pods needed mixed. */
struct node_mode_state {
	enum node_mode mode;
	int64_t mixed_last_needed_ms;
};
#define NODE_MODE_STATE_INIT ((struct node_mode_state){.mode = MODE_IDLE, .mixed_last_needed_ms = 0})

/* The download tree (DOWNLOAD in the top comment) */
struct node_down_info {
	bool planned;        /* the plan has the down.* items */
	uint64_t rate_bps;   /* downlinkRate, else uplinkRate; 0 = unknown (not shaped) */
	uint64_t shaped_bps; /* rate * 98 % when planned */
	uint64_t class_rate_bps[_CLASS_MAX];
	uint64_t class_ceil_bps[_CLASS_MAX];
	unsigned n_filters;
	uint32_t rcv_window_bytes;         /* training pods' tcp_rmem maximum while planned, 0 = none */
	uint64_t gate_bps;                 /* down.gate's threshold (bpf_gate.h), 0 = no gate planned */
	bool classifier;                   /* down.classifier planned (dcls.bpf.c) */
	uint32_t cls_priority[_CLASS_MAX]; /* with it: each class's classid on the ifb's tree (0 = none) */
	uint64_t gate_hold_ns;             /* down.gate's hold (node_gate_config), 0 = no gate planned */
	uint64_t bulk_rate_bps;            /* BANDS: down.class.inference-bulk's rate, 0 = no band */
	uint32_t bulk_priority;            /* BANDS: the classifier's priority for it, 0 = no band */
};

struct node_plan_info {
	enum node_mode mode;
	enum node_shape shape;
	uint64_t rate_bps;   /* R: uplinkRate or link speed, 0 = unknown */
	uint64_t shaped_bps; /* Rp = R * 99 % when shape = HTB, else 0 */
	bool rate_configured;
	struct node_counts counts;
	struct node_shares shares;
	uint64_t class_rate_bps[_CLASS_MAX]; /* HTB guaranteed rates (0 = no class) */
	uint64_t class_ceil_bps[_CLASS_MAX]; /* HTB ceilings (what a class may borrow up to) */
	uint32_t ce_threshold_us;            /* on training queues, 0 = none */
	unsigned n_filters;
	unsigned n_queues; /* SHAPE_MQ, SHAPE_EDT: tx queues given a child */
	bool classifier;   /* the clsact BPF classifier sets skb->priority (SHAPE_MQ mixed, SHAPE_HTB, SHAPE_EDT) */
	uint32_t cls_priority[_CLASS_MAX]; /* with classifier: each class's skb->priority (mq: band, HTB: classid) */
	bool speed_untrusted;              /* a virtual link's reported speed was not used as a rate */
	uint64_t up_gate_bps;              /* SHAPE_HTB_IFB: uplink.gate's threshold (bpf_gate.h), else 0 */
	uint64_t up_gate_hold_ns;          /* SHAPE_HTB_IFB: uplink.gate's hold (node_up_gate_config), else 0 */
	/* BANDS (0 = none): the thresholds, the uplink band's HTB rate (0 = no
	 * object: the band is training's priority) and its priority */
	uint32_t bulk_threshold_bytes;
	uint32_t bulk_idle_ms;
	uint64_t bulk_rate_bps;
	uint32_t bulk_priority;
	double bulk_weight; /* bulkWeight (informational; the quanta carry it) */
	struct node_down_info down;
	unsigned n_warn;
	char warn[NODE_WARN_MAX][NODE_WARN_LEN];
};

/* Names */
const char *node_mode_name(enum node_mode m);         /* "idle" "training" "inference" "mixed" */
enum node_mode node_mode_from_name(const char *s);    /* _MODE_INVALID if unknown */
const char *node_classify_name(enum node_classify c); /* "src-ip" "dscp" */
enum node_classify node_classify_from_name(const char *s);
const char *node_shape_name(enum node_shape s);               /* "none" "root-aqm" "prio" "htb" "mq" "edt" "htb-ifb" */
const char *node_weight_basis_name(enum node_weight_basis b); /* "pods" "gpus" "bandwidth" */

/* Config */
void node_config_defaults(struct node_config *ret);
/* Range checks (inferenceShare and trainingFloor 0..1, DSCP 0..63, classify, rate bounds);
 * errors name the key and value. */
int node_config_check(const struct node_config *cfg, struct error *err);

/* Counting and the mode */
void node_pods_count(const struct node_pod *pods, unsigned n, struct node_counts *ret);
enum node_mode node_mode_desired(const struct node_counts *c);
/* Decide the mode at now_ms from the previous state (see the top comment).
 * Returns the monotonic time in ms at which the decision may change without
 * a new event (the end of the mixed hold), or -1 when only events can change
 * it: the agent arms a timer for it. */
int64_t node_mode_decide(const struct node_mode_state *prev, const struct node_counts *c, int64_t now_ms,
                         uint32_t hold_s, struct node_mode_state *ret);

/* Guaranteed shares for a mode (formula in the top comment). */
void node_shares_compute(const struct node_counts *c, double training_floor, double inference_share,
                         enum node_mode mode, struct node_shares *ret);

/* The classifier's map content for a plan with info->classifier (else 0
 * entries): one entry per pod address (classify src-ip) or per class DSCP
 * (classify dscp), and the default. *ret is malloc'd (free it). */
int node_cls_entries(const struct node_pod *pods, unsigned n, const struct node_config *cfg,
                     const struct node_plan_info *info, struct bpf_cls_entry **ret, unsigned *ret_n);
/* The download classifier's map content for a plan with info->down's
 * classifier (else 0 entries): one entry per pod address (as a
 * destination) and the default; never DSCP (marks that arrive are not
 * aiqos's). *ret is malloc'd (free it). */
int node_down_cls_entries(const struct node_pod *pods, unsigned n, const struct node_plan_info *info,
                          struct bpf_cls_entry **ret, unsigned *ret_n);
/* The EDT map's configuration for a plan (rate 0 = stamping off: every
 * shape but SHAPE_EDT). */
void node_edt_config(const struct node_config *cfg, const struct node_plan_info *info, struct bpf_edt *ret);

/* The download gate's configuration for a plan (threshold 0 = off: the
 * download tree not planned, or planned without the gate). */
void node_gate_config(const struct node_plan_info *info, struct bpf_gate *ret);
/* The upload gate's (GATED HTB; threshold 0 = off: another shape); the
 * ifb's own packets pass (ifb_ifindex, facts' ifb_up_ifindex). */
void node_up_gate_config(const struct node_plan_info *info, int ifb_ifindex, struct bpf_gate *ret);
/* Would the plan be SHAPE_HTB_IFB (GATED HTB)? The agent creates the ifb
 * before planning when it would. */
bool node_htb_ifb_wanted(const struct node_config *cfg, const struct uplink_facts *up, const struct plan_caps *caps,
                         enum node_mode mode);

/* The plan item id of a pod's n-th address filter ("uplink.pod.<H>.<n>"),
 * and of its download filter on the ifb ("down.pod.<H>.<n>"). */
int node_pod_item_id(const char *uid, unsigned n, char *buf, size_t size);
int node_down_pod_item_id(const char *uid, unsigned n, char *buf, size_t size);

/* The training pods' tcp_rmem maximum while the download tree shapes at
 * shaped_bps (DOWNLOAD): 0 when configured is NODE_DOWN_RCV_WINDOW_OFF or
 * nothing is shaped, configured bytes as given, else (_AUTO) shaped_bps / 8
 * x rtt_us + NODE_DOWN_QUEUE_BUDGET_BYTES (at most NODE_DOWN_RCV_WINDOW_MAX). */
uint32_t node_down_rcv_window(uint64_t shaped_bps, uint32_t rtt_us, uint32_t configured);
/* The tcp_rmem maximum a class's pods get while the download tree is
 * planned (DOWNLOAD), 0 = not bounded: training info->down.rcv_window_bytes,
 * inference NODE_DOWN_INF_RCV_FACTOR times that while the download bands
 * are on (at most NODE_DOWN_RCV_WINDOW_MAX). */
uint32_t node_down_rcv_bound(const struct node_plan_info *info, enum workload_class c);

/* Does the node shape its download direction in this mode (config on, a
 * rate known, the kinds it needs not known missing)? ret_rate_bps (may be
 * NULL): the rate (downlinkRate, else uplinkRate; 0 = unknown). The agent
 * asks before planning to create the ifb (or remove it). */
bool node_downlink_wanted(const struct node_config *cfg, const struct plan_caps *caps, enum node_mode mode,
                          uint64_t *ret_rate_bps);

/* Build the uplink plan for `mode` (normally from node_mode_decide). prev:
 * the plan in force (NULL = none), only used to keep filter handles stable.
 * caps may be NULL (nothing known missing). On success ret's previous items
 * are freed and replaced (prev may be ret itself); on failure ret and
 * ret_info are untouched. ret_info may be NULL. ret must be zero-initialised
 * or a plan from an earlier call.
 * Errors: -EINVAL (bad config, pod class/family/address count, duplicate pod
 * UID, bad mode), -ENOTUNIQ (UID hash collision), -E2BIG (more than
 * NODE_FILTERS_MAX filters), -ENOMEM. */
int node_plan(const struct node_pod *pods, unsigned n, const struct node_config *cfg, const struct uplink_facts *up,
              const struct plan_caps *caps, enum node_mode mode, const struct plan *prev, struct plan *ret,
              struct node_plan_info *ret_info, struct error *err);

/* Desired equality of two items: type, dev, id, depends and every
 * alternative (effective fields ignored). */
bool node_item_same_desired(const struct plan_item *a, const struct plan_item *b);

/* What changed between the plan in force and a new plan, by item id:
 * removed (indices into old), added and changed (indices into new), each in
 * plan order (parents first). changed = same id and different desired
 * content, or recreated: an item whose object is replaced (a qdisc by
 * another kind or handle, anything moved to another parent) takes every item
 * depending on it along (the kernel destroys a qdisc's classes, children and
 * filters with it), so those are listed as changed even when equal. Arrays
 * are heap (node_plan_delta_free). */
struct node_plan_delta {
	unsigned n_removed, n_added, n_changed, n_same;
	unsigned *removed;
	unsigned *added;
	unsigned *changed;
};
int node_plan_delta(const struct plan *old, const struct plan *new_, struct node_plan_delta *ret);
void node_plan_delta_free(struct node_plan_delta *d);
/* Copy the effective state (status, chosen, err) of the items node_plan_delta
 * calls same from old into new (they need no re-apply). Returns -ENOMEM or
 * the number of items carried over. */
int node_plan_carry_effective(struct plan *new_, const struct plan *old);

#endif
