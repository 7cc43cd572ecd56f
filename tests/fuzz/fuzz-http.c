/* fuzz-http.c: libFuzzer target for the request parser of `counters serve`
 * (dnt_http_request_parse), with the properties the server relies on checked: a 200 points inside
 * the bytes, at a target that starts with '/', and a head that ends where it says; bytes past the
 * head never change the verdict. Seeds: tests/fuzz/seeds/http, requests of curl, wget and Python. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dnt-counters.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *buf = (const char *)data;
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
  return 0;
}
