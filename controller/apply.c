/* apply.c — one decision written to the store (see apply.h). */
#include "apply.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "gq.h"

#define APPLY_PLACEMENT_MAX (1u << 20) /* bound of a placement text */

int apply_holds(int state)
{
    return state == STORE_ADMITTED || state == STORE_RUNNING;
}

int64_t apply_gpus(const struct apply_job *j, int nrep)
{
    if (nrep <= 0)
        return 0;
    if (j->gpus > 0)
        return (int64_t)j->gpus * nrep;
    if (j->shares > 0)
        return ((int64_t)j->shares * nrep + 999) / 1000;
    return 0;
}

int apply_quota_entry(const struct sched_quota *q, int nq, const char *gpu_type)
{
    int star = -1;
    const char *t = gpu_type ? gpu_type : "";
    for (int e = 0; e < nq; e++) {
        const char *qt = q[e].gpu_type ? q[e].gpu_type : "";
        if (t[0] && !strcmp(qt, t))
            return e;
        if (!strcmp(qt, "*") && star < 0)
            star = e;
    }
    return star;
}

int64_t apply_borrowed(int64_t nominal, int64_t others, int64_t mine)
{
    int64_t over = others + mine - nominal;
    if (over <= 0 || mine <= 0)
        return 0;
    return over < mine ? over : mine;
}

int apply_placement_add(struct ctl_placement *pl, const struct sched_node *nodes,
                        const struct sched_replica *rep, int nrep, int partial)
{
    int next = 0, rc;
    for (int k = 0; k < nrep; k++) {
        while (ctl_placement_find(pl, next) >= 0)
            next++;
        if ((rc = ctl_placement_add(pl, next, nodes[rep[k].node].name, rep[k].devs)))
            return rc;
        if (partial)
            pl->rep[ctl_placement_find(pl, next)].gen = ++pl->reseq;
    }
    return 0;
}

int apply_audit(const struct apply_ctx *x, const char *action, const char *team, const char *key,
                const char *oldv, const char *newv, const char *reason)
{
    struct store_audit a = {0,           x->now_ms,         "gangq",           action,
                            team ? team : "", key ? key : "", oldv ? oldv : "", newv ? newv : "",
                            reason ? reason : ""};
    return store_audit_add(x->st, &a, x->err, x->errlen);
}

/* ---- ledger ---- */

struct settle_row {
    char *key; /* owned */
    int entry;
    int64_t gpus, borrowed;
};

struct settle {
    const struct sched_quota *q;
    int nq;
    struct settle_row *rows;
    size_t n, cap;
};

static int settle_cb(void *ctx, const struct store_alloc *a)
{
    struct settle *s = ctx;
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 16;
        struct settle_row *nr = realloc(s->rows, cap * sizeof(*nr));
        if (!nr)
            return GQ_ENOMEM;
        s->rows = nr;
        s->cap = cap;
    }
    struct settle_row *r = &s->rows[s->n];
    if (!(r->key = strdup(a->job_key)))
        return GQ_ENOMEM;
    r->entry = apply_quota_entry(s->q, s->nq, a->gpu_type);
    r->gpus = a->gpus;
    r->borrowed = a->borrowed;
    s->n++;
    return 0;
}

int apply_ledger_settle(const struct apply_ctx *x, const char *team, const struct sched_quota *quota, int nquota)
{
    struct settle s = {quota, nquota > 0 ? nquota : 0, NULL, 0, 0};
    int64_t *held = NULL;
    int rc = 0;
    if (!team || !team[0])
        return 0;
    /* No row borrows and the team holds no more than its smallest nominal
     * entry: no entry is over, every row's figure stays 0 (skips reading
     * every row of a big team at each admission) */
    int64_t sum_gpus = 0, sum_borrowed = 0, min_nominal = INT64_MAX;
    for (int i = 0; i < s.nq; i++)
        if (quota[i].gpus < min_nominal)
            min_nominal = quota[i].gpus;
    if ((rc = store_allocs_team_sum(x->st, team, &sum_gpus, &sum_borrowed, x->err, x->errlen)))
        return rc;
    if (!sum_borrowed && sum_gpus <= min_nominal)
        return 0;
    if ((rc = store_allocs_team(x->st, team, settle_cb, &s, x->err, x->errlen)))
        goto out;
    if (!(held = calloc((size_t)s.nq + 1, sizeof(*held)))) {
        rc = GQ_ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < s.n && !rc; i++) {
        struct settle_row *r = &s.rows[i];
        int64_t b = 0;
        if (r->entry >= 0) {
            b = apply_borrowed(quota[r->entry].gpus, held[r->entry], r->gpus);
            held[r->entry] += r->gpus;
        }
        if (b != r->borrowed)
            rc = store_alloc_set_borrowed(x->st, r->key, b, x->err, x->errlen);
    }
out:
    if (rc == GQ_ENOMEM)
        gq_errf(x->err, x->errlen, "out of memory settling the ledger of team %s", team);
    for (size_t i = 0; i < s.n; i++)
        free(s.rows[i].key);
    free(s.rows);
    free(held);
    return rc;
}

/* The first index of s->team at or after team (its place if absent). */
static size_t settle_find(const struct apply_settle_set *s, const char *team)
{
    size_t lo = 0, hi = s->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (strcmp(s->team[mid], team) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

int apply_settle_add(struct apply_settle_set *s, const char *team)
{
    size_t i = settle_find(s, team);
    if (i < s->n && !strcmp(s->team[i], team))
        return 0;
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 16;
        char **nt = realloc(s->team, cap * sizeof(*nt));
        if (!nt)
            return GQ_ENOMEM;
        s->team = nt;
        s->cap = cap;
    }
    char *t = strdup(team);
    if (!t)
        return GQ_ENOMEM;
    memmove(s->team + i + 1, s->team + i, (s->n - i) * sizeof(*s->team));
    s->team[i] = t;
    s->n++;
    return 0;
}

void apply_settle_clear(struct apply_settle_set *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->team[i]);
    s->n = 0;
}

void apply_settle_release(struct apply_settle_set *s)
{
    apply_settle_clear(s);
    free(s->team);
    s->team = NULL;
    s->cap = 0;
}

int apply_ledger_changed(const struct apply_ctx *x, const char *team, const struct sched_quota *quota,
                         int nquota)
{
    if (!x->defer || !team || !team[0])
        return apply_ledger_settle(x, team, quota, nquota);
    int rc = apply_settle_add(x->defer, team);
    if (rc)
        gq_errf(x->err, x->errlen, "out of memory noting team %s for its ledger", team);
    return rc;
}

int apply_settle_flush(const struct apply_ctx *x, apply_quota_fn quota_of, void *ud)
{
    struct apply_settle_set *s = x->defer;
    struct apply_ctx now = *x;
    int rc = 0;
    now.defer = NULL;
    for (size_t i = 0; s && i < s->n && !rc; i++) {
        struct sched_quota buf[API_MAX_QUOTA];
        int nq = 0;
        const struct sched_quota *q = quota_of(ud, s->team[i], buf, &nq);
        rc = apply_ledger_settle(&now, s->team[i], q, nq);
    }
    if (s)
        apply_settle_clear(s);
    return rc;
}

int apply_ledger_set(const struct apply_ctx *x, const struct apply_job *j, int nrep, const char *gpu_type)
{
    struct store_alloc a = {j->key, j->team ? j->team : "", gpu_type ? gpu_type : "", apply_gpus(j, nrep), 0};
    int rc = store_alloc_set(x->st, &a, x->err, x->errlen);
    return rc ? rc : apply_ledger_changed(x, j->team, j->quota, j->nquota);
}

int apply_ledger_clear(const struct apply_ctx *x, const struct apply_job *j)
{
    int rc = store_alloc_clear(x->st, j->key, x->err, x->errlen);
    return rc ? rc : apply_ledger_changed(x, j->team, j->quota, j->nquota);
}

/* ---- the pieces every decision is made of ---- */

static int intent(const struct apply_ctx *x, int kind, const char *key, const char *payload)
{
    int64_t id = 0;
    int rc = store_intent_add(x->st, kind, key, payload ? payload : "", x->now_ms, &id, x->err, x->errlen);
    if (!rc && x->act_at_once)
        rc = store_intent_done(x->st, id, x->now_ms, x->err, x->errlen);
    return rc;
}

static int transition(const struct apply_ctx *x, const struct apply_job *j, int state, const char *placement,
                      const char *message, const char *by, const char *why, int bump)
{
    struct store_transition t = {state, placement, message, by, why, bump};
    return store_job_transition(x->st, j->key, &t, x->now_ms, x->err, x->errlen);
}

/* Give up the hold: ledger row cleared, an intent to delete its pods. */
static int release(const struct apply_ctx *x, const struct apply_job *j, int kind, const char *payload)
{
    int rc = apply_ledger_clear(x, j);
    return rc ? rc : intent(x, kind, j->key, payload);
}

static int format(const struct ctl_placement *pl, struct gq_buf *b)
{
    gq_buf_init(b, APPLY_PLACEMENT_MAX);
    return ctl_placement_format(pl, b); /* always writes: b->p is set when 0 */
}

/* ---- decisions ---- */

int apply_admit(const struct apply_ctx *x, const struct apply_job *j, const struct ctl_placement *pl,
                const char *gpu_type, const char *message)
{
    struct gq_buf b;
    int rc = format(pl, &b);
    int ns = apply_holds(j->state) ? j->state : STORE_ADMITTED;
    if (rc)
        gq_errf(x->err, x->errlen, "%s: placement text: %s", j->key, gq_strerror(rc));
    else if (!(rc = transition(x, j, ns, b.p, message ? message : "", NULL, NULL, 0)) &&
             !(rc = apply_ledger_set(x, j, pl->n, gpu_type)) &&
             !(rc = intent(x, STORE_INTENT_ADMIT, j->key, b.p)))
        rc = apply_audit(x, "admit", j->team, j->key, store_state_name(j->state), b.p, message);
    gq_buf_release(&b);
    return rc;
}

int apply_running(const struct apply_ctx *x, const struct apply_job *j)
{
    return transition(x, j, STORE_RUNNING, NULL, NULL, NULL, NULL, 0);
}

int apply_replace_replica(const struct apply_ctx *x, const struct apply_job *j,
                          const struct ctl_placement *pl, const char *gpu_type, const char *why)
{
    struct gq_buf b;
    int rc = format(pl, &b);
    if (rc)
        gq_errf(x->err, x->errlen, "%s: placement text: %s", j->key, gq_strerror(rc));
    else if (!(rc = transition(x, j, j->state, b.p, why, NULL, NULL, 0)) &&
             !(rc = apply_ledger_set(x, j, pl->n, gpu_type)))
        rc = apply_audit(x, "replace-replica", j->team, j->key, "", b.p, why);
    gq_buf_release(&b);
    return rc;
}

int apply_preempt(const struct apply_ctx *x, const struct apply_job *j, const char *by, const char *why)
{
    int rc;
    const char *w = why ? why : "preempted";
    if ((rc = release(x, j, STORE_INTENT_PREEMPT, by)) ||
        (rc = transition(x, j, STORE_PREEMPTED, "", w, by ? by : "", w, 0)))
        return rc;
    return apply_audit(x, "preempt", j->team, j->key, store_state_name(j->state), "Preempted", w);
}

int apply_requeue(const struct apply_ctx *x, const struct apply_job *j, int64_t retries, int max_retries,
                  const char *why, char *msg, size_t msglen, int *failed)
{
    char m[API_MSG_MAX];
    int over = max_retries >= 0 && retries + 1 > max_retries;
    why = why ? why : "";
    int rc = release(x, j, STORE_INTENT_DELETE, "requeue");
    if (over)
        snprintf(m, sizeof(m), "%s; gave up after %lld retries", why, (long long)retries);
    else if (max_retries >= 0)
        snprintf(m, sizeof(m), "requeued (retry %lld of %d): %s", (long long)retries + 1, max_retries, why);
    else
        snprintf(m, sizeof(m), "requeued (retry %lld): %s", (long long)retries + 1, why);
    if (msg && msglen)
        gq_strlcpy(msg, m, msglen);
    if (failed)
        *failed = over;
    if (rc || (rc = transition(x, j, over ? STORE_FAILED : STORE_QUEUED, "", m, NULL, NULL, !over)))
        return rc;
    return apply_audit(x, over ? "fail" : "requeue", j->team, j->key, store_state_name(j->state),
                       over ? "Failed" : "Queued", m);
}

int apply_requeue_spec(const struct apply_ctx *x, const struct apply_job *j, const char *msg)
{
    int rc;
    if ((rc = release(x, j, STORE_INTENT_DELETE, "respec")) ||
        (rc = transition(x, j, STORE_QUEUED, "", msg, NULL, NULL, 0)))
        return rc;
    return apply_audit(x, "requeue", j->team, j->key, store_state_name(j->state), "Queued", msg);
}

int apply_suspend(const struct apply_ctx *x, const struct apply_job *j)
{
    int rc, held = apply_holds(j->state);
    if ((held && (rc = release(x, j, STORE_INTENT_SUSPEND, "suspend"))) ||
        (rc = transition(x, j, STORE_SUSPENDED, held ? "" : NULL, "suspended by spec.suspend", NULL, NULL, 0)))
        return rc;
    return apply_audit(x, "suspend", j->team, j->key, store_state_name(j->state), "Suspended",
                       "spec.suspend=true");
}

int apply_resume(const struct apply_ctx *x, const struct apply_job *j)
{
    int rc = transition(x, j, STORE_QUEUED, "", "", NULL, NULL, 0);
    return rc ? rc
              : apply_audit(x, "resume", j->team, j->key, store_state_name(j->state), "Queued",
                            "spec.suspend=false");
}

int apply_succeed(const struct apply_ctx *x, const struct apply_job *j, const char *msg, int delete_pods)
{
    int rc, del = delete_pods && apply_holds(j->state);
    if ((rc = del ? release(x, j, STORE_INTENT_DELETE, "succeeded") : apply_ledger_clear(x, j)) ||
        (rc = transition(x, j, STORE_SUCCEEDED, del ? "" : NULL, msg, NULL, NULL, 0)))
        return rc;
    return apply_audit(x, "succeed", j->team, j->key, store_state_name(j->state), "Succeeded", msg);
}

int apply_fail(const struct apply_ctx *x, const struct apply_job *j, const char *msg, const char *payload)
{
    int rc;
    if ((apply_holds(j->state) && (rc = release(x, j, STORE_INTENT_DELETE, payload))) ||
        (rc = transition(x, j, STORE_FAILED, "", msg, NULL, NULL, 0)))
        return rc;
    return apply_audit(x, "fail", j->team, j->key, store_state_name(j->state), "Failed", msg);
}
