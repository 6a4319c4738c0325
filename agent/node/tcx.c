/* tcx.c — the uplink's egress classifier as a tcx link (tcx.h). */
#include <bpf/bpf.h>
#include <errno.h>
#include <linux/bpf.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "agent.h"
#include "bpf_cls.h"
#include "bpf_load.h"
#include "node/tcx.h"

#ifndef BPF_F_BEFORE
#define BPF_F_BEFORE (1U << 3)
#endif
#define BPF_FS_MAGIC_ 0xcafe4a11

bool tcx_available(int ifindex)
{
	struct bpf_tcx_prog p[1];
	unsigned n = 0;

	return ifindex > 0 && bpf_tcx_query(ifindex, true, p, 0, &n, NULL) == 0;
}

/* <bpffs>/aiqos/cls-egress-<ifname>, "" when there is no bpffs to pin in */
static void pin_path(const struct agent *ag, char *buf, size_t size)
{
	const char *fs = getenv("AIQOS_BPFFS");
	char dir[256];
	struct statfs st;

	buf[0] = '\0';
	if (!fs || !fs[0])
		fs = TCX_BPFFS_DEFAULT;
	if (statfs(fs, &st) < 0 || (unsigned long)st.f_type != BPF_FS_MAGIC_)
		return;
	snprintf(dir, sizeof(dir), "%s/aiqos", fs);
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return;
	snprintf(buf, size, "%s/cls-egress-%s", dir, ag->up.ifname);
}

static uint32_t link_prog_id(int link_fd)
{
	struct bpf_link_info info;
	uint32_t len = sizeof(info);

	memset(&info, 0, sizeof(info));
	return bpf_obj_get_info_by_fd(link_fd, &info, &len) == 0 ? info.prog_id : 0;
}

/* Where our program runs on the egress hook: 0 first, > 0 behind others, -1 not there. */
static int hook_position(const struct agent *ag, uint32_t prog_id)
{
	struct bpf_tcx_prog p[32];
	unsigned n = 0;

	if (!prog_id || bpf_tcx_query(ag->up.ifindex, true, p, ARRAY_SIZE(p), &n, NULL) < 0)
		return -1;
	for (unsigned i = 0; i < n && i < ARRAY_SIZE(p); i++)
		if (p[i].id == prog_id)
			return (int)i;
	return -1;
}

/* The attached program is the one this version loads (its tag), or the
 * tags are unknown. */
static bool prog_is_this_version(const struct agent *ag, uint32_t prog_id)
{
	uint8_t tag[TC_BPF_TAG_LEN];
	int fd;
	bool same;

	if (!ag->prog_tag_known)
		return true;
	fd = prog_id ? bpf_prog_get_fd_by_id(prog_id) : -1;
	if (fd < 0)
		return false;
	same = bpf_prog_tag_get(fd, tag, NULL) == 0 && memcmp(tag, ag->prog_tag[AGENT_PROG_CLS], sizeof(tag)) == 0;
	close(fd);
	return same;
}

void tcx_cls_release(struct agent *ag, bool detach)
{
	char pin[AGENT_PATH_MAX];

	if (ag->tcx_cls_link_fd < 0 && detach) {
		/* a pinned link of an earlier run */
		pin_path(ag, pin, sizeof(pin));
		if (pin[0])
			ag->tcx_cls_link_fd = bpf_obj_get(pin);
	}
	if (ag->tcx_cls_link_fd >= 0) {
		if (detach)
			(void)bpf_link_detach(ag->tcx_cls_link_fd);
		close(ag->tcx_cls_link_fd);
	}
	if (detach) {
		pin_path(ag, pin, sizeof(pin));
		if (pin[0])
			(void)unlink(pin);
	}
	ag->tcx_cls_link_fd = -1;
	ag->tcx_cls_prog_id = 0;
}

int tcx_cls_sync(struct agent *ag, bool want, struct error *err)
{
	char pin[AGENT_PATH_MAX];
	int prog_fd = -1, pos, r;

	if (!want) {
		if (ag->tcx_cls_link_fd >= 0 || ag->tcx_cls_prog_id)
			tcx_cls_release(ag, true);
		return 0;
	}
	pin_path(ag, pin, sizeof(pin));
	if (ag->tcx_cls_link_fd < 0 && pin[0]) {
		/* a restart: adopt the pinned link and its program's maps */
		int fd = bpf_obj_get(pin);

		if (fd >= 0) {
			ag->tcx_cls_link_fd = fd;
			ag->tcx_cls_prog_id = link_prog_id(fd);
			if (!prog_is_this_version(ag, ag->tcx_cls_prog_id) ||
			    (ag->up_cls_map_fd < 0 && bpf_cls_map_from_prog(ag->tcx_cls_prog_id, &ag->up_cls_map_fd,
			                                                    &ag->up_edt_map_fd, NULL) < 0))
				tcx_cls_release(ag, true); /* another version's program or maps: attach anew */
		}
	}
	pos = ag->tcx_cls_link_fd >= 0 ? hook_position(ag, ag->tcx_cls_prog_id) : -1;
	if (pos == 0)
		return 0;
	if (pos > 0)
		log_msg(LOG_LVL_WARN, "another tcx program runs before the classifier: attached first again", "uplink",
		        ag->up.ifname, (char *)NULL);
	if (ag->tcx_cls_link_fd >= 0) {
		/* detached behind our back, or not first: a new link, first */
		ag->tcx_cls_drift++;
		tcx_cls_release(ag, true);
	}
	r = bpf_cls_load(&ag->up_cls_map_fd, &ag->up_edt_map_fd, &prog_fd, err);
	if (r < 0)
		return r;
	{
		struct bpf_link_create_opts o;

		memset(&o, 0, sizeof(o));
		o.sz = sizeof(o);
		o.flags = BPF_F_BEFORE; /* first on the hook */
		r = bpf_link_create(prog_fd, ag->up.ifindex, BPF_LOAD_TCX_EGRESS, &o);
	}
	if (r < 0) {
		r = -errno;
		close(prog_fd);
		return error_set(err, -r, "tcx egress link on %s: %s", ag->up.ifname, strerror(-r));
	}
	ag->tcx_cls_link_fd = r;
	ag->tcx_cls_prog_id = link_prog_id(r);
	close(prog_fd);
	if (pin[0]) {
		(void)unlink(pin);
		if (bpf_obj_pin(ag->tcx_cls_link_fd, pin) < 0)
			log_msg(LOG_LVL_WARN, "tcx link not pinned: a restart attaches it again", "pin", pin, "error",
			        strerror(errno), (char *)NULL);
	}
	log_msg(LOG_LVL_INFO, "classifier attached as a tcx link, first on the egress hook", "uplink", ag->up.ifname,
	        "pin", pin[0] ? pin : "-", (char *)NULL);
	return 1;
}
