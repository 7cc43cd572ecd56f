/* The counters library's HTTP server (dnt_http_server) on a loop in a thread of its own, for the
 * tests that talk to it over the loopback: it answers /metrics with one gauge (`up 1`) and 404
 * to anything else. Static helpers, one copy per test program (they link the counters library
 * and libuv, which the test library does not). */
#ifndef DNT_TEST_HTTP_THREAD_H
#define DNT_TEST_HTTP_THREAD_H

#include <criterion/criterion.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "dnt-counters.h"
#include "dnt-http.h"

struct server_thread {
  pthread_t thread;
  uv_loop_t loop;
  uv_async_t stop;
  dnt_http_server *server;
  int port;
  pthread_mutex_t lock;
  pthread_cond_t ready;
  int started;
  struct dnt_http_limits lim; /* applied before the loop runs (zero: the defaults) */
  unsigned long long evicted, timed_out; /* the server's counts when it stopped */
};

static inline void server_thread_answer(void *ud, const char *path, struct dnt_http_reply *r) {
  (void)ud;
  if (strcmp(path, "/metrics") == 0) {
    r->status = 200;
    r->content_type = "text/plain; version=0.0.4; charset=utf-8";
    r->body = strdup("# TYPE up gauge\nup 1\n");
    r->body_len = r->body ? strlen(r->body) : 0;
  } else {
    r->status = 404;
  }
}

static inline void server_thread_on_stop(uv_async_t *a) {
  struct server_thread *s = a->data;
  s->evicted = dnt_http_server_evicted(s->server);
  s->timed_out = dnt_http_server_timed_out(s->server);
  dnt_http_server_close(s->server);
  uv_close((uv_handle_t *)a, NULL);
}

static inline void *server_thread_run(void *ud) {
  struct server_thread *s = ud;
  char err[256];
  uv_loop_init(&s->loop);
  uv_async_init(&s->loop, &s->stop, server_thread_on_stop);
  s->stop.data = s;
  int rc = dnt_http_server_start(&s->loop, "127.0.0.1:0", server_thread_answer, s, &s->server, err, sizeof err);
  if (!rc) dnt_http_server_set_limits(s->server, &s->lim);
  pthread_mutex_lock(&s->lock);
  s->port = rc ? -1 : dnt_http_server_port(s->server);
  s->started = 1;
  pthread_cond_signal(&s->ready);
  pthread_mutex_unlock(&s->lock);
  if (!rc) uv_run(&s->loop, UV_RUN_DEFAULT);
  uv_loop_close(&s->loop);
  return NULL;
}

/* Starts the server with lim (NULL: the defaults) and returns once it listens (s->port). */
static inline void server_start_limited(struct server_thread *s, const struct dnt_http_limits *lim) {
  memset(s, 0, sizeof *s);
  if (lim) s->lim = *lim;
  pthread_mutex_init(&s->lock, NULL);
  pthread_cond_init(&s->ready, NULL);
  cr_assert_eq(pthread_create(&s->thread, NULL, server_thread_run, s), 0);
  pthread_mutex_lock(&s->lock);
  while (!s->started) pthread_cond_wait(&s->ready, &s->lock);
  pthread_mutex_unlock(&s->lock);
  cr_assert_gt(s->port, 0);
}

static inline void server_start(struct server_thread *s) { server_start_limited(s, NULL); }

/* Closes the server (its counts kept in s) and joins the thread. */
static inline void server_stop(struct server_thread *s) {
  uv_async_send(&s->stop);
  pthread_join(s->thread, NULL);
}

#endif
