/* ------------------------------------------------------------------------
 * sim_disk.c: Crash-stop raft_io wrapper with a shadow disk
 *
 * The 0.15 fixture has no restart: its in-memory "disk" keeps entries from
 * index 1 and mis-indexes them after a snapshot.  So the wrapper forwards
 * every operation to the fixture's io, keeps its own copy of what completed
 * (term, vote, snapshot, entries by index, in the order a real disk would
 * apply them), and a restart loads from that copy.  It also counts the I/O
 * in flight (a node is closed only when none is left, since the fixture
 * would otherwise call back into freed raft memory), and it implements the
 * server's crash-stop rule: any failed disk write marks the node crashed,
 * and the driver kills it before the next step.
 * ------------------------------------------------------------------------ */
#include "sim_int.h"

/* Find the node owning a wrapper io. */
static sim_node *io_node(struct raft_io *io)
{
    return (sim_node *)((char *)io - offsetof(sim_node, wio));
}

/* Remember one request in flight and return its record. */
static sim_pending *pend_add(sim_node *n, int kind, void *req)
{
    n->pend = sim_grow(n->pend, &n->cap_pend, n->n_pend + 1, sizeof *n->pend);
    sim_pending *p = &n->pend[n->n_pend++];
    memset(p, 0, sizeof *p);
    p->kind = kind;
    p->req = req;
    return p;
}

/* Remove and return (by value) the record of a completed request; every
 * node is searched because the fixture's callback does not say whose. */
static sim_pending pend_take(void *req, sim_node **owner)
{
    sim *s = g_sim;
    for (unsigned k = 0; k < s->n_nodes; k++) {
        sim_node *n = &s->nodes[k];
        for (size_t j = 0; j < n->n_pend; j++) {
            if (n->pend[j].req != req)
                continue;
            sim_pending p = n->pend[j];
            n->pend[j] = n->pend[--n->n_pend];
            *owner = n;
            return p;
        }
    }
    fprintf(stderr, "sim: completion for an unknown request\n");
    abort();
}

/* Drop persisted entries from index onward. */
static void disk_truncate(sim_node *n, raft_index index)
{
    while (n->d_n > 0 && n->d_start + n->d_n - 1 >= index) {
        n->d_n--;
        raft_free(n->d_ent[n->d_n].buf.base);
    }
    if (n->d_n == 0 && index > n->d_start)
        n->d_start = index;
    if (n->d_n == 0 && index <= n->d_start)
        n->d_start = index;
}

/* Drop persisted entries up to and including index (log compaction). */
static void disk_drop_prefix(sim_node *n, raft_index index)
{
    size_t k = 0;
    while (k < n->d_n && n->d_start + k <= index) {
        raft_free(n->d_ent[k].buf.base);
        k++;
    }
    memmove(n->d_ent, n->d_ent + k, (n->d_n - k) * sizeof *n->d_ent);
    n->d_n -= k;
    n->d_start += k;
    if (n->d_n == 0 && n->d_start <= index)
        n->d_start = index + 1;
}

/* Write one entry at index (after everything before it). */
static void disk_put(sim_node *n, raft_index index, const struct raft_entry *e)
{
    if (n->d_n == 0)
        n->d_start = index;
    disk_truncate(n, index);
    assert(n->d_n == 0 || n->d_start + n->d_n == index);
    if (n->d_n == 0)
        n->d_start = index;
    n->d_ent = sim_grow(n->d_ent, &n->d_cap, n->d_n + 1, sizeof *n->d_ent);
    struct raft_entry *d = &n->d_ent[n->d_n++];
    d->term = e->term;
    d->type = e->type;
    d->buf.len = e->buf.len;
    d->buf.base = raft_malloc(e->buf.len ? e->buf.len : 1);
    assert(d->buf.base != NULL);
    if (e->buf.len)
        memcpy(d->buf.base, e->buf.base, e->buf.len);
    d->batch = NULL;
}

/* Deep-copy a snapshot into one raft_malloc'd buffer, the layout raft's
 * load expects (n_bufs == 1). */
static struct raft_snapshot *snap_copy(const struct raft_snapshot *src)
{
    struct raft_snapshot *d = raft_calloc(1, sizeof *d);
    assert(d != NULL);
    d->index = src->index;
    d->term = src->term;
    d->configuration_index = src->configuration_index;
    raft_configuration_init(&d->configuration);
    for (unsigned k = 0; k < src->configuration.n; k++) {
        const struct raft_server *sv = &src->configuration.servers[k];
        int rv = raft_configuration_add(&d->configuration, sv->id, sv->address,
                                        sv->role);
        assert(rv == 0);
        (void)rv;
    }
    size_t len = 0;
    for (unsigned k = 0; k < src->n_bufs; k++)
        len += src->bufs[k].len;
    d->bufs = raft_malloc(sizeof *d->bufs);
    assert(d->bufs != NULL);
    d->bufs[0].base = raft_malloc(len ? len : 1);
    assert(d->bufs[0].base != NULL);
    d->bufs[0].len = len;
    uint8_t *p = d->bufs[0].base;
    for (unsigned k = 0; k < src->n_bufs; k++) {
        memcpy(p, src->bufs[k].base, src->bufs[k].len);
        p += src->bufs[k].len;
    }
    d->n_bufs = 1;
    return d;
}

/* Free a snapshot made by snap_copy. */
void sim_snap_free(struct raft_snapshot *sn)
{
    if (sn == NULL)
        return;
    raft_configuration_close(&sn->configuration);
    for (unsigned k = 0; k < sn->n_bufs; k++)
        raft_free(sn->bufs[k].base);
    raft_free(sn->bufs);
    raft_free(sn);
}

/* Count a disk write against the armed fault; true when this one fails
 * (the node then crash-stops, as the server's raft_io wrapper aborts). */
static bool disk_fault_hit(sim_node *n)
{
    if (n->disk_fault < 0)
        return false;
    if (n->disk_fault > 0) {
        n->disk_fault--;
        return false;
    }
    n->disk_fault = -1;
    n->crashed = true;
    return true;
}

/* Forward init. */
static int wio_init(struct raft_io *io, raft_id id, const char *address)
{
    sim_node *n = io_node(io);
    n->inner->data = io->data;
    return n->inner->init(n->inner, id, address);
}

/* Forward close; the fixture calls back at once. */
static void wio_close(struct raft_io *io, raft_io_close_cb cb)
{
    sim_node *n = io_node(io);
    n->inner->close(n->inner, cb);
}

/* Load from the shadow disk, in the shape raft_start expects: a snapshot
 * with one buffer, and entries from start_index, each its own batch. */
static int wio_load(struct raft_io *io, raft_term *term, raft_id *voted_for,
                    struct raft_snapshot **snapshot, raft_index *start_index,
                    struct raft_entry *entries[], size_t *n_entries)
{
    sim_node *n = io_node(io);
    *term = n->d_term;
    *voted_for = n->d_vote;
    *snapshot = n->d_snap ? snap_copy(n->d_snap) : NULL;
    *start_index = n->d_n ? n->d_start : (n->d_snap ? n->d_snap->index + 1 : 1);
    *n_entries = n->d_n;
    *entries = NULL;
    if (n->d_n) {
        *entries = raft_calloc(n->d_n, sizeof **entries);
        assert(*entries != NULL);
        for (size_t k = 0; k < n->d_n; k++) {
            struct raft_entry *e = &(*entries)[k];
            e->term = n->d_ent[k].term;
            e->type = n->d_ent[k].type;
            e->buf.len = n->d_ent[k].buf.len;
            e->buf.base = raft_malloc(e->buf.len ? e->buf.len : 1);
            assert(e->buf.base != NULL);
            memcpy(e->buf.base, n->d_ent[k].buf.base, e->buf.len);
            e->batch = e->buf.base;
        }
    }
    n->submit_last = n->d_n ? n->d_start + n->d_n - 1
                            : (n->d_snap ? n->d_snap->index : 0);
    return 0;
}

/* Entries in raft's in-memory log (a circular buffer, public in raft.h). */
static size_t rlog_n(const struct raft_log *l)
{
    if (l->size == 0)
        return 0;
    return l->back >= l->front ? l->back - l->front : l->size - l->front + l->back;
}

/* Whether index is in raft's in-memory log. */
static bool rlog_has(const struct raft_log *l, raft_index index)
{
    return index > l->offset && index <= l->offset + rlog_n(l);
}

/* The term of index as raft's logTermOf gives it (0: unknown here). */
raft_term sim_rlog_term(const struct raft_log *l, raft_index index)
{
    if (rlog_has(l, index))
        return l->entries[(l->front + (index - l->offset - 1)) % l->size].term;
    if (index != 0 && index == l->snapshot.last_index)
        return l->snapshot.last_term;
    return 0;
}

/* Whether delivering message m to r would make libraft 0.15 dereference
 * NULL: a follower truncating an uncommitted configuration entry rolls back
 * to its last committed configuration by reading that entry from its log
 * (membershipRollback), and after a snapshot compacted the entry away
 * logGet returns NULL.  Fixed upstream in raft 0.17.1 ("membership: Ensure
 * configuration rollback is possible"); found by the membership changes of
 * this simulation (seed 148).  Mirrors the checks raft makes on the way
 * (term, log matching, first conflicting entry). */
static bool rollback_would_crash(const struct raft *r, const struct raft_message *m)
{
    if (m->type != RAFT_IO_APPEND_ENTRIES)
        return false;
    const struct raft_append_entries *ae = &m->append_entries;
    if (ae->term < r->current_term || r->configuration_uncommitted_index == 0 ||
        rlog_has(&r->log, r->configuration_index))
        return false;
    if (ae->prev_log_index != 0 &&
        sim_rlog_term(&r->log, ae->prev_log_index) != ae->prev_log_term)
        return false; /* rejected before anything is truncated */
    for (unsigned j = 0; j < ae->n_entries; j++) {
        raft_index index = ae->prev_log_index + 1 + j;
        raft_term local = sim_rlog_term(&r->log, index);
        if (local > 0 && local != ae->entries[j].term)
            return index > r->commit_index &&
                   r->configuration_uncommitted_index >= index;
    }
    return false;
}

/* Receive: hand the message to raft, unless it would crash raft (see
 * rollback_would_crash): then the process dies, as fenced would, and the
 * driver restarts it from its disk. */
static void wio_recv(struct raft_io *inner, struct raft_message *m)
{
    sim *s = g_sim;
    sim_node *n = NULL;
    for (unsigned k = 0; k < s->n_nodes && n == NULL; k++)
        if (s->nodes[k].inner == inner)
            n = &s->nodes[k];
    assert(n != NULL);
    struct raft *r = inner->data;
    if (rollback_would_crash(r, m)) {
        if (!n->crashed) {
            s->res->rollback_crashes++;
            sim_log(s, "node %u crash-stops: libraft 0.15 would crash rolling back "
                       "configuration %" PRIu64 " (its committed entry %" PRIu64
                       " is compacted)", n->i,
                    (uint64_t)r->configuration_uncommitted_index,
                    (uint64_t)r->configuration_index);
        }
        n->crashed = true;
        if (m->append_entries.entries != NULL) { /* ours to free, as raft would */
            raft_free(m->append_entries.entries[0].batch);
            raft_free(m->append_entries.entries);
        }
        return;
    }
    n->recv(inner, m);
}

/* Forward start (receiving through wio_recv). */
static int wio_start(struct raft_io *io, unsigned msecs, raft_io_tick_cb tick,
                     raft_io_recv_cb recv)
{
    sim_node *n = io_node(io);
    n->recv = recv;
    int rv = n->inner->start(n->inner, msecs, tick, wio_recv);
    if (rv != 0)
        n->crashed = true;
    return rv;
}

/* Bootstrap: forward, and persist the first configuration entry. */
static int wio_bootstrap(struct raft_io *io,
                         const struct raft_configuration *conf)
{
    sim_node *n = io_node(io);
    int rv = n->inner->bootstrap(n->inner, conf);
    if (rv != 0)
        return rv;
    struct raft_entry e;
    memset(&e, 0, sizeof e);
    e.term = 1;
    e.type = RAFT_CHANGE;
    rv = raft_configuration_encode(conf, &e.buf);
    assert(rv == 0);
    disk_put(n, 1, &e);
    raft_free(e.buf.base);
    n->d_term = 1;
    n->d_vote = 0;
    n->submit_last = 1;
    return 0;
}

/* Recover is not used by the sim. */
static int wio_recover(struct raft_io *io,
                       const struct raft_configuration *conf)
{
    (void)io;
    (void)conf;
    return RAFT_IOERR;
}

/* Persist the term; a failure is a failed disk write (crash-stop). */
static int wio_set_term(struct raft_io *io, raft_term term)
{
    sim_node *n = io_node(io);
    /* Off by default: with these faults libraft 0.15 crashes in its own
     * error path (bad free, seeds 10140 and 10399); see docs/testing.md. */
    if (n->sim->o.vote_faults && disk_fault_hit(n))
        return RAFT_IOERR;
    int rv = n->inner->set_term(n->inner, term);
    if (rv != 0) {
        n->crashed = true;
        return rv;
    }
    n->d_term = term;
    n->d_vote = 0;
    return 0;
}

/* Persist the vote; a failure is a failed disk write (crash-stop). */
static int wio_set_vote(struct raft_io *io, raft_id id)
{
    sim_node *n = io_node(io);
    /* Off by default: with these faults libraft 0.15 crashes in its own
     * error path (bad free, seeds 10140 and 10399); see docs/testing.md. */
    if (n->sim->o.vote_faults && disk_fault_hit(n))
        return RAFT_IOERR;
    int rv = n->inner->set_vote(n->inner, id);
    if (rv != 0) {
        n->crashed = true;
        return rv;
    }
    n->d_vote = id;
    return 0;
}

/* Queue a disk op behind the ones submitted earlier. */
static sim_diskop *op_push(sim_node *n, int kind)
{
    sim_diskop *op = calloc(1, sizeof *op);
    assert(op != NULL);
    op->kind = kind;
    if (n->ops_tail)
        n->ops_tail->next = op;
    else
        n->ops_head = op;
    n->ops_tail = op;
    return op;
}

/* Let completed ops take effect on the shadow disk, oldest first, stopping
 * at the first one still in flight. */
static void ops_drain(sim_node *n)
{
    while (n->ops_head && n->ops_head->done) {
        sim_diskop *op = n->ops_head;
        n->ops_head = op->next;
        if (n->ops_head == NULL)
            n->ops_tail = NULL;
        if (op->kind == OP_APPEND) {
            for (unsigned k = 0; k < op->n; k++) {
                disk_put(n, op->first + k, &op->entries[k]);
                raft_free(op->entries[k].buf.base);
            }
            free(op->entries);
        } else if (op->kind == OP_TRUNCATE) {
            disk_truncate(n, op->index);
        } else if (op->snap != NULL) {
            raft_index idx = op->snap->index;
            sim_snap_free(n->d_snap);
            n->d_snap = op->snap;
            if (op->trailing == 0) {
                /* an installed snapshot replaces the whole log */
                disk_truncate(n, 0);
                n->d_start = idx + 1;
            } else if (idx > op->trailing) {
                disk_drop_prefix(n, idx - op->trailing);
            }
        }
        free(op);
    }
}

/* Whether raft is about to persist a configuration entry that libraft
 * 0.15 never puts into effect: a follower applies a configuration entry (as
 * uncommitted) only when its write completes, and skips that when it is no
 * longer a follower by then (replication.c appendFollowerCb); a candidate,
 * or a leader elected meanwhile, keeps the old configuration, and when the
 * entry commits it records its index over the old content (seed 254: a
 * leader that waits for a node removed long ago).  A leader's own entries
 * carry its term and took effect when proposed.  The process then
 * crash-stops: a restart takes the log's last configuration entry. */
static bool change_left_out(sim_node *n, const sim_diskop *op)
{
    const struct raft *r = n->wio.data;
    if (r->state != RAFT_CANDIDATE && r->state != RAFT_LEADER)
        return false;
    for (unsigned k = 0; k < op->n; k++)
        if (op->rentries[k].type == RAFT_CHANGE &&
            (r->state == RAFT_CANDIDATE || op->rentries[k].term < r->current_term)) {
            n->sim->res->conf_crashes++;
            sim_log(n->sim, "node %u crash-stops: libraft 0.15 would leave out the "
                            "configuration entry at index %" PRIu64, n->i,
                    (uint64_t)(op->first + k));
            return true;
        }
    return false;
}

/* Append completion: take a copy of the entries (raft may free them once
 * called back), let them land in order, then call raft. */
static void wio_append_cb(struct raft_io_append *req, int status)
{
    sim_node *n;
    sim_pending p = pend_take(req, &n);
    sim_diskop *op = p.op;
    if (status != 0) {
        n->crashed = true;
        op->n = 0; /* nothing written */
    } else if (op->n) {
        op->entries = calloc(op->n, sizeof *op->entries);
        assert(op->entries != NULL);
        for (unsigned k = 0; k < op->n; k++) {
            const struct raft_entry *e = &op->rentries[k];
            op->entries[k].term = e->term;
            op->entries[k].type = e->type;
            op->entries[k].buf.len = e->buf.len;
            op->entries[k].buf.base = raft_malloc(e->buf.len ? e->buf.len : 1);
            assert(op->entries[k].buf.base != NULL);
            if (e->buf.len)
                memcpy(op->entries[k].buf.base, e->buf.base, e->buf.len);
        }
    }
    if (status == 0 && n->sim->o.membership && change_left_out(n, op))
        n->crashed = true;
    op->done = true;
    ops_drain(n);
    if (p.cb.append != NULL)
        p.cb.append(req, status);
}

/* Append: forward, remembering at which index the entries go. */
static int wio_append(struct raft_io *io, struct raft_io_append *req,
                      const struct raft_entry entries[], unsigned n_entries,
                      raft_io_append_cb cb)
{
    sim_node *n = io_node(io);
    if (disk_fault_hit(n))
        return RAFT_IOERR;
    int rv = n->inner->append(n->inner, req, entries, n_entries, wio_append_cb);
    if (rv != 0) {
        n->crashed = true;
        return rv;
    }
    sim_pending *p = pend_add(n, PEND_APPEND, req);
    p->cb.append = cb;
    p->op = op_push(n, OP_APPEND);
    p->op->rentries = entries;
    p->op->n = n_entries;
    p->op->first = n->submit_last + 1;
    n->submit_last += n_entries;
    return 0;
}

/* Truncate: an op on the shadow only (the fixture's own truncate
 * mis-indexes after a snapshot), in order behind earlier appends. */
static int wio_truncate(struct raft_io *io, raft_index index)
{
    sim_node *n = io_node(io);
    sim_diskop *op = op_push(n, OP_TRUNCATE);
    op->index = index;
    op->done = true;
    ops_drain(n);
    n->submit_last = index - 1;
    return 0;
}

/* Forward send completion. */
static void wio_send_cb(struct raft_io_send *req, int status)
{
    sim_node *n;
    sim_pending p = pend_take(req, &n);
    if (p.cb.send != NULL)
        p.cb.send(req, status);
}

/* Send: forward (a send failure is a network error, not a crash). */
static int wio_send(struct raft_io *io, struct raft_io_send *req,
                    const struct raft_message *message, raft_io_send_cb cb)
{
    sim_node *n = io_node(io);
    int rv = n->inner->send(n->inner, req, message, wio_send_cb);
    if (rv != 0)
        return rv;
    sim_pending *p = pend_add(n, PEND_SEND, req);
    p->cb.send = cb;
    return 0;
}

/* Snapshot-put completion: copy the snapshot (raft frees its own after
 * the callback) and let it take effect in order: keep `trailing` entries
 * before it, none for an installed snapshot (trailing 0). */
static void wio_snap_put_cb(struct raft_io_snapshot_put *req, int status)
{
    sim_node *n;
    sim_pending p = pend_take(req, &n);
    if (status != 0)
        n->crashed = true;
    else
        p.op->snap = snap_copy(p.op->rsnap);
    p.op->done = true;
    ops_drain(n);
    if (p.cb.snap_put != NULL)
        p.cb.snap_put(req, status);
}

/* Snapshot put: forward. */
static int wio_snap_put(struct raft_io *io, unsigned trailing,
                        struct raft_io_snapshot_put *req,
                        const struct raft_snapshot *snapshot,
                        raft_io_snapshot_put_cb cb)
{
    sim_node *n = io_node(io);
    int rv = n->inner->snapshot_put(n->inner, trailing, req, snapshot,
                                    wio_snap_put_cb);
    if (rv != 0) {
        n->crashed = true;
        return rv;
    }
    sim_pending *p = pend_add(n, PEND_SNAP_PUT, req);
    p->cb.snap_put = cb;
    p->op = op_push(n, OP_SNAPSHOT);
    p->op->trailing = trailing;
    p->op->rsnap = snapshot;
    if (trailing == 0)
        n->submit_last = snapshot->index;
    return 0;
}

/* Snapshot-get completion: forward (the fixture's copy holds the same
 * bytes as our shadow).  The 0.15 fixture's copy leaves configuration_index
 * uninitialized (its snapshot_copy skips it), and a leader sends that index
 * in InstallSnapshot; with membership changes the receiver then rolls back
 * to a garbage index (seed 212).  Our shadow has the index raft gave. */
static void wio_snap_get_cb(struct raft_io_snapshot_get *req,
                            struct raft_snapshot *snapshot, int status)
{
    sim_node *n;
    sim_pending p = pend_take(req, &n);
    if (status == 0 && snapshot != NULL && n->d_snap != NULL &&
        n->d_snap->index == snapshot->index)
        snapshot->configuration_index = n->d_snap->configuration_index;
    if (p.cb.snap_get != NULL)
        p.cb.snap_get(req, snapshot, status);
}

/* Snapshot get: forward. */
static int wio_snap_get(struct raft_io *io, struct raft_io_snapshot_get *req,
                        raft_io_snapshot_get_cb cb)
{
    sim_node *n = io_node(io);
    int rv = n->inner->snapshot_get(n->inner, req, wio_snap_get_cb);
    if (rv != 0)
        return rv;
    sim_pending *p = pend_add(n, PEND_SNAP_GET, req);
    p->cb.snap_get = cb;
    return 0;
}

/* Forward time: the node's clock is the fixture's (raft's timers). */
static raft_time wio_time(struct raft_io *io)
{
    sim_node *n = io_node(io);
    return n->inner->time(n->inner);
}

/* Forward random (the fixture returns its configured election timeout). */
static int wio_random(struct raft_io *io, int min, int max)
{
    sim_node *n = io_node(io);
    return n->inner->random(n->inner, min, max);
}

/* Forward async work (unused: our fsm takes snapshots synchronously). */
static int wio_async_work(struct raft_io *io, struct raft_io_async_work *req,
                          raft_io_async_work_cb cb)
{
    sim_node *n = io_node(io);
    return n->inner->async_work(n->inner, req, cb);
}

/* Set up the wrapper of a node around the fixture's io. */
void sim_wio_setup(sim_node *n, struct raft_io *inner)
{
    memset(&n->wio, 0, sizeof n->wio);
    n->inner = inner;
    n->wio.version = 2;
    n->wio.impl = n;
    n->wio.init = wio_init;
    n->wio.close = wio_close;
    n->wio.load = wio_load;
    n->wio.start = wio_start;
    n->wio.bootstrap = wio_bootstrap;
    n->wio.recover = wio_recover;
    n->wio.set_term = wio_set_term;
    n->wio.set_vote = wio_set_vote;
    n->wio.append = wio_append;
    n->wio.truncate = wio_truncate;
    n->wio.send = wio_send;
    n->wio.snapshot_put = wio_snap_put;
    n->wio.snapshot_get = wio_snap_get;
    n->wio.time = wio_time;
    n->wio.random = wio_random;
    n->wio.async_work = wio_async_work;
}

/* Forget everything on a node's disk, as an empty data dir would hold (a
 * removed node that is added again); nothing may be in flight. */
void sim_disk_wipe(sim_node *n)
{
    assert(n->n_pend == 0 && n->ops_head == NULL);
    for (size_t j = 0; j < n->d_n; j++)
        raft_free(n->d_ent[j].buf.base);
    n->d_n = 0;
    n->d_start = 1;
    sim_snap_free(n->d_snap);
    n->d_snap = NULL;
    n->d_term = 0;
    n->d_vote = 0;
    n->submit_last = 0;
}
