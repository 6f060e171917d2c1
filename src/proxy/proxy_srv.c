/* fence-proxy: the one server of the process, which every file of the
 * proxy reaches as srv (proxy_int.h); defined in a file of its own, below
 * them all, so that none of them refers up to proxy.c (which starts it). */
#include "proxy/proxy_int.h"

/* The server (proxy_int.h). */
fp_server fence__proxy_srv;
