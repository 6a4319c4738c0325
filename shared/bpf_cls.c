/* bpf_cls.c — the uplink classifier program (bpf_cls.h): assembled
 * (bpf_asm.h), loaded with bpf(2); its maps created, found again and
 * synced. */
#include <arpa/inet.h>
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/pkt_cls.h>
#include <stddef.h>

#include "bpf_asm.h"
#include "bpf_cls.h"

#define ETH_HDR 14

#define EDT(f) ((int16_t)offsetof(struct bpf_edt, f))

/* The key lives at fp-24 (20 bytes), a scratch word at fp-32, the EDT
 * map's index at fp-40. */
#define KEY_OFF     (-24)
#define SCRATCH_OFF (-32)
#define EDT_KEY_OFF (-40)

enum {
	LBL_V4,
	LBL_V6,
	LBL_DSCP,
	LBL_DEF,
	LBL_SET,
	LBL_OUT,
	LBL_SEGS,
	LBL_BULK,
	LBL_INF_MIN,
	LBL_INF_START,
	LBL_LINK_START,
	LBL_BULK_START,
	LBL_STAMP,
	LBL_DROP,
};

static void key_zero(struct asm_buf *a)
{
	MOV_IMM(a, R1, 0);
	STX(a, BPF_DW, R10, R1, KEY_OFF);
	STX(a, BPF_DW, R10, R1, KEY_OFF + 8);
	STX(a, BPF_W, R10, R1, KEY_OFF + 16);
}

static void lookup(struct asm_buf *a, int map_fd)
{
	emit_map_lookup(a, map_fd, KEY_OFF);
}

/* dst = (r8 bytes * the map's field q) >> 20: the time they take, in ns */
static void edt_cost(struct asm_buf *a, uint8_t dst, int16_t q)
{
	LDX(a, BPF_DW, dst, R7, q);
	ALU_REG(a, BPF_MUL, dst, R8);
	ALU_IMM(a, BPF_RSH, dst, 20);
}

/* r2 = start = max(r2 (a clock), r0 (now)); beyond the horizon: drop */
static void edt_start(struct asm_buf *a, unsigned l)
{
	JGE_REG(a, R2, R0, l);
	MOV_REG(a, R2, R0);
	label(a, l);
	MOV_REG(a, R3, R2);
	ALU_REG(a, BPF_SUB, R3, R0);
	LDX(a, BPF_DW, R4, R7, EDT(horizon_ns));
	JGT_REG(a, R3, R4, LBL_DROP);
}

/* the map's clock = start (r2) + the packet's time at rate q */
static void edt_clock_after(struct asm_buf *a, int16_t q, int16_t clock)
{
	edt_cost(a, R3, q);
	ALU_REG(a, BPF_ADD, R3, R2);
	STX(a, BPF_DW, R7, R3, clock);
}

/* The EDT stage (bpf_cls.h), entered with r6 = skb, r9 = the priority set;
 * ends at LBL_OUT, or drops. r7 = the map value, r8 = bytes, r0 = now. */
static void edt_stage(struct asm_buf *a, int edt_fd)
{
	ST(a, BPF_W, R10, EDT_KEY_OFF, 0);
	emit_map_lookup(a, edt_fd, EDT_KEY_OFF);
	JEQ(a, R0, 0, LBL_OUT);
	MOV_REG(a, R7, R0);
	LDX(a, BPF_DW, R1, R7, EDT(link_q20));
	JEQ(a, R1, 0, LBL_OUT);
	/* bytes = len + overhead * max(gso_segs, 1) */
	LDX(a, BPF_W, R8, R6, (int16_t)offsetof(struct __sk_buff, gso_segs));
	JNE(a, R8, 0, LBL_SEGS);
	MOV_IMM(a, R8, 1);
	label(a, LBL_SEGS);
	LDX(a, BPF_W, R1, R7, EDT(overhead));
	ALU_REG(a, BPF_MUL, R8, R1);
	LDX(a, BPF_W, R1, R6, (int16_t)offsetof(struct __sk_buff, len));
	ALU_REG(a, BPF_ADD, R8, R1);
	CALL(a, BPF_FUNC_ktime_get_ns);
	LDX(a, BPF_W, R1, R7, EDT(inf_priority));
	JNE_REG(a, R9, R1, LBL_BULK);

	/* inference: start = max(now, min(its clock, the link's)): at the link
	 * rate while no bulk waits, at its own rate behind bulk that does */
	LDX(a, BPF_DW, R2, R7, EDT(inf_ns));
	LDX(a, BPF_DW, R4, R7, EDT(link_ns));
	JGE_REG(a, R4, R2, LBL_INF_MIN);
	MOV_REG(a, R2, R4);
	label(a, LBL_INF_MIN);
	edt_start(a, LBL_INF_START);
	edt_clock_after(a, EDT(inf_q20), EDT(inf_ns));
	LDX(a, BPF_DW, R4, R7, EDT(link_ns));
	JGE_REG(a, R4, R0, LBL_LINK_START);
	MOV_REG(a, R4, R0);
	label(a, LBL_LINK_START);
	edt_cost(a, R3, EDT(link_q20));
	ALU_REG(a, BPF_ADD, R4, R3);
	STX(a, BPF_DW, R7, R4, EDT(link_ns));
	JA(a, LBL_STAMP);

	/* bulk: the link's clock */
	label(a, LBL_BULK);
	LDX(a, BPF_DW, R2, R7, EDT(link_ns));
	edt_start(a, LBL_BULK_START);
	edt_clock_after(a, EDT(link_q20), EDT(link_ns));

	label(a, LBL_STAMP);
	STX(a, BPF_DW, R6, R2, (int16_t)offsetof(struct __sk_buff, tstamp));
	JA(a, LBL_OUT);

	label(a, LBL_DROP);
	MOV_IMM(a, R0, TC_ACT_SHOT);
	EXIT(a);
}

/* bpf_skb_load_bytes(skb, off, fp + to, len); r0 != 0 -> label fail */
static void load_bytes(struct asm_buf *a, int off, int to, int len, unsigned fail)
{
	MOV_REG(a, R1, R6);
	MOV_IMM(a, R2, off);
	MOV_REG(a, R3, R10);
	ALU_IMM(a, BPF_ADD, R3, to);
	MOV_IMM(a, R4, len);
	CALL(a, BPF_FUNC_skb_load_bytes);
	JNE(a, R0, 0, fail);
}

/* The key {type, source address at off of len bytes}; a map hit -> LBL_SET,
 * an unreadable packet -> LBL_DEF. */
static void lookup_source(struct asm_buf *a, int map_fd, int type, int off, int len)
{
	ST(a, BPF_B, R10, KEY_OFF, type);
	load_bytes(a, off, KEY_OFF + 4, len, LBL_DEF);
	lookup(a, map_fd);
	JNE(a, R0, 0, LBL_SET);
}

static int assemble(struct asm_buf *a, int map_fd, int edt_fd)
{
	asm_init(a);
	MOV_REG(a, R6, R1);
	LDX(a, BPF_W, R7, R6, (int16_t)offsetof(struct __sk_buff, protocol));
	key_zero(a);
	STX(a, BPF_DW, R10, R1, SCRATCH_OFF);
	JEQ(a, R7, htons(ETH_P_IP), LBL_V4);
	JEQ(a, R7, htons(ETH_P_IPV6), LBL_V6);
	JA(a, LBL_OUT);

	label(a, LBL_V4);
	lookup_source(a, map_fd, BPF_CLS_KEY_SRC4, ETH_HDR + 12, 4); /* saddr */
	load_bytes(a, ETH_HDR + 1, SCRATCH_OFF, 1, LBL_DEF);         /* TOS */
	LDX(a, BPF_B, R8, R10, SCRATCH_OFF);
	ALU_IMM(a, BPF_RSH, R8, 2);
	JA(a, LBL_DSCP);

	label(a, LBL_V6);
	lookup_source(a, map_fd, BPF_CLS_KEY_SRC6, ETH_HDR + 8, 16); /* saddr */
	load_bytes(a, ETH_HDR, SCRATCH_OFF, 2, LBL_DEF);             /* version | traffic class | flow */
	/* dscp = (b0 & 0x0f) << 2 | b1 >> 6 */
	LDX(a, BPF_B, R8, R10, SCRATCH_OFF);
	ALU_IMM(a, BPF_AND, R8, 0x0f);
	ALU_IMM(a, BPF_LSH, R8, 2);
	LDX(a, BPF_B, R1, R10, SCRATCH_OFF + 1);
	ALU_IMM(a, BPF_RSH, R1, 6);
	OR_REG(a, R8, R1);

	label(a, LBL_DSCP);
	key_zero(a);
	ST(a, BPF_B, R10, KEY_OFF, BPF_CLS_KEY_DSCP);
	STX(a, BPF_B, R10, R8, KEY_OFF + 4);
	lookup(a, map_fd);
	JNE(a, R0, 0, LBL_SET);

	label(a, LBL_DEF);
	key_zero(a);
	lookup(a, map_fd);
	JEQ(a, R0, 0, LBL_OUT);

	label(a, LBL_SET);
	LDX(a, BPF_W, R9, R0, 0);
	STX(a, BPF_W, R6, R9, (int16_t)offsetof(struct __sk_buff, priority));
	edt_stage(a, edt_fd);

	label(a, LBL_OUT);
	MOV_IMM(a, R0, TC_ACT_UNSPEC);
	EXIT(a);
	return asm_resolve(a);
}

/* ---- syscalls ---- */

int bpf_cls_map_create(int *ret_fd, struct error *err)
{
	return bpf_map_create_named(BPF_MAP_TYPE_HASH, sizeof(struct bpf_cls_key), sizeof(uint32_t), BPF_CLS_MAP_MAX,
	                            "aiqos_cls", "classifier's BPF map", ret_fd, err);
}

uint64_t bpf_edt_q20(uint64_t rate_bps)
{
	/* 8e9 ns per bit-per-second per byte, << 20: 8.4e15 fits in 64 bits */
	return rate_bps ? (8000000000ull << 20) / rate_bps : 0;
}

int bpf_edt_map_create(int *ret_fd, struct error *err)
{
	return bpf_map_create_named(BPF_MAP_TYPE_ARRAY, sizeof(uint32_t), sizeof(struct bpf_edt), 1, "aiqos_edt",
	                            "EDT BPF map", ret_fd, err);
}

int bpf_edt_sync(int edt_fd, const struct bpf_edt *want, bool *ret_changed, struct error *err)
{
	struct bpf_edt have = {0}, v = *want;
	int r;

	if (ret_changed)
		*ret_changed = false;
	r = bpf_array0_read(edt_fd, &have, "EDT map", err);
	if (r < 0)
		return r;
	if (have.link_q20 == v.link_q20 && have.inf_q20 == v.inf_q20 && have.horizon_ns == v.horizon_ns &&
	    have.overhead == v.overhead && have.inf_priority == v.inf_priority)
		return 0;
	v.link_ns = 0;
	v.inf_ns = 0;
	r = bpf_array0_write(edt_fd, &v, "EDT map", err);
	if (r < 0)
		return r;
	if (ret_changed)
		*ret_changed = true;
	return 0;
}

int bpf_cls_prog_load(int map_fd, int edt_fd, int *ret_fd, struct error *err)
{
	_cleanup_free_ struct asm_buf *a = calloc(1, sizeof(*a));
	int r;

	if (!a)
		return error_set(err, ENOMEM, "out of memory");
	r = assemble(a, map_fd, edt_fd);
	if (r < 0)
		return error_set(err, -r, "assemble the classifier: %s", strerror(-r));
	return bpf_prog_load_sched_cls(a, BPF_CLS_NAME, "classifier", ret_fd, err);
}

int bpf_cls_map_from_prog(uint32_t prog_id, int *ret_fd, int *ret_edt_fd, struct error *err)
{
	_cleanup_close_ int cls = -1, edt = -1;
	uint32_t map_ids[4] = {0}, n = 0;
	int r = bpf_prog_map_ids(prog_id, map_ids, ARRAY_SIZE(map_ids), &n, "classifier", err);

	if (r < 0)
		return r;
	if (n != 2)
		return error_set(err, ENOENT, "classifier program id %u uses %u maps, not 2", prog_id, n);
	for (unsigned i = 0; i < 2; i++) {
		uint32_t type = 0;
		int fd = -1;

		r = bpf_map_fd_by_id(map_ids[i], &fd, &type, NULL, err);
		if (r < 0)
			return r;
		if (type == BPF_MAP_TYPE_HASH && cls < 0)
			cls = fd;
		else if (type == BPF_MAP_TYPE_ARRAY && edt < 0)
			edt = fd;
		else
			close(fd);
	}
	if (cls < 0 || edt < 0)
		return error_set(err, ENOENT, "classifier program id %u: not the maps of %s", prog_id, BPF_CLS_NAME);
	*ret_fd = TAKE_FD(cls);
	*ret_edt_fd = TAKE_FD(edt);
	return 0;
}

static int key_cmp(const void *a, const void *b)
{
	return memcmp(a, b, sizeof(struct bpf_cls_key));
}

static int entry_cmp(const void *a, const void *b)
{
	return memcmp(&((const struct bpf_cls_entry *)a)->key, &((const struct bpf_cls_entry *)b)->key,
	              sizeof(struct bpf_cls_key));
}

int bpf_cls_map_sync(int map_fd, const struct bpf_cls_entry *want, unsigned n, unsigned *ret_changed, struct error *err)
{
	_cleanup_free_ struct bpf_cls_key *have = NULL;
	_cleanup_free_ struct bpf_cls_entry *sorted = NULL;
	/* iteration starts from a key that is never an entry (the kernel then
	 * returns the first), rather than a NULL key memcheckers flag */
	struct bpf_cls_key cur = {.kind = 0xff}, next = {0};
	union bpf_attr attr;
	unsigned n_have = 0, changed = 0;

	if (n > BPF_CLS_MAP_MAX)
		return error_set(err, E2BIG, "classifier: %u entries, at most %d", n, BPF_CLS_MAP_MAX);
	have = calloc(BPF_CLS_MAP_MAX, sizeof(*have));
	sorted = calloc(n ? n : 1, sizeof(*sorted));
	if (!have || !sorted)
		return error_set(err, ENOMEM, "out of memory");
	if (n)
		memcpy(sorted, want, n * sizeof(*sorted));
	qsort(sorted, n, sizeof(*sorted), entry_cmp);
	for (;;) {
		memset(&attr, 0, sizeof(attr));
		attr.map_fd = (uint32_t)map_fd;
		attr.key = ptr_u64(&cur);
		attr.next_key = ptr_u64(&next);
		if (sys_bpf(BPF_MAP_GET_NEXT_KEY, &attr) < 0) {
			if (errno == ENOENT)
				break;
			return error_set(err, errno, "classifier map: iterate: %s", strerror(errno));
		}
		if (n_have >= BPF_CLS_MAP_MAX)
			break;
		have[n_have++] = next;
		cur = next;
	}
	for (unsigned i = 0; i < n_have; i++) {
		struct bpf_cls_entry key = {.key = have[i]};

		if (n && bsearch(&key, sorted, n, sizeof(*sorted), entry_cmp))
			continue;
		memset(&attr, 0, sizeof(attr));
		attr.map_fd = (uint32_t)map_fd;
		attr.key = ptr_u64(&have[i]);
		if (sys_bpf(BPF_MAP_DELETE_ELEM, &attr) < 0 && errno != ENOENT)
			return error_set(err, errno, "classifier map: delete: %s", strerror(errno));
		changed++;
	}
	qsort(have, n_have, sizeof(*have), key_cmp);
	for (unsigned i = 0; i < n; i++) {
		uint32_t v = 0;
		bool present = n_have && bsearch(&sorted[i].key, have, n_have, sizeof(*have), key_cmp);

		if (present) {
			memset(&attr, 0, sizeof(attr));
			attr.map_fd = (uint32_t)map_fd;
			attr.key = ptr_u64(&sorted[i].key);
			attr.value = ptr_u64(&v);
			if (sys_bpf(BPF_MAP_LOOKUP_ELEM, &attr) == 0 && v == sorted[i].priority)
				continue;
		}
		v = sorted[i].priority;
		memset(&attr, 0, sizeof(attr));
		attr.map_fd = (uint32_t)map_fd;
		attr.key = ptr_u64(&sorted[i].key);
		attr.value = ptr_u64(&v);
		attr.flags = BPF_ANY;
		if (sys_bpf(BPF_MAP_UPDATE_ELEM, &attr) < 0)
			return error_set(err, errno, "classifier map: update: %s", strerror(errno));
		changed++;
	}
	if (ret_changed)
		*ret_changed = changed;
	return 0;
}
