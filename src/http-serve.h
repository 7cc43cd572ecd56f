/* A minimal HTTP/1.1 server on the caller's libuv loop, for `counters serve`: GET (and HEAD)
 * requests answered by one handler, one request per connection (`Connection: close`), headers
 * capped at 8 KiB (431 beyond), a client silent for 10 s closed. Bytes may arrive in any split.
 * No printing, no exits. */
#ifndef DNT_HTTP_SERVE_H
#define DNT_HTTP_SERVE_H

#include <stddef.h>
#include <uv.h>

#define DNT_HTTP_MAX_HEADER 8192
#define DNT_HTTP_IDLE_MS 10000

/* What the handler answers: status (200, 404, 503...), content type and body. The body is a
 * heap buffer the server takes over (frees after sending); NULL with body_len 0 is an empty body. */
struct dnt_http_reply {
  int status;
  const char *content_type; /* static string */
  char *body;
  size_t body_len;
};

/* Called for each well-formed GET/HEAD request; path is the request target ("/metrics?x=1"),
 * valid during the call. Fill reply (zeroed on entry). */
typedef void (*dnt_http_handler)(void *ud, const char *path, struct dnt_http_reply *reply);

typedef struct dnt_http_server dnt_http_server;

/* Listens on addr: "HOST:PORT", "[IPv6]:PORT" or ":PORT" (= 127.0.0.1:PORT: loopback unless an
 * address is given); PORT 0 picks a free one (see dnt_http_server_port). *out: free with
 * dnt_http_server_close. Returns 0, or a negative error with a message in err (caller-owned). */
int dnt_http_server_start(uv_loop_t *loop, const char *addr, dnt_http_handler handler, void *ud,
                          dnt_http_server **out, char *err, size_t errlen);

/* The port listened on. */
int dnt_http_server_port(const dnt_http_server *s);

/* Requests handed to the handler so far. */
unsigned long long dnt_http_server_requests(const dnt_http_server *s);

/* Closes the listener and every client; the memory goes once libuv has closed the handles (run
 * the loop). NULL is fine. */
void dnt_http_server_close(dnt_http_server *s);

#endif
