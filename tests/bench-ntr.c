/* bench-ntr.c: parse-only throughput of the nettrace parser. Prints, asserts nothing.
 *   tests/bench-ntr            generate a ~256 MB V4 trace in memory (tests/lib/ntr-writer.c)
 *   tests/bench-ntr FILE...    parse these files instead
 *   tests/bench-ntr --write FILE MB   write a synthetic trace of about MB megabytes (for
 *                              benchmarks of whole commands on a big file)
 *   tests/bench-ntr --write-allocs FILE MB   the same of GCAllocationTick V4 events with stacks
 *                              (200 types, 64 stacks, 16 threads): `dntrace allocs`'s bench
 *   tests/bench-ntr --write-async FILE MB   the same of async chains (the task library's awaits
 *                              continued on 16 pool threads, samples): stitching's bench
 * For each input: one whole-buffer feed and 64 KiB feeds (what a socket reader does). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "lib/ntr-writer.h"
#include "ntr.h"

struct sink {
  uint64_t events, payload_bytes, frames;
};

static int on_event(void *ud, const ntr_event *e) {
  struct sink *s = ud;
  s->events++;
  s->payload_bytes += e->payload_size;
  if (e->stack)
    s->frames += e->stack->nframes;
  return 0;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Sample-profiler-like events: per thread runs of events with stacks, 100 KB blocks, a stack
 * block before each event block, a sequence point every ~10 MB. */
static void generate(ntrw *w, size_t target) {
  ntrw_trace t = {1000, 1000000000, 8, 4242, 8, 1000000, NULL, 0};
  static const ntrw_field fs[] = {{"Type", 10, NULL, NULL, 0, 0}};
  ntrw_md md = {1, "Microsoft-DotNETCore-SampleProfiler", 0, "", 0, 0, 4, -1, fs, 1, 0, 0};
  ntrw_md md2 = {2, "Microsoft-Windows-DotNETRuntime", 80, "", 0x8000, 1, 4, -1, NULL, 0, 0, 1};
  uint64_t frames[64][24];
  const uint64_t *fp[64];
  uint32_t nf[64], seq[16] = {0};
  uint64_t ts = 1000, th[16];
  uint8_t payload[96];
  size_t last_sp = 0;
  uint32_t next_stack = 1; /* ids are dense and restart after each sequence point */
  unsigned r = 12345;
  int i, k;

  for (i = 0; i < 64; i++) {
    nf[i] = 4 + (uint32_t)(i % 20);
    for (k = 0; k < 24; k++)
      frames[i][k] = 0x7f1234000000ULL + (uint64_t)i * 4096 + (uint64_t)k * 64;
    fp[i] = frames[i];
  }
  for (i = 0; i < 16; i++)
    th[i] = 30000 + (uint64_t)i;
  memset(payload, 0x5a, sizeof(payload));
  ntrw_init(w, 0);
  ntrw_trace_hdr(w, &t);
  ntrw_md_begin(w);
  ntrw_metadata(w, &md);
  ntrw_metadata(w, &md2);
  ntrw_block_end(w);
  while (w->len < target) {
    size_t start;
    ntrw_stacks(w, next_stack, 64, fp, nf);
    {
      uint32_t base = next_stack;
      next_stack += 64;
      ntrw_ev_begin(w, 1);
      start = w->len;
      while (w->len - start < 100000) {
        int t_i = (int)((r >> 16) % 16), run = 1 + (int)((r >> 8) % 8);
        for (k = 0; k < run; k++) {
          ntrw_ev e;
          r = r * 1103515245u + 12345u;
          memset(&e, 0, sizeof(e));
          e.metadata_id = (r >> 20) % 8 ? 1 : 2;
          e.seq = ++seq[t_i];
          e.capture_thread = 1000;
          e.thread = th[t_i];
          e.proc = 0xffffffffu;
          e.stack_id = base + (r >> 10) % 64;
          ts += 1000 + (r >> 12) % 5000;
          e.ts = ts;
          e.payload = payload;
          e.payload_size = e.metadata_id == 1 ? 4 : 16 + (r >> 4) % 80;
          e.capture_thread = th[t_i];
          ntrw_event(w, &e);
        }
      }
      ntrw_block_end(w);
    }
    if (w->len - last_sp > 10u << 20) {
      ntrw_sp(w, ts, 0, 16, th, seq);
      last_sp = w->len;
      next_stack = 1;
    }
  }
  ntrw_end(w);
}

/* One GCAllocationTick V4 payload (the runtime's layout: data/runtime-events.xml) into p; its
 * size. The type's name is "Bench.Type<type>". */
static uint32_t alloc_tick(uint8_t *p, uint32_t amount, uint32_t type, uint64_t object_size) {
  uint8_t *q = p;
  uint64_t amount64 = amount, type_id = 0x7f0000001000ULL + type * 64, address = 0x7e0000000000ULL + amount;
  uint32_t kind = 0, heap = 0;
  uint16_t clr = 8;
  char name[32];
  memcpy(q, &amount, 4), q += 4;
  memcpy(q, &kind, 4), q += 4;
  memcpy(q, &clr, 2), q += 2;
  memcpy(q, &amount64, 8), q += 8;
  memcpy(q, &type_id, 8), q += 8;
  snprintf(name, sizeof name, "Bench.Type%u", type);
  for (const char *c = name;; c++) { /* UTF-16LE, NUL-terminated */
    *q++ = (uint8_t)*c;
    *q++ = 0;
    if (!*c) break;
  }
  memcpy(q, &heap, 4), q += 4;
  memcpy(q, &address, 8), q += 8;
  memcpy(q, &object_size, 8), q += 8;
  return (uint32_t)(q - p);
}

/* Allocation ticks from 16 threads, each with one of 64 stacks, 200 types; blocks, stack blocks
 * and sequence points as generate() writes them. */
static void generate_allocs(ntrw *w, size_t target) {
  ntrw_trace t = {1000, 1000000000, 8, 4242, 8, 1000000, NULL, 0};
  ntrw_md md = {1, "Microsoft-Windows-DotNETRuntime", 10, "", 0x1, 4, 5, -1, NULL, 0, 0, 1};
  uint64_t frames[64][24];
  const uint64_t *fp[64];
  uint32_t nf[64], seq[16] = {0};
  uint64_t ts = 1000, th[16];
  uint8_t payload[128];
  size_t last_sp = 0;
  uint32_t next_stack = 1;
  unsigned r = 12345;
  for (int i = 0; i < 64; i++) {
    nf[i] = 6 + (uint32_t)(i % 18);
    for (int k = 0; k < 24; k++) frames[i][k] = 0x7f1234000000ULL + (uint64_t)i * 4096 + (uint64_t)k * 64;
    fp[i] = frames[i];
  }
  for (int i = 0; i < 16; i++) th[i] = 30000 + (uint64_t)i;
  ntrw_init(w, 0);
  ntrw_trace_hdr(w, &t);
  ntrw_md_begin(w);
  ntrw_metadata(w, &md);
  ntrw_block_end(w);
  while (w->len < target) {
    uint32_t base = next_stack;
    ntrw_stacks(w, next_stack, 64, fp, nf);
    next_stack += 64;
    ntrw_ev_begin(w, 1);
    size_t start = w->len;
    while (w->len - start < 100000) {
      ntrw_ev e;
      r = r * 1103515245u + 12345u;
      int t_i = (int)((r >> 16) % 16);
      uint32_t type = (r >> 8) % 200;
      memset(&e, 0, sizeof e);
      e.metadata_id = 1;
      e.seq = ++seq[t_i];
      e.thread = e.capture_thread = th[t_i];
      e.proc = 0xffffffffu;
      e.stack_id = base + (r >> 10) % 64;
      ts += 1000 + (r >> 12) % 5000;
      e.ts = ts;
      e.payload = payload;
      e.payload_size = alloc_tick(payload, 100000 + (r >> 4) % 4096, type, 24 + (type % 50) * 8);
      ntrw_event(w, &e);
    }
    ntrw_block_end(w);
    if (w->len - last_sp > 10u << 20) {
      ntrw_sp(w, ts, 0, 16, th, seq);
      last_sp = w->len;
      next_stack = 1;
    }
  }
  ntrw_end(w);
}

/* UTF-16LE of an ASCII string, with its NUL, at q: past it. */
static uint8_t *put_wstr(uint8_t *q, const char *s) {
  for (;; s++) {
    *q++ = (uint8_t)*s;
    *q++ = 0;
    if (!*s) return q;
  }
}

/* Async chains (`dntrace report`'s stitching under load): the driver thread awaits (TplEventSource
 * TaskWaitBegin) and one of 16 pool threads, waking from the pool's wait (ThreadPoolWorkerThreadWait),
 * runs the continuation (TaskWaitEnd) and is sampled counting primes under ExecutionContext
 * .RunInternal; every thread is sampled too. Each task id once: the activities come and go. */
static void generate_async(ntrw *w, size_t target) {
  ntrw_trace t = {1000, 1000000000, 8, 4343, 8, 1000000, NULL, 0};
  ntrw_md md[] = {
      {1, "Microsoft-DotNETCore-SampleProfiler", 0, "", 0, 0, 0, -1, NULL, 0, 0, 1},
      {2, "System.Threading.Tasks.TplEventSource", 10, "TaskWaitBegin", 3, 3, 4, -1, NULL, 0, 0, 1},
      {3, "System.Threading.Tasks.TplEventSource", 11, "TaskWaitEnd", 3, 0, 5, -1, NULL, 0, 0, 1},
      {4, "Microsoft-Windows-DotNETRuntime", 57, "", 0x10000, 0, 4, -1, NULL, 0, 0, 1},
      {5, "Microsoft-Windows-DotNETRuntime", 152, "", 0x8, 2, 4, -1, NULL, 0, 0, 1},
      {6, "Microsoft-Windows-DotNETRuntime", 143, "", 0x10, 1, 5, -1, NULL, 0, 0, 1},
  };
  /* methods, 0x100 each: the program's (module 1), the core library's (module 2) */
  static const struct { uint64_t module, start; const char *ns, *name; } methods[] = {
      {1, 0x1000, "Bench.Program", "Main"},        {1, 0x1100, "Bench.Work", "Outer"},
      {1, 0x1200, "Bench.Work+<Inner>d__1", "MoveNext"}, {1, 0x1300, "Bench.Work", "CountPrimes"},
      {2, 0x2000, "System.Threading.Tasks.TplEventSource", "TaskWaitBegin"},
      {2, 0x2100, "System.Threading.ExecutionContext", "RunInternal"},
      {2, 0x2200, "System.Threading.ThreadPoolWorkQueue", "Dispatch"},
  };
  static const uint64_t s_await[] = {0x2010, 0x1210, 0x1110, 0x1010}, s_work[] = {0x1310, 0x1220, 0x2110, 0x2210},
                        s_idle[] = {0x2220};
  const uint64_t *fp[3] = {s_await, s_work, s_idle};
  uint32_t nf[3] = {4, 4, 1}, seq[17] = {0}, task = 0;
  uint64_t ts = 1000, th[17];
  uint8_t p[512];
  size_t last_sp = 0;
  uint32_t next_stack = 1;
  for (int i = 0; i < 17; i++) th[i] = 40000 + (uint64_t)i; /* 0 the driver, then the pool */
  ntrw_init(w, 0);
  ntrw_trace_hdr(w, &t);
  ntrw_md_begin(w);
  for (int i = 0; i < 6; i++) ntrw_metadata(w, &md[i]);
  ntrw_block_end(w);
  ntrw_ev_begin(w, 1);
  for (uint64_t m = 1; m <= 2; m++) { /* the modules, then the methods */
    uint8_t *q = p;
    uint32_t zero = 0;
    uint64_t asm_id = 100 + m;
    memcpy(q, &m, 8), q += 8, memcpy(q, &asm_id, 8), q += 8, memcpy(q, &zero, 4), q += 4, memcpy(q, &zero, 4), q += 4;
    const char *path = m == 1 ? "/app/Bench.dll" : "/usr/share/dotnet/shared/Microsoft.NETCore.App/10.0.0/System.Private.CoreLib.dll";
    q = put_wstr(q, path), q = put_wstr(q, path);
    memset(q, 0, 2 + 16 + 4 + 2 + 16 + 4 + 2), q += 2 + 16 + 4 + 2 + 16 + 4 + 2;
    ntrw_ev e = {.metadata_id = 5, .seq = ++seq[0], .thread = th[0], .capture_thread = th[0], .proc = 0xffffffffu,
                 .ts = ts++, .payload = p, .payload_size = (uint32_t)(q - p)};
    ntrw_event(w, &e);
  }
  for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++) {
    uint8_t *q = p;
    uint64_t id = 1000 + i, size_flags = 0x100 | (8ull << 32) /* size, token 0 */, token_flags = 8;
    memcpy(q, &id, 8), q += 8, memcpy(q, &methods[i].module, 8), q += 8, memcpy(q, &methods[i].start, 8), q += 8;
    memcpy(q, &size_flags, 4), q += 4, memcpy(q, &token_flags, 4), q += 4, memcpy(q, &token_flags, 4), q += 4;
    q = put_wstr(q, methods[i].ns), q = put_wstr(q, methods[i].name), q = put_wstr(q, "void  ()");
    memset(q, 0, 2), q += 2;
    ntrw_ev e = {.metadata_id = 6, .seq = ++seq[0], .thread = th[0], .capture_thread = th[0], .proc = 0xffffffffu,
                 .ts = ts++, .payload = p, .payload_size = (uint32_t)(q - p)};
    ntrw_event(w, &e);
  }
  ntrw_block_end(w);
  while (w->len < target) {
    uint32_t base = next_stack;
    ntrw_stacks(w, next_stack, 3, fp, nf);
    next_stack += 3;
    ntrw_ev_begin(w, 1);
    size_t start = w->len;
    while (w->len - start < 100000) {
      int k = 1 + (int)(task % 16);
      uint32_t tpl[5] = {1, 0, ++task, 2, 0}, managed = 2, counts[3] = {1, 0, 0};
      struct { int thread; uint32_t md, stack; const void *payload; uint32_t size; } evs[] = {
          {0, 2, base, tpl, 20},      {k, 4, 0, counts, 10},       {k, 3, 0, tpl, 12},
          {k, 1, base + 1, &managed, 4}, {k, 1, base + 1, &managed, 4}, {0, 1, base, &managed, 4},
          {k, 1, base + 1, &managed, 4}, {k, 1, base + 2, &managed, 4},
      };
      for (size_t i = 0; i < sizeof evs / sizeof evs[0]; i++) {
        ntrw_ev e = {.metadata_id = evs[i].md, .seq = ++seq[evs[i].thread], .thread = th[evs[i].thread],
                     .capture_thread = th[evs[i].thread], .proc = 0xffffffffu, .stack_id = evs[i].stack,
                     .ts = ts += 20000, .payload = evs[i].payload, .payload_size = evs[i].size};
        ntrw_event(w, &e);
      }
    }
    ntrw_block_end(w);
    if (w->len - last_sp > 10u << 20) {
      ntrw_sp(w, ts, 0, 17, th, seq);
      last_sp = w->len;
      next_stack = 1;
    }
  }
  ntrw_end(w);
}

static void bench(const char *name, const uint8_t *buf, size_t len) {
  static const size_t chunks[] = {0, 65536};
  size_t c;
  for (c = 0; c < 2; c++) {
    double best = 1e9;
    int rep, rc = 0;
    struct sink s;
    ntr_stats st;
    for (rep = 0; rep < 3; rep++) {
      static const ntr_callbacks cb = {NULL, NULL, NULL, on_event, NULL, NULL, NULL, NULL};
      ntr_parser *p;
      size_t off = 0;
      double t0, dt;
      memset(&s, 0, sizeof(s));
      if (ntr_parser_new(&p, &cb, &s, NULL) < 0)
        return;
      t0 = now();
      while (off < len) {
        size_t n = chunks[c] ? chunks[c] : len;
        if (n > len - off)
          n = len - off;
        rc = ntr_parser_feed(p, buf + off, n);
        off += n;
        if (rc < 0)
          break;
      }
      rc = ntr_parser_finish(p);
      dt = now() - t0;
      if (dt < best)
        best = dt;
      ntr_parser_stats(p, &st);
      ntr_parser_free(p);
    }
    printf("ntr parse %-28s %s: %8.1f MB in %.3f s = %7.0f MB/s, %.1f M events/s (%llu events, "
           "finish %s)\n",
           name, chunks[c] ? "64KiB feeds" : "whole buffer", (double)len / 1e6, best,
           (double)len / 1e6 / best, (double)s.events / 1e6 / best,
           (unsigned long long)s.events, rc ? ntr_err_name(rc) : "ok");
  }
}

int main(int argc, char **argv) {
  struct rusage ru;
  int i;
  if (argc == 4 && (strcmp(argv[1], "--write") == 0 || strcmp(argv[1], "--write-allocs") == 0 ||
                    strcmp(argv[1], "--write-async") == 0)) {
    ntrw w;
    if (strcmp(argv[1], "--write") == 0)
      generate(&w, (size_t)atol(argv[3]) << 20);
    else if (strcmp(argv[1], "--write-async") == 0)
      generate_async(&w, (size_t)atol(argv[3]) << 20);
    else
      generate_allocs(&w, (size_t)atol(argv[3]) << 20);
    FILE *f = fopen(argv[2], "wb");
    if (!f || fwrite(w.buf, 1, w.len, f) != w.len || fclose(f) != 0) {
      perror(argv[2]);
      return 1;
    }
    printf("wrote a %.1f MB synthetic trace to %s\n", (double)w.len / 1e6, argv[2]);
    ntrw_release(&w);
    return 0;
  }
  if (argc > 1) {
    for (i = 1; i < argc; i++) {
      FILE *f = fopen(argv[i], "rb");
      uint8_t *b;
      long n;
      if (!f) {
        perror(argv[i]);
        return 1;
      }
      fseek(f, 0, SEEK_END);
      n = ftell(f);
      fseek(f, 0, SEEK_SET);
      b = malloc((size_t)n + 1);
      if (!b || fread(b, 1, (size_t)n, f) != (size_t)n) {
        fprintf(stderr, "cannot read %s\n", argv[i]);
        return 1;
      }
      fclose(f);
      bench(argv[i], b, (size_t)n);
      free(b);
    }
  } else {
    ntrw w;
    double t0 = now();
    generate(&w, 256u << 20);
    printf("generated a %.1f MB synthetic V4 trace in %.2f s\n", (double)w.len / 1e6, now() - t0);
    getrusage(RUSAGE_SELF, &ru);
    printf("peak RSS after generating: %ld MB\n", ru.ru_maxrss / 1024);
    bench("(synthetic)", w.buf, w.len);
    ntrw_release(&w);
  }
  getrusage(RUSAGE_SELF, &ru);
  printf("peak RSS: %ld MB (input buffer included)\n", ru.ru_maxrss / 1024);
  return 0;
}
