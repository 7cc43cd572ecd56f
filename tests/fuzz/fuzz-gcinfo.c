/* fuzz-gcinfo.c: libFuzzer target for the JIT's GC info decoder (coredump/gcinfo.c, gcroot's
 * stack roots): an input is a code offset (4 bytes), the decoder's flags (1 byte), then the GC
 * info's bytes; the decoder reads them as it reads a core's memory, and must end, read nothing
 * past them, and say at most its limit of slots, each of a known base. Seeds: tests/fuzz/seeds/
 * gcinfo (infos of the shapes the JIT writes, encoded here by hand). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core-int.h"

#define BASE 0x10000

struct blob {
  const uint8_t *p;
  size_t n;
};

static int blob_read(const void *ud, uint64_t at, void *buf, size_t n) {
  const struct blob *b = ud;
  if (at < BASE || at - BASE > b->n || n > b->n - (at - BASE)) return -1;
  memcpy(buf, b->p + (at - BASE), n);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 5) return 0;
  uint32_t offset;
  memcpy(&offset, data, 4);
  struct blob b = {data + 5, size - 5};
  static struct dnt__gcinfo g;
  if (dnt__gcinfo_decode(blob_read, &b, BASE, offset, data[4] & 3, &g) == 0) {
    if (g.nslots > DNT__GC_MAX_SLOTS) abort();
    for (uint32_t i = 0; i < g.nslots; i++)
      if (!g.slots[i].is_register && g.slots[i].base > 3) abort();
  }
  return 0;
}
