/* The server's --push: windows of thread time sent to Pyroscope's /ingest (serve-int.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "serve-int.h"

/* ---- --push: windows of thread time sent to Pyroscope's /ingest ---- */

#define PUSH_TIMEOUT_MS 10000
#define PUSH_BACKOFF_MAX_MS 30000
#define PUSH_BOUNDARY "dntrace-pprof-5e1f0c2a9d"

/* Percent-encodes s into fp as a query value (RFC 3986's unreserved characters kept). */
static void put_query_value(FILE *fp, const char *s) {
  for (; *s; s++) {
    unsigned char ch = (unsigned char)*s;
    if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || strchr("-._~", ch))
      fputc(ch, fp);
    else
      fprintf(fp, "%%%02X", ch);
  }
}

static void push_send(struct target *t);

static void on_retry(uv_timer_t *h) { push_send(h->data); }

static void on_posted(void *ud, int status, const char *msg) {
  struct target *t = ud;
  struct pusher *p = t->push;
  p->post = NULL;
  if (status >= 200 && status < 300) {
    free(p->q[0].body);
    free(p->q[0].target);
    memmove(&p->q[0], &p->q[1], (p->nq - 1) * sizeof p->q[0]);
    p->nq--;
    p->sent++;
    p->backoff_ms = 0;
    if (p->away)
      serve_say(t->sv, DNT_SAY_LOG, "push: %s:%d takes profiles again", t->sv->c.push_host, t->sv->c.push_port);
    p->away = 0;
    push_send(t);
    return;
  }
  p->failed++;
  if (!p->away) {
    const struct dnt_server_config *c = &t->sv->c;
    if (status > 0) serve_say(t->sv, DNT_SAY_LOG, "push: %s:%d answered %d; trying again", c->push_host, c->push_port, status);
    else serve_say(t->sv, DNT_SAY_LOG, "push: %s:%d: %s; trying again", c->push_host, c->push_port, msg);
  }
  p->away = 1;
  p->backoff_ms = p->backoff_ms ? p->backoff_ms * 2 : 1000;
  if (p->backoff_ms > PUSH_BACKOFF_MAX_MS) p->backoff_ms = PUSH_BACKOFF_MAX_MS;
  uv_timer_start(&p->retry, on_retry, p->backoff_ms, 0);
}

/* Sends the oldest window waiting, unless one is on its way or a retry is due. */
static void push_send(struct target *t) {
  struct pusher *p = t->push;
  struct serve *sv = t->sv;
  if (!p->nq || p->post || uv_is_active((uv_handle_t *)&p->retry)) return;
  char *copy = malloc(p->q[0].len); /* kept for a retry */
  if (!copy) {
    on_posted(t, -ENOMEM, "out of memory");
    return;
  }
  memcpy(copy, p->q[0].body, p->q[0].len);
  int rc = dnt_http_post_start(sv->loop, sv->c.push_host, sv->c.push_port, p->q[0].target,
                               "multipart/form-data; boundary=" PUSH_BOUNDARY, copy, p->q[0].len, PUSH_TIMEOUT_MS,
                               on_posted, t, &p->post);
  if (rc) on_posted(t, rc, uv_strerror(rc));
}

/* A window's pprof: queued as Pyroscope's ingest wants it, the newest dropped when 2 wait. */
static void push_done(struct job *j, struct dnt_http_reply *answer) {
  struct target *t = j->t;
  char *pprof = answer->body;
  size_t len = answer->body_len;
  answer->body = NULL;
  if (t && t->push) {
    struct pusher *p = t->push;
    if (p->cur == j) p->cur = NULL; /* it failed: the next starts afresh */
    if (p->next == j) p->next = NULL;
    for (struct job **pp = &p->stopping; *pp; pp = &(*pp)->stopping_next)
      if (*pp == j) {
        *pp = j->stopping_next;
        break;
      }
  }
  if (!t || !t->push || answer->status != 200 || !pprof) {
    free(pprof);
    return;
  }
  struct pusher *p = t->push;
  if (p->nq == sizeof p->q / sizeof p->q[0]) { /* the server is away: memory stays flat */
    p->dropped++;
    free(pprof);
    return;
  }
  struct serve *sv = t->sv;
  struct window *w = &p->q[p->nq];
  w->body = NULL, w->target = NULL;
  FILE *fp = open_memstream(&w->body, &w->len);
  if (!fp) {
    p->dropped++; /* out of memory: as a window the queue had no room for */
    free(pprof);
    return;
  }
  fputs("--" PUSH_BOUNDARY "\r\nContent-Disposition: form-data; name=\"profile\"; filename=\"profile.pprof\"\r\n"
        "Content-Type: application/octet-stream\r\n\r\n",
        fp);
  fwrite(pprof, 1, len, fp);
  fputs("\r\n--" PUSH_BOUNDARY "\r\nContent-Disposition: form-data; name=\"sample_type_config\"; "
        "filename=\"sample_type_config.json\"\r\nContent-Type: application/json\r\n\r\n"
        "{\"wall\":{\"units\":\"nanoseconds\",\"aggregation\":\"sum\",\"display-name\":\"wall\",\"sampled\":true},"
        "\"samples\":{\"units\":\"samples\",\"aggregation\":\"sum\",\"display-name\":\"samples\",\"sampled\":true}}"
        "\r\n--" PUSH_BOUNDARY "--\r\n",
        fp);
  int ok = fclose(fp) == 0;
  free(pprof);
  char *target = NULL, *name = NULL, pid[24];
  size_t tlen = 0, nlen = 0;
  FILE *np = ok ? open_memstream(&name, &nlen) : NULL;
  if (np) { /* name=APP{labels}: the process's name, its pid and process, every --label */
    snprintf(pid, sizeof pid, "%d", t->pid);
    fprintf(np, "%s{pid=%s,process=%s", t->name, pid, t->name);
    for (size_t i = 0; i < sv->c.nlabels; i++) fprintf(np, ",%s=%s", sv->c.label_kv[2 * i], sv->c.label_kv[2 * i + 1]);
    fputc('}', np);
  }
  ok = np && fclose(np) == 0;
  fp = ok ? open_memstream(&target, &tlen) : NULL;
  if (fp) {
    fprintf(fp, "%s/ingest?name=", strcmp(sv->c.push_path, "/") == 0 ? "" : sv->c.push_path);
    put_query_value(fp, name);
    fprintf(fp, "&from=%lld&until=%lld&format=pprof&spyName=dntrace", (long long)j->from_unix,
            (long long)j->until_unix);
  }
  ok = fp && fclose(fp) == 0;
  free(name);
  if (!ok) { /* out of memory: as a window the queue had no room for */
    free(w->body), free(target);
    w->body = NULL;
    p->dropped++;
    return;
  }
  w->target = target;
  p->nq++;
  push_send(t);
}

static void push_started(struct job *j) {
  struct pusher *p = j->t->push;
  uint64_t boundary = uv_hrtime(); /* CLOCK_MONOTONIC ns, as the runtime's timestamps on Linux */
  j->from_ns = boundary;
  j->from_unix = (int64_t)(dnt__unix_ms() / 1000);
  struct job *old = p->cur;
  p->cur = j;
  p->next = NULL;
  if (old) {
    __atomic_store_n(&old->until_ns, boundary, __ATOMIC_RELEASE);
    old->until_unix = j->from_unix;
    old->stopped = 1;
    old->stopping_next = p->stopping;
    p->stopping = old;
    dsipc_session_stop(old->s); /* its rundown names its frames; then push_done */
    if (!old->ended) uv_timer_start(&old->timer, serve_job_timer, STOP_GRACE_MS, 0);
  }
}

/* Every --push-interval: the next window starts; once it samples, the current one stops. */
void serve_push_roll(struct serve *sv, struct target *t) {
  struct pusher *p = t->push;
  if (!p || p->next || !t->live) return;
  char err[700];
  if (serve_job_start(sv, t, JOB_PROFILE, 0, 0, NULL, err, sizeof err) != 0) return; /* tried again next time */
  p->next->done = push_done;
  p->next->started = push_started;
}

void serve_push_tick(uv_timer_t *h) {
  struct serve *sv = h->data;
  for (struct target *t = sv->targets; t; t = t->next) serve_push_roll(sv, t);
}

static void on_pusher_closed(uv_handle_t *h) {
  struct pusher *p = h->data;
  for (size_t i = 0; i < p->nq; i++) free(p->q[i].body), free(p->q[i].target);
  free(p);
}

struct pusher *serve_pusher_new(struct serve *sv) {
  struct pusher *p = calloc(1, sizeof *p);
  if (!p) return NULL;
  uv_timer_init(sv->loop, &p->retry);
  p->retry.data = NULL; /* the target, once it has one */
  return p;
}

/* The target goes: its windows are dropped, its queue with it. */
void serve_pusher_free(struct target *t) {
  struct pusher *p = t->push;
  if (!p) return;
  t->push = NULL;
  dnt_http_post_cancel(p->post);
  struct job *js[2] = {p->cur, p->next};
  for (int i = 0; i < 2; i++)
    if (js[i]) {
      js[i]->t = NULL;
      serve_job_release(js[i]);
    }
  for (struct job *j = p->stopping, *next; j; j = next) { /* none of them may come back to t */
    next = j->stopping_next;
    j->t = NULL;
    serve_job_release(j);
  }
  p->retry.data = p;
  uv_close((uv_handle_t *)&p->retry, on_pusher_closed);
}
