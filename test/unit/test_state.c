/* test_state.c — the state store: id validation, atomic saves (no partial
 * file ever visible, temp files cleaned up on failure, clear errors on a
 * read-only or full filesystem), strict loading of corrupted or truncated
 * files, listing and removal. No root needed: temp directories, and a user +
 * mount namespace for the read-only/full filesystem cases. */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <dirent.h>
#include <fcntl.h>
#include <linux/if_ether.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include "profile.h"
#include "state.h"
#include "t.h"

/* A fresh directory path under t_tmpdir() (not created). */
static void fresh_dir(char *buf, size_t size, const char *name)
{
	t_tmppath(buf, size, name);
	t_rm_rf(buf);
}

static struct tc_spec qdisc(enum tc_kind_id k, uint32_t parent, uint32_t handle)
{
	struct tc_spec s = {.type = TC_QDISC, .kind = k, .parent = parent, .handle = handle};
	return s;
}

/* A plan with every status: applied, degraded (tc and sysctl), skipped for a
 * missing feature and for a parent that was not applied. */
static struct plan_item *next_item(struct plan *p)
{
	struct plan_item *it = plan_item_add(p, ITEM_TC, DEV_POD, "", NULL);

	if (!it)
		abort(); /* out of memory in a test */
	return it;
}

static void sample_plan(struct plan *p)
{
	struct plan_item *it;

	plan_free(p);
	it = next_item(p);
	*it = (struct plan_item){.type = ITEM_TC, .dev = DEV_POD, .id = "egress.root", .n_alt = 1};
	it->tc[0] = qdisc(TC_KIND_HTB, TC_H_ROOT, TC_H_MAKE(1 << 16, 0));
	it->tc[0].u.htb.defcls = 0x10;
	it->status = ITEM_APPLIED;
	it->chosen = 0;

	it = next_item(p);
	*it = (struct plan_item){
	        .type = ITEM_TC, .dev = DEV_POD, .id = "egress.leaf", .depends = "egress.root", .n_alt = 2};
	it->tc[0] = qdisc(TC_KIND_FQ_CODEL, TC_H_MAKE(1 << 16, 0x10), TC_H_MAKE(0x10 << 16, 0));
	it->tc[0].u.fq_codel.target_us = 1000;
	it->tc[1] = qdisc(TC_KIND_BFIFO, TC_H_MAKE(1 << 16, 0x10), TC_H_MAKE(0x10 << 16, 0));
	it->tc[1].u.fifo.limit = 150000;
	it->status = ITEM_DEGRADED;
	it->chosen = 1;
	it->err = ENOENT;
	it->unknown = true; /* the kernel said the kind is unknown */

	it = next_item(p);
	*it = (struct plan_item){.type = ITEM_SYSCTL, .dev = DEV_POD, .id = "sysctl.cc", .n_alt = 2};
	str_copy(it->key, sizeof(it->key), "net/ipv4/tcp_congestion_control");
	str_copy(it->val[0], sizeof(it->val[0]), "dctcp");
	str_copy(it->val[1], sizeof(it->val[1]), "cubic");
	it->status = ITEM_DEGRADED;
	it->chosen = 1;
	it->err = ENOENT;

	it = next_item(p);
	*it = (struct plan_item){.type = ITEM_SYSCTL, .dev = DEV_POD, .id = "sysctl.ecn", .n_alt = 1};
	str_copy(it->key, sizeof(it->key), "net/ipv4/tcp_ecn");
	str_copy(it->val[0], sizeof(it->val[0]), "1");
	it->status = ITEM_APPLIED;
	it->chosen = 0;

	it = next_item(p);
	*it = (struct plan_item){.type = ITEM_TC, .dev = DEV_HOST, .id = "ingress.root", .n_alt = 1};
	it->tc[0] = qdisc(TC_KIND_FQ, TC_H_ROOT, TC_H_MAKE(2 << 16, 0));
	it->status = ITEM_SKIPPED;
	it->chosen = -1;
	it->err = ENOENT;
	it->unknown = true;

	it = next_item(p);
	*it = (struct plan_item){
	        .type = ITEM_TC, .dev = DEV_HOST, .id = "ingress.child", .depends = "ingress.root", .n_alt = 1};
	it->tc[0] = qdisc(TC_KIND_PFIFO, TC_H_MAKE(2 << 16, 1), TC_H_MAKE(0x20 << 16, 0));
	it->status = ITEM_SKIPPED;
	it->chosen = -1;
	it->err = ESRCH;
}

static struct attach_state *sample_state(const char *cid, const char *ifname)
{
	struct attach_state *s = calloc(1, sizeof(*s));

	str_copy(s->container_id, sizeof(s->container_id), cid);
	str_copy(s->ifname, sizeof(s->ifname), ifname);
	str_copy(s->netns, sizeof(s->netns), "/var/run/netns/cni-1234");
	str_copy(s->pod_namespace, sizeof(s->pod_namespace), "team-a");
	str_copy(s->pod_name, sizeof(s->pod_name), "llm \"serve\"-0");
	str_copy(s->pod_uid, sizeof(s->pod_uid), "6f1d-77");
	str_copy(s->network, sizeof(s->network), "kindnet");
	s->workload.class = CLASS_INFERENCE;
	str_copy(s->workload.profile, sizeof(s->workload.profile), "inference-strict");
	s->workload.egress_bps = 500000000;
	s->workload.ingress_bps = 1000000000000ULL;
	str_copy(s->profile, sizeof(s->profile), "inference-strict");
	str_copy(s->annotations_source, sizeof(s->annotations_source), "runtime");
	str_copy(s->ifs.pod_ifname, sizeof(s->ifs.pod_ifname), ifname);
	str_copy(s->ifs.host_ifname, sizeof(s->ifs.host_ifname), "veth1234abcd");
	s->ifs.mtu = 1450;
	s->pod_ifindex = 3;
	s->host_ifindex = 17;
	str_copy(s->ips[0], sizeof(s->ips[0]), "10.244.1.5/24");
	str_copy(s->ips[1], sizeof(s->ips[1]), "fd00::5/64");
	s->n_ips = 2;
	sample_plan(&s->plan);
	str_copy(s->failure, sizeof(s->failure), "");
	s->updated_unix = 1795975831;
	return s;
}

static cJSON *read_json_file(const char *path)
{
	FILE *f = fopen(path, "re");
	static char buf[256 * 1024];
	size_t n;

	if (!f)
		return NULL;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	return cJSON_Parse(buf);
}

static void write_file(const char *path, const char *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	CHECK(fd >= 0);
	if (fd < 0)
		return;
	CHECK(write(fd, data, len) == (ssize_t)len);
	close(fd);
}

TEST(check_id)
{
	char id200[201];
	char id127[128];
	memset(id200, 'a', 200);
	id200[200] = '\0';
	memset(id127, 'b', 127);
	id127[127] = '\0';

	const struct {
		const char *cid, *ifname;
		int want;
	} cases[] = {
	        {"0123abcdef", "eth0", 0},
	        {"k8s_POD.x-1", "net-1", 0},
	        {id127, "eth0", 0},
	        {id200, "eth0", -ENAMETOOLONG},
	        {"../x", "eth0", -EINVAL},
	        {"..", "eth0", -EINVAL},
	        {".", "eth0", -EINVAL},
	        {".hidden", "eth0", -EINVAL},
	        {"-rf", "eth0", -EINVAL},
	        {"a/b", "eth0", -EINVAL},
	        {"", "eth0", -EINVAL},
	        {"a@b", "eth0", -EINVAL},
	        {"a b", "eth0", -EINVAL},
	        {"a\nb", "eth0", -EINVAL},
	        {"abc", "", -EINVAL},
	        {"abc", "eth0/../x", -EINVAL},
	        {"abc", "..", -EINVAL},
	        /* Linux's and libcni's rules: '@', '+', a leading '-' are fine */
	        {"abc", "eth@0", 0},
	        {"abc", "net+1", 0},
	        {"abc", "-eth0", 0},
	        {"abc", ".eth0", 0},
	        {"abc", "eth0:1", -EINVAL},
	        {"abc", "eth\t0", -EINVAL},
	        {"abc",
	         "eth\xc2\xa0"
	         "0",
	         -EINVAL}, /* U+00A0 */
	        {"abc", ".", -EINVAL},
	        {"abc", "0123456789abcdef", -ENAMETOOLONG}, /* 16 > IFNAMSIZ-1 */
	        {"abc", "0123456789abcde", 0},
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct error e = {0};
		int r = state_check_id(cases[i].cid, cases[i].ifname, &e);
		if (r != cases[i].want)
			fprintf(stderr, "  case %zu: '%.40s' '%s'\n", i, cases[i].cid, cases[i].ifname);
		CHECK_INT(r, cases[i].want);
		if (r < 0)
			CHECK(e.msg[0] != '\0');
	}
	{
		struct error e = {0};
		CHECK_INT(state_check_id("a/b", "eth0", &e), -EINVAL);
		CHECK_CONTAINS(e.msg, "container ID 'a/b'");
		CHECK_INT(state_check_id(NULL, "eth0", &e), -EINVAL);
	}
}

TEST(path)
{
	char buf[STATE_PATH_MAX];
	char small[16];

	CHECK_INT(state_path("/var/lib/aiqos", "abc-1", "net-1", buf, sizeof(buf)), 0);
	CHECK_STR(buf, "/var/lib/aiqos/abc-1@net-1.json");
	CHECK_INT(state_path("/d", "../x", "eth0", buf, sizeof(buf)), -EINVAL);
	CHECK_INT(state_path("/var/lib/aiqos", "abc", "eth0", small, sizeof(small)), -ENAMETOOLONG);
}

TEST(save_load_round_trip)
{
	char dir[128], path[STATE_PATH_MAX];
	struct attach_state *s = sample_state("c0ffee-01", "eth0");
	struct attach_state *l = calloc(1, sizeof(*l));
	struct error e = {0};
	cJSON *choices = NULL;
	struct stat st;

	/* missing parents are created 0700 */
	fresh_dir(dir, sizeof(dir), "rt");
	strncat(dir, "/nested/state", sizeof(dir) - strlen(dir) - 1);
	CHECK_INT(state_save(dir, s, &e), 0);
	CHECK_INT(state_path(dir, "c0ffee-01", "eth0", path, sizeof(path)), 0);
	CHECK(stat(path, &st) == 0 && (st.st_mode & 07777) == 0600);
	CHECK(stat(dir, &st) == 0 && (st.st_mode & 07777) == 0700);
	CHECK_INT(t_count_files(dir, ".tmp."), 0);

	/* second save over the first: replaced, still no temp file */
	s->updated_unix++;
	CHECK_INT(state_save(dir, s, &e), 0);
	CHECK_INT(t_count_files(dir, ".tmp."), 0);

	CHECK_INT(state_load(dir, "c0ffee-01", "eth0", l, &choices, &e), 0);
	CHECK_STR(l->container_id, "c0ffee-01");
	CHECK_STR(l->ifname, "eth0");
	CHECK_STR(l->netns, s->netns);
	CHECK_STR(l->pod_namespace, "team-a");
	CHECK_STR(l->pod_name, "llm \"serve\"-0");
	CHECK_STR(l->pod_uid, "6f1d-77");
	CHECK_STR(l->network, "kindnet");
	CHECK_INT(l->workload.class, CLASS_INFERENCE);
	CHECK_STR(l->workload.profile, "inference-strict");
	CHECK_INT(l->workload.egress_bps, 500000000);
	CHECK(l->workload.ingress_bps == 1000000000000ULL);
	CHECK_STR(l->profile, "inference-strict");
	CHECK_STR(l->annotations_source, "runtime");
	CHECK_STR(l->ifs.pod_ifname, "eth0");
	CHECK_STR(l->ifs.host_ifname, "veth1234abcd");
	CHECK_INT(l->ifs.mtu, 1450);
	CHECK_INT(l->pod_ifindex, 3);
	CHECK_INT(l->host_ifindex, 17);
	CHECK_INT(l->n_ips, 2);
	CHECK_STR(l->ips[1], "fd00::5/64");
	CHECK_STR(l->failure, "");
	CHECK_INT(l->updated_unix, s->updated_unix);
	CHECK_INT(l->plan.n, 0); /* the desired plan is not stored */
	CHECK(choices != NULL);

	/* the choices go back onto a freshly planned copy */
	{
		struct plan *p = calloc(1, sizeof(*p));
		sample_plan(p);
		for (unsigned i = 0; i < p->n; i++) {
			p->items[i].status = ITEM_PENDING;
			p->items[i].chosen = -1;
			p->items[i].err = 0;
		}
		CHECK_INT(plan_choices_from_json(p, choices, &e), 0);
		for (unsigned i = 0; i < p->n; i++) {
			CHECK_INT(p->items[i].status, s->plan.items[i].status);
			CHECK_INT(p->items[i].chosen, s->plan.items[i].chosen);
			CHECK_INT(p->items[i].err, s->plan.items[i].err);
		}
		plan_free(p);
		free(p);
	}
	cJSON_Delete(choices);
	attach_state_free(s);
	attach_state_free(l);
}

/* Issue 13 item 4: the record keeps the content of the profile it was
 * applied with (profileSpec), so a changed config cannot make it lie. */
TEST(profile_spec_round_trip)
{
	char dir[128];
	struct attach_state *s = sample_state("c0ffee-02", "eth0");
	struct attach_state *l = calloc(1, sizeof(*l));
	struct profile_set set;
	struct error e = {0};
	cJSON *choices = NULL;

	profile_set_builtin(&set);
	fresh_dir(dir, sizeof(dir), "spec");
	/* no spec: none read back (older records) */
	CHECK_INT(state_save(dir, s, &e), 0);
	CHECK_INT(state_load(dir, "c0ffee-02", "eth0", l, &choices, &e), 0);
	CHECK(!l->has_profile_spec);
	cJSON_Delete(choices);
	choices = NULL;

	s->profile_spec = *profile_find(&set, "inference-strict");
	s->profile_spec.notsent_lowat = 12345;
	s->profile_spec.dscp = -1;
	s->profile_spec.n_cc = 1;
	s->has_profile_spec = true;
	CHECK_INT(state_save(dir, s, &e), 0);
	CHECK_INT(state_load(dir, "c0ffee-02", "eth0", l, &choices, &e), 0);
	CHECK(l->has_profile_spec);
	CHECK(profile_content_equal(&l->profile_spec, &s->profile_spec));
	CHECK(profile_content_hash(&l->profile_spec) == profile_content_hash(&s->profile_spec));
	CHECK_INT(l->profile_spec.notsent_lowat, 12345);
	CHECK_INT(l->profile_spec.dscp, -1);
	CHECK_INT(l->profile_spec.n_cc, 1);
	CHECK(!profile_content_equal(&l->profile_spec, profile_find(&set, "inference-strict")));
	CHECK(profile_content_hash(&l->profile_spec) != profile_content_hash(profile_find(&set, "inference-strict")));
	cJSON_Delete(choices);
	attach_state_free(s);
	attach_state_free(l);
}

TEST(file_contents)
{
	char dir[128], path[STATE_PATH_MAX];
	struct attach_state *s = sample_state("abc", "net-1");
	cJSON *j, *v;

	fresh_dir(dir, sizeof(dir), "contents");
	CHECK_INT(state_save(dir, s, NULL), 0);
	CHECK_INT(state_path(dir, "abc", "net-1", path, sizeof(path)), 0);
	j = read_json_file(path);
	CHECK(j != NULL);
	if (!j) {
		attach_state_free(s);
		return;
	}
	CHECK_INT(cJSON_GetObjectItem(j, "version")->valuedouble, 1);
	CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(j, "class")), "inference");
	CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "pod"), "namespace")), "team-a");
	CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "ifaces"), "host")), "veth1234abcd");
	CHECK_INT(cJSON_GetArraySize(cJSON_GetObjectItem(j, "choices")), 6);
	v = cJSON_GetObjectItem(j, "effective");
	CHECK(cJSON_IsArray(v) && cJSON_GetArraySize(v) > 0);
	{
		/* effective lines mention what is in force: bfifo, not fq_codel */
		char *txt = cJSON_PrintUnformatted(v);
		CHECK_CONTAINS(txt, "bfifo");
		free(txt);
	}
	v = cJSON_GetObjectItem(j, "degraded");
	CHECK(cJSON_IsArray(v));
	CHECK_INT(cJSON_GetArraySize(v), 4); /* leaf, cc, ingress.root, ingress.child */
	{
		const cJSON *d;
		bool saw_leaf = false, saw_child = false, saw_cc = false, saw_root = false;
		cJSON_ArrayForEach(d, v)
		{
			const char *id = cJSON_GetStringValue(cJSON_GetObjectItem(d, "id"));
			const char *wanted = cJSON_GetStringValue(cJSON_GetObjectItem(d, "wanted"));
			const cJSON *got = cJSON_GetObjectItem(d, "got");
			const char *reason = cJSON_GetStringValue(cJSON_GetObjectItem(d, "reason"));
			if (!id || !wanted || !reason) {
				CHECK(!"degraded entry lacks id/wanted/reason");
				continue;
			}
			if (streq(id, "egress.leaf")) {
				saw_leaf = true;
				CHECK_CONTAINS(wanted, "fq_codel");
				CHECK_CONTAINS(cJSON_GetStringValue(got), "bfifo");
				/* in words (reason.h): the missing feature, not errno text */
				CHECK_CONTAINS(reason, "kernel lacks the fq_codel qdisc");
				CHECK(!strstr(reason, strerror(ENOENT)));
			} else if (streq(id, "sysctl.cc")) {
				saw_cc = true;
				CHECK_CONTAINS(wanted, "dctcp");
				CHECK_CONTAINS(cJSON_GetStringValue(got), "cubic");
			} else if (streq(id, "ingress.root")) {
				saw_root = true;
				CHECK(cJSON_IsNull(got));
			} else if (streq(id, "ingress.child")) {
				saw_child = true;
				CHECK_CONTAINS(reason, "depends on ingress.root");
			}
		}
		CHECK(saw_leaf && saw_cc && saw_root && saw_child);
	}
	CHECK_INT(cJSON_GetObjectItem(j, "updated")->valuedouble, 1795975831);
	cJSON_Delete(j);
	attach_state_free(s);
}

TEST(load_missing)
{
	char dir[128];
	struct attach_state *l = calloc(1, sizeof(*l));
	struct error e = {0};
	cJSON *choices = (cJSON *)1;

	fresh_dir(dir, sizeof(dir), "missing");
	CHECK_INT(state_load(dir, "nope", "eth0", l, &choices, &e), -ENOENT);
	CHECK(choices == NULL);
	CHECK_CONTAINS(e.msg, "nope@eth0.json");
	CHECK_INT(state_load(dir, "../etc", "eth0", l, NULL, &e), -EINVAL);
	attach_state_free(l);
}

/* Save a good state, then replace the file with damaged content and check
 * that loading fails with an error naming the file (and the field). */
TEST(load_corrupted)
{
	char dir[128], path[STATE_PATH_MAX];
	struct attach_state *s = sample_state("bad", "eth0");
	struct attach_state *l = calloc(1, sizeof(*l));
	char *good;
	cJSON *j;

	fresh_dir(dir, sizeof(dir), "corrupt");
	CHECK_INT(state_save(dir, s, NULL), 0);
	CHECK_INT(state_path(dir, "bad", "eth0", path, sizeof(path)), 0);
	j = state_to_json(s);
	good = cJSON_PrintUnformatted(j);
	cJSON_Delete(j);

	struct {
		const char *name;
		char *content; /* NULL: truncated good */
		const char *msg;
	} cases[] = {
	        {"truncated", NULL, "truncated JSON"},
	        {"garbage", strdup("this is not json"), "invalid or truncated JSON"},
	        {"empty", strdup(""), "is empty"},
	        {"array", strdup("[1,2,3]"), "not a JSON object"},
	        {"trailing", NULL, "invalid or truncated JSON"},
	        {"version", strdup("{\"version\":2}"), "'version' = 2"},
	        {"no-id", strdup("{\"version\":1,\"ifname\":\"eth0\"}"), "field 'containerId' is missing"},
	        {"class", NULL, "field 'class'"},
	        {"ifindex", NULL, "field 'ifaces.podIfindex'"},
	        {"long", NULL, "field 'network' is longer"},
	        {"other", NULL, "belongs to other/eth0"},
	        {"choices", NULL, "field 'choices'"},
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char *c = cases[i].content;
		if (streq(cases[i].name, "truncated")) {
			c = strdup(good);
			c[strlen(c) / 2] = '\0';
		} else if (streq(cases[i].name, "trailing")) {
			size_t n = strlen(good);
			c = malloc(n + 8);
			memcpy(c, good, n);
			memcpy(c + n, " {}", 4);
		} else if (!c) {
			cJSON *m = cJSON_Parse(good);
			char big[300];
			memset(big, 'n', sizeof(big) - 1);
			big[sizeof(big) - 1] = '\0';
			if (streq(cases[i].name, "class"))
				cJSON_ReplaceItemInObject(m, "class", cJSON_CreateNumber(5));
			else if (streq(cases[i].name, "ifindex"))
				cJSON_ReplaceItemInObject(cJSON_GetObjectItem(m, "ifaces"), "podIfindex",
				                          cJSON_CreateNumber(-1));
			else if (streq(cases[i].name, "long"))
				cJSON_ReplaceItemInObject(m, "network", cJSON_CreateString(big));
			else if (streq(cases[i].name, "other"))
				cJSON_ReplaceItemInObject(m, "containerId", cJSON_CreateString("other"));
			else if (streq(cases[i].name, "choices"))
				cJSON_DeleteItemFromObject(m, "choices");
			c = cJSON_PrintUnformatted(m);
			cJSON_Delete(m);
		}
		write_file(path, c, strlen(c));
		{
			struct error e = {0};
			cJSON *choices = NULL;
			int r = state_load(dir, "bad", "eth0", l, &choices, &e);
			if (r >= 0)
				fprintf(stderr, "  case %s loaded\n", cases[i].name);
			CHECK(r < 0);
			CHECK_CONTAINS(e.msg, path);
			CHECK_CONTAINS(e.msg, cases[i].msg);
			CHECK(choices == NULL);
			CHECK_INT(e.errnum, -r); /* the errno, unclassified: CNI codes are cni/'s */
			CHECK_INT(e.code, 0);
		}
		free(c);
	}
	free(good);
	attach_state_free(s);
	attach_state_free(l);
}

/* A writer saving two versions in turn while a reader loads: every load must
 * see one complete version (never a partial or empty file). */
TEST(atomic_no_partial_file)
{
	char dir[128];
	struct attach_state *l = calloc(1, sizeof(*l));
	unsigned loads = 0, bad = 0;
	pid_t pid;

	fresh_dir(dir, sizeof(dir), "atomic");
	{
		struct attach_state *s = sample_state("race", "eth0");
		CHECK_INT(state_save(dir, s, NULL), 0);
		attach_state_free(s);
	}
	pid = fork();
	if (pid == 0) {
		struct attach_state *s = sample_state("race", "eth0");
		for (int i = 0; i < 400; i++) {
			/* version A has a long failure text, B none: sizes differ */
			if (i % 2)
				memset(s->failure, 'x', 900);
			else
				s->failure[0] = '\0';
			s->updated_unix = 1000 + i;
			if (state_save(dir, s, NULL) < 0)
				_exit(1);
		}
		_exit(0);
	}
	for (;;) {
		int status;
		struct error e = {0};
		int r = state_load(dir, "race", "eth0", l, NULL, &e);
		loads++;
		if (r < 0 || (l->failure[0] && strlen(l->failure) != 900)) {
			if (bad++ == 0)
				fprintf(stderr, "  partial state seen: %s\n", e.msg);
		}
		if (waitpid(pid, &status, WNOHANG) == pid) {
			CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
			break;
		}
	}
	CHECK_INT(bad, 0);
	CHECK(loads > 10);
	CHECK_INT(t_count_files(dir, ".tmp."), 0);
	attach_state_free(l);
}

TEST(stale_tmp_file_of_same_pid)
{
	char dir[128], tmp[STATE_PATH_MAX + 32];
	struct attach_state *s = sample_state("stale", "eth0");
	struct stat st;

	fresh_dir(dir, sizeof(dir), "stale");
	CHECK(mkdir(dir, 0755) == 0);
	snprintf(tmp, sizeof(tmp), "%s/stale@eth0.json.tmp.%ld", dir, (long)getpid());
	write_file(tmp, "junk", 4);
	CHECK_INT(state_save(dir, s, NULL), 0);
	CHECK_INT(t_count_files(dir, ".tmp."), 0);
	/* an existing directory keeps its mode */
	CHECK(stat(dir, &st) == 0 && (st.st_mode & 07777) == 0755);
	attach_state_free(s);
}

TEST(save_errors)
{
	char dir[128], path[256];
	struct attach_state *s = sample_state("err", "eth0");
	struct error e = {0};

	/* a path component is a regular file */
	fresh_dir(dir, sizeof(dir), "notadir");
	write_file(dir, "x", 1);
	snprintf(path, sizeof(path), "%s/sub", dir);
	CHECK_INT(state_save(path, s, &e), -ENOTDIR);
	CHECK_CONTAINS(e.msg, dir);
	CHECK_INT(e.errnum, ENOTDIR); /* the errno, unclassified: CNI codes are cni/'s */
	CHECK_INT(e.code, 0);

	/* bad ids never reach the filesystem */
	str_copy(s->container_id, sizeof(s->container_id), "../../etc/passwd");
	CHECK_INT(state_save(t_tmpdir(), s, &e), -EINVAL);
	CHECK_CONTAINS(e.msg, "container ID");
	attach_state_free(s);
}

/* Read-only and full filesystems need a mount: a child enters a new user
 * and mount namespace (works without root), mounts a tmpfs and reports back. */
struct fs_result {
	int ro_r, full_r, full_tmp_left;
	char ro_msg[ERROR_MSG_MAX], full_msg[ERROR_MSG_MAX];
	int setup_errno;
};

static int write_map(const char *file, const char *text)
{
	int fd = open(file, O_WRONLY | O_CLOEXEC);
	int r = 0;
	if (fd < 0)
		return -errno;
	if (write(fd, text, strlen(text)) < 0)
		r = -errno;
	close(fd);
	return r;
}

static void fs_child(struct fs_result *res, const char *dir)
{
	uid_t uid = getuid();
	gid_t gid = getgid();
	char map[64], ro[256], full[256], filler[300];
	struct attach_state *s = sample_state("fs", "eth0");

	if (unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0) {
		/* no user namespaces: root can still make a mount namespace */
		if (unshare(CLONE_NEWNS) < 0) {
			res->setup_errno = errno;
			return;
		}
	} else {
		snprintf(map, sizeof(map), "0 %u 1", (unsigned)uid);
		write_map("/proc/self/setgroups", "deny");
		if (write_map("/proc/self/uid_map", map) < 0) {
			res->setup_errno = EPERM;
			return;
		}
		snprintf(map, sizeof(map), "0 %u 1", (unsigned)gid);
		write_map("/proc/self/gid_map", map);
	}
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
		res->setup_errno = errno;
		return;
	}
	snprintf(ro, sizeof(ro), "%s/ro", dir);
	snprintf(full, sizeof(full), "%s/full", dir);
	if (mkdir(ro, 0700) < 0 || mkdir(full, 0700) < 0 ||
	    mount("tmpfs", ro, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV, "size=64k") < 0 ||
	    mount("tmpfs", full, "tmpfs", MS_NOSUID | MS_NODEV, "size=16k") < 0) {
		res->setup_errno = errno;
		return;
	}
	{
		struct error e = {0};
		res->ro_r = state_save(ro, s, &e);
		memcpy(res->ro_msg, e.msg, sizeof(e.msg));
	}
	/* fill the small tmpfs, then save */
	snprintf(filler, sizeof(filler), "%s/filler", full);
	{
		int fd = open(filler, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
		char block[1024] = {0};
		while (fd >= 0 && write(fd, block, sizeof(block)) > 0)
			;
		if (fd >= 0)
			close(fd);
	}
	{
		struct error e = {0};
		res->full_r = state_save(full, s, &e);
		memcpy(res->full_msg, e.msg, sizeof(e.msg));
		res->full_tmp_left = (int)t_count_files(full, ".tmp.");
	}
	attach_state_free(s);
}

TEST(save_readonly_and_full_fs)
{
	char dir[128];
	struct fs_result *res;
	int pfd[2];
	pid_t pid;
	int status;

	fresh_dir(dir, sizeof(dir), "fs");
	CHECK(mkdir(dir, 0700) == 0);
	res = calloc(1, sizeof(*res));
	CHECK(pipe2(pfd, O_CLOEXEC) == 0);
	pid = fork();
	if (pid == 0) {
		fs_child(res, dir);
		if (write(pfd[1], res, sizeof(*res)) != (ssize_t)sizeof(*res))
			_exit(2);
		_exit(0);
	}
	close(pfd[1]);
	CHECK(read(pfd[0], res, sizeof(*res)) == (ssize_t)sizeof(*res));
	close(pfd[0]);
	waitpid(pid, &status, 0);
	if (res->setup_errno) {
		/* cannot build the fixture: say so and fail rather than pass silently */
		fprintf(stderr, "  cannot create a mount namespace for the read-only/full fs cases: %s\n",
		        strerror(res->setup_errno));
		CHECK(res->setup_errno == 0);
		free(res);
		return;
	}
	CHECK_INT(res->ro_r, -EROFS);
	CHECK_CONTAINS(res->ro_msg, "/ro/fs@eth0.json.tmp.");
	CHECK_CONTAINS(res->ro_msg, strerror(EROFS));
	CHECK_INT(res->full_r, -ENOSPC);
	CHECK_CONTAINS(res->full_msg, "/full/fs@eth0.json.tmp.");
	CHECK_CONTAINS(res->full_msg, strerror(ENOSPC));
	CHECK_INT(res->full_tmp_left, 0);
	free(res);
}

struct listed {
	unsigned n;
	char cid[8][STATE_ID_MAX];
	char ifname[8][IFNAME_LEN];
	int stop_after;
};

static int list_cb(const char *cid, const char *ifname, void *userdata)
{
	struct listed *l = userdata;
	if (l->n < 8) {
		str_copy(l->cid[l->n], STATE_ID_MAX, cid);
		str_copy(l->ifname[l->n], IFNAME_LEN, ifname);
	}
	l->n++;
	if (l->stop_after && (int)l->n >= l->stop_after)
		return -ECANCELED;
	return 0;
}

static bool listed_has(const struct listed *l, const char *cid, const char *ifname)
{
	for (unsigned i = 0; i < l->n && i < 8; i++)
		if (streq(l->cid[i], cid) && streq(l->ifname[i], ifname))
			return true;
	return false;
}

TEST(list_and_remove)
{
	char dir[128], junk[256];
	static const char *const ids[][2] = {
	        {"abc-def-1", "net-1"}, {"abc-def", "eth0"}, {"x.y_z", "eth0"}, {"enc", "x@y"}, {"enc", "net+1%"}};
	static const char *const junk_names[] = {"foo.json",    "a@b@c.json",   "x@y.json.tmp.123", "README",
	                                         "@eth0.json",  "..@eth0.json", "abc@.json",        "a@b.jsonx",
	                                         ".json",       "a@b c.json",   "a@x%2F.json",      "a@b%zz.json",
	                                         "a@b%61.json", "a@b%2b.json"};
	struct listed l = {0};
	struct error e = {0};

	fresh_dir(dir, sizeof(dir), "list");
	/* a missing directory lists nothing */
	CHECK_INT(state_list(dir, list_cb, &l, &e), 0);
	CHECK_INT(l.n, 0);
	for (size_t i = 0; i < ARRAY_SIZE(ids); i++) {
		struct attach_state *s = sample_state(ids[i][0], ids[i][1]);
		CHECK_INT(state_save(dir, s, &e), 0);
		attach_state_free(s);
	}
	for (size_t i = 0; i < ARRAY_SIZE(junk_names); i++) {
		snprintf(junk, sizeof(junk), "%s/%s", dir, junk_names[i]);
		write_file(junk, "{}", 2);
	}
	snprintf(junk, sizeof(junk), "%s/sub@eth0.json", dir);
	CHECK(mkdir(junk, 0700) == 0); /* a directory with a valid-looking name */

	CHECK_INT(state_list(dir, list_cb, &l, &e), 0);
	CHECK_INT(l.n, 5);
	for (size_t i = 0; i < ARRAY_SIZE(ids); i++)
		CHECK(listed_has(&l, ids[i][0], ids[i][1]));
	/* what is not [A-Za-z0-9_.-] in an interface name is encoded in the file name */
	snprintf(junk, sizeof(junk), "%s/enc@x%%40y.json", dir);
	CHECK(access(junk, F_OK) == 0);
	snprintf(junk, sizeof(junk), "%s/enc@net%%2B1%%25.json", dir);
	CHECK(access(junk, F_OK) == 0);
	{
		struct attach_state *r = calloc(1, sizeof(*r));
		cJSON *ch = NULL;
		CHECK(r != NULL);
		if (r) {
			CHECK_INT(state_load(dir, "enc", "x@y", r, &ch, &e), 0);
			CHECK_STR(r->ifname, "x@y");
			cJSON_Delete(ch);
			attach_state_free(r);
		}
	}

	/* the callback can stop the walk */
	memset(&l, 0, sizeof(l));
	l.stop_after = 1;
	CHECK_INT(state_list(dir, list_cb, &l, &e), -ECANCELED);
	CHECK_INT(l.n, 1);

	/* remove is idempotent */
	CHECK_INT(state_remove(dir, "abc-def", "eth0", &e), 0);
	CHECK_INT(state_remove(dir, "abc-def", "eth0", &e), 0);
	CHECK_INT(state_remove(dir, "../x", "eth0", &e), -EINVAL);
	memset(&l, 0, sizeof(l));
	CHECK_INT(state_list(dir, list_cb, &l, &e), 0);
	CHECK_INT(l.n, 4);
	CHECK(!listed_has(&l, "abc-def", "eth0"));
	CHECK(listed_has(&l, "abc-def-1", "net-1"));
}

TEST(pending_round_trip)
{
	char dir[128], path[STATE_PATH_MAX];
	struct attach_state *s = sample_state("intent", "eth0"), *r = calloc(1, sizeof(*r));
	struct error e = {0};

	fresh_dir(dir, sizeof(dir), "pending");
	CHECK_INT(state_save(dir, s, &e), 0);
	CHECK_INT(state_load(dir, "intent", "eth0", r, NULL, &e), 0);
	CHECK(!r->pending);
	s->pending = true;
	CHECK_INT(state_save(dir, s, &e), 0);
	CHECK_INT(state_load(dir, "intent", "eth0", r, NULL, &e), 0);
	CHECK(r->pending);
	/* a wrong type names the field */
	CHECK_INT(state_path(dir, "intent", "eth0", path, sizeof(path)), 0);
	{
		static char buf[65536];
		FILE *f = fopen(path, "r");
		size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
		cJSON *j;
		char *text;

		if (f)
			fclose(f);
		buf[n] = '\0';
		j = cJSON_Parse(buf);
		CHECK(j != NULL);
		cJSON_ReplaceItemInObject(j, "pending", cJSON_CreateString("yes"));
		text = cJSON_Print(j);
		write_file(path, text, strlen(text));
		free(text);
		cJSON_Delete(j);
	}
	CHECK_INT(state_load(dir, "intent", "eth0", r, NULL, &e), -EINVAL);
	CHECK_CONTAINS(e.msg, "pending");
	attach_state_free(s);
	attach_state_free(r);
}

/* A child takes the lock and holds it until killed. */
static pid_t lock_holder_of(const char *dir, const char *cid, const char *ifname)
{
	int ready[2];
	char c;
	pid_t pid;

	if (pipe(ready) < 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		int fd = cid ? state_lock_attachment(dir, cid, ifname, 1000, NULL) : state_lock(dir, 1000, NULL);
		if (write(ready[1], fd >= 0 ? "y" : "n", 1) < 0)
			_exit(1);
		pause();
		_exit(0);
	}
	close(ready[1]);
	if (read(ready[0], &c, 1) != 1 || c != 'y')
		pid = -1;
	close(ready[0]);
	return pid;
}

static pid_t lock_holder(const char *dir)
{
	return lock_holder_of(dir, NULL, NULL);
}

static long ms_between(const struct timespec *a, const struct timespec *b)
{
	return (b->tv_sec - a->tv_sec) * 1000 + (b->tv_nsec - a->tv_nsec) / 1000000;
}

/* One lock per attachment: a busy one is -ETIMEDOUT (code 11) within its
 * bound, others are free at once; the last user removes the lock file; a
 * waiter on a lock file removed meanwhile takes the new one. */
TEST(attachment_locks_are_per_attachment_and_bounded)
{
	char dir[128], path[300];
	struct error e = {0};
	struct timespec t0, t1;
	pid_t holder;
	int fd;

	fresh_dir(dir, sizeof(dir), "alock");
	holder = lock_holder_of(dir, "busy", "x@y");
	CHECK(holder > 0);
	snprintf(path, sizeof(path), "%s/busy@x%%40y.lock", dir);
	CHECK(access(path, F_OK) == 0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	fd = state_lock_attachment(dir, "busy", "x@y", 100, &e);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	CHECK_INT(fd, -ETIMEDOUT);
	CHECK_INT(e.errnum, ETIMEDOUT); /* the errno, unclassified: CNI codes are cni/'s */
	CHECK_INT(e.code, 0);
	CHECK_CONTAINS(e.msg, path);
	CHECK(ms_between(&t0, &t1) >= 100 && ms_between(&t0, &t1) < 600);
	CHECK_INT(state_lock_attachment(dir, "busy", "x@y", 0, &e), -ETIMEDOUT); /* one try */
	/* another attachment: no wait */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	fd = state_lock_attachment(dir, "free", "eth0", 100, &e);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	CHECK(fd >= 0);
	CHECK(ms_between(&t0, &t1) < 50);
	/* no record: releasing removes the lock file */
	state_unlock_attachment(fd, dir, "free", "eth0");
	snprintf(path, sizeof(path), "%s/free@eth0.lock", dir);
	CHECK(access(path, F_OK) < 0 && errno == ENOENT);
	/* with a record the lock file stays */
	{
		struct attach_state *st = sample_state("kept", "eth0");
		CHECK_INT(state_save(dir, st, &e), 0);
		attach_state_free(st);
		fd = state_lock_attachment(dir, "kept", "eth0", 100, &e);
		CHECK(fd >= 0);
		state_unlock_attachment(fd, dir, "kept", "eth0");
		snprintf(path, sizeof(path), "%s/kept@eth0.lock", dir);
		CHECK(access(path, F_OK) == 0);
	}
	/* the holder dies: free again */
	kill(holder, SIGKILL);
	waitpid(holder, NULL, 0);
	fd = state_lock_attachment(dir, "busy", "x@y", 100, &e);
	CHECK(fd >= 0);
	/* a waiter that opened the file before the last holder removed it takes
	 * the new file, not the unlinked one */
	{
		int ready[2];
		char c = 0;
		pid_t w;

		CHECK(pipe(ready) == 0);
		w = fork();
		if (w == 0) {
			struct error we = {0};
			close(fd); /* an inherited copy would hold the parent's lock */
			int f = state_lock_attachment(dir, "busy", "x@y", 2000, &we);
			if (f < 0)
				fprintf(stderr, "  waiter: %d %s\n", f, we.msg);
			struct stat a, b;
			snprintf(path, sizeof(path), "%s/busy@x%%40y.lock", dir);
			_exit(f >= 0 && fstat(f, &a) == 0 && stat(path, &b) == 0 && a.st_ino == b.st_ino ? 0 : 1);
		}
		close(ready[0]);
		close(ready[1]);
		usleep(100 * 1000);                              /* the waiter polls the file held here */
		state_unlock_attachment(fd, dir, "busy", "x@y"); /* no record: removed */
		CHECK(waitpid(w, &ready[0], 0) == w && WIFEXITED(ready[0]) && WEXITSTATUS(ready[0]) == 0);
		(void)c;
	}
}

TEST(lock_excludes_and_dies_with_its_holder)
{
	char dir[128], path[256];
	struct error e = {0};
	struct timespec t0, t1;
	struct stat st;
	pid_t holder;
	int fd;

	fresh_dir(dir, sizeof(dir), "lock/sub"); /* created (0700) on first use */
	fd = state_lock(dir, 100, &e);
	CHECK(fd >= 0);
	snprintf(path, sizeof(path), "%s/lock", dir);
	CHECK(stat(path, &st) == 0 && (st.st_mode & 07777) == 0600);
	CHECK(stat(dir, &st) == 0 && (st.st_mode & 07777) == 0700);
	state_unlock(fd);

	holder = lock_holder(dir);
	CHECK(holder > 0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	CHECK_INT(state_lock(dir, 50, &e), -ETIMEDOUT);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	CHECK_CONTAINS(e.msg, path);
	CHECK_CONTAINS(e.msg, "50 ms");
	/* bounded: waited the timeout, not much more */
	CHECK((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000 < 1000);
	/* a holder killed with the lock releases it */
	kill(holder, SIGKILL);
	waitpid(holder, NULL, 0);
	fd = state_lock(dir, 1000, &e);
	CHECK(fd >= 0);
	state_unlock(fd);

	/* a state dir that cannot be one: the error names it */
	snprintf(path, sizeof(path), "%s/file", dir);
	write_file(path, "x", 1);
	snprintf(path, sizeof(path), "%s/file/sub", dir);
	CHECK_INT(state_lock(path, 10, &e), -ENOTDIR);
	CHECK_CONTAINS(e.msg, dir);
}

TEST(sweep_tmp_of_dead_writers)
{
	char dir[128], path[300];
	/* not ours to sweep: another file's temp, junk names */
	static const char *const keep[] = {"uplink.json.tmp.", "a@eth0.json", "README.tmp.", "a@b@c.json.tmp."};
	pid_t dead = fork();
	struct dirent *de;
	unsigned n = 0;
	DIR *d;

	if (dead == 0)
		_exit(0);
	waitpid(dead, NULL, 0); /* a pid that no longer runs */
	fresh_dir(dir, sizeof(dir), "sweep");
	CHECK(mkdir(dir, 0700) == 0);
	snprintf(path, sizeof(path), "%s/a@eth0.json.tmp.%d", dir, (int)dead); /* DEL of a/eth0 removes it */
	write_file(path, "{", 1);
	snprintf(path, sizeof(path), "%s/b@eth0.json.tmp.%d", dir, (int)dead); /* only GC does */
	write_file(path, "{", 1);
	snprintf(path, sizeof(path), "%s/a@eth0.json.tmp.%d", dir, (int)getpid()); /* a live writer's */
	write_file(path, "{", 1);
	snprintf(path, sizeof(path), "%s/kernel-caps.tmp.%d", dir, (int)dead); /* node-wide: any sweep */
	write_file(path, "{", 1);
	for (size_t i = 0; i < ARRAY_SIZE(keep); i++) {
		char name[64];
		snprintf(name, sizeof(name), "%s%d", keep[i], (int)dead);
		snprintf(path, sizeof(path), "%s/%s", dir, name);
		write_file(path, "{", 1);
	}
	CHECK_INT(state_sweep_tmp(dir, "a", "eth0"), 2);
	CHECK_INT(state_sweep_tmp(dir, "a", "eth0"), 0);
	CHECK_INT(state_sweep_tmp(dir, NULL, NULL), 1);
	CHECK_INT(state_sweep_tmp(dir, NULL, NULL), 0);
	d = opendir(dir);
	CHECK(d != NULL);
	while (d && (de = readdir(d)))
		n += de->d_name[0] != '.';
	if (d)
		closedir(d);
	CHECK_INT(n, 1 + ARRAY_SIZE(keep)); /* the live writer's and the foreign names stay */
	CHECK_INT(state_sweep_tmp("/nonexistent-aiqos", NULL, NULL), 0);
}

TEST(intent_round_trip)
{
	char dir[128];
	struct attach_state *s = sample_state("intent", "eth0"), *r = calloc(1, sizeof(*r));
	struct profile_set set;
	struct error e = {0};

	profile_set_builtin(&set);
	fresh_dir(dir, sizeof(dir), "intent");
	/* a re-tune's intent keeps its target next to the committed tuning */
	s->pending = true;
	s->intent.op = ATTACH_OP_RETUNE;
	s->intent.has_target = true;
	s->intent.workload.class = CLASS_TRAINING;
	s->intent.workload.ingress_bps = 80000000;
	str_copy(s->intent.workload.profile, sizeof(s->intent.workload.profile), "training");
	str_copy(s->intent.profile, sizeof(s->intent.profile), "training");
	s->intent.profile_spec = *profile_find(&set, "training");
	s->intent.ifs = s->ifs;
	s->intent.ifs.mtu = 9000;
	CHECK_INT(state_save(dir, s, &e), 0);
	CHECK_INT(state_load(dir, "intent", "eth0", r, NULL, &e), 0);
	CHECK(r->pending);
	CHECK_INT(r->intent.op, ATTACH_OP_RETUNE);
	CHECK(r->intent.has_target);
	CHECK_INT(r->intent.workload.class, CLASS_TRAINING);
	CHECK_INT(r->intent.workload.ingress_bps, 80000000);
	CHECK_STR(r->intent.workload.profile, "training");
	CHECK_STR(r->intent.profile, "training");
	CHECK(profile_content_equal(&r->intent.profile_spec, profile_find(&set, "training")));
	CHECK_INT(r->intent.ifs.mtu, 9000);
	CHECK_STR(r->intent.ifs.host_ifname, "veth1234abcd");
	CHECK_INT(r->workload.class, CLASS_INFERENCE); /* the committed tuning */
	/* the record's and the intent's workload limits: errors name whose */
	for (int intent = 0; intent < 2; intent++) {
		char path[STATE_PATH_MAX], *text;
		cJSON *j = state_to_json(s), *w;

		w = cJSON_GetObjectItem(intent ? cJSON_GetObjectItem(j, "intent") : j, "workload");
		cJSON_ReplaceItemInObject(w, intent ? "ingressBps" : "egressBps", cJSON_CreateNumber(-1));
		text = cJSON_Print(j);
		CHECK_INT(state_path(dir, "intent", "eth0", path, sizeof(path)), 0);
		write_file(path, text, strlen(text));
		free(text);
		cJSON_Delete(j);
		error_clear(&e);
		CHECK_INT(state_load(dir, "intent", "eth0", r, NULL, &e), -ERANGE);
		CHECK_CONTAINS(e.msg,
		               intent ? "field 'intent.workload.ingressBps' = -1" : "field 'workload.egressBps' = -1");
	}
	/* a teardown's intent without a target; an unknown op names the field */
	s->intent.op = ATTACH_OP_TEARDOWN;
	s->intent.has_target = false;
	CHECK_INT(state_save(dir, s, &e), 0);
	CHECK_INT(state_load(dir, "intent", "eth0", r, NULL, &e), 0);
	CHECK_INT(r->intent.op, ATTACH_OP_TEARDOWN);
	CHECK(!r->intent.has_target);
	{
		char path[STATE_PATH_MAX], *text;
		cJSON *j = state_to_json(s);

		cJSON_ReplaceItemInObject(cJSON_GetObjectItem(j, "intent"), "op", cJSON_CreateString("explode"));
		text = cJSON_Print(j);
		CHECK_INT(state_path(dir, "intent", "eth0", path, sizeof(path)), 0);
		write_file(path, text, strlen(text));
		free(text);
		cJSON_Delete(j);
		error_clear(&e);
		CHECK_INT(state_load(dir, "intent", "eth0", r, NULL, &e), -EINVAL);
		CHECK_CONTAINS(e.msg, "intent.op");
	}
	/* a pending record of an older writer (no intent) is an ADD's */
	s->intent.op = ATTACH_OP_NONE;
	CHECK_INT(state_save(dir, s, &e), 0);
	CHECK_INT(state_load(dir, "intent", "eth0", r, NULL, &e), 0);
	CHECK_INT(r->intent.op, ATTACH_OP_ADD);
	attach_state_free(s);
	attach_state_free(r);
}
