/* A minimal HTTP/1.1 server for `counters serve` (http-serve.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http-serve.h"

struct client;

struct dnt_http_server {
  uv_tcp_t listener;
  dnt_http_handler handler;
  void *ud;
  int port;
  int closing;
  unsigned refs; /* the listener + every open client: freed at zero */
  unsigned long long requests;
  struct client *clients;
};

struct client {
  uv_tcp_t tcp;
  uv_timer_t idle;
  struct dnt_http_server *server;
  struct client *prev, *next;
  int handles; /* open libuv handles of this client: freed at zero */
  int answered;
  size_t len;
  char buf[DNT_HTTP_MAX_HEADER + 1];
};

struct response {
  uv_write_t req;
  struct client *client;
  char head[256];
  char *body;
};

static void release_server(struct dnt_http_server *s) {
  if (--s->refs == 0) free(s);
}

static void on_client_handle_closed(uv_handle_t *h) {
  struct client *c = h->data;
  if (--c->handles) return;
  struct dnt_http_server *s = c->server;
  free(c);
  release_server(s);
}

static void close_client(struct client *c) {
  if (uv_is_closing((uv_handle_t *)&c->tcp)) return;
  struct dnt_http_server *s = c->server;
  if (c->prev) c->prev->next = c->next;
  else s->clients = c->next;
  if (c->next) c->next->prev = c->prev;
  c->prev = c->next = NULL;
  uv_close((uv_handle_t *)&c->tcp, on_client_handle_closed);
  uv_close((uv_handle_t *)&c->idle, on_client_handle_closed);
}

static const char *reason(int status) {
  switch (status) {
  case 200: return "OK";
  case 400: return "Bad Request";
  case 404: return "Not Found";
  case 405: return "Method Not Allowed";
  case 431: return "Request Header Fields Too Large";
  case 503: return "Service Unavailable";
  default: return status < 400 ? "OK" : status < 500 ? "Bad Request" : "Internal Server Error";
  }
}

static void on_written(uv_write_t *req, int status) {
  struct response *r = (struct response *)req;
  (void)status;
  close_client(r->client); /* Connection: close */
  free(r->body);
  free(r);
}

/* Sends the reply (taking its body) and closes the connection once it is out. */
static void respond(struct client *c, struct dnt_http_reply *rep, int head_only) {
  c->answered = 1;
  uv_read_stop((uv_stream_t *)&c->tcp);
  struct response *r = calloc(1, sizeof *r);
  if (!r) {
    free(rep->body);
    close_client(c);
    return;
  }
  r->client = c;
  r->body = rep->body;
  int n = snprintf(r->head, sizeof r->head,
                   "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%sConnection: close\r\n\r\n",
                   rep->status, reason(rep->status), rep->content_type ? rep->content_type : "text/plain; charset=utf-8",
                   rep->body_len, rep->status == 405 ? "Allow: GET, HEAD\r\n" : "");
  uv_buf_t bufs[2] = {uv_buf_init(r->head, (unsigned)n), uv_buf_init(r->body, (unsigned)rep->body_len)};
  int nbufs = head_only || !rep->body_len ? 1 : 2;
  if (uv_write(&r->req, (uv_stream_t *)&c->tcp, bufs, (unsigned)nbufs, on_written) != 0) {
    free(r->body);
    free(r);
    close_client(c);
  }
}

static void respond_text(struct client *c, int status, const char *text) {
  struct dnt_http_reply rep = {.status = status, .body = strdup(text)};
  rep.body_len = rep.body ? strlen(rep.body) : 0;
  respond(c, &rep, 0);
}

/* The head is complete in c->buf: "METHOD SP TARGET SP HTTP/1.x" on the first line. */
static void handle_request(struct client *c) {
  char *eol = strpbrk(c->buf, "\r\n");
  *eol = '\0';
  char *sp1 = strchr(c->buf, ' '), *sp2 = sp1 ? strchr(sp1 + 1, ' ') : NULL;
  if (!sp1 || !sp2 || sp1 == c->buf || sp2 == sp1 + 1 || strchr(sp2 + 1, ' ') ||
      strncmp(sp2 + 1, "HTTP/1.", 7) != 0 || (sp2[8] != '0' && sp2[8] != '1') || sp2[9] || sp1[1] != '/') {
    respond_text(c, 400, "bad request\n");
    return;
  }
  *sp1 = *sp2 = '\0';
  int head = strcmp(c->buf, "HEAD") == 0;
  if (!head && strcmp(c->buf, "GET") != 0) {
    respond_text(c, 405, "only GET and HEAD\n");
    return;
  }
  struct dnt_http_reply rep = {0};
  c->server->handler(c->server->ud, sp1 + 1, &rep);
  c->server->requests++;
  respond(c, &rep, head);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  struct client *c = h->data;
  (void)suggested;
  size_t room = DNT_HTTP_MAX_HEADER - c->len;
  *buf = uv_buf_init(c->buf + c->len, (unsigned)(room ? room : 1));
  if (!room) buf->base = NULL, buf->len = 0;
}

static void on_read(uv_stream_t *stream, ssize_t n, const uv_buf_t *buf) {
  struct client *c = stream->data;
  (void)buf;
  if (n < 0) {
    close_client(c); /* EOF before a whole request, or an error */
    return;
  }
  if (n == 0 || c->answered) return;
  size_t scan_from = c->len > 3 ? c->len - 3 : 0;
  c->len += (size_t)n;
  c->buf[c->len] = '\0';
  uv_timer_again(&c->idle);
  if (memchr(c->buf, '\0', c->len)) {
    respond_text(c, 400, "bad request\n");
    return;
  }
  if (strstr(c->buf + scan_from, "\r\n\r\n") || strstr(c->buf + scan_from, "\n\n")) {
    handle_request(c);
    return;
  }
  if (c->len >= DNT_HTTP_MAX_HEADER) respond_text(c, 431, "request head too large\n");
}

static void on_idle(uv_timer_t *t) { close_client(t->data); }

static void on_connection(uv_stream_t *listener, int status) {
  struct dnt_http_server *s = listener->data;
  if (status < 0 || s->closing) return;
  struct client *c = calloc(1, sizeof *c);
  if (!c) return;
  c->server = s;
  uv_tcp_init(listener->loop, &c->tcp);
  uv_timer_init(listener->loop, &c->idle);
  c->tcp.data = c->idle.data = c;
  c->handles = 2;
  s->refs++;
  c->next = s->clients;
  if (s->clients) s->clients->prev = c;
  s->clients = c;
  if (uv_accept(listener, (uv_stream_t *)&c->tcp) != 0) {
    close_client(c);
    return;
  }
  uv_timer_start(&c->idle, on_idle, DNT_HTTP_IDLE_MS, DNT_HTTP_IDLE_MS);
  uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}

/* "HOST:PORT", "[V6]:PORT", ":PORT" -> a socket address. */
static int parse_addr(const char *addr, struct sockaddr_storage *ss, char *err, size_t errlen) {
  char host[256];
  const char *colon = strrchr(addr, ':');
  if (!colon) return snprintf(err, errlen, "'%s' is not HOST:PORT", addr), -EINVAL;
  size_t hlen = (size_t)(colon - addr);
  if (hlen >= sizeof host) return snprintf(err, errlen, "'%s': the host is too long", addr), -EINVAL;
  memcpy(host, addr, hlen);
  host[hlen] = '\0';
  char *end;
  long port = strtol(colon + 1, &end, 10);
  if (!colon[1] || *end || port < 0 || port > 65535)
    return snprintf(err, errlen, "'%s': '%s' is not a port number", addr, colon + 1), -EINVAL;
  if (!host[0]) snprintf(host, sizeof host, "127.0.0.1");
  int rc;
  if (host[0] == '[') {
    size_t n = strlen(host);
    if (n < 3 || host[n - 1] != ']') return snprintf(err, errlen, "'%s' is not [IPv6]:PORT", addr), -EINVAL;
    host[n - 1] = '\0';
    rc = uv_ip6_addr(host + 1, (int)port, (struct sockaddr_in6 *)ss);
  } else {
    if (strcmp(host, "localhost") == 0) snprintf(host, sizeof host, "127.0.0.1");
    rc = uv_ip4_addr(host, (int)port, (struct sockaddr_in *)ss);
  }
  if (rc) return snprintf(err, errlen, "'%s' is not a numeric address (e.g. 127.0.0.1:9400)", addr), -EINVAL;
  return 0;
}

int dnt_http_server_start(uv_loop_t *loop, const char *addr, dnt_http_handler handler, void *ud,
                          dnt_http_server **out, char *err, size_t errlen) {
  struct sockaddr_storage ss;
  memset(&ss, 0, sizeof ss);
  int rc = parse_addr(addr, &ss, err, errlen);
  if (rc) return rc;
  struct dnt_http_server *s = calloc(1, sizeof *s);
  if (!s) return snprintf(err, errlen, "out of memory"), -ENOMEM;
  s->handler = handler;
  s->ud = ud;
  s->refs = 1;
  uv_tcp_init(loop, &s->listener);
  s->listener.data = s;
  rc = uv_tcp_bind(&s->listener, (const struct sockaddr *)&ss, 0);
  if (!rc) rc = uv_listen((uv_stream_t *)&s->listener, 64, on_connection);
  if (rc) {
    snprintf(err, errlen, "cannot listen on %s: %s", addr, uv_strerror(rc));
    dnt_http_server_close(s);
    return rc;
  }
  struct sockaddr_storage bound;
  int len = sizeof bound;
  uv_tcp_getsockname(&s->listener, (struct sockaddr *)&bound, &len);
  s->port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                                : ((struct sockaddr_in *)&bound)->sin_port);
  *out = s;
  return 0;
}

int dnt_http_server_port(const dnt_http_server *s) { return s->port; }

unsigned long long dnt_http_server_requests(const dnt_http_server *s) { return s->requests; }

static void on_listener_closed(uv_handle_t *h) { release_server(h->data); }

void dnt_http_server_close(dnt_http_server *s) {
  if (!s || s->closing) return;
  s->closing = 1;
  while (s->clients) close_client(s->clients);
  uv_close((uv_handle_t *)&s->listener, on_listener_closed);
}
