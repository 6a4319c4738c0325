/* test_agent_records.c — records the plugin could not write, written by the
 * agent (agent/records.c): validation of an offer, a write that fails
 * (retried with backoff, shown in JSON), the write once the directory takes
 * it (the plugin's record verbatim, choices included), never over a record
 * already there, a pod that is gone, and DEL forgetting. The "pod" is the
 * test's own netns and its lo, so the liveness check is real. */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "records.h"
#include "t.h"

static unsigned n_written;
static char last_written[STATE_ID_MAX];

static void on_written(void *ud, const char *cid, const char *ifname)
{
	(void)ud;
	(void)ifname;
	n_written++;
	str_copy(last_written, sizeof(last_written), cid);
}

static cJSON *record(const char *cid, const char *netns)
{
	struct attach_state *s = calloc(1, sizeof(*s));
	cJSON *j;

	str_copy(s->container_id, sizeof(s->container_id), cid);
	str_copy(s->ifname, sizeof(s->ifname), "lo");
	str_copy(s->netns, sizeof(s->netns), netns);
	str_copy(s->pod_namespace, sizeof(s->pod_namespace), "aqt");
	str_copy(s->pod_name, sizeof(s->pod_name), "p1");
	str_copy(s->ifs.pod_ifname, sizeof(s->ifs.pod_ifname), "lo");
	s->pod_ifindex = 1;
	s->workload.class = CLASS_INFERENCE;
	str_copy(s->profile, sizeof(s->profile), "inference");
	if (!plan_item_add(&s->plan, ITEM_SYSCTL, DEV_POD, "sysctl.tcp_ecn", NULL))
		abort(); /* out of memory in a test */
	str_copy(s->plan.items[0].key, sizeof(s->plan.items[0].key), "net/ipv4/tcp_ecn");
	s->plan.items[0].n_alt = 1;
	str_copy(s->plan.items[0].val[0], sizeof(s->plan.items[0].val[0]), "1");
	s->plan.items[0].status = ITEM_APPLIED;
	s->plan.items[0].chosen = 0;
	str_copy(s->plan.items[0].prev, sizeof(s->plan.items[0].prev), "2");
	s->updated_unix = 1;
	j = state_to_json(s);
	attach_state_free(s);
	return j;
}

TEST(offer_is_validated)
{
	struct agent_records rs = {0};
	struct error e = {0};
	cJSON *j = record("c1", "/proc/self/ns/net");

	CHECK_INT(agent_records_offer(&rs, j, "c2", "lo", 0, &e), -EINVAL);
	CHECK_CONTAINS(e.msg, "another attachment");
	cJSON_AddTrueToObject(j, "pending");
	error_clear(&e);
	CHECK_INT(agent_records_offer(&rs, j, "c1", "lo", 0, &e), -EINVAL);
	CHECK_CONTAINS(e.msg, "intent");
	CHECK_INT(rs.n, 0);
	cJSON_Delete(j);
	j = cJSON_Parse("{\"version\":1}");
	error_clear(&e);
	CHECK(agent_records_offer(&rs, j, "c1", "lo", 0, &e) < 0);
	CHECK_INT(rs.n, 0);
	cJSON_Delete(j);
	agent_records_free(&rs);
}

TEST(written_once_the_directory_takes_it)
{
	char tmpl[] = "/tmp/aiqos-test-records.XXXXXX", dir[64], path[STATE_PATH_MAX];
	struct agent_records rs = {0};
	struct attach_state *s = calloc(1, sizeof(*s));
	struct error e = {0};
	cJSON *j = record("c1", "/proc/self/ns/net"), *choices = NULL, *st;
	char *text;

	CHECK(mkdtemp(tmpl) != NULL);
	snprintf(dir, sizeof(dir), "%s/state", tmpl);
	/* the state dir is a file: the write fails, retried with backoff */
	{
		FILE *f = fopen(dir, "w");

		CHECK(f != NULL);
		if (f)
			fclose(f);
	}
	CHECK_INT(agent_records_offer(&rs, j, "c1", "lo", 1000, &e), 0);
	CHECK_INT(agent_records_next_ms(&rs), 1000);
	n_written = 0;
	agent_records_flush(&rs, dir, 1000, on_written, NULL);
	CHECK_INT(n_written, 0);
	CHECK_INT(rs.n, 1);
	CHECK(agent_records_next_ms(&rs) > 1000);
	st = agent_records_json(&rs, 3000);
	text = cJSON_PrintUnformatted(st);
	CHECK_CONTAINS(text, "\"containerId\":\"c1\"");
	CHECK_CONTAINS(text, "\"retries\":1");
	CHECK_CONTAINS(text, "\"waitingSeconds\":2");
	CHECK_CONTAINS(text, "Not a directory");
	free(text);
	cJSON_Delete(st);
	/* not due yet: not tried */
	agent_records_flush(&rs, dir, 1001, on_written, NULL);
	CHECK_INT(rs.v[0].retries, 1);
	/* space is back */
	CHECK_INT(unlink(dir), 0);
	agent_records_flush(&rs, dir, agent_records_next_ms(&rs), on_written, NULL);
	CHECK_INT(n_written, 1);
	CHECK_STR(last_written, "c1");
	CHECK_INT(rs.n, 0);
	CHECK_INT(rs.written, 1);
	CHECK_INT(agent_records_next_ms(&rs), -1);
	CHECK_INT(state_load(dir, "c1", "lo", s, &choices, &e), 0);
	CHECK_STR(s->pod_name, "p1");
	text = cJSON_PrintUnformatted(choices);
	CHECK_CONTAINS(text, "\"prev\":\"2\""); /* the plugin's choices, verbatim */
	free(text);
	cJSON_Delete(choices);
	/* a record there already is never overwritten */
	cJSON_ReplaceItemInObject(j, "profile", cJSON_CreateString("training"));
	CHECK_INT(agent_records_offer(&rs, j, "c1", "lo", 5000, &e), 0);
	agent_records_flush(&rs, dir, 5000, on_written, NULL);
	CHECK_INT(n_written, 1);
	CHECK_INT(rs.n, 0);
	CHECK_INT(state_load(dir, "c1", "lo", s, NULL, &e), 0);
	CHECK_STR(s->profile, "inference");
	/* a pod that is gone: dropped, not written */
	cJSON_Delete(j);
	j = record("c2", "/run/netns/aqt-records-no-such-netns");
	CHECK_INT(agent_records_offer(&rs, j, "c2", "lo", 6000, &e), 0);
	agent_records_flush(&rs, dir, 6000, on_written, NULL);
	CHECK_INT(rs.n, 0);
	CHECK_INT(state_load(dir, "c2", "lo", s, NULL, &e), -ENOENT);
	/* DEL forgets one still waiting */
	CHECK_INT(agent_records_offer(&rs, j, "c2", "lo", 7000, &e), 0);
	agent_records_forget(&rs, "c2", "lo");
	CHECK_INT(rs.n, 0);
	cJSON_Delete(j);
	agent_records_free(&rs);
	attach_state_free(s);
	snprintf(path, sizeof(path), "rm -rf '%s'", tmpl);
	CHECK_INT(system(path), 0);
}
