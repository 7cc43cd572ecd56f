/* Private to ipc/: the allocator, the little-endian writer and the bounds-checked reader. */
#ifndef DSIPC_INT_H
#define DSIPC_INT_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "dsipc.h"

void *dsipc__malloc(size_t n);
void *dsipc__realloc(void *p, size_t n);
void *dsipc__calloc(size_t n, size_t size);
void dsipc__free(void *p);
char *dsipc__strdup(const char *s);

/* Fills st: code, hresult and a formatted message. Returns code, so `return dsipc__fail(...)`. */
int dsipc__fail(dsipc_status *st, int code, uint32_t hresult, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void dsipc__ok(dsipc_status *st);

/* Writer: appends to a dsipc_buf. Errors are remembered so a whole message can be written and
 * checked once (w.err). */
struct dsipc__writer {
  dsipc_buf *b;
  int err;
};
void dsipc__w_begin(struct dsipc__writer *w, dsipc_buf *b, uint8_t set, uint8_t id);
void dsipc__w_u8(struct dsipc__writer *w, uint8_t v);
void dsipc__w_u16(struct dsipc__writer *w, uint16_t v);
void dsipc__w_u32(struct dsipc__writer *w, uint32_t v);
void dsipc__w_u64(struct dsipc__writer *w, uint64_t v);
void dsipc__w_bytes(struct dsipc__writer *w, const void *p, size_t n);
/* UTF-8 in, protocol string out (u32 count incl. NUL, UTF-16LE); NULL or "" -> count 0. */
void dsipc__w_string(struct dsipc__writer *w, const char *utf8);
/* Patches the header's size; DSIPC_ETOOBIG over 65535. Returns w->err or 0. */
int dsipc__w_end(struct dsipc__writer *w);

/* Appends n bytes to b, growing it (no size limit: for replies and continuations). */
int dsipc__buf_append(dsipc_buf *b, const void *p, size_t n);

/* Reader: a cursor that never reads past its end (ds_ipc_message_try_parse_* style). */
struct dsipc__reader {
  const uint8_t *p;
  size_t left;
};
int dsipc__r_u8(struct dsipc__reader *r, uint8_t *v);
int dsipc__r_u16(struct dsipc__reader *r, uint16_t *v);
int dsipc__r_u32(struct dsipc__reader *r, uint32_t *v);
int dsipc__r_u64(struct dsipc__reader *r, uint64_t *v);
int dsipc__r_bytes(struct dsipc__reader *r, void *out, size_t n);
/* A protocol string as a heap UTF-8 copy (NULL for count 0). DSIPC_EPROTO for a count past the
 * bytes left, a missing NUL, a NUL inside, or a lone surrogate. */
int dsipc__r_string(struct dsipc__reader *r, char **out);

/* UTF-8 <-> UTF-16LE. Both reject malformed input. */
int dsipc__utf8_to_utf16(const char *s, uint16_t **out, size_t *units);
int dsipc__utf16le_to_utf8(const uint8_t *p, size_t units, char **out);

/* A connectable address for path: itself, or /proc/self/fd/N/<name> when path is longer than
 * sun_path (*dirfd then holds N, to close after connecting). */
int dsipc__short_alias(const char *path, char *alias, size_t cap, int *dirfd);
/* Connects to the socket at path (any length), retrying briefly while the runtime's listener
 * refuses; *out a non-blocking fd. 0, or an error with st filled. */
int dsipc__connect(const char *path, int *out, dsipc_status *st);
/* The same with at most `tries` attempts (1: no pause at all, for a caller on a loop that
 * retries on its own timer, after dsipc__connect_pause_ms(attempt)). A refusal worth another
 * try is -ECONNREFUSED. */
int dsipc__connect_tries(const char *path, int *out, dsipc_status *st, int tries);
uint64_t dsipc__connect_pause_ms(int attempt);
#define DSIPC__CONNECT_TRIES 5

/* dsipc_open_in_root's walk without openat2, for kernels before 5.6 (tests call it directly). */
int dsipc__open_in_root_walk(int root_fd, const char *path, int flags, unsigned mode);

/* Largest string we accept from a runtime, in UTF-16 units (a command line can be long). */
#define DSIPC__MAX_STRING_UNITS (1u << 20)

#endif
