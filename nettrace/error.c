/* error.c: the error table, the replaceable allocator, and sticky error messages. */
#include <stdio.h>
#include <stdlib.h>

#include "ntr-int.h"

const char *ntr_err_name(int err) {
  switch (err) {
#define XX(name, value, msg) \
  case NTR_##name:           \
    return "NTR_" #name;
    NTR_ERRNO_MAP(XX)
#undef XX
  }
  return "NTR_UNKNOWN";
}

const char *ntr_strerror(int err) {
  switch (err) {
#define XX(name, value, msg) \
  case NTR_##name:           \
    return msg;
    NTR_ERRNO_MAP(XX)
#undef XX
  }
  return "unknown error";
}

/* The allocator. Plain function pointers rather than a struct so replacing it is one call;
 * tests swap in a failing allocator to walk every NTR_ENOMEM path. */
static struct {
  ntr_malloc_fn m;
  ntr_realloc_fn r;
  ntr_calloc_fn c;
  ntr_free_fn f;
} alloc = {malloc, realloc, calloc, free};

int ntr_replace_allocator(ntr_malloc_fn m, ntr_realloc_fn r, ntr_calloc_fn c, ntr_free_fn f) {
  if (!m || !r || !c || !f)
    return NTR_EINVAL;
  alloc.m = m;
  alloc.r = r;
  alloc.c = c;
  alloc.f = f;
  return 0;
}

void *ntr__malloc(size_t n) { return alloc.m(n ? n : 1); }
void *ntr__realloc(void *ptr, size_t n) { return alloc.r(ptr, n ? n : 1); }
void *ntr__calloc(size_t count, size_t size) { return alloc.c(count ? count : 1, size ? size : 1); }
void ntr__free(void *ptr) {
  if (ptr)
    alloc.f(ptr);
}

int ntr__fail(ntr_parser *p, int code, uint64_t off, const char *fmt, ...) {
  va_list ap;
  int n;

  /* The first error wins: later ones are consequences of it. */
  if (p->state == NTR_S_FAILED)
    return p->err;
  n = snprintf(p->errmsg, sizeof(p->errmsg), "byte %llu: ", (unsigned long long)off);
  if (n < 0)
    n = 0;
  va_start(ap, fmt);
  vsnprintf(p->errmsg + n, sizeof(p->errmsg) - (size_t)n, fmt, ap);
  va_end(ap);
  p->state = NTR_S_FAILED;
  p->err = code;
  return code;
}

int ntr__stopped(ntr_parser *p, uint64_t off, const char *what) {
  return ntr__fail(p, NTR_ESTOPPED, off, "stopped by the %s callback", what);
}
