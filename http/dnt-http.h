/* http/: the small HTTP/1.1 server of `serve` and `counters serve` (Prometheus' /metrics, Go's
 * /debug/pprof/), with its deferred answers and query strings, and the one POST client of
 * `serve --push`: on the caller's libuv loop, never printing, never exiting. Moved out of
 * counters/ (issue 26): it serves more than counters. One public header. */
#ifndef DNT_HTTP_H
#define DNT_HTTP_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

/* A minimal HTTP/1.1 server on the caller's libuv loop, for `serve` and `counters serve`: GET (and HEAD)
 * requests answered by one handler, one request per connection (`Connection: close`), headers
 * capped at 8 KiB (431 beyond). Bytes may arrive in any split. No printing, no exits.
 *
 * Slow clients cannot lock a scrape out (slowloris): a connection is closed when silent for
 * DNT_HTTP_IDLE_MS and, however it trickles, DNT_HTTP_REQUEST_MS after it was accepted; at most
 * DNT_HTTP_MAX_CLIENTS connections are held (fewer when RLIMIT_NOFILE is low: a quarter of it),
 * at most DNT_HTTP_MAX_PER_ADDR from one address. A new connection always gets a slot: past a
 * cap, the oldest connection (of that address first) still sending its request is closed for it,
 * so the slot a scrape needs is never held by clients that never finish. */

#define DNT_HTTP_MAX_HEADER 8192
#define DNT_HTTP_IDLE_MS 5000
#define DNT_HTTP_REQUEST_MS 10000
#define DNT_HTTP_MAX_CLIENTS 64
#define DNT_HTTP_MAX_PER_ADDR 16

/* The first line of a request head, as dnt_http_request_parse finds it. */
struct dnt_http_request {
  int head;           /* 1: HEAD, 0: GET */
  const char *target; /* the request target ("/metrics?x=1"), pointing into the caller's bytes */
  size_t target_len;
  size_t head_len;    /* bytes of the head, its empty line included */
};

/* Parses the len bytes received so far of a request (caller-owned, need not be NUL-terminated;
 * any split: call again with more). Returns 0 while the head is incomplete, 200 for a
 * well-formed GET or HEAD ("METHOD SP /TARGET SP HTTP/1.0|1" then headers up to an empty line,
 * CRLF or LF; req filled), or the status to answer: 400 (malformed, a NUL byte), 405 (another
 * method), 431 (no end of head within DNT_HTTP_MAX_HEADER bytes). */
int dnt_http_request_parse(const char *buf, size_t len, struct dnt_http_request *req);

/* What the handler answers: status (200, 404, 503...), content type and body. The body is a
 * heap buffer the server takes over (frees after sending); NULL with body_len 0 is an empty body. */
struct dnt_http_reply {
  int status;
  const char *content_type; /* static string */
  char *body;
  size_t body_len;
  void *priv; /* the server's (set before the handler is called): leave it alone */
};

/* Called for each well-formed GET/HEAD request; path is the request target ("/metrics?x=1"),
 * valid during the call. Fill reply (zeroed on entry), or answer later: see dnt_http_defer. */
typedef void (*dnt_http_handler)(void *ud, const char *path, struct dnt_http_reply *reply);

typedef struct dnt_http_server dnt_http_server;

/* ---- answering later (a profile that takes N seconds) ----
 * From inside the handler, dnt_http_defer(reply, ...) keeps the connection open with no answer
 * yet and returns a handle; the reply is then sent with dnt_http_pending_answer from any later
 * callback of the loop. A deferred request is out of the idle and request deadlines (the client
 * is waiting for us) and is never closed to make room for a newer connection; it still ends if
 * the client goes away or the server is closed: then on_gone(ud) is called (from the loop, at
 * most once) and the handle is no longer valid. */
typedef struct dnt_http_pending dnt_http_pending;
/* NULL when out of memory (the handler then answers as usual). reply: the handler's. */
dnt_http_pending *dnt_http_defer(struct dnt_http_reply *reply, void (*on_gone)(void *ud), void *ud);
/* Sends rep (its body taken over, as a handler's) and ends the handle; on_gone is not called. */
void dnt_http_pending_answer(dnt_http_pending *p, struct dnt_http_reply *rep);

/* The value of query parameter key in a request target ("/p?seconds=3&pid=7"), percent-decoded
 * ('+' as a space) into out (caller-owned, cap bytes, NUL-terminated). Returns its length, -1
 * when the key is absent, -2 when the value is malformed (a bad %XX, a NUL, longer than cap - 1).
 * The first occurrence wins; a key written without '=' has the empty value. */
int dnt_http_query_get(const char *target, const char *key, char *out, size_t cap);

/* ---- a POST, for `serve --push` ---- */

/* Splits "http://HOST[:PORT][/PATH]" (PORT default 80, PATH default "") into the caller's
 * buffers. 0, or -EINVAL (another scheme, an empty host, a bad port, a part too long). */
int dnt_http_url_parse(const char *url, char *host, size_t hcap, int *port, char *path, size_t pcap);

/* One POST on the caller's loop: HOST resolved (uv_getaddrinfo), connected, the request written
 * (Content-Length, Connection: close), the status line read. cb(ud, status, msg) is called once
 * from the loop: status the HTTP status, or a negative error (-ECONNREFUSED, -ETIMEDOUT, ...)
 * with msg saying what (valid during the call). body (len bytes, heap) is taken over. timeout_ms
 * covers the whole exchange. 0, or a negative error (no callback then; body freed). */
typedef void (*dnt_http_post_cb)(void *ud, int status, const char *msg);
typedef struct dnt_http_post dnt_http_post;
int dnt_http_post_start(uv_loop_t *loop, const char *host, int port, const char *target, const char *content_type,
                        char *body, size_t len, uint64_t timeout_ms, dnt_http_post_cb cb, void *ud,
                        dnt_http_post **out);
/* The status of an answer from its first len bytes (caller-owned, any split): 0 while its first
 * line is incomplete (and shorter than 256 bytes), the status (100..599) of "HTTP/1.x NNN ...",
 * or -1 for anything else. */
int dnt_http_status_parse(const char *buf, size_t len);

/* Drops the POST: no callback after this; its memory goes once libuv is done with it. */
void dnt_http_post_cancel(dnt_http_post *p);

/* The path of a target without its query ("/debug/pprof/profile?seconds=3" -> 21 bytes). */
size_t dnt_http_path_len(const char *target);

/* Listens on addr: "HOST:PORT", "[IPv6]:PORT" or ":PORT" (= 127.0.0.1:PORT: loopback unless an
 * address is given); PORT 0 picks a free one (see dnt_http_server_port). *out: free with
 * dnt_http_server_close. Returns 0, or a negative error with a message in err (caller-owned). */
int dnt_http_server_start(uv_loop_t *loop, const char *addr, dnt_http_handler handler, void *ud,
                          dnt_http_server **out, char *err, size_t errlen);
/* Whether addr is one dnt_http_server_start takes ("HOST:PORT", "[V6]:PORT", ":PORT", numeric):
 * 0, or -EINVAL with the reason in err (caller-owned), so a command can refuse it before it
 * looks for its targets. */
int dnt_http_addr_check(const char *addr, char *err, size_t errlen);

/* The server's limits; a field left 0 keeps its default (the DNT_HTTP_ values above). */
struct dnt_http_limits {
  unsigned max_clients;  /* connections held at once (a quarter of RLIMIT_NOFILE at most) */
  unsigned max_per_addr; /* of them, from one peer address */
  unsigned request_ms;   /* the whole life of a connection, from accept to close */
  unsigned idle_ms;      /* silence allowed while the request arrives */
};
/* Applies to connections accepted from then on. lim: borrowed for the call. */
void dnt_http_server_set_limits(dnt_http_server *s, const struct dnt_http_limits *lim);

/* Connections closed to make room for newer ones, and closed by a deadline, so far. */
unsigned long long dnt_http_server_evicted(const dnt_http_server *s);
unsigned long long dnt_http_server_timed_out(const dnt_http_server *s);

/* The port listened on. */
int dnt_http_server_port(const dnt_http_server *s);

/* Requests handed to the handler so far. */
unsigned long long dnt_http_server_requests(const dnt_http_server *s);

/* Closes the listener and every client; the memory goes once libuv has closed the handles (run
 * the loop). NULL is fine. */
void dnt_http_server_close(dnt_http_server *s);

#endif
