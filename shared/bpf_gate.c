/* bpf_gate.c — the gate program (bpf_gate.h): assembled
 * (bpf_asm.h), loaded, its map created, found again and synced. */
#include <linux/pkt_cls.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "bpf_asm.h"
#include "bpf_gate.h"
#include "util.h"

#define G(f) ((int16_t)offsetof(struct bpf_gate, f))

enum {
	LBL_TO_IFB,
	LBL_COUNT,
	LBL_SAME_WINDOW,
	LBL_UNDER,
};

static int assemble(struct asm_buf *a, int map_fd)
{
	asm_init(a);
	MOV_REG(a, R6, R1);
	ST(a, BPF_W, R10, -8, 0);
	emit_map_lookup(a, map_fd, -8);
	JEQ(a, R0, 0, LBL_TO_IFB);
	MOV_REG(a, R7, R0);
	LDX(a, BPF_DW, R1, R7, G(threshold_bytes));
	JEQ(a, R1, 0, LBL_TO_IFB); /* off */
	/* what the ifb sends back passes, uncounted */
	LDX(a, BPF_DW, R1, R7, G(pass_ifindex));
	JEQ(a, R1, 0, LBL_COUNT);
	LDX(a, BPF_W, R2, R6, (int16_t)offsetof(struct __sk_buff, ingress_ifindex));
	JNE_REG(a, R1, R2, LBL_COUNT);
	MOV_IMM(a, R0, TC_ACT_OK);
	EXIT(a);
	label(a, LBL_COUNT);
	CALL(a, BPF_FUNC_ktime_get_ns);
	MOV_REG(a, R9, R0);

	/* a new window when this one is over */
	LDX(a, BPF_DW, R2, R7, G(win_start_ns));
	MOV_REG(a, R3, R9);
	ALU_REG(a, BPF_SUB, R3, R2);
	LDX(a, BPF_DW, R4, R7, G(win_ns));
	JGT_REG(a, R4, R3, LBL_SAME_WINDOW);
	STX(a, BPF_DW, R7, R9, G(win_start_ns));
	ST(a, BPF_DW, R7, G(win_bytes), 0);
	label(a, LBL_SAME_WINDOW);

	/* bytes += len; over the threshold: redirect until now + hold */
	LDX(a, BPF_W, R8, R6, (int16_t)offsetof(struct __sk_buff, len));
	LDX(a, BPF_DW, R1, R7, G(win_bytes));
	ALU_REG(a, BPF_ADD, R1, R8);
	STX(a, BPF_DW, R7, R1, G(win_bytes));
	LDX(a, BPF_DW, R2, R7, G(threshold_bytes));
	JGE_REG(a, R2, R1, LBL_UNDER);
	LDX(a, BPF_DW, R3, R7, G(hold_ns));
	ALU_REG(a, BPF_ADD, R3, R9);
	STX(a, BPF_DW, R7, R3, G(redirect_until_ns));
	label(a, LBL_UNDER);

	LDX(a, BPF_DW, R3, R7, G(redirect_until_ns));
	JGT_REG(a, R3, R9, LBL_TO_IFB);
	MOV_IMM(a, R0, TC_ACT_OK);
	EXIT(a);

	label(a, LBL_TO_IFB);
	MOV_IMM(a, R0, TC_ACT_UNSPEC);
	EXIT(a);
	return asm_resolve(a);
}

int bpf_gate_map_create(int *ret_fd, struct error *err)
{
	return bpf_map_create_named(BPF_MAP_TYPE_ARRAY, sizeof(uint32_t), sizeof(struct bpf_gate), 1, "aiqos_gate",
	                            "gate's BPF map", ret_fd, err);
}

int bpf_gate_prog_load(int map_fd, const char *name, int *ret_fd, struct error *err)
{
	_cleanup_free_ struct asm_buf *a = calloc(1, sizeof(*a));
	int r;

	if (!a)
		return error_set(err, ENOMEM, "out of memory");
	r = assemble(a, map_fd);
	if (r < 0)
		return error_set(err, -r, "assemble the gate %s: %s", name, strerror(-r));
	return bpf_prog_load_sched_cls(a, name, streq(name, BPF_GATE_UP_NAME) ? "upload gate" : "download gate", ret_fd,
	                               err);
}

int bpf_gate_map_from_prog(uint32_t prog_id, int *ret_fd, struct error *err)
{
	_cleanup_close_ int fd = -1;
	uint32_t map_ids[2] = {0}, n = 0, type = 0, value_size = 0;
	int r = bpf_prog_map_ids(prog_id, map_ids, ARRAY_SIZE(map_ids), &n, "gate", err);

	if (r < 0)
		return r;
	if (n != 1)
		return error_set(err, ENOENT, "gate program id %u uses %u maps, not 1", prog_id, n);
	r = bpf_map_fd_by_id(map_ids[0], &fd, &type, &value_size, err);
	if (r < 0)
		return r;
	/* an older gate's map (another value size) is not reused */
	if (type != BPF_MAP_TYPE_ARRAY || value_size != sizeof(struct bpf_gate))
		return error_set(err, ENOENT, "gate program id %u: not the map of this version's gate", prog_id);
	*ret_fd = TAKE_FD(fd);
	return 0;
}

int bpf_gate_read(int map_fd, struct bpf_gate *ret, struct error *err)
{
	memset(ret, 0, sizeof(*ret));
	return bpf_array0_read(map_fd, ret, "gate map", err);
}

int bpf_gate_sync(int map_fd, const struct bpf_gate *want, bool *ret_changed, struct error *err)
{
	struct bpf_gate have, v = {.win_ns = want->win_ns,
	                           .threshold_bytes = want->threshold_bytes,
	                           .hold_ns = want->hold_ns,
	                           .pass_ifindex = want->pass_ifindex};
	int r;

	if (ret_changed)
		*ret_changed = false;
	r = bpf_gate_read(map_fd, &have, err);
	if (r < 0)
		return r;
	if (have.win_ns == v.win_ns && have.threshold_bytes == v.threshold_bytes && have.hold_ns == v.hold_ns &&
	    have.pass_ifindex == v.pass_ifindex)
		return 0;
	r = bpf_array0_write(map_fd, &v, "gate map", err);
	if (r < 0)
		return r;
	if (ret_changed)
		*ret_changed = true;
	return 0;
}
