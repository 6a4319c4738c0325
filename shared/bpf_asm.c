/* bpf_asm.c — the assembler and the bpf(2) calls of the uplink's programs
 * (bpf_asm.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "bpf_asm.h"
#include "util.h"

#define VERIFIER_LOG 65536

long sys_bpf(int cmd, union bpf_attr *attr)
{
	return syscall(__NR_bpf, cmd, attr, sizeof(*attr));
}

uint64_t ptr_u64(const void *p)
{
	return (uint64_t)(uintptr_t)p;
}

void asm_init(struct asm_buf *a)
{
	memset(a, 0, sizeof(*a));
	for (unsigned i = 0; i < BPF_ASM_LABELS_MAX; i++)
		a->label_at[i] = -1;
}

void emit(struct asm_buf *a, uint8_t code, uint8_t dst, uint8_t src, int16_t off, int32_t imm)
{
	if (a->n >= BPF_ASM_INSNS_MAX) {
		a->overflow = true;
		return;
	}
	a->insn[a->n++] = (struct bpf_insn){.code = code, .dst_reg = dst, .src_reg = src, .off = off, .imm = imm};
}

void emit_jmp(struct asm_buf *a, uint8_t code, uint8_t dst, int32_t imm, unsigned l)
{
	if (a->n_fix >= BPF_ASM_INSNS_MAX || l >= BPF_ASM_LABELS_MAX) {
		a->overflow = true;
		return;
	}
	a->fix[a->n_fix].insn = a->n;
	a->fix[a->n_fix++].label = l;
	emit(a, code, dst, 0, 0, imm);
}

void emit_jmp_reg(struct asm_buf *a, uint8_t code, uint8_t dst, uint8_t src, unsigned l)
{
	emit_jmp(a, code | BPF_X, dst, 0, l);
	if (!a->overflow)
		a->insn[a->n - 1].src_reg = src;
}

void label(struct asm_buf *a, unsigned l)
{
	if (l < BPF_ASM_LABELS_MAX)
		a->label_at[l] = (int)a->n;
}

void emit_ld_map(struct asm_buf *a, int map_fd)
{
	emit(a, BPF_LD | BPF_DW | BPF_IMM, R1, BPF_PSEUDO_MAP_FD, 0, map_fd); // NOLINT(misc-redundant-expression)
	emit(a, 0, 0, 0, 0, 0);
}

void emit_map_lookup(struct asm_buf *a, int map_fd, int key_off)
{
	emit_ld_map(a, map_fd);
	MOV_REG(a, R2, R10);
	ALU_IMM(a, BPF_ADD, R2, key_off);
	CALL(a, BPF_FUNC_map_lookup_elem);
}

int asm_resolve(struct asm_buf *a)
{
	if (a->overflow)
		return -E2BIG;
	for (unsigned i = 0; i < a->n_fix; i++) {
		int at = a->label_at[a->fix[i].label];

		if (at < 0)
			return -EINVAL;
		a->insn[a->fix[i].insn].off = (int16_t)(at - (int)a->fix[i].insn - 1);
	}
	return 0;
}

int bpf_map_create_named(uint32_t type, uint32_t key_size, uint32_t value_size, uint32_t max_entries, const char *name,
                         const char *what, int *ret_fd, struct error *err)
{
	union bpf_attr attr;
	int fd;

	memset(&attr, 0, sizeof(attr));
	attr.map_type = type;
	attr.key_size = key_size;
	attr.value_size = value_size;
	attr.max_entries = max_entries;
	str_copy(attr.map_name, sizeof(attr.map_name), name);
	fd = (int)sys_bpf(BPF_MAP_CREATE, &attr);
	if (fd < 0 && errno == EINVAL) { /* kernels before map names */
		memset(attr.map_name, 0, sizeof(attr.map_name));
		fd = (int)sys_bpf(BPF_MAP_CREATE, &attr);
	}
	if (fd < 0)
		return error_set(err, errno, "create the %s: %s", what, strerror(errno));
	*ret_fd = fd;
	return 0;
}

int bpf_prog_load_sched_cls(const struct asm_buf *a, const char *name, const char *what, int *ret_fd, struct error *err)
{
	_cleanup_free_ char *vlog = NULL;
	union bpf_attr attr;
	int fd;

	memset(&attr, 0, sizeof(attr));
	attr.prog_type = BPF_PROG_TYPE_SCHED_CLS;
	attr.insns = ptr_u64(a->insn);
	attr.insn_cnt = a->n;
	attr.license = ptr_u64("GPL");
	str_copy(attr.prog_name, sizeof(attr.prog_name), name);
	fd = (int)sys_bpf(BPF_PROG_LOAD, &attr);
	if (fd < 0 && errno == EINVAL) { /* kernels before program names */
		memset(attr.prog_name, 0, sizeof(attr.prog_name));
		fd = (int)sys_bpf(BPF_PROG_LOAD, &attr);
	}
	if (fd < 0 && (vlog = calloc(1, VERIFIER_LOG))) {
		/* again with the verifier's log, for the reason */
		attr.log_buf = ptr_u64(vlog);
		attr.log_size = VERIFIER_LOG;
		attr.log_level = 1;
		fd = (int)sys_bpf(BPF_PROG_LOAD, &attr);
	}
	if (fd < 0) {
		int e = errno;
		size_t len = vlog ? strlen(vlog) : 0;

		while (len > 0 && (vlog[len - 1] == '\n' || vlog[len - 1] == ' '))
			vlog[--len] = '\0';
		/* the last lines of the verifier's log say why */
		return error_set(err, e, "load the %s program: %s%s%s", what, strerror(e), len ? ": " : "",
		                 len > 300 ? vlog + len - 300
		                 : len     ? vlog
		                           : "");
	}
	*ret_fd = fd;
	return 0;
}

int bpf_map_fd_by_id(uint32_t id, int *ret_fd, uint32_t *ret_type, uint32_t *ret_value_size, struct error *err)
{
	struct bpf_map_info info;
	union bpf_attr attr;
	int fd;

	memset(&attr, 0, sizeof(attr));
	attr.map_id = id;
	fd = (int)sys_bpf(BPF_MAP_GET_FD_BY_ID, &attr);
	if (fd < 0)
		return error_set(err, errno, "BPF map id %u: %s", id, strerror(errno));
	memset(&info, 0, sizeof(info));
	memset(&attr, 0, sizeof(attr));
	attr.info.bpf_fd = (uint32_t)fd;
	attr.info.info_len = sizeof(info);
	attr.info.info = ptr_u64(&info);
	if (sys_bpf(BPF_OBJ_GET_INFO_BY_FD, &attr) < 0) {
		int e = errno;

		close(fd);
		return error_set(err, e, "BPF map id %u: info: %s", id, strerror(e));
	}
	*ret_fd = fd;
	*ret_type = info.type;
	if (ret_value_size)
		*ret_value_size = info.value_size;
	return 0;
}

int bpf_prog_map_ids(uint32_t prog_id, uint32_t *ids, uint32_t max, uint32_t *ret_n, const char *what,
                     struct error *err)
{
	_cleanup_close_ int prog_fd = -1;
	struct bpf_prog_info info;
	union bpf_attr attr;

	memset(&attr, 0, sizeof(attr));
	attr.prog_id = prog_id;
	prog_fd = (int)sys_bpf(BPF_PROG_GET_FD_BY_ID, &attr);
	if (prog_fd < 0)
		return error_set(err, errno, "%s program id %u: %s", what, prog_id, strerror(errno));
	memset(&info, 0, sizeof(info));
	info.nr_map_ids = max;
	info.map_ids = ptr_u64(ids);
	memset(&attr, 0, sizeof(attr));
	attr.info.bpf_fd = (uint32_t)prog_fd;
	attr.info.info_len = sizeof(info);
	attr.info.info = ptr_u64(&info);
	if (sys_bpf(BPF_OBJ_GET_INFO_BY_FD, &attr) < 0)
		return error_set(err, errno, "%s program id %u: info: %s", what, prog_id, strerror(errno));
	*ret_n = info.nr_map_ids;
	return 0;
}

/* cmd (lookup or update) on element 0 of an array map */
static int array0_op(int map_fd, int cmd, void *value, const char *what, struct error *err)
{
	uint32_t key = 0;
	union bpf_attr attr;

	memset(&attr, 0, sizeof(attr));
	attr.map_fd = (uint32_t)map_fd;
	attr.key = ptr_u64(&key);
	attr.value = ptr_u64(value);
	attr.flags = cmd == BPF_MAP_UPDATE_ELEM ? BPF_ANY : 0;
	if (sys_bpf(cmd, &attr) < 0)
		return error_set(err, errno, "%s: %s: %s", what, cmd == BPF_MAP_UPDATE_ELEM ? "update" : "read",
		                 strerror(errno));
	return 0;
}

int bpf_array0_read(int map_fd, void *value, const char *what, struct error *err)
{
	return array0_op(map_fd, BPF_MAP_LOOKUP_ELEM, value, what, err);
}

int bpf_array0_write(int map_fd, const void *value, const char *what, struct error *err)
{
	return array0_op(map_fd, BPF_MAP_UPDATE_ELEM, (void *)(uintptr_t)value, what, err);
}
