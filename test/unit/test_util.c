/* test_util.c — shared/util.c's string helpers: str_utf8_cut (the cut of a
 * Prometheus label value and of an Event message). */
#include "t.h"
#include "util.h"

TEST(utf8_cut_keeps_short_strings)
{
	CHECK_INT(str_utf8_cut("", 4), 0);
	CHECK_INT(str_utf8_cut("abc", 3), 3);
	CHECK_INT(str_utf8_cut("abc", 10), 3);
	CHECK_INT(str_utf8_cut("abcd", 3), 3);
	CHECK_INT(str_utf8_cut("abc", 0), 0);
}

TEST(utf8_cut_ends_on_a_character_boundary)
{
	/* "aé€𝄞": a (1 byte), é (2), € (3), 𝄞 (4) */
	const char *s = "a\xc3\xa9\xe2\x82\xac\xf0\x9d\x84\x9e";

	CHECK_INT(str_utf8_cut(s, 1), 1);
	CHECK_INT(str_utf8_cut(s, 2), 1); /* inside é */
	CHECK_INT(str_utf8_cut(s, 3), 3);
	CHECK_INT(str_utf8_cut(s, 4), 3); /* inside € */
	CHECK_INT(str_utf8_cut(s, 5), 3);
	CHECK_INT(str_utf8_cut(s, 6), 6);
	CHECK_INT(str_utf8_cut(s, 9), 6); /* inside 𝄞 */
	CHECK_INT(str_utf8_cut(s, 10), 10);
	CHECK_INT(str_utf8_cut(s, 11), 10);
}

TEST(utf8_cut_reads_at_most_max_plus_one_bytes)
{
	/* not NUL-terminated after byte 3: only bytes 0..3 may be read */
	char buf[4] = {'a', 'b', 'c', 'd'};

	CHECK_INT(str_utf8_cut(buf, 3), 3);
}
