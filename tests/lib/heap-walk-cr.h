/* Heap walks for the gcdump tests (static helpers, one copy per test program): nettrace files
 * of a walk written event by event (the runtime's GCStart, BulkType, GCBulkNode, GCBulkEdge,
 * GCBulkRootEdge and GCEnd), a graph whose dominators and paths are worked out by hand, the
 * sample started with a heap whose shape is known, and Microsoft's dotnet-gcdump. */
#ifndef DNT_TEST_HEAP_WALK_CR_H
#define DNT_TEST_HEAP_WALK_CR_H

#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "env-cr.h"
#include "files-cr.h"
#include "ntr-writer.h"
#include "record-cr.h"
#include "run.h"
#include "target-cr.h"
#include "target.h"

#define ENTRIES "3000"
#define BYTES "500"

/* The sample with --heap HEAP (N:K[:M]), quiet otherwise, started as mode says (plainly, or in
 * namespaces of its own). */
static inline void start_heap_in(dnt_target *t, const char *heap, dnt_target_mode mode) {
  DNT_REQUIRE_TARGET();
  require_python();
  const char *const args[] = {"--heap", heap, "--no-cpu", "--no-blocking", "--no-alloc",
                              "--no-exceptions", "--no-counters", NULL};
  dnt_target_opts o = {.mode = mode, .args = args, .wait_socket = 1, .timeout_ms = DNT_HANG_MS};
  char err[512];
  cr_assert_eq(dnt_target_start(t, &o, err, sizeof err), 0, "%s", err);
}

static inline void start_heap_with(dnt_target *t, const char *heap) { start_heap_in(t, heap, DNT_TARGET_PLAIN); }
static inline void start_heap(dnt_target *t) { start_heap_with(t, ENTRIES ":" BYTES); }

/* ---- dotnet-gcdump, the reference ----
 * Microsoft's dotnet-gcdump (NuGet, installed by ./bootstrap.sh into build-tools/dotnet-tools, or
 * $DNT_DOTNET_TOOLS). Its report's rows are "SIZE COUNT TYPE[ (Bytes > N)]  [MODULE]", a type
 * split over rows by its objects' sizes, SIZE one object's. */

static inline const char *gcdump_tool(void) { return diag_tool("dotnet-gcdump"); }


/* ---- walks written here ---- */

#define RUNTIME "Microsoft-Windows-DotNETRuntime"

struct walk {
  ntrw w;
  uint32_t seq;
  uint64_t ts;
};

static inline void put(struct walk *k, uint32_t md, const uint8_t *p, uint32_t n) {
  ntrw_ev e = {.metadata_id = md, .seq = ++k->seq, .thread = 5, .capture_thread = 5, .ts = k->ts += 10,
               .payload = p, .payload_size = n};
  ntrw_event(&k->w, &e);
}

static inline void le(uint8_t *p, uint64_t v, int n) {
  for (int i = 0; i < n; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* A trace of process pid with the metadata of the walk's events (1 GCStart, 2 GCEnd, 3 BulkType,
 * 4 BulkNode, 5 BulkEdge, 6 BulkRootEdge), its event block begun. */
static inline void walk_begin(struct walk *k, uint32_t pid) {
  memset(k, 0, sizeof *k);
  ntrw_trace t = {.sync_qpc = 1000, .freq = 1000000, .pointer_size = 8, .pid = pid, .cpus = 1, .sampling_ns = 1000000};
  ntrw_md md[] = {
      {.id = 1, .provider = RUNTIME, .event_id = 1, .version = 2, .level = 4, .keywords = 1, .name = "", .opcode = -1, .no_fields = 1},
      {.id = 2, .provider = RUNTIME, .event_id = 2, .version = 1, .level = 4, .keywords = 1, .name = "", .opcode = -1, .no_fields = 1},
      {.id = 3, .provider = RUNTIME, .event_id = 15, .version = 0, .level = 4, .keywords = 0x80000, .name = "", .opcode = -1, .no_fields = 1},
      {.id = 4, .provider = RUNTIME, .event_id = 18, .version = 0, .level = 4, .keywords = 0x100000, .name = "", .opcode = -1, .no_fields = 1},
      {.id = 5, .provider = RUNTIME, .event_id = 19, .version = 0, .level = 4, .keywords = 0x100000, .name = "", .opcode = -1, .no_fields = 1},
      {.id = 6, .provider = RUNTIME, .event_id = 16, .version = 0, .level = 4, .keywords = 0x100000, .name = "", .opcode = -1, .no_fields = 1},
  };
  ntrw_init(&k->w, 0);
  ntrw_trace_hdr(&k->w, &t);
  ntrw_md_begin(&k->w);
  for (size_t i = 0; i < sizeof md / sizeof md[0]; i++) ntrw_metadata(&k->w, &md[i]);
  ntrw_block_end(&k->w);
  ntrw_ev_begin(&k->w, 1);
  k->ts = 2000;
}

/* GCStart v2: Count 7, Depth 2, Reason 1 (induced), Type 0 (blocking), ClrInstanceID and
 * ClientSequenceNumber 0. */
static inline void gc_start(struct walk *k) {
  uint8_t p[26] = {0};
  le(p, 7, 4), le(p + 4, 2, 4), le(p + 8, 1, 4), le(p + 12, 0, 4);
  put(k, 1, p, sizeof p);
}

/* GCEnd v1: Count 7, Depth 2, ClrInstanceID 0. */
static inline void gc_end(struct walk *k) {
  uint8_t p[10] = {0};
  le(p, 7, 4), le(p + 4, 2, 4);
  put(k, 2, p, sizeof p);
}

/* The trace ended and saved to path. */
static inline void walk_end(struct walk *k, const char *path) {
  ntrw_block_end(&k->w);
  ntrw_end(&k->w);
  dnt_write_file(path, k->w.buf, k->w.len);
  ntrw_release(&k->w);
}

/* GCStart (Count 7, Depth 2, Reason 1 induced, Type 0 blocking; none when nodes < 0), a type, `nodes` node events of
 * one object with `edges` references each (their Index from 0, but skip_node leaves one out),
 * one edge event per node with `edges_sent` references, and GCEnd unless cut. */
static inline void write_walk(const char *path, int nodes, int edges, int edges_sent, int skip_node, int cut) {
  struct walk k;
  walk_begin(&k, 4545);
  uint8_t p[256];
  if (nodes >= 0) gc_start(&k); /* else no collection at all: no walk */
  /* BulkType: Count 1, ClrInstanceID, then TypeID 0x100, ModuleID, TypeNameID, Flags,
   * CorElementType, "T\0" in UTF-16, TypeParameterCount 0 */
  memset(p, 0, sizeof p);
  le(p, 1, 4), le(p + 6, 0x100, 8), p[31] = 'T', le(p + 35, 0, 4);
  put(&k, 3, p, 39);
  for (int i = 0, index = 0; i < nodes; i++, index++) {
    if (i == skip_node) index++; /* an event of the sequence never comes */
    memset(p, 0, sizeof p);
    le(p, (uint64_t)index, 4), le(p + 4, 1, 4);
    le(p + 10, 0x10000 + 0x20 * (uint64_t)i, 8), le(p + 18, 24, 8), le(p + 26, 0x100, 8), le(p + 34, (uint64_t)edges, 8);
    put(&k, 4, p, 42);
    memset(p, 0, sizeof p);
    le(p, (uint64_t)i, 4), le(p + 4, (uint64_t)edges_sent, 4);
    for (int e = 0; e < edges_sent; e++) le(p + 10 + 12 * e, 0x10000, 8);
    put(&k, 5, p, 10 + 12 * (uint32_t)edges_sent);
  }
  if (!cut) gc_end(&k);
  walk_end(&k, path);
}

/* ---- retained sizes, by construction ----
 * Types TA..TF; objects A (100 bytes, TA), B (10, TB), C (20, TC), D (30, TD), E (40, TE),
 * F (50, TF), G (60, TA), H (5, TB); references A→B, A→C, B→D, B→H, C→D, D→E, F→E, G→A; roots A
 * and F, and a weak one to G (left out, so G is garbage). Dominators: D by A (reached through B
 * and through C), E by the roots alone (through A and through F), H by B. Retained: A 100+15+20+30
 * = 165, B 10+5 = 15, C 20, D 30, E 40, F 50, G nothing. Per type: TA 165 (G retains nothing),
 * TB 15 (H is B's: counted once), TC 20, TD 30, TE 40, TF 50. */
static inline void write_graph(const char *path) {
  struct walk k;
  walk_begin(&k, 4646);
  static uint8_t p[1024];
  gc_start(&k);
  /* the types: TypeID 0x100 * (i + 1), named "TA".."TF" */
  size_t n = 6;
  memset(p, 0, sizeof p);
  le(p, 6, 4);
  for (int i = 0; i < 6; i++) {
    le(p + n, 0x100 * (uint64_t)(i + 1), 8), n += 25;
    p[n] = 'T', p[n + 2] = (uint8_t)('A' + i), n += 6; /* "T?" and its NUL, UTF-16 */
    le(p + n, 0, 4), n += 4;
  }
  put(&k, 3, p, (uint32_t)n);
  static const struct { uint64_t size, type, edges; } obj[8] = {
      {100, 1, 2}, {10, 2, 2}, {20, 3, 1}, {30, 4, 1}, {40, 5, 0}, {50, 6, 1}, {60, 1, 1}, {5, 2, 0}};
  memset(p, 0, sizeof p);
  le(p, 0, 4), le(p + 4, 8, 4);
  for (int i = 0; i < 8; i++) {
    uint8_t *v = p + 10 + 32 * i;
    le(v, 0x1000 * (uint64_t)(i + 1), 8), le(v + 8, obj[i].size, 8), le(v + 16, 0x100 * obj[i].type, 8);
    le(v + 24, obj[i].edges, 8);
  }
  put(&k, 4, p, 10 + 32 * 8);
  /* A→B, A→C, B→D, B→H, C→D, D→E, F→E, G→A: targets by address (A is 0x1000 .. H 0x8000) */
  static const uint64_t to[8] = {0x2000, 0x3000, 0x4000, 0x8000, 0x4000, 0x5000, 0x5000, 0x1000};
  memset(p, 0, sizeof p);
  le(p, 0, 4), le(p + 4, 8, 4);
  for (int i = 0; i < 8; i++) le(p + 10 + 12 * i, to[i], 8);
  put(&k, 5, p, 10 + 12 * 8);
  /* roots: A and F strong (a handle, kind 2), G weak (flag 2) */
  static const uint64_t rooted[3] = {0x1000, 0x6000, 0x7000};
  memset(p, 0, sizeof p);
  le(p, 0, 4), le(p + 4, 3, 4);
  for (int i = 0; i < 3; i++) {
    uint8_t *v = p + 10 + 21 * i;
    le(v, rooted[i], 8), v[8] = 2, le(v + 9, i == 2 ? 2 : 0, 4), le(v + 13, 0x900 + (uint64_t)i, 8);
  }
  put(&k, 6, p, 10 + 21 * 3);
  gc_end(&k);
  walk_end(&k, path);
}

#endif
