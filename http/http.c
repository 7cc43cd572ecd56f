/* A minimal HTTP/1.1 server for `counters serve` (dnt-counters.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/resource.h>

#include "dnt-http.h"

struct client;

struct dnt_http_server {
  uv_tcp_t listener;
  dnt_http_handler handler;
  void *ud;
  int port;
  int closing;
  unsigned refs; /* the listener + every open client: freed at zero */
  unsigned long long requests, evicted, timed_out;
  struct dnt_http_limits lim; /* every field set (defaults filled in, the cap fitted to the fd limit) */
  unsigned nclients;
  struct client *oldest, *newest; /* the open clients in the order they were accepted */
};

struct client {
  uv_tcp_t tcp;
  uv_timer_t timer; /* the idle time or the connection's deadline, whichever comes first */
  struct dnt_http_server *server;
  struct client *prev, *next; /* prev: accepted earlier */
  struct sockaddr_storage peer;
  uint64_t deadline; /* loop time (ms) by which the connection is closed, answered or not */
  uint64_t accepted; /* loop time (ms) it was accepted */
  int handles;       /* open libuv handles of this client: freed at zero */
  int answered;
  int head;                   /* a HEAD request: the reply goes without its body */
  dnt_http_pending *pending;  /* deferred by the handler: answered later (dnt_http_defer) */
  size_t len;
  char buf[DNT_HTTP_MAX_HEADER + 1];
};

struct dnt_http_pending {
  struct client *client;
  void (*on_gone)(void *ud);
  void *ud;
};

struct response {
  uv_write_t req;
  struct client *client;
  char head[256];
  char *body;
};

/* ---- the request head: pure, no I/O ---- */

/* The end of the head (just past its empty line) in the first len bytes, or 0; -1 at a NUL. */
static long head_end(const char *buf, size_t len) {
  for (size_t i = 0; i < len; i++) {
    if (buf[i] == '\0') return -1;
    if (buf[i] != '\n') continue;
    size_t j = i + 1;
    if (j < len && buf[j] == '\r') j++;
    if (j < len && buf[j] == '\n') return (long)(j + 1);
  }
  return 0;
}

int dnt_http_request_parse(const char *buf, size_t len, struct dnt_http_request *req) {
  memset(req, 0, sizeof *req);
  if (len > DNT_HTTP_MAX_HEADER) len = DNT_HTTP_MAX_HEADER;
  long end = head_end(buf, len);
  if (end < 0) return 400;
  if (end == 0) return len >= DNT_HTTP_MAX_HEADER ? 431 : 0;
  /* the request line: "METHOD SP TARGET SP HTTP/1.x", ended by LF or CRLF */
  const char *line = buf, *eol = memchr(buf, '\n', (size_t)end);
  size_t n = (size_t)(eol - line);
  if (n && line[n - 1] == '\r') n--;
  const char *sp1 = memchr(line, ' ', n);
  if (!sp1 || sp1 == line) return 400;
  const char *target = sp1 + 1;
  const char *sp2 = memchr(target, ' ', n - (size_t)(target - line));
  if (!sp2 || sp2 == target || *target != '/') return 400;
  const char *version = sp2 + 1;
  size_t vlen = n - (size_t)(version - line);
  if (vlen != 8 || memcmp(version, "HTTP/1.", 7) != 0 || (version[7] != '0' && version[7] != '1')) return 400;
  for (const char *t = target; t < sp2; t++)
    if ((unsigned char)*t <= 0x20 || *t == 0x7f) return 400;
  size_t mlen = (size_t)(sp1 - line);
  int head = mlen == 4 && memcmp(line, "HEAD", 4) == 0;
  if (!head && !(mlen == 3 && memcmp(line, "GET", 3) == 0)) return 405;
  req->head = head;
  req->target = target;
  req->target_len = (size_t)(sp2 - target);
  req->head_len = (size_t)end;
  return 200;
}

/* ---- the server ---- */

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
  if (c->pending) { /* the client went (or the server closes) before the deferred answer */
    dnt_http_pending *p = c->pending;
    c->pending = NULL;
    p->on_gone(p->ud);
    free(p);
  }
  if (c->prev) c->prev->next = c->next;
  else s->oldest = c->next;
  if (c->next) c->next->prev = c->prev;
  else s->newest = c->prev;
  c->prev = c->next = NULL;
  s->nclients--;
  uv_close((uv_handle_t *)&c->tcp, on_client_handle_closed);
  uv_close((uv_handle_t *)&c->timer, on_client_handle_closed);
}

static const char *reason(int status) {
  switch (status) {
  case 200: return "OK";
  case 400: return "Bad Request";
  case 404: return "Not Found";
  case 405: return "Method Not Allowed";
  case 429: return "Too Many Requests";
  case 431: return "Request Header Fields Too Large";
  case 500: return "Internal Server Error";
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

static void respond_status(struct client *c, int status) {
  switch (status) {
  case 405: respond_text(c, 405, "only GET and HEAD\n"); break;
  case 431: respond_text(c, 431, "request head too large\n"); break;
  default: respond_text(c, 400, "bad request\n"); break;
  }
}

/* The head is complete in c->buf (dnt_http_request_parse said 200). */
static void handle_request(struct client *c, const struct dnt_http_request *req) {
  char *target = c->buf + (req->target - c->buf);
  target[req->target_len] = '\0'; /* the space before the version */
  struct dnt_http_reply rep = {0};
  rep.priv = c;
  c->head = req->head;
  c->server->handler(c->server->ud, target, &rep);
  c->server->requests++;
  if (c->pending) { /* answered later: the client waits for us, no deadline; its EOF still ends it */
    c->answered = 1;
    uv_timer_stop(&c->timer);
    return;
  }
  respond(c, &rep, req->head);
}

dnt_http_pending *dnt_http_defer(struct dnt_http_reply *reply, void (*on_gone)(void *ud), void *ud) {
  struct client *c = reply->priv;
  if (!c || c->pending) return NULL;
  dnt_http_pending *p = calloc(1, sizeof *p);
  if (!p) return NULL;
  p->client = c;
  p->on_gone = on_gone;
  p->ud = ud;
  c->pending = p;
  return p;
}

void dnt_http_pending_answer(dnt_http_pending *p, struct dnt_http_reply *rep) {
  struct client *c = p->client;
  c->pending = NULL;
  free(p);
  respond(c, rep, c->head);
}

/* ---- the query string: pure, no I/O ---- */

size_t dnt_http_path_len(const char *target) { return strcspn(target, "?#"); }

static int hex_digit(char ch) {
  if (ch >= '0' && ch <= '9') return ch - '0';
  if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
  if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
  return -1;
}

int dnt_http_query_get(const char *target, const char *key, char *out, size_t cap) {
  const char *q = strchr(target, '?');
  if (!q || cap == 0) return -1;
  size_t klen = strlen(key);
  for (const char *p = q + 1; *p && *p != '#';) {
    size_t n = strcspn(p, "&#");
    size_t name = strcspn(p, "=&#");
    if (name > n) name = n;
    if (name == klen && memcmp(p, key, klen) == 0) {
      const char *v = p + name + (name < n), *end = p + n;
      size_t o = 0;
      for (; v < end; v++) {
        int ch = (unsigned char)*v;
        if (ch == '+') {
          ch = ' ';
        } else if (ch == '%') {
          int hi = end - v > 2 ? hex_digit(v[1]) : -1, lo = hi >= 0 ? hex_digit(v[2]) : -1;
          if (lo < 0) return -2;
          ch = hi * 16 + lo;
          v += 2;
        }
        if (ch == 0 || o + 1 >= cap) return -2;
        out[o++] = (char)ch;
      }
      out[o] = '\0';
      return (int)o;
    }
    p += n;
    if (*p == '&') p++;
  }
  return -1;
}

static void on_timer(uv_timer_t *t) {
  struct client *c = t->data;
  c->server->timed_out++;
  close_client(c);
}

/* Idle time from now, but never past the connection's deadline. */
static void arm_timer(struct client *c) {
  uint64_t now = uv_now(c->timer.loop), left = c->deadline > now ? c->deadline - now : 0;
  uint64_t idle = c->server->lim.idle_ms;
  uv_timer_start(&c->timer, on_timer, idle < left ? idle : left, 0);
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
  size_t scan_from = c->len > 2 ? c->len - 2 : 0;
  c->len += (size_t)n;
  c->buf[c->len] = '\0';
  arm_timer(c);
  /* the head is parsed once its end (or a NUL, or the cap) is in: not again for every byte */
  if (!memchr(c->buf + scan_from, '\0', c->len - scan_from) && !strstr(c->buf + scan_from, "\n\n") &&
      !strstr(c->buf + scan_from, "\n\r\n") && c->len < DNT_HTTP_MAX_HEADER)
    return;
  struct dnt_http_request req;
  int status = dnt_http_request_parse(c->buf, c->len, &req);
  if (status == 200) handle_request(c, &req);
  else if (status) respond_status(c, status);
}

static int same_addr(const struct sockaddr_storage *a, const struct sockaddr_storage *b) {
  if (a->ss_family != b->ss_family) return 0;
  if (a->ss_family == AF_INET)
    return ((const struct sockaddr_in *)a)->sin_addr.s_addr == ((const struct sockaddr_in *)b)->sin_addr.s_addr;
  if (a->ss_family == AF_INET6)
    return memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr, &((const struct sockaddr_in6 *)b)->sin6_addr,
                  sizeof(struct in6_addr)) == 0;
  return 1; /* unknown family: all alike */
}

/* Whether the client's request head is all there: read already, or waiting in the socket (a
 * client accepted in the same burst as many others has not been read yet). A scrape sends its
 * whole request at once; a slow client never finishes its head. */
static int request_complete(struct client *c) {
  c->buf[c->len] = '\0';
  if (strstr(c->buf, "\r\n\r\n") || strstr(c->buf, "\n\n")) return 1;
  uv_os_fd_t fd;
  if (uv_fileno((uv_handle_t *)&c->tcp, &fd) != 0) return 0;
  char peek[DNT_HTTP_MAX_HEADER + 1];
  ssize_t n = recv(fd, peek, sizeof peek - 1, MSG_PEEK | MSG_DONTWAIT);
  if (n <= 0) return 0;
  peek[n] = '\0';
  /* what was read already and what waits make one head: look at the seam too */
  char seam[8] = "";
  size_t tail = c->len < 3 ? c->len : 3;
  memcpy(seam, c->buf + c->len - tail, tail);
  memcpy(seam + tail, peek, (size_t)n < 4 ? (size_t)n : 4);
  seam[tail + ((size_t)n < 4 ? (size_t)n : 4)] = '\0';
  return strstr(peek, "\r\n\r\n") || strstr(peek, "\n\n") || strstr(seam, "\r\n\r\n") != NULL;
}

/* The client to close to make room: from peer's address when peer is given, never except. First
 * the oldest still sending a request it has not finished (the slow ones), then one being
 * answered, and a complete request only when nothing else is left: a scrape always gets in. */
static struct client *oldest_client(struct dnt_http_server *s, const struct sockaddr_storage *peer,
                                    const struct client *except) {
  struct client *answered = NULL, *complete = NULL;
  for (struct client *c = s->oldest; c; c = c->next) {
    if (c == except || c->pending || (peer && !same_addr(&c->peer, peer))) continue;
    if (c->answered) {
      if (!answered) answered = c;
    } else if (request_complete(c)) {
      if (!complete) complete = c;
    } else {
      return c;
    }
  }
  return answered ? answered : complete;
}

/* Makes the caps hold with c counted, closing the oldest connections (c is never one of them). */
static void make_room(struct dnt_http_server *s, struct client *c) {
  unsigned from_peer = 0;
  for (struct client *o = s->oldest; o; o = o->next) from_peer += same_addr(&o->peer, &c->peer);
  while (from_peer > s->lim.max_per_addr) {
    struct client *victim = oldest_client(s, &c->peer, c);
    if (!victim) break;
    s->evicted++;
    close_client(victim);
    from_peer--;
  }
  while (s->nclients > s->lim.max_clients) {
    struct client *victim = oldest_client(s, NULL, c);
    if (!victim) break;
    s->evicted++;
    close_client(victim);
  }
}

static void on_connection(uv_stream_t *listener, int status) {
  struct dnt_http_server *s = listener->data;
  if (status < 0 || s->closing) return;
  struct client *c = calloc(1, sizeof *c);
  if (!c) return;
  c->server = s;
  uv_tcp_init(listener->loop, &c->tcp);
  uv_timer_init(listener->loop, &c->timer);
  c->tcp.data = c->timer.data = c;
  c->handles = 2;
  s->refs++;
  c->prev = s->newest;
  if (s->newest) s->newest->next = c;
  else s->oldest = c;
  s->newest = c;
  s->nclients++;
  int len = sizeof c->peer;
  if (uv_accept(listener, (uv_stream_t *)&c->tcp) != 0 ||
      uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&c->peer, &len) != 0) {
    close_client(c);
    return;
  }
  make_room(s, c);
  c->accepted = uv_now(listener->loop);
  c->deadline = c->accepted + s->lim.request_ms;
  arm_timer(c);
  uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}

void dnt_http_server_set_limits(dnt_http_server *s, const struct dnt_http_limits *lim) {
  struct dnt_http_limits l = {DNT_HTTP_MAX_CLIENTS, DNT_HTTP_MAX_PER_ADDR, DNT_HTTP_REQUEST_MS, DNT_HTTP_IDLE_MS};
  if (lim && lim->max_clients) l.max_clients = lim->max_clients;
  if (lim && lim->max_per_addr) l.max_per_addr = lim->max_per_addr;
  if (lim && lim->request_ms) l.request_ms = lim->request_ms;
  if (lim && lim->idle_ms) l.idle_ms = lim->idle_ms;
  /* far enough below the fd limit that accept never meets EMFILE (libuv would then drop every
   * new connection, the scrape's too): the rest of the process needs its descriptors as well */
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
    rlim_t fit = rl.rlim_cur / 4 > 4 ? rl.rlim_cur / 4 : 4;
    if (l.max_clients > fit) l.max_clients = (unsigned)fit;
  }
  if (l.max_per_addr > l.max_clients) l.max_per_addr = l.max_clients;
  s->lim = l;
}

unsigned long long dnt_http_server_evicted(const dnt_http_server *s) { return s->evicted; }

unsigned long long dnt_http_server_timed_out(const dnt_http_server *s) { return s->timed_out; }

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

int dnt_http_addr_check(const char *addr, char *err, size_t errlen) {
  struct sockaddr_storage ss;
  memset(&ss, 0, sizeof ss);
  return parse_addr(addr, &ss, err, errlen);
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
  dnt_http_server_set_limits(s, NULL);
  uv_tcp_init(loop, &s->listener);
  s->listener.data = s;
  rc = uv_tcp_bind(&s->listener, (const struct sockaddr *)&ss, 0);
  /* a deep backlog: under a flood of connections (slow clients reconnecting), a full queue would
   * drop a scrape's SYN and make it wait a second for the retry */
  if (!rc) rc = uv_listen((uv_stream_t *)&s->listener, 1024, on_connection);
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
  while (s->oldest) close_client(s->oldest);
  uv_close((uv_handle_t *)&s->listener, on_listener_closed);
}
