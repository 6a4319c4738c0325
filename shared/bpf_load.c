/* bpf_load.c — the loaders' shared libbpf calls (bpf_load.h). */
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "bpf_load.h"
#include "util.h"

/* The last line of the verifier's log that says something. */
static const char *log_last_words(const char *log, char *buf, size_t size)
{
	size_t n = log ? strlen(log) : 0;
	const char *end, *start;

	while (n && (log[n - 1] == '\n' || log[n - 1] == ' '))
		n--;
	if (!n)
		return NULL;
	end = log + n;
	start = end;
	while (start > log && start[-1] != '\n')
		start--;
	n = (size_t)(end - start);
	if (n >= size)
		n = size - 1;
	memcpy(buf, start, n);
	buf[n] = '\0';
	return buf;
}

int bpf_load_error(struct error *err, int r, const char *what, const char *log)
{
	char last[256];
	const char *words;

	if (r >= 0)
		r = -EINVAL;
	if (bpf_denied(r))
		return error_set(err, -r,
		                 "load the %s: bpf(2): %s: a configuration error, not a missing kernel feature "
		                 "(the agent needs CAP_BPF or CAP_SYS_ADMIN, bpf allowed by its seccomp filter, "
		                 "and on kernels before 5.11 an RLIMIT_MEMLOCK large enough for its maps)",
		                 what, strerror(-r));
	words = log_last_words(log, last, sizeof(last));
	if (words)
		return error_set(err, -r, "load the %s: %s (verifier: %s)", what, strerror(-r), words);
	return error_set(err, -r, "load the %s: %s", what, strerror(-r));
}

int bpf_skel_load(struct bpf_object_skeleton *skel, struct bpf_program *prog, struct bpf_map *const *maps,
                  int *const *fds, unsigned n, int *ret_prog_fd, const char *what, const char *log, struct error *err)
{
	int kept[BPF_SKEL_MAPS_MAX] = {-1, -1, -1, -1}, fd = -1;
	int r = 0;

	if (n > BPF_SKEL_MAPS_MAX)
		return error_set(err, E2BIG, "load the %s: %u maps", what, n);
	for (unsigned i = 0; i < n && r == 0; i++)
		if (*fds[i] >= 0)
			r = bpf_map__reuse_fd(maps[i], *fds[i]);
	if (r == 0)
		r = bpf_object__load_skeleton(skel);
	if (r < 0)
		return bpf_load_error(err, r, what, log);
	/* the skeleton's fds close with it: keep copies */
	fd = bpf_fd_keep(bpf_program__fd(prog));
	for (unsigned i = 0; fd >= 0 && i < n; i++)
		if (*fds[i] < 0 && (kept[i] = bpf_fd_keep(bpf_map__fd(maps[i]))) < 0)
			r = -errno;
	if (fd < 0 || r < 0) {
		r = fd < 0 ? -errno : r;
		for (unsigned i = 0; i < n; i++)
			if (kept[i] >= 0)
				close(kept[i]);
		if (fd >= 0)
			close(fd);
		return error_set(err, -r, "load the %s: keep its fds: %s", what, strerror(-r));
	}
	for (unsigned i = 0; i < n; i++)
		if (*fds[i] < 0)
			*fds[i] = kept[i];
	*ret_prog_fd = fd;
	return 0;
}

int bpf_prog_map_ids(uint32_t prog_id, uint32_t *ids, uint32_t max, uint32_t *ret_n, const char *what,
                     struct error *err)
{
	struct bpf_prog_info info;
	uint32_t len = sizeof(info);
	_cleanup_close_ int fd = bpf_prog_get_fd_by_id(prog_id);

	if (fd < 0)
		return error_set(err, errno, "%s program id %u: %s", what, prog_id, strerror(errno));
	memset(&info, 0, sizeof(info));
	info.nr_map_ids = max;
	info.map_ids = (uint64_t)(uintptr_t)ids;
	if (bpf_obj_get_info_by_fd(fd, &info, &len) < 0)
		return error_set(err, errno, "%s program id %u: info: %s", what, prog_id, strerror(errno));
	*ret_n = info.nr_map_ids;
	return 0;
}

int bpf_map_adopt(uint32_t id, const struct bpf_map_want *want, int *ret_fd, const char *what, struct error *err)
{
	struct bpf_map_info info;
	uint32_t len = sizeof(info);
	_cleanup_close_ int fd = bpf_map_get_fd_by_id(id);

	if (fd < 0)
		return error_set(err, errno, "%s map id %u: %s", what, id, strerror(errno));
	memset(&info, 0, sizeof(info));
	if (bpf_obj_get_info_by_fd(fd, &info, &len) < 0)
		return error_set(err, errno, "%s map id %u: info: %s", what, id, strerror(errno));
	if (info.type != want->type || info.key_size != want->key_size || info.value_size != want->value_size ||
	    info.max_entries != want->max_entries)
		return error_set(err, ENOENT,
		                 "%s map id %u: type %u, key %u, value %u bytes, %u entries: not this version's "
		                 "(%u, %u, %u, %u)",
		                 what, id, info.type, info.key_size, info.value_size, info.max_entries, want->type,
		                 want->key_size, want->value_size, want->max_entries);
	*ret_fd = TAKE_FD(fd);
	return 0;
}

int bpf_prog_one_map(uint32_t prog_id, const struct bpf_map_want *want, int *ret_fd, const char *what,
                     struct error *err)
{
	uint32_t map_ids[2] = {0}, n = 0;
	int r = bpf_prog_map_ids(prog_id, map_ids, 2, &n, what, err);

	if (r < 0)
		return r;
	if (n != 1)
		return error_set(err, ENOENT, "%s program id %u uses %u maps, not 1", what, prog_id, n);
	return bpf_map_adopt(map_ids[0], want, ret_fd, what, err);
}

int bpf_prog_tag_get(int prog_fd, uint8_t *ret_tag, struct error *err)
{
	struct bpf_prog_info info;
	uint32_t len = sizeof(info);

	memset(&info, 0, sizeof(info));
	if (bpf_obj_get_info_by_fd(prog_fd, &info, &len) < 0)
		return error_set(err, errno, "program info: %s", strerror(errno));
	memcpy(ret_tag, info.tag, BPF_TAG_LEN);
	return 0;
}

int bpf_tcx_query(int ifindex, bool egress, struct bpf_tcx_prog *ret, unsigned max, unsigned *ret_n, struct error *err)
{
	uint32_t ids[64], cnt = ARRAY_SIZE(ids), flags = 0;

	if (bpf_prog_query(ifindex, egress ? BPF_LOAD_TCX_EGRESS : BPF_LOAD_TCX_INGRESS, 0, &flags, ids, &cnt) < 0)
		return error_set(err, errno, "tcx %s of ifindex %d: %s", egress ? "egress" : "ingress", ifindex,
		                 strerror(errno));
	*ret_n = cnt;
	for (uint32_t i = 0; i < cnt && i < max && i < ARRAY_SIZE(ids); i++) {
		struct bpf_prog_info info;
		uint32_t len = sizeof(info);
		int fd = bpf_prog_get_fd_by_id(ids[i]);

		ret[i].id = ids[i];
		ret[i].name[0] = '\0';
		memset(&info, 0, sizeof(info));
		if (fd >= 0 && bpf_obj_get_info_by_fd(fd, &info, &len) == 0)
			str_copy(ret[i].name, sizeof(ret[i].name), info.name);
		if (fd >= 0)
			close(fd);
	}
	return 0;
}

int bpf_array0_read(int map_fd, void *value, const char *what, struct error *err)
{
	uint32_t key = 0;

	if (bpf_map_lookup_elem(map_fd, &key, value) < 0)
		return error_set(err, errno, "%s: read: %s", what, strerror(errno));
	return 0;
}

int bpf_array0_write(int map_fd, const void *value, const char *what, struct error *err)
{
	uint32_t key = 0;

	if (bpf_map_update_elem(map_fd, &key, value, BPF_ANY) < 0)
		return error_set(err, errno, "%s: write: %s", what, strerror(errno));
	return 0;
}
