/* bpf_asm.h — a tiny BPF assembler for the uplink's programs (bpf_cls.h,
 * bpf_gate.h): instructions with forward labels, no compiler at run time
 * and no libbpf; the bpf(2) calls they share. */
#ifndef AIQOS_BPF_ASM_H
#define AIQOS_BPF_ASM_H

#include <linux/bpf.h>
#include <stdbool.h>
#include <stdint.h>

#include "error.h"

#define BPF_ASM_INSNS_MAX  256
#define BPF_ASM_LABELS_MAX 24

struct asm_buf {
	struct bpf_insn insn[BPF_ASM_INSNS_MAX];
	unsigned n;
	int label_at[BPF_ASM_LABELS_MAX]; /* instruction index, -1 = not placed */
	struct {
		unsigned insn;
		unsigned label;
	} fix[BPF_ASM_INSNS_MAX];
	unsigned n_fix;
	bool overflow;
};

void asm_init(struct asm_buf *a);
void emit(struct asm_buf *a, uint8_t code, uint8_t dst, uint8_t src, int16_t off, int32_t imm);
/* a jump to a label (placed before or after); on two registers (BPF_X) */
void emit_jmp(struct asm_buf *a, uint8_t code, uint8_t dst, int32_t imm, unsigned label);
void emit_jmp_reg(struct asm_buf *a, uint8_t code, uint8_t dst, uint8_t src, unsigned label);
void label(struct asm_buf *a, unsigned l);
/* r1 = the map (its fd, as a BPF_PSEUDO_MAP_FD load) */
void emit_ld_map(struct asm_buf *a, int map_fd);
/* r0 = the map's value for the key at fp + key_off, or NULL */
void emit_map_lookup(struct asm_buf *a, int map_fd, int key_off);
/* Jump offsets filled in: -E2BIG (too long), -EINVAL (a label not placed). */
int asm_resolve(struct asm_buf *a);

long sys_bpf(int cmd, union bpf_attr *attr);
uint64_t ptr_u64(const void *p);
/* A named map (the name left out on kernels before map names). what names
 * it in errors. */
int bpf_map_create_named(uint32_t type, uint32_t key_size, uint32_t value_size, uint32_t max_entries, const char *name,
                         const char *what, int *ret_fd, struct error *err);
/* Load a SCHED_CLS program (GPL); on failure the verifier's last words are
 * in err. */
int bpf_prog_load_sched_cls(const struct asm_buf *a, const char *name, const char *what, int *ret_fd,
                            struct error *err);
/* The ids of the maps an attached program uses (by its id), at most max;
 * what names it in errors. */
int bpf_prog_map_ids(uint32_t prog_id, uint32_t *ids, uint32_t max, uint32_t *ret_n, const char *what,
                     struct error *err);
/* Element 0 of an array map: read, written. */
int bpf_array0_read(int map_fd, void *value, const char *what, struct error *err);
int bpf_array0_write(int map_fd, const void *value, const char *what, struct error *err);
/* A map's fd, type and value size (ret_value_size may be NULL) from its id. */
int bpf_map_fd_by_id(uint32_t id, int *ret_fd, uint32_t *ret_type, uint32_t *ret_value_size, struct error *err);

#define R0  BPF_REG_0
#define R1  BPF_REG_1
#define R2  BPF_REG_2
#define R3  BPF_REG_3
#define R4  BPF_REG_4
#define R6  BPF_REG_6
#define R7  BPF_REG_7
#define R8  BPF_REG_8
#define R9  BPF_REG_9
#define R10 BPF_REG_10

#define MOV_IMM(a, d, v)     emit(a, BPF_ALU64 | BPF_MOV | BPF_K, d, 0, 0, v)
#define MOV_REG(a, d, s)     emit(a, BPF_ALU64 | BPF_MOV | BPF_X, d, s, 0, 0)
#define ALU_IMM(a, op, d, v) emit(a, BPF_ALU64 | (op) | BPF_K, d, 0, 0, v)
#define ALU_REG(a, op, d, s) emit(a, BPF_ALU64 | (op) | BPF_X, d, s, 0, 0)
#define OR_REG(a, d, s)      emit(a, BPF_ALU64 | BPF_OR | BPF_X, d, s, 0, 0)
#define LDX(a, sz, d, s, o)  emit(a, BPF_LDX | (sz) | BPF_MEM, d, s, o, 0)
#define STX(a, sz, d, s, o)  emit(a, BPF_STX | (sz) | BPF_MEM, d, s, o, 0)
#define ST(a, sz, d, o, v)   emit(a, BPF_ST | (sz) | BPF_MEM, d, 0, o, v)
#define CALL(a, fn)          emit(a, BPF_JMP | BPF_CALL, 0, 0, 0, fn)
#define EXIT(a)              emit(a, BPF_JMP | BPF_EXIT, 0, 0, 0, 0)
#define JEQ(a, d, v, l)      emit_jmp(a, BPF_JMP | BPF_JEQ | BPF_K, d, v, l)
#define JNE(a, d, v, l)      emit_jmp(a, BPF_JMP | BPF_JNE | BPF_K, d, v, l)
#define JA(a, l)             emit_jmp(a, BPF_JMP | BPF_JA, 0, 0, l)
#define JGE_REG(a, d, s, l)  emit_jmp_reg(a, BPF_JMP | BPF_JGE, d, s, l)
#define JGT_REG(a, d, s, l)  emit_jmp_reg(a, BPF_JMP | BPF_JGT, d, s, l)
#define JNE_REG(a, d, s, l)  emit_jmp_reg(a, BPF_JMP | BPF_JNE, d, s, l)

#endif
