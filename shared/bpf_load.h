/* bpf_load.h — what the loaders of aiqos's BPF programs (bpf_cls.h,
 * bpf_gate.h) share on top of libbpf: the maps of an attached program
 * found again by id (their type and sizes checked), an array's element 0,
 * a program's tag, and libbpf's errors turned into ours (a refusal of
 * bpf(2) itself is a configuration error, not a missing feature). The
 * programs are compiled from shared/bpf/NAME.bpf.c and embedded as
 * skeletons (build/gen/NAME.skel.h): nothing is read from disk at run
 * time. */
#ifndef AIQOS_BPF_LOAD_H
#define AIQOS_BPF_LOAD_H

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>

#include "error.h"

#define BPF_TAG_LEN       8 /* BPF_TAG_SIZE: the kernel's hash of a program's instructions */
#define BPF_LOG_MAX       65536
#define BPF_SKEL_MAPS_MAX 4

/* What a map adopted from an attached program must be. */
struct bpf_map_want {
	uint32_t type;
	uint32_t key_size;
	uint32_t value_size;
	uint32_t max_entries;
};

/* Whether a load failed because bpf(2) was refused (EPERM: a seccomp
 * filter, missing CAP_BPF/CAP_SYS_ADMIN, RLIMIT_MEMLOCK before 5.11) rather
 * than because the kernel lacks or refuses the program. */
static inline bool bpf_denied(int r)
{
	return r == -EPERM;
}

/* A copy of a skeleton's fd (they close with it), close-on-exec; -1 and
 * errno on failure. */
static inline int bpf_fd_keep(int fd)
{
	return fd < 0 ? -1 : fcntl(fd, F_DUPFD_CLOEXEC, 3);
}

struct bpf_object_skeleton;
struct bpf_program;
struct bpf_map;

/* What every loader does between opening its skeleton and destroying it:
 * each of maps[0..n) on the fd *fds[i] when it is >= 0 (reused), the skeleton
 * loaded (log: the buffer the skeleton was opened with, for the
 * verifier's words), and copies of the program's fd (ret_prog_fd) and of
 * new maps' fds (into *fds[i]) kept past the skeleton. what names the
 * program in errors. */
int bpf_skel_load(struct bpf_object_skeleton *skel, struct bpf_program *prog, struct bpf_map *const *maps,
                  int *const *fds, unsigned n, int *ret_prog_fd, const char *what, const char *log, struct error *err);

/* The error of a failed skeleton load: the verifier's last words (from
 * log), or what a refusal of bpf(2) means. Returns r. */
int bpf_load_error(struct error *err, int r, const char *what, const char *log);
/* The ids of the maps an attached program uses (by its id), at most max. */
int bpf_prog_map_ids(uint32_t prog_id, uint32_t *ids, uint32_t max, uint32_t *ret_n, const char *what,
                     struct error *err);
/* A map's fd from its id when it is what want says (else -ENOENT, so the
 * caller loads the program again on new maps: another version's layout is
 * never read into this one's structs). */
int bpf_map_adopt(uint32_t id, const struct bpf_map_want *want, int *ret_fd, const char *what, struct error *err);
/* The one map of an attached program of one map (by its id), when it is
 * what want says (bpf_map_adopt); ENOENT when the program has another
 * number of maps. */
int bpf_prog_one_map(uint32_t prog_id, const struct bpf_map_want *want, int *ret_fd, const char *what,
                     struct error *err);
/* A loaded program's tag (ret_tag: BPF_TAG_LEN bytes). */
int bpf_prog_tag_get(int prog_fd, uint8_t *ret_tag, struct error *err);
/* tcx (kernel >= 6.6): a device's hooks as bpf_mprog lists of programs
 * that run before the legacy clsact filters. Debian 12's UAPI headers and
 * libbpf 1.1 predate it: the attach types by number. */
#define BPF_LOAD_TCX_INGRESS 46 /* BPF_TCX_INGRESS */
#define BPF_LOAD_TCX_EGRESS  47 /* BPF_TCX_EGRESS */
struct bpf_tcx_prog {
	uint32_t id;
	char name[16]; /* BPF_OBJ_NAME_LEN */
};
/* The programs on a device's tcx hook, in the order they run (at most max;
 * ret_n: how many there are). -EINVAL: the kernel has no tcx. */
int bpf_tcx_query(int ifindex, bool egress, struct bpf_tcx_prog *ret, unsigned max, unsigned *ret_n, struct error *err);
/* Element 0 of an array map: read, written. */
int bpf_array0_read(int map_fd, void *value, const char *what, struct error *err);
int bpf_array0_write(int map_fd, const void *value, const char *what, struct error *err);

#endif
