/* rate.c — tc_core-like arithmetic: psched ticks (64 ns, the kernel's
 * PSCHED_SHIFT), transmit times of bursts, and printing rates, sizes and times
 * in the units tc(8) parses (rates SI "mbit", sizes binary "kb", times "ms"). */
#include <inttypes.h>

#include "tc_int.h"

#define PSCHED_NS_PER_TICK 64ULL
#define NS_PER_SEC         1000000000ULL
/* ns per second / ns per tick / bits per byte: ticks = bytes * 8 * 1e9 / 64 / rate_bps */
#define TICKS_PER_BYTE_BIT (NS_PER_SEC * 8ULL / PSCHED_NS_PER_TICK)

uint32_t tc_time_to_ticks(uint64_t ns)
{
	uint64_t t = ns / PSCHED_NS_PER_TICK;
	return t > UINT32_MAX ? UINT32_MAX : (uint32_t)t;
}

uint32_t tc_xmit_ticks(uint64_t rate_bps, uint32_t bytes)
{
	uint64_t t;

	if (rate_bps == 0)
		return UINT32_MAX;
	/* bytes < 2^32 and TICKS_PER_BYTE_BIT = 1.25e8 < 2^27: no overflow */
	t = (uint64_t)bytes * TICKS_PER_BYTE_BIT / rate_bps;
	return t > UINT32_MAX ? UINT32_MAX : (uint32_t)t;
}

uint32_t tc_ticks_to_bytes(uint64_t rate_bps, uint32_t ticks)
{
	/* bytes = ticks * rate_bps / 1.25e8, in 128-bit to avoid overflow at high rates */
	unsigned __int128 b = ((unsigned __int128)ticks * rate_bps + TICKS_PER_BYTE_BIT / 2) / TICKS_PER_BYTE_BIT;
	return b > UINT32_MAX ? UINT32_MAX : (uint32_t)b;
}

bool tc_burst_close(uint64_t rate_bps, uint32_t want_bytes, uint32_t have_bytes)
{
	uint64_t diff = want_bytes > have_bytes ? want_bytes - have_bytes : have_bytes - want_bytes;
	/* one microsecond plus two ticks of traffic at the rate, plus rounding */
	uint64_t tol = rate_bps / 8 * (1000 + 2 * PSCHED_NS_PER_TICK) / NS_PER_SEC + 1;
	return diff <= tol;
}

static int fmt_result(int n, size_t size)
{
	return n < 0 || (size_t)n >= size ? -ENOBUFS : 0;
}

int tc_rate_format(uint64_t bps, char *buf, size_t size)
{
	static const struct {
		uint64_t div;
		const char *unit;
	} units[] = {
	        {1000000000000ULL, "tbit"},
	        {1000000000ULL, "gbit"},
	        {1000000ULL, "mbit"},
	        {1000ULL, "kbit"},
	};

	for (size_t i = 0; i < ARRAY_SIZE(units); i++)
		if (bps >= units[i].div && bps % units[i].div == 0)
			return fmt_result(snprintf(buf, size, "%" PRIu64 "%s", bps / units[i].div, units[i].unit),
			                  size);
	return fmt_result(snprintf(buf, size, "%" PRIu64 "bit", bps), size);
}

int tc_size_format(uint32_t bytes, char *buf, size_t size)
{
	static const struct {
		uint32_t div;
		const char *unit;
	} units[] = {
	        {1024U * 1024U * 1024U, "gb"},
	        {1024U * 1024U, "mb"},
	        {1024U, "kb"},
	};

	for (size_t i = 0; i < ARRAY_SIZE(units); i++)
		if (bytes >= units[i].div && bytes % units[i].div == 0)
			return fmt_result(snprintf(buf, size, "%" PRIu32 "%s", bytes / units[i].div, units[i].unit),
			                  size);
	return fmt_result(snprintf(buf, size, "%" PRIu32 "b", bytes), size);
}

int tc_time_format(uint32_t us, char *buf, size_t size)
{
	if (us >= 1000000 && us % 1000000 == 0)
		return fmt_result(snprintf(buf, size, "%" PRIu32 "s", us / 1000000), size);
	if (us >= 1000 && us % 1000 == 0)
		return fmt_result(snprintf(buf, size, "%" PRIu32 "ms", us / 1000), size);
	return fmt_result(snprintf(buf, size, "%" PRIu32 "us", us), size);
}
