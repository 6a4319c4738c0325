/* rate.c — tc_core-like arithmetic: psched ticks (64 ns, the kernel's
 * PSCHED_SHIFT), transmit times of bursts, and printing rates, sizes and times
 * in the units tc(8) parses (rates SI "mbit", sizes binary "kb", times "ms"). */
#include <inttypes.h>

#include "tc_int.h"

#define PSCHED_NS_PER_TICK 64ULL
#define NS_PER_SEC         1000000000ULL
/* ns per second / ns per tick: ticks = bytes * 1e9 / 64 / rate in bytes per second */
#define TICKS_PER_BYTE (NS_PER_SEC / PSCHED_NS_PER_TICK)

uint32_t tc_time_to_ticks(uint64_t ns)
{
	uint64_t t = ns / PSCHED_NS_PER_TICK;
	return t > UINT32_MAX ? UINT32_MAX : (uint32_t)t;
}

uint32_t tc_xmit_ticks(uint64_t rate_bps, uint32_t bytes)
{
	/* the kernel's units: its rate is in bytes per second (tc_rate_bytes),
	 * so a rate that is not a multiple of 8 bit/s reads back as the one
	 * below; ticks from the bit rate would never read back as sent */
	uint64_t rate_bytes = tc_rate_bytes(rate_bps), t;

	if (rate_bytes == 0)
		return UINT32_MAX;
	/* bytes < 2^32 and TICKS_PER_BYTE = 1.5625e7 < 2^24: no overflow */
	t = (uint64_t)bytes * TICKS_PER_BYTE / rate_bytes;
	return t > UINT32_MAX ? UINT32_MAX : (uint32_t)t;
}

uint32_t tc_ticks_to_bytes(uint64_t rate_bps, uint32_t ticks)
{
	/* bytes = ticks * rate in bytes / 1.5625e7, in 128-bit to avoid overflow at high rates */
	unsigned __int128 b =
	        ((unsigned __int128)ticks * tc_rate_bytes(rate_bps) + TICKS_PER_BYTE / 2) / TICKS_PER_BYTE;
	return b > UINT32_MAX ? UINT32_MAX : (uint32_t)b;
}

uint32_t tc_burst_read_back(uint64_t rate_bps, uint32_t bytes)
{
	return tc_ticks_to_bytes(rate_bps, tc_xmit_ticks(rate_bps, bytes));
}

bool tc_burst_close(uint64_t rate_bps, uint32_t want_bytes, uint32_t have_bytes)
{
	uint64_t diff = want_bytes > have_bytes ? want_bytes - have_bytes : have_bytes - want_bytes;
	/* one microsecond plus two ticks of traffic at the rate, plus rounding */
	uint64_t tol = rate_bps / 8 * (1000 + 2 * PSCHED_NS_PER_TICK) / NS_PER_SEC + 1;
	return diff <= tol;
}

/* A unit table, largest first, ending in the base unit (div 1). */
struct unit {
	uint64_t div;
	const char *name;
};

static const struct unit rate_units[] = {
        {1000000000000ULL, "tbit"}, {1000000000ULL, "gbit"}, {1000000ULL, "mbit"}, {1000ULL, "kbit"}, {1, "bit"},
};
static const struct unit size_units[] = {
        {1024ULL * 1024 * 1024, "gb"},
        {1024ULL * 1024, "mb"},
        {1024, "kb"},
        {1, "b"},
};
static const struct unit time_units[] = {
        {1000000, "s"},
        {1000, "ms"},
        {1, "us"},
};

/* v in the largest unit that divides it exactly ("500mbit", "64kb", "1ms"). */
static int unit_format(uint64_t v, const struct unit *u, char *buf, size_t size)
{
	int n;

	while (u->div > 1 && (v < u->div || v % u->div != 0))
		u++;
	n = snprintf(buf, size, "%" PRIu64 "%s", v / u->div, u->name);
	return n < 0 || (size_t)n >= size ? -ENOBUFS : 0;
}

int tc_rate_format(uint64_t bps, char *buf, size_t size)
{
	return unit_format(bps, rate_units, buf, size);
}

int tc_size_format(uint32_t bytes, char *buf, size_t size)
{
	return unit_format(bytes, size_units, buf, size);
}

int tc_time_format(uint32_t us, char *buf, size_t size)
{
	return unit_format(us, time_units, buf, size);
}

/* " <name> <value>" onto a format() buffer; a value that does not print
 * marks it truncated (format() then fails with -ENOBUFS). */
static void unit_word(struct sbuf *sb, const char *name, uint64_t v, const struct unit *u)
{
	char s[32];

	if (unit_format(v, u, s, sizeof(s)) < 0) {
		sb->truncated = true;
		return;
	}
	sbuf_word(sb, "%s %s", name, s);
}

void sbuf_rate(struct sbuf *sb, const char *name, uint64_t bps)
{
	unit_word(sb, name, bps, rate_units);
}

void sbuf_size(struct sbuf *sb, const char *name, uint32_t bytes)
{
	unit_word(sb, name, bytes, size_units);
}

void sbuf_time(struct sbuf *sb, const char *name, uint32_t us)
{
	unit_word(sb, name, us, time_units);
}
