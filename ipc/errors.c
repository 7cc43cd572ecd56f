/* Error names and messages, the runtime's HRESULTs, and the replaceable allocator. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsipc-int.h"

const char *dsipc_strerror(int err) {
  switch (err) {
#define XX(name, value, msg) \
  case DSIPC_E##name: return msg;
    DSIPC_ERRNO_MAP(XX)
#undef XX
  case 0: return "success";
  default: return err < 0 && err > -4096 ? strerror(-err) : "unknown error";
  }
}

const char *dsipc_err_name(int err) {
  switch (err) {
#define XX(name, value, msg) \
  case DSIPC_E##name: return "DSIPC_E" #name;
    DSIPC_ERRNO_MAP(XX)
#undef XX
  case 0: return "OK";
  default: return "ERRNO";
  }
}

const char *dsipc_hresult_message(uint32_t hr) {
  switch (hr) {
  case DSIPC_HR_BAD_ENCODING: return "the runtime could not decode the request (or does not support these options)";
  case DSIPC_HR_UNKNOWN_COMMAND: return "unknown command (the runtime is too old for it)";
  case DSIPC_HR_UNKNOWN_MAGIC: return "unknown magic";
  case DSIPC_HR_NOTSUPPORTED: return "not supported by this runtime";
  case DSIPC_HR_FAIL: return "the operation failed in the runtime";
  case DSIPC_HR_NOT_YET_AVAILABLE: return "not yet available (the runtime is still starting)";
  case DSIPC_HR_RUNTIME_UNINITIALIZED: return "the runtime is not initialized";
  case DSIPC_HR_INVALIDARG: return "invalid argument";
  case DSIPC_HR_INSUFFICIENT_BUFFER: return "insufficient buffer";
  case DSIPC_HR_ENVVAR_NOT_FOUND: return "environment variable not found";
  default: return "unknown error";
  }
}

int dsipc__fail(dsipc_status *st, int code, uint32_t hresult, const char *fmt, ...) {
  if (st) {
    st->code = code;
    st->hresult = hresult;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(st->msg, sizeof st->msg, fmt, ap);
    va_end(ap);
  }
  return code;
}

void dsipc__ok(dsipc_status *st) {
  if (!st) return;
  st->code = 0;
  st->hresult = 0;
  st->msg[0] = '\0';
}

static struct {
  void *(*malloc_fn)(size_t);
  void *(*realloc_fn)(void *, size_t);
  void *(*calloc_fn)(size_t, size_t);
  void (*free_fn)(void *);
} alloc = {malloc, realloc, calloc, free};

int dsipc_replace_allocator(void *(*malloc_fn)(size_t), void *(*realloc_fn)(void *, size_t),
                            void *(*calloc_fn)(size_t, size_t), void (*free_fn)(void *)) {
  if (!malloc_fn || !realloc_fn || !calloc_fn || !free_fn) return DSIPC_EINVAL;
  alloc.malloc_fn = malloc_fn;
  alloc.realloc_fn = realloc_fn;
  alloc.calloc_fn = calloc_fn;
  alloc.free_fn = free_fn;
  return 0;
}

void *dsipc__malloc(size_t n) { return alloc.malloc_fn(n ? n : 1); }
void *dsipc__realloc(void *p, size_t n) { return alloc.realloc_fn(p, n ? n : 1); }
void *dsipc__calloc(size_t n, size_t size) { return alloc.calloc_fn(n ? n : 1, size ? size : 1); }
void dsipc__free(void *p) {
  if (p) alloc.free_fn(p);
}

char *dsipc__strdup(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = dsipc__malloc(n);
  return d ? memcpy(d, s, n) : NULL;
}
