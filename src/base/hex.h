/* Hex digits: the one decoder for the ACL file's #<sha256> passwords
 * (src/auth/acl.c), the RESP inline parser's "\xHH" escapes
 * (src/proto/resp.c) and fence-proxy's percent-decoding (src/proxy/path.c).
 * Pure and inline. */
#ifndef FENCE_COMMON_HEX_H
#define FENCE_COMMON_HEX_H

/* The value 0..15 of the hex digit c (either case), or -1 for any other
 * character. */
static inline int fence__hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

#endif
