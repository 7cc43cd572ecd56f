/* One HTTP/1.1 POST on the caller's loop, for `serve --push` (dnt-counters.h): resolve, connect,
 * write, read the status line; one deadline for it all. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dnt-http.h"

struct dnt_http_post {
  uv_loop_t *loop;
  uv_getaddrinfo_t resolve;
  uv_connect_t connect;
  uv_write_t write;
  uv_tcp_t tcp;
  uv_timer_t timer;
  int tcp_open, resolving, handles, done, cancelled;
  char port[8];
  char *head, *body;
  size_t head_len, body_len;
  char reply[300];
  size_t nreply;
  dnt_http_post_cb cb;
  void *ud;
};

int dnt_http_url_parse(const char *url, char *host, size_t hcap, int *port, char *path, size_t pcap) {
  if (strncmp(url, "http://", 7) != 0) return -EINVAL;
  const char *h = url + 7, *end = h + strcspn(h, "/?#");
  const char *colon = memchr(h, ':', (size_t)(end - h));
  const char *hend = colon ? colon : end;
  if (hend == h || (size_t)(hend - h) >= hcap) return -EINVAL;
  memcpy(host, h, (size_t)(hend - h));
  host[hend - h] = '\0';
  *port = 80;
  if (colon) {
    char *pe;
    long v = strtol(colon + 1, &pe, 10);
    if (pe != end || colon + 1 == end || v < 1 || v > 65535) return -EINVAL;
    *port = (int)v;
  }
  if (strlen(end) >= pcap) return -EINVAL;
  strcpy(path, end);
  return 0;
}

static void free_post(struct dnt_http_post *p) {
  free(p->head);
  free(p->body);
  free(p);
}

static void on_closed(uv_handle_t *h) {
  struct dnt_http_post *p = h->data;
  if (--p->handles == 0 && !p->resolving) free_post(p);
}

/* Calls back once (unless cancelled) and closes everything. */
static void finish(struct dnt_http_post *p, int status, const char *msg) {
  if (p->done) return;
  p->done = 1;
  if (!p->cancelled) p->cb(p->ud, status, msg);
  uv_close((uv_handle_t *)&p->timer, on_closed);
  if (p->tcp_open) uv_close((uv_handle_t *)&p->tcp, on_closed);
}

static void on_timeout(uv_timer_t *t) { finish(t->data, -ETIMEDOUT, "no answer in time"); }

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  struct dnt_http_post *p = h->data;
  (void)suggested;
  size_t room = sizeof p->reply - 1 - p->nreply;
  *buf = uv_buf_init(p->reply + p->nreply, (unsigned)room);
}

int dnt_http_status_parse(const char *buf, size_t len) {
  static const char prefix[] = "HTTP/1.";
  size_t n = len < 7 ? len : 7;
  if (memcmp(buf, prefix, n) != 0) return -1;
  const char *eol = memchr(buf, '\n', len < 256 ? len : 256); /* a first line of 256 bytes is no answer */
  if (!eol) return len >= 256 ? -1 : 0;
  /* "HTTP/1.x NNN" then a space or the end of the line */
  size_t line = (size_t)(eol - buf);
  if (line < 12 || buf[7] < '0' || buf[7] > '9' || buf[8] != ' ') return -1;
  int status = 0;
  for (size_t i = 9; i < 12; i++) {
    if (buf[i] < '0' || buf[i] > '9') return -1;
    status = status * 10 + (buf[i] - '0');
  }
  if (line > 12 && buf[12] != ' ' && buf[12] != '\r') return -1;
  return status >= 100 && status <= 599 ? status : -1;
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
  struct dnt_http_post *p = s->data;
  (void)buf;
  if (n > 0) p->nreply += (size_t)n;
  int status = dnt_http_status_parse(p->reply, p->nreply);
  if (status == 0 && n < 0) {
    finish(p, n == UV_EOF ? -ECONNRESET : (int)n, n == UV_EOF ? "closed without an answer" : uv_strerror((int)n));
    return;
  }
  if (status < 0) finish(p, -EPROTO, "not an HTTP answer");
  else if (status > 0) finish(p, status, "");
}

static void on_written(uv_write_t *w, int status) {
  struct dnt_http_post *p = w->data;
  if (status < 0) finish(p, status, uv_strerror(status));
}

static void on_connected(uv_connect_t *c, int status) {
  struct dnt_http_post *p = c->data;
  if (p->done) return;
  if (status < 0) {
    finish(p, status, uv_strerror(status));
    return;
  }
  uv_buf_t bufs[2] = {uv_buf_init(p->head, (unsigned)p->head_len), uv_buf_init(p->body, (unsigned)p->body_len)};
  p->write.data = p;
  int rc = uv_write(&p->write, (uv_stream_t *)&p->tcp, bufs, p->body_len ? 2 : 1, on_written);
  if (!rc) rc = uv_read_start((uv_stream_t *)&p->tcp, on_alloc, on_read);
  if (rc) finish(p, rc, uv_strerror(rc));
}

static void on_resolved(uv_getaddrinfo_t *r, int status, struct addrinfo *res) {
  struct dnt_http_post *p = r->data;
  p->resolving = 0;
  if (p->done) { /* cancelled or timed out meanwhile */
    uv_freeaddrinfo(res);
    if (p->handles == 0) free_post(p);
    return;
  }
  if (status < 0 || !res) {
    finish(p, status < 0 ? status : -EHOSTUNREACH, status < 0 ? uv_strerror(status) : "no address");
    uv_freeaddrinfo(res);
    return;
  }
  uv_tcp_init(p->loop, &p->tcp);
  p->tcp.data = p;
  p->tcp_open = 1;
  p->handles++;
  p->connect.data = p;
  int rc = uv_tcp_connect(&p->connect, &p->tcp, res->ai_addr, on_connected);
  uv_freeaddrinfo(res);
  if (rc) finish(p, rc, uv_strerror(rc));
}

int dnt_http_post_start(uv_loop_t *loop, const char *host, int port, const char *target, const char *content_type,
                        char *body, size_t len, uint64_t timeout_ms, dnt_http_post_cb cb, void *ud,
                        dnt_http_post **out) {
  struct dnt_http_post *p = calloc(1, sizeof *p);
  if (!p) return free(body), -ENOMEM;
  p->loop = loop;
  p->cb = cb;
  p->ud = ud;
  p->body = body;
  p->body_len = len;
  int n = snprintf(NULL, 0, "POST %s HTTP/1.1\r\nHost: %s:%d\r\nContent-Type: %s\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
                   target[0] ? target : "/", host, port, content_type, len);
  if (n < 0 || !(p->head = malloc((size_t)n + 1))) return free_post(p), -ENOMEM;
  snprintf(p->head, (size_t)n + 1,
           "POST %s HTTP/1.1\r\nHost: %s:%d\r\nContent-Type: %s\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
           target[0] ? target : "/", host, port, content_type, len);
  p->head_len = (size_t)n;
  snprintf(p->port, sizeof p->port, "%d", port);
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
  p->resolve.data = p;
  int rc = uv_getaddrinfo(loop, &p->resolve, on_resolved, host, p->port, &hints);
  if (rc) return free_post(p), rc;
  p->resolving = 1;
  uv_timer_init(loop, &p->timer);
  p->timer.data = p;
  p->handles = 1;
  uv_timer_start(&p->timer, on_timeout, timeout_ms, 0);
  *out = p;
  return 0;
}

void dnt_http_post_cancel(dnt_http_post *p) {
  if (!p) return;
  p->cancelled = 1;
  if (p->resolving) uv_cancel((uv_req_t *)&p->resolve); /* on_resolved still comes, with an error */
  finish(p, -ECANCELED, "cancelled");
}
