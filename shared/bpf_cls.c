/* bpf_cls.c — the uplink classifier's loader (bpf_cls.h): the program from
 * its skeleton (shared/bpf/cls.bpf.c), its maps created, found again and
 * synced. */
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bpf_cls.h"
#include "bpf_load.h"
#include "cls.skel.h"
#include "dcls.skel.h"
#include "util.h"

static const struct bpf_map_want want_cls = {BPF_MAP_TYPE_HASH, sizeof(struct bpf_cls_key), sizeof(uint32_t),
                                             BPF_CLS_MAP_MAX};
static const struct bpf_map_want want_edt = {BPF_MAP_TYPE_ARRAY, sizeof(uint32_t), sizeof(struct bpf_edt), 1};
static const struct bpf_map_want want_seen = {BPF_MAP_TYPE_PERCPU_ARRAY, sizeof(uint32_t), sizeof(uint64_t), 1};

int bpf_cls_load(int *cls_fd, int *edt_fd, int *ret_prog_fd, struct error *err)
{
	_cleanup_free_ char *log = calloc(1, BPF_LOG_MAX);
	struct bpf_object_open_opts o = {.sz = sizeof(o), .kernel_log_buf = log, .kernel_log_size = BPF_LOG_MAX};
	struct cls_bpf *skel;
	int r;

	if (!log)
		return error_set(err, ENOMEM, "out of memory");
	skel = cls_bpf__open_opts(&o);
	if (!skel)
		return bpf_load_error(err, -errno, "classifier", NULL);
	r = bpf_skel_load(skel->skeleton, skel->progs.aiqos_cls_edt,
	                  (struct bpf_map *const[]){skel->maps.aiqos_cls, skel->maps.aiqos_edt},
	                  (int *const[]){cls_fd, edt_fd}, 2, ret_prog_fd, "classifier", log, err);
	cls_bpf__destroy(skel);
	return r;
}

int bpf_dcls_load(int *map_fd, int *seen_fd, int *ret_prog_fd, struct error *err)
{
	_cleanup_free_ char *log = calloc(1, BPF_LOG_MAX);
	struct bpf_object_open_opts o = {.sz = sizeof(o), .kernel_log_buf = log, .kernel_log_size = BPF_LOG_MAX};
	struct dcls_bpf *skel;
	int r;

	if (!log)
		return error_set(err, ENOMEM, "out of memory");
	skel = dcls_bpf__open_opts(&o);
	if (!skel)
		return bpf_load_error(err, -errno, "download classifier", NULL);
	r = bpf_skel_load(skel->skeleton, skel->progs.aiqos_dcls_prog,
	                  (struct bpf_map *const[]){skel->maps.aiqos_dcls, skel->maps.aiqos_dseen},
	                  (int *const[]){map_fd, seen_fd}, 2, ret_prog_fd, "download classifier", log, err);
	dcls_bpf__destroy(skel);
	return r;
}

/* The maps of an attached program of this version (n_min..n_min + 1 maps:
 * its own, its flows (bands.h), which a reload starts afresh, and maybe the
 * compiler's constants): each of want[] adopted into fds[] (closed on
 * failure). */
static int prog_maps_adopt(uint32_t prog_id, unsigned n_min, const struct bpf_map_want *const *want, int *fds,
                           unsigned n_want, const char *what, const char *name, struct error *err)
{
	uint32_t map_ids[4] = {0}, n = 0;
	int r = bpf_prog_map_ids(prog_id, map_ids, ARRAY_SIZE(map_ids), &n, what, err);
	unsigned found = 0;

	if (r < 0)
		return r;
	if (n < n_min || n > n_min + 1)
		return error_set(err, ENOENT, "%s program id %u uses %u maps, not %u or %u", what, prog_id, n, n_min,
		                 n_min + 1);
	for (unsigned k = 0; k < n_want; k++)
		fds[k] = -1;
	for (unsigned i = 0; i < n; i++)
		for (unsigned k = 0; k < n_want; k++) {
			struct error e = {0};

			if (fds[k] < 0 && bpf_map_adopt(map_ids[i], want[k], &fds[k], what, &e) == 0) {
				found++;
				break;
			}
		}
	if (found == n_want)
		return 0;
	for (unsigned k = 0; k < n_want; k++)
		if (fds[k] >= 0) {
			close(fds[k]);
			fds[k] = -1;
		}
	return error_set(err, ENOENT, "%s program id %u: not the maps of this version's %s", what, prog_id, name);
}

int bpf_dcls_map_from_prog(uint32_t prog_id, int *ret_fd, int *ret_seen_fd, struct error *err)
{
	int fds[2] = {-1, -1};
	int r = prog_maps_adopt(prog_id, 3, (const struct bpf_map_want *const[]){&want_cls, &want_seen}, fds, 2,
	                        "download classifier", BPF_DCLS_NAME, err);

	if (r < 0)
		return r;
	*ret_fd = fds[0];
	*ret_seen_fd = fds[1];
	return 0;
}

int bpf_dcls_seen(int seen_fd, uint64_t *ret, struct error *err)
{
	int n = libbpf_num_possible_cpus();
	_cleanup_free_ uint64_t *v = NULL;
	uint32_t zero = 0;

	if (n <= 0)
		return error_set(err, -n, "download classifier count: CPUs: %s", strerror(-n));
	v = calloc((size_t)n, sizeof(*v));
	if (!v)
		return error_set(err, ENOMEM, "out of memory");
	if (bpf_map_lookup_elem(seen_fd, &zero, v) < 0)
		return error_set(err, errno, "download classifier count: %s", strerror(errno));
	*ret = 0;
	for (int i = 0; i < n; i++)
		*ret += v[i];
	return 0;
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
	v.link_q8 = 0;
	v.inf_q8 = 0;
	r = bpf_array0_write(edt_fd, &v, "EDT map", err);
	if (r < 0)
		return r;
	if (ret_changed)
		*ret_changed = true;
	return 0;
}

int bpf_cls_map_from_prog(uint32_t prog_id, int *ret_fd, int *ret_edt_fd, struct error *err)
{
	int fds[2] = {-1, -1};
	int r = prog_maps_adopt(prog_id, 3, (const struct bpf_map_want *const[]){&want_cls, &want_edt}, fds, 2,
	                        "classifier", BPF_CLS_NAME, err);

	if (r < 0)
		return r;
	*ret_fd = fds[0];
	*ret_edt_fd = fds[1];
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
		if (bpf_map_get_next_key(map_fd, &cur, &next) < 0) {
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
		if (bpf_map_delete_elem(map_fd, &have[i]) < 0 && errno != ENOENT)
			return error_set(err, errno, "classifier map: delete: %s", strerror(errno));
		changed++;
	}
	qsort(have, n_have, sizeof(*have), key_cmp);
	for (unsigned i = 0; i < n; i++) {
		uint32_t v = 0;
		bool present = n_have && bsearch(&sorted[i].key, have, n_have, sizeof(*have), key_cmp);

		if (present && bpf_map_lookup_elem(map_fd, &sorted[i].key, &v) == 0 && v == sorted[i].priority)
			continue;
		v = sorted[i].priority;
		if (bpf_map_update_elem(map_fd, &sorted[i].key, &v, BPF_ANY) < 0)
			return error_set(err, errno, "classifier map: update: %s", strerror(errno));
		changed++;
	}
	if (ret_changed)
		*ret_changed = changed;
	return 0;
}
