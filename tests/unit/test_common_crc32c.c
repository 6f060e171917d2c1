/* src/base/crc32c: the check value and a few known vectors. */
#include "base/crc32c.h"
#include "../lib/test.h"

/* RFC 3720's check value, the empty string, and 32 zero bytes. */
static void test_vectors(void)
{
    CHECK_EQ_U64(fence__crc32c("123456789", 9), 0xE3069283u);
    CHECK_EQ_U64(fence__crc32c("", 0), 0);
    unsigned char zeros[32] = {0};
    CHECK_EQ_U64(fence__crc32c(zeros, sizeof(zeros)), 0x8A9136AAu);
    unsigned char ones[32];
    memset(ones, 0xff, sizeof(ones));
    CHECK_EQ_U64(fence__crc32c(ones, sizeof(ones)), 0x62A8AB43u);
}

int main(void)
{
    TEST_RUN(test_vectors);
    return TEST_DONE();
}
