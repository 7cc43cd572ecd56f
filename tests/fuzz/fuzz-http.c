/* fuzz-http.c: libFuzzer target for the request parser of `counters serve` and `serve`
 * (dnt_http_request_parse), with the properties the server relies on checked: a 200 points inside
 * the bytes, at a target that starts with '/', and a head that ends where it says; bytes past the
 * head never change the verdict. Then the query-string parser of `serve` (dnt_http_query_get,
 * dnt_http_path_len) on the request's target and on the whole input as a string: a value never
 * longer than its buffer, NUL-terminated at the length returned, without a NUL inside, never
 * longer than its raw text; the URL of `serve --push` and the status line of its server's answer
 * (a prefix of an answer never gives another status than the whole). Seeds: tests/fuzz/seeds/http, requests of curl, wget, Python and
 * go tool pprof. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dnt-counters.h"
#include "dnt-http.h"

/* The query parser's properties on target (NUL-terminated). */
static void check_query(const char *target) {
  static const char *const keys[] = {"seconds", "pid", "debug", "a", ""};
  size_t tlen = strlen(target);
  if (dnt_http_path_len(target) > tlen) abort();
  for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
    for (size_t cap = 1; cap <= 33; cap += 8) {
      char out[33];
      memset(out, 'x', sizeof out);
      int n = dnt_http_query_get(target, keys[k], out, cap);
      if (n < -2) abort();
      if (n < 0) continue;
      if ((size_t)n >= cap || out[n] != '\0' || strlen(out) != (size_t)n || (size_t)n > tlen) abort();
    }
  }
}

/* What `serve --push` reads of the server it sends to: the URL it was given and the answer's
 * status line. Any split of the answer gives the same verdict once whole. */
static void check_client(const char *whole, const char *buf, size_t size) {
  char host[64], path[64];
  int port = -1;
  if (dnt_http_url_parse(whole, host, sizeof host, &port, path, sizeof path) == 0) {
    if (!host[0] || port < 1 || port > 65535 || strlen(host) >= sizeof host || strlen(path) >= sizeof path) abort();
  }
  int status = dnt_http_status_parse(buf, size);
  if (status != 0 && status != -1 && (status < 100 || status > 599)) abort();
  for (size_t cut = 0; cut < size && cut < 300; cut += 7) { /* a prefix never contradicts the whole */
    int part = dnt_http_status_parse(buf, cut);
    if (part != 0 && part != status) abort();
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *buf = (const char *)data;
  char *whole = malloc(size + 1); /* the input as a string, up to its first NUL */
  if (!whole) return 0;
  memcpy(whole, data, size);
  whole[size] = '\0';
  check_query(whole);
  check_client(whole, buf, size);
  free(whole);
  struct dnt_http_request req, again;
  int status = dnt_http_request_parse(buf, size, &req);
  if (status != 0 && status != 200 && status != 400 && status != 405 && status != 431) abort();
  if (status == 0 && size >= DNT_HTTP_MAX_HEADER) abort(); /* the cap must end the wait */
  if (status != 200) return 0;
  if (req.head_len == 0 || req.head_len > size || req.head_len > DNT_HTTP_MAX_HEADER) abort();
  if (req.target < buf || req.target + req.target_len > buf + req.head_len) abort();
  if (req.target_len == 0 || req.target[0] != '/' || memchr(req.target, ' ', req.target_len)) abort();
  /* the head alone gives the same answer */
  if (dnt_http_request_parse(buf, req.head_len, &again) != 200 || again.target != req.target ||
      again.target_len != req.target_len || again.head != req.head)
    abort();
  /* and one byte less is not yet a head */
  if (dnt_http_request_parse(buf, req.head_len - 1, &again) == 200) abort();
  char *target = malloc(req.target_len + 1);
  if (!target) return 0;
  memcpy(target, req.target, req.target_len);
  target[req.target_len] = '\0';
  check_query(target);
  free(target);
  return 0;
}
