/* fence-store configuration: one table drives the flags, their bounds,
 * defaults and --help. */
#ifndef FENCE_STORE_CONFIG_H
#define FENCE_STORE_CONFIG_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* Everything fence-store can be told on its command line. */
typedef struct fence_store_config {
    uint64_t port;           /* TCP port to listen on */
    char bind[64];           /* address to listen on (IPv4/IPv6 literal) */
    char data_dir[1024];     /* directory of the LMDB environment */
    uint64_t max_value;      /* largest value in bytes */
    uint64_t map_size;       /* LMDB map size in bytes (database ceiling) */
    uint64_t max_clients;    /* most connections at once */
    uint64_t obuf_max;       /* reply bytes queued per client before it is
                              * disconnected as a slow reader */
    bool ignore_tokens;      /* control mode: admit every token */
    uint64_t log_level;      /* 0 error .. 3 debug */
} fence_store_config;

/* Fill *cfg with the defaults. */
void fence__store_config_default(fence_store_config *cfg);

/* Parse argv (flags "--name value" or "--name=value") into *cfg, then
 * validate the whole struct.  Returns 0; 1 if --help was given (help was
 * printed to out); -1 on an error (a message naming the flag was printed
 * to err). */
int fence__store_config_parse(fence_store_config *cfg, int argc, char **argv,
                              FILE *out, FILE *err);

#endif /* FENCE_STORE_CONFIG_H */
