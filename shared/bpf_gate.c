/* bpf_gate.c — the gate's loader (bpf_gate.h): the program from its
 * skeleton (shared/bpf/gate.bpf.c), its map created, found again and
 * synced. */
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <stdlib.h>
#include <string.h>

#include "bpf_gate.h"
#include "bpf_load.h"
#include "gate.skel.h"
#include "util.h"

static const struct bpf_map_want want_gate = {BPF_MAP_TYPE_ARRAY, sizeof(uint32_t), sizeof(struct bpf_gate), 1};

static const char *gate_what(const char *name)
{
	return streq(name, BPF_GATE_UP_NAME) ? "upload gate" : "download gate";
}

int bpf_gate_load(int *map_fd, const char *name, int *ret_prog_fd, struct error *err)
{
	_cleanup_free_ char *log = calloc(1, BPF_LOG_MAX);
	struct bpf_object_open_opts o = {.sz = sizeof(o), .kernel_log_buf = log, .kernel_log_size = BPF_LOG_MAX};
	struct gate_bpf *skel;
	int r;

	if (!log)
		return error_set(err, ENOMEM, "out of memory");
	skel = gate_bpf__open_opts(&o);
	if (!skel)
		return bpf_load_error(err, -errno, gate_what(name), NULL);
	r = bpf_skel_load(skel->skeleton, skel->progs.aiqos_gate_prog, &skel->maps.aiqos_gate, &map_fd, 1, ret_prog_fd,
	                  gate_what(name), log, err);
	gate_bpf__destroy(skel);
	return r;
}

int bpf_gate_map_from_prog(uint32_t prog_id, int *ret_fd, struct error *err)
{
	return bpf_prog_one_map(prog_id, &want_gate, ret_fd, "gate", err);
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
