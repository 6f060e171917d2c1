/* fenced's client connections as a whole, on the shared connection layer
 * (src/net/conn.h): close one, close after its replies, send the replies
 * that became ready, close all.  Below client_conn.c (where a request
 * enters) and the files that answer requests (observe.c, cmd.c, loop.c). */
#include "server/server.h"

/* ---- Connections ---------------------------------------------------------- */

/* Close c (idempotent); its requests are forgotten or orphaned through the
 * hooks of client_conn.c. */
void fence__conn_close(fence_conn *c)
{
    fence__net_conn_close(&c->base);
}

/* QUIT: answer what is owed, then close. */
void fence__conn_close_after_flush(fence_conn *c)
{
    fence__net_close_after_flush(&c->base);
}

/* Send the replies that became ready during this loop turn. */
void fence__conns_flush(fence_server *s)
{
    fence__net_flush(&s->net);
}

/* Close every connection (shutdown).  No request is parsed after this, so
 * the parse scratch goes too. */
void fence__conns_close_all(fence_server *s)
{
    fence__net_stop(&s->net);
    fence__net_free(&s->net);
}
