#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nt-scan.h"

struct cur {
  const uint8_t *p;
  size_t len, off;
  int bad;
};

static int need(struct cur *c, size_t n) {
  if (c->bad || c->len - c->off < n) {
    c->bad = 1;
    return 0;
  }
  return 1;
}
static uint32_t u32(struct cur *c) {
  if (!need(c, 4)) return 0;
  const uint8_t *b = c->p + c->off;
  c->off += 4;
  return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}
static uint8_t u8(struct cur *c) { return need(c, 1) ? c->p[c->off++] : 0; }
static uint64_t varu(struct cur *c) {
  uint64_t v = 0;
  for (int shift = 0; shift < 70; shift += 7) {
    uint8_t b = u8(c);
    v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) return v;
  }
  c->bad = 1;
  return 0;
}
static void skip(struct cur *c, size_t n) {
  if (need(c, n)) c->off += n;
}

static void provider_of(struct cur *c, char *out, size_t cap) {
  size_t k = 0;
  for (;;) {
    if (!need(c, 2)) return;
    uint16_t ch = (uint16_t)(c->p[c->off] | c->p[c->off + 1] << 8);
    c->off += 2;
    if (!ch) break;
    if (k + 1 < cap) out[k++] = ch < 128 ? (char)ch : '?';
  }
  out[k] = '\0';
}

static int has_needle(const struct nt_scan *s, const uint8_t *p, size_t n) {
  size_t k = strlen(s->needle);
  if (!k || n < 2 * k) return 0;
  for (size_t i = 0; i + 2 * k <= n; i++) {
    size_t j = 0;
    while (j < k && p[i + 2 * j] == (uint8_t)s->needle[j] && p[i + 2 * j + 1] == 0) j++;
    if (j == k) return 1;
  }
  return 0;
}

static void count(struct nt_scan *s, uint32_t meta_id, uint64_t thread, uint64_t ts, int hit) {
  const char *prov = "?";
  uint32_t ev = 0;
  for (int i = 0; i < s->nmeta; i++)
    if (s->meta[i].id == meta_id) prov = s->meta[i].provider, ev = s->meta[i].event_id;
  s->events++;
  uint64_t inside = s->window_hi && ts >= s->window_lo && ts <= s->window_hi;
  for (int i = 0; i < s->ncounts; i++)
    if (s->counts[i].thread == thread && s->counts[i].event_id == ev && strcmp(s->counts[i].provider, prov) == 0) {
      s->counts[i].count++;
      s->counts[i].in_window += inside;
      s->counts[i].needle_hits += (uint64_t)hit;
      if (ts < s->counts[i].first_ts) s->counts[i].first_ts = ts;
      if (ts > s->counts[i].last_ts) s->counts[i].last_ts = ts;
      return;
    }
  if (s->ncounts == (int)(sizeof s->counts / sizeof s->counts[0])) return;
  snprintf(s->counts[s->ncounts].provider, sizeof s->counts[0].provider, "%s", prov);
  s->counts[s->ncounts].event_id = ev;
  s->counts[s->ncounts].thread = thread;
  s->counts[s->ncounts].count = 1;
  s->counts[s->ncounts].in_window = inside;
  s->counts[s->ncounts].needle_hits = (uint64_t)hit;
  s->counts[s->ncounts].first_ts = s->counts[s->ncounts].last_ts = ts;
  s->ncounts++;
}

/* A metadata record's id, provider and event id, kept while there is room. */
static void add_metadata(struct nt_scan *s, const uint8_t *p, size_t n) {
  if (s->nmeta >= NT_SCAN_MAX) return;
  struct cur m = {p, n, 0, 0};
  s->meta[s->nmeta].id = u32(&m);
  provider_of(&m, s->meta[s->nmeta].provider, sizeof s->meta[0].provider);
  s->meta[s->nmeta].event_id = u32(&m);
  if (!m.bad) s->nmeta++;
}

/* Event or metadata blobs with header compression; the state resets per block. */
static void scan_blobs(struct nt_scan *s, struct cur *c, size_t end, int is_meta) {
  uint32_t meta = 0, payload = 0;
  uint64_t thread = 0, ts = 0; /* the timestamp: a delta from the block's previous event */
  while (c->off < end && !c->bad) {
    uint8_t flags = u8(c);
    if (flags & 0x01) meta = (uint32_t)varu(c);
    if (flags & 0x02) varu(c), varu(c), varu(c);
    if (flags & 0x04) thread = varu(c);
    if (flags & 0x08) varu(c);
    ts += varu(c);
    if (flags & 0x10) skip(c, 16);
    if (flags & 0x20) skip(c, 16);
    if (flags & 0x80) payload = (uint32_t)varu(c);
    if (c->bad || payload > end - c->off) {
      c->bad = 1;
      return;
    }
    if (is_meta) add_metadata(s, c->p + c->off, payload);
    else count(s, meta, thread, ts, has_needle(s, c->p + c->off, payload));
    c->off += payload;
  }
}

/* NetPerf V3's events: no block header, each row its own size, metadata records among them
 * (metadata id 0), then the payload and the event's stack (skipped with the rest of the row). */
static void scan_v3(struct nt_scan *s, struct cur *c, size_t end) {
  while (c->off < end && !c->bad) {
    size_t row = c->off;
    uint32_t size = u32(c), meta = u32(c), thread = u32(c);
    uint64_t ts = (uint64_t)u32(c);
    ts |= (uint64_t)u32(c) << 32;
    skip(c, 32);
    uint32_t payload = u32(c);
    if (c->bad || size < 52 || size > end - row - 4 || payload > size - 52) {
      c->bad = 1;
      return;
    }
    if (meta == 0) add_metadata(s, c->p + c->off, payload);
    else count(s, meta, thread, ts, has_needle(s, c->p + c->off, payload));
    c->off = row + 4 + size;
  }
}

void nt_scan(const uint8_t *p, size_t len, struct nt_scan *s) {
  char needle[sizeof s->needle];
  memcpy(needle, s->needle, sizeof needle);
  uint64_t lo = s->window_lo, hi = s->window_hi;
  memset(s, 0, sizeof *s);
  memcpy(s->needle, needle, sizeof needle);
  s->window_lo = lo;
  s->window_hi = hi;
  struct cur c = {p, len, 0, 0};
  static const char magic[] = "Nettrace\x14\0\0\0!FastSerialization.1";
  /* NetPerf (.NET Core 2.x): the FastSerialization header alone, objects begun by tag 4 */
  int netperf = len >= 24 && memcmp(p, magic + 8, 24) == 0;
  if (!netperf && (len < 32 || memcmp(p, magic, 32) != 0)) {
    snprintf(s->problem, sizeof s->problem, "no Nettrace/FastSerialization header");
    return;
  }
  s->magic_ok = 1;
  c.off = netperf ? 24 : 32;
  const uint8_t begin = netperf ? 0x04 : 0x05;
  for (;;) {
    size_t obj_start = c.off;
    uint8_t tag = u8(&c);
    if (c.bad) break;
    if (tag == 0x01) {
      s->complete = c.off == len;
      if (!s->complete) snprintf(s->problem, sizeof s->problem, "bytes after the end tag");
      s->stopped_at = c.off;
      return;
    }
    if (tag != begin || u8(&c) != begin || u8(&c) != 0x01) {
      if (!c.bad) snprintf(s->problem, sizeof s->problem, "bad object tag at %zu", obj_start);
      c.bad = 1;
      break;
    }
    skip(&c, 8);
    uint32_t name_len = u32(&c);
    if (name_len > 64 || !need(&c, name_len)) {
      c.bad = 1;
      break;
    }
    char name[65];
    memcpy(name, p + c.off, name_len);
    name[name_len] = '\0';
    c.off += name_len;
    if (u8(&c) != 0x06) c.bad = 1;
    if (c.bad) break;
    if (strcmp(name, "Trace") == 0) {
      if (!need(&c, 48)) break;
      for (int i = 0; i < 8; i++) s->start_time[i] = (uint16_t)(p[c.off + 2 * i] | p[c.off + 2 * i + 1] << 8);
      s->pointer_size = (uint32_t)(p[c.off + 32] | p[c.off + 33] << 8);
      for (int i = 7; i >= 0; i--) s->qpc_frequency = s->qpc_frequency << 8 | p[c.off + 24 + i];
      s->sampling_ns = (uint32_t)p[c.off + 44] | (uint32_t)p[c.off + 45] << 8 | (uint32_t)p[c.off + 46] << 16 |
                       (uint32_t)p[c.off + 47] << 24;
      c.off += 48;
      s->trace_objects++;
    } else {
      uint32_t size = u32(&c);
      skip(&c, (4 - (c.off & 3)) & 3);
      if (c.bad || size > len - c.off) {
        c.bad = 1;
        break;
      }
      size_t end = c.off + size;
      int is_event = strcmp(name, "EventBlock") == 0, is_meta = strcmp(name, "MetadataBlock") == 0;
      if (is_event && netperf) {
        struct cur h = c;
        scan_v3(s, &h, end);
        if (h.bad) {
          snprintf(s->problem, sizeof s->problem, "bad event data in %s at %zu", name, h.off);
          c.bad = 1;
          break;
        }
      } else if (is_event || is_meta) {
        struct cur h = c;
        uint16_t header_size = (uint16_t)(p[c.off] | p[c.off + 1] << 8);
        uint16_t flags = (uint16_t)(p[c.off + 2] | p[c.off + 3] << 8);
        if (header_size < 4 || header_size > size || !(flags & 1)) {
          snprintf(s->problem, sizeof s->problem, "unexpected block header in %s at %zu", name, c.off);
          c.bad = 1;
          break;
        }
        h.off += header_size;
        scan_blobs(s, &h, end, is_meta);
        if (h.bad) {
          snprintf(s->problem, sizeof s->problem, "bad event data in %s at %zu", name, h.off);
          c.bad = 1;
          break;
        }
      }
      c.off = end;
      s->blocks++;
    }
    if (u8(&c) != 0x06) c.bad = 1;
    if (c.bad) break;
  }
  s->stopped_at = c.off;
  if (!s->problem[0]) snprintf(s->problem, sizeof s->problem, "truncated at %zu of %zu bytes", c.off, len);
}

int nt_scan_file(const char *path, struct nt_scan *out) {
  FILE *fp = fopen(path, "rb");
  if (!fp) return -1;
  fseek(fp, 0, SEEK_END);
  long n = ftell(fp);
  fseek(fp, 0, SEEK_SET);
  uint8_t *buf = malloc(n > 0 ? (size_t)n : 1);
  size_t got = buf ? fread(buf, 1, (size_t)n, fp) : 0;
  fclose(fp);
  if (!buf || got != (size_t)n) {
    free(buf);
    return -1;
  }
  nt_scan(buf, got, out);
  free(buf);
  return 0;
}

uint64_t nt_scan_count(const struct nt_scan *s, const char *provider, long event_id, uint64_t thread) {
  uint64_t n = 0;
  for (int i = 0; i < s->ncounts; i++)
    if (strcmp(s->counts[i].provider, provider) == 0 && (event_id < 0 || s->counts[i].event_id == (uint32_t)event_id) &&
        (thread == 0 || s->counts[i].thread == thread))
      n += s->counts[i].count;
  return n;
}

uint64_t nt_scan_count_in_window(const struct nt_scan *s, const char *provider, long event_id, uint64_t thread) {
  uint64_t n = 0;
  for (int i = 0; i < s->ncounts; i++)
    if (strcmp(s->counts[i].provider, provider) == 0 && (event_id < 0 || s->counts[i].event_id == (uint32_t)event_id) &&
        (thread == 0 || s->counts[i].thread == thread))
      n += s->counts[i].in_window;
  return n;
}

double nt_scan_spans_ms(const struct nt_scan *s, const char *provider, uint32_t event_id) {
  double ms = 0;
  for (int i = 0; i < s->ncounts; i++)
    if (strcmp(s->counts[i].provider, provider) == 0 && s->counts[i].event_id == event_id && s->qpc_frequency)
      ms += (double)(s->counts[i].last_ts - s->counts[i].first_ts) * 1000.0 / (double)s->qpc_frequency;
  return ms;
}

uint64_t nt_scan_needle_hits(const struct nt_scan *s, const char *provider, long event_id) {
  uint64_t n = 0;
  for (int i = 0; i < s->ncounts; i++)
    if (strcmp(s->counts[i].provider, provider) == 0 && (event_id < 0 || s->counts[i].event_id == (uint32_t)event_id))
      n += s->counts[i].needle_hits;
  return n;
}

size_t nt_scan_sample_threads(const struct nt_scan *s, struct nt_scan_thread *out, size_t cap) {
  size_t n = 0;
  for (int i = 0; i < s->ncounts; i++) {
    const char *prov = s->counts[i].provider;
    uint32_t id = s->counts[i].event_id;
    int sample = strcmp(prov, "Microsoft-DotNETCore-SampleProfiler") == 0 && id == 0;
    int alloc = strcmp(prov, "Microsoft-Windows-DotNETRuntime") == 0 && (id == 10 || id == 20 || id == 32);
    if (!sample && !alloc) continue;
    size_t k = 0;
    while (k < n && out[k].thread != s->counts[i].thread) k++;
    if (k == n) {
      if (n == cap) continue;
      out[n++] = (struct nt_scan_thread){s->counts[i].thread, 0, s->counts[i].first_ts, s->counts[i].last_ts};
    }
    out[k].count += s->counts[i].count;
    if (s->counts[i].first_ts < out[k].first_ts) out[k].first_ts = s->counts[i].first_ts;
    if (s->counts[i].last_ts > out[k].last_ts) out[k].last_ts = s->counts[i].last_ts;
  }
  return n;
}
