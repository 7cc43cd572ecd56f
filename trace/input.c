/* trace-input.c: a trace file (plain, gzip or zip) streamed into the nettrace parser in
 * DNT_TRACE_CHUNK pieces. Every size read from a zip header is checked against the file's size
 * before it is used; the member is inflated as it is read, never held whole. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "dnt-trace.h"

struct reader {
  char name[300];     /* "'path'" or "standard input", for messages */
  int fd;
  ntr_parser *p;
  int prc;            /* result of the last ntr_parser_feed */
  uint64_t fed;       /* bytes handed to the parser */
  uint8_t head[8];    /* the stream's first bytes, to tell "not a trace" from "cut short" */
  size_t nhead;
  uint8_t *buf;       /* DNT_TRACE_CHUNK bytes of parser input */
  uint8_t *zbuf;      /* DNT_TRACE_CHUNK bytes of compressed input */
  int io_errno;       /* read(2) failed */
  int cut;            /* the compressed data ends before its end */
  char bad[300];      /* the container is damaged (CRC, deflate data); "" if not */
  char fatal[300];    /* the container cannot be read at all; "" if not */
};

static void setmsg(char *dst, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void setmsg(char *dst, size_t cap, const char *fmt, ...) {
  va_list ap;
  if (!dst || !cap) return;
  va_start(ap, fmt);
  vsnprintf(dst, cap, fmt, ap);
  va_end(ap);
}

/* Feeds n bytes; returns nonzero when the parser wants no more (end marker, error, stop). */
static int feed(struct reader *r, const uint8_t *d, size_t n) {
  if (r->nhead < sizeof r->head) {
    size_t k = sizeof r->head - r->nhead < n ? sizeof r->head - r->nhead : n;
    memcpy(r->head + r->nhead, d, k);
    r->nhead += k;
  }
  r->fed += n;
  r->prc = ntr_parser_feed(r->p, d, n);
  return r->prc != 0;
}

static uint16_t le16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t le32(const uint8_t *p) { return (uint32_t)le16(p) | (uint32_t)le16(p + 2) << 16; }

/* pread of exactly n bytes; 0, or -1 with io_errno / fatal set. */
static int read_at(struct reader *r, void *dst, size_t n, uint64_t off) {
  size_t got = 0;
  while (got < n) {
    ssize_t k = pread(r->fd, (uint8_t *)dst + got, n - got, (off_t)(off + got));
    if (k < 0 && errno == EINTR) continue;
    if (k < 0) {
      r->io_errno = errno;
      return -1;
    }
    if (k == 0) {
      setmsg(r->fatal, sizeof r->fatal, "%s shrank while being read", r->name);
      return -1;
    }
    got += (size_t)k;
  }
  return 0;
}

/* ---- plain and gzip: zlib's gzread, which passes non-gzip data through unchanged ---------- */

static void read_gz(struct reader *r) {
  int fd = dup(r->fd);
  if (fd < 0) {
    r->io_errno = errno;
    return;
  }
  gzFile gz = gzdopen(fd, "rb");
  if (!gz) {
    close(fd);
    r->io_errno = ENOMEM;
    return;
  }
  gzbuffer(gz, DNT_TRACE_CHUNK);
  for (;;) {
    int n = gzread(gz, r->buf, DNT_TRACE_CHUNK);
    if (n > 0) {
      if (r->fed == 0 && n >= 4 && memcmp(r->buf, "PK\3\4", 4) == 0) {
        setmsg(r->fatal, sizeof r->fatal, "%s is a zip archive: it must be a seekable file to be read", r->name);
        break;
      }
      if (feed(r, r->buf, (size_t)n)) break;
      continue;
    }
    /* a cut gzip stream is Z_BUF_ERROR, which gzread may report only through gzerror after
     * returning 0 */
    int zerr;
    const char *msg = gzerror(gz, &zerr);
    if (n == 0 && zerr == Z_OK) break;
    if (zerr == Z_ERRNO)
      r->io_errno = errno ? errno : EIO;
    else if (zerr == Z_BUF_ERROR)
      r->cut = 1; /* "unexpected end of file" */
    else
      setmsg(r->bad, sizeof r->bad, "%s: bad gzip data after %llu bytes: %s", r->name, (unsigned long long)r->fed,
             msg);
    break;
  }
  gzclose_r(gz);
}

/* ---- zip: the central directory names the member; its data is streamed from the local header */

struct zip_member {
  unsigned alike;   /* members of the chosen kind (.nettrace or .netperf), the chosen one included */
  char other[256];  /* the second of them, for the note */
  char name[256]; /* cut to fit; for messages */
  uint16_t flags, method;
  uint32_t crc, csize, usize, local;
};

static int ends_with(const char *s, size_t n, const char *suffix) {
  size_t k = strlen(suffix);
  return n >= k && strncasecmp(s + n - k, suffix, k) == 0;
}

#define ZIP_EOCD 22
#define ZIP_CDH 46
#define ZIP_LFH 30

/* Finds the member to read: the first *.nettrace, else the first *.netperf. 0 or -1 (fatal). */
static int zip_find(struct reader *r, uint64_t base, uint64_t size, struct zip_member *m, uint64_t *cd_end_out) {
  if (size < ZIP_EOCD) {
    setmsg(r->fatal, sizeof r->fatal, "%s is not a zip archive (too short)", r->name);
    return -1;
  }
  size_t tail = size < ZIP_EOCD + 0xffff ? (size_t)size : ZIP_EOCD + 0xffff;
  uint8_t *t = malloc(tail);
  if (!t) {
    r->io_errno = ENOMEM;
    return -1;
  }
  int rc = -1;
  if (read_at(r, t, tail, base + size - tail) < 0) goto out;
  size_t i = tail - ZIP_EOCD + 1, at = (size_t)-1;
  while (i-- > 0) {
    if (le32(t + i) == 0x06054b50 && i + ZIP_EOCD + le16(t + i + 20) <= tail) {
      at = i;
      break;
    }
  }
  if (at == (size_t)-1) {
    setmsg(r->fatal, sizeof r->fatal, "%s is not a zip archive (no end of central directory)", r->name);
    goto out;
  }
  uint64_t eocd = size - tail + at;
  uint32_t entries = le16(t + at + 10), cd_size = le32(t + at + 12), cd_off = le32(t + at + 16);
  if (entries == 0xffff || cd_size == 0xffffffffu || cd_off == 0xffffffffu) {
    setmsg(r->fatal, sizeof r->fatal, "%s: zip64 archives are not supported", r->name);
    goto out;
  }
  if ((uint64_t)cd_off + cd_size > eocd) {
    setmsg(r->fatal, sizeof r->fatal, "%s: the zip central directory (%u bytes at %u) lies outside the file",
           r->name, cd_size, cd_off);
    goto out;
  }
  uint64_t pos = cd_off, cd_end = (uint64_t)cd_off + cd_size;
  int found = 0; /* 2: a .nettrace, 1: a .netperf */
  m->alike = 0;
  m->other[0] = '\0';
  for (uint32_t k = 0; k < entries; k++) {
    uint8_t h[ZIP_CDH];
    char nm[256];
    if (pos + ZIP_CDH > cd_end) break;
    if (read_at(r, h, ZIP_CDH, base + pos) < 0) goto out;
    if (le32(h) != 0x02014b50) {
      setmsg(r->fatal, sizeof r->fatal, "%s: bad zip central directory entry at byte %llu", r->name,
             (unsigned long long)pos);
      goto out;
    }
    uint16_t nlen = le16(h + 28);
    uint64_t next = pos + ZIP_CDH + nlen + le16(h + 30) + le16(h + 32);
    if (next > cd_end) {
      setmsg(r->fatal, sizeof r->fatal, "%s: zip central directory entry %u runs past the directory", r->name, k);
      goto out;
    }
    /* only the name's end matters for the choice; keep its last 255 bytes */
    size_t keep = nlen < sizeof nm - 1 ? nlen : sizeof nm - 1;
    if (read_at(r, nm, keep, base + pos + ZIP_CDH + nlen - keep) < 0) goto out;
    nm[keep] = '\0';
    int kind = ends_with(nm, keep, ".nettrace") ? 2 : ends_with(nm, keep, ".netperf") ? 1 : 0;
    if (kind && kind == found && m->alike++ == 1) snprintf(m->other, sizeof m->other, "%s", nm);
    if (kind > found) {
      found = kind;
      m->alike = 1;
      m->other[0] = '\0';
      snprintf(m->name, sizeof m->name, "%s", nm);
      m->flags = le16(h + 8);
      m->method = le16(h + 10);
      m->crc = le32(h + 16);
      m->csize = le32(h + 20);
      m->usize = le32(h + 24);
      m->local = le32(h + 42);
    }
    pos = next;
  }
  if (!found) {
    setmsg(r->fatal, sizeof r->fatal, "%s: the zip archive has no .nettrace member", r->name);
    goto out;
  }
  *cd_end_out = cd_off;
  rc = 0;
out:
  free(t);
  return rc;
}

static void read_zip(struct reader *r, uint64_t base, uint64_t size) {
  struct zip_member m;
  uint64_t cd_off;
  if (zip_find(r, base, size, &m, &cd_off) < 0) return;
  if (m.flags & 1) {
    setmsg(r->fatal, sizeof r->fatal, "%s: zip member '%s' is encrypted", r->name, m.name);
    return;
  }
  if (m.method != 0 && m.method != 8) {
    setmsg(r->fatal, sizeof r->fatal, "%s: zip member '%s' uses compression method %u (only stored and deflated are read)",
           r->name, m.name, m.method);
    return;
  }
  if (m.csize == 0xffffffffu || m.usize == 0xffffffffu || m.local == 0xffffffffu) {
    setmsg(r->fatal, sizeof r->fatal, "%s: zip64 archives are not supported", r->name);
    return;
  }
  uint8_t lh[ZIP_LFH];
  if ((uint64_t)m.local + ZIP_LFH > cd_off) {
    setmsg(r->fatal, sizeof r->fatal, "%s: zip local header of '%s' at byte %u lies outside the file", r->name, m.name,
           m.local);
    return;
  }
  if (read_at(r, lh, sizeof lh, base + m.local) < 0) return;
  if (le32(lh) != 0x04034b50) {
    setmsg(r->fatal, sizeof r->fatal, "%s: bad zip local header for '%s' at byte %u", r->name, m.name, m.local);
    return;
  }
  uint64_t data = (uint64_t)m.local + ZIP_LFH + le16(lh + 26) + le16(lh + 28);
  if (data + m.csize > cd_off) {
    setmsg(r->fatal, sizeof r->fatal, "%s: zip member '%s' (%u bytes at byte %llu) runs past the end of its data",
           r->name, m.name, m.csize, (unsigned long long)data);
    return;
  }
  if (m.method == 0 && m.csize != m.usize) {
    setmsg(r->fatal, sizeof r->fatal, "%s: stored zip member '%s' has different sizes (%u, %u)", r->name, m.name,
           m.csize, m.usize);
    return;
  }

  uLong crc = crc32(0, NULL, 0);
  uint64_t left = m.csize, pos = data, out = 0;
  int stopped = 0;
  if (m.method == 0) {
    while (left && !stopped) {
      size_t n = left < DNT_TRACE_CHUNK ? (size_t)left : DNT_TRACE_CHUNK;
      if (read_at(r, r->buf, n, base + pos) < 0) return;
      pos += n;
      left -= n;
      crc = crc32(crc, r->buf, (uInt)n);
      out += n;
      stopped = feed(r, r->buf, n);
    }
  } else {
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    if (inflateInit2(&zs, -MAX_WBITS) != Z_OK) {
      r->io_errno = ENOMEM;
      return;
    }
    int zrc = Z_OK;
    while (!stopped) {
      if (zs.avail_in == 0 && left) {
        size_t n = left < DNT_TRACE_CHUNK ? (size_t)left : DNT_TRACE_CHUNK;
        if (read_at(r, r->zbuf, n, base + pos) < 0) break;
        pos += n;
        left -= n;
        zs.next_in = r->zbuf;
        zs.avail_in = (uInt)n;
      }
      zs.next_out = r->buf;
      zs.avail_out = DNT_TRACE_CHUNK;
      zrc = inflate(&zs, Z_NO_FLUSH);
      size_t produced = DNT_TRACE_CHUNK - zs.avail_out;
      if (produced) {
        crc = crc32(crc, r->buf, (uInt)produced);
        out += produced;
        stopped = feed(r, r->buf, produced);
      }
      if (zrc == Z_STREAM_END) break;
      if (zrc == Z_BUF_ERROR && zs.avail_in == 0 && left == 0) {
        r->cut = 1;
        break;
      }
      if (zrc == Z_MEM_ERROR) {
        r->io_errno = ENOMEM;
        break;
      }
      if (zrc != Z_OK && zrc != Z_BUF_ERROR) {
        setmsg(r->bad, sizeof r->bad, "%s: zip member '%s' has bad deflate data after %llu bytes%s%s", r->name, m.name,
               (unsigned long long)out, zs.msg ? ": " : "", zs.msg ? zs.msg : "");
        break;
      }
    }
    inflateEnd(&zs);
    if (stopped || zrc != Z_STREAM_END) return;
  }
  if (stopped) return;
  if (out != m.usize || crc != m.crc)
    setmsg(r->bad, sizeof r->bad, "%s: zip member '%s' fails its %s check", r->name, m.name,
           out != m.usize ? "size" : "CRC");
}

/* ---- the verdict ------------------------------------------------------------------------ */

/* "byte N: what" -> "what"; the offset is said in our own words. */
static const char *after_offset(const char *msg) {
  if (strncmp(msg, "byte ", 5) == 0) {
    const char *c = strstr(msg, ": ");
    if (c) return c + 2;
  }
  return msg;
}

static int looks_like_start(const struct reader *r) {
  static const uint8_t v4[8] = "Nettrace", netperf[8] = {0x14, 0, 0, 0, '!', 'F', 'a', 's'};
  return memcmp(r->head, v4, r->nhead) == 0 || memcmp(r->head, netperf, r->nhead) == 0;
}

static int verdict(struct reader *r, char *err, size_t errlen) {
  if (r->io_errno) {
    setmsg(err, errlen, "cannot read %s: %s", r->name, strerror(r->io_errno));
    return -1;
  }
  if (r->fatal[0]) {
    setmsg(err, errlen, "%s", r->fatal);
    return -1;
  }
  const int have_header = ntr_parser_trace(r->p) != NULL;
  int prc = r->prc;
  if (prc == NTR_EOF) {
    if (r->bad[0]) {
      setmsg(err, errlen, "%s", r->bad);
      return DNT_TRACE_DAMAGED;
    }
    return DNT_TRACE_COMPLETE;
  }
  if (prc == NTR_ESTOPPED) return DNT_TRACE_STOPPED;
  if (prc == 0) {
    if (r->fed == 0 && !r->bad[0]) {
      setmsg(err, errlen, "%s is empty: not a nettrace file", r->name);
      return -1;
    }
    prc = ntr_parser_finish(r->p);
    if (prc == 0) return DNT_TRACE_COMPLETE;
  }
  const char *msg = ntr_parser_errmsg(r->p);
  if (r->bad[0]) {
    /* the compressed data went wrong first; the parser's complaint is only its consequence */
    setmsg(err, errlen, "%s", r->bad);
    return have_header ? DNT_TRACE_DAMAGED : -1;
  }
  if (!have_header) {
    if (prc == NTR_EUNSUPPORTED)
      setmsg(err, errlen, "%s: %s", r->name, after_offset(msg));
    else if (!looks_like_start(r))
      setmsg(err, errlen, "%s is not a nettrace file", r->name);
    else if (prc == NTR_ETRUNCATED)
      setmsg(err, errlen, "%s is truncated at byte %llu, before its trace header", r->name,
             (unsigned long long)r->fed);
    else
      setmsg(err, errlen, "%s is not a readable trace: %s", r->name, msg);
    return -1;
  }
  if (prc == NTR_ETRUNCATED) {
    setmsg(err, errlen, "%s is %s%s", r->name, after_offset(msg), r->cut ? " (the compressed data ends early)" : "");
    return DNT_TRACE_TRUNCATED;
  }
  if (prc == NTR_ENOMEM) {
    setmsg(err, errlen, "%s: out of memory", r->name);
    return -1;
  }
  /* not damaged: well formed perhaps, but it asks for more memory than the parser allows */
  if (prc == NTR_ELIMIT) {
    setmsg(err, errlen, "%s goes past a reader limit at %s", r->name, msg);
    return DNT_TRACE_DAMAGED;
  }
  setmsg(err, errlen, "%s is damaged at %s", r->name, msg);
  return DNT_TRACE_DAMAGED;
}

int dnt_trace_zip_note(const char *path, char *note, size_t cap) {
  struct reader r;
  struct zip_member m;
  uint64_t cd_off;
  int rc = 0;
  if (note && cap) note[0] = '\0';
  if (strcmp(path, "-") == 0) return 0;
  memset(&r, 0, sizeof r);
  snprintf(r.name, sizeof r.name, "'%s'", path);
  r.fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (r.fd < 0) return 0;
  struct stat st;
  uint8_t magic[4];
  if (fstat(r.fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < 4 || pread(r.fd, magic, 4, 0) != 4 ||
      memcmp(magic, "PK\3\4", 4) != 0)
    goto out;
  if (zip_find(&r, 0, (uint64_t)st.st_size, &m, &cd_off) < 0 || m.alike < 2) goto out;
  setmsg(note, cap, "%s holds %u %s members: reading '%s', the first (not '%s'%s)", r.name, m.alike,
         ends_with(m.name, strlen(m.name), ".netperf") ? ".netperf" : ".nettrace", m.name, m.other,
         m.alike > 2 ? " and the others" : "");
  rc = 1;
out:
  close(r.fd);
  return rc;
}

/* How many times this process opened a trace: a command that reads each trace once is checked
 * through it (dnt_trace_opens). */
static unsigned trace_opens;

unsigned dnt_trace_opens(void) { return trace_opens; }

int dnt_trace_read(const char *path, const ntr_callbacks *cb, void *ud, ntr_stats *stats, char *err,
                   size_t errlen) {
  struct reader r;
  int rc = -1;
  memset(&r, 0, sizeof r);
  r.fd = -1;
  if (err && errlen) err[0] = '\0';
  if (stats) memset(stats, 0, sizeof *stats);
  int is_stdin = strcmp(path, "-") == 0;
  if (is_stdin)
    snprintf(r.name, sizeof r.name, "standard input");
  else
    snprintf(r.name, sizeof r.name, "'%s'", path);

  trace_opens++;
  /* O_NONBLOCK: opening a FIFO nobody writes to would wait forever; a named input must be a
   * regular file (a pipe or terminal comes in as "-") */
  r.fd = is_stdin ? 0 : open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (r.fd < 0) {
    setmsg(err, errlen, "cannot open %s: %s", r.name, strerror(errno));
    return -1;
  }
  struct stat st;
  if (fstat(r.fd, &st) != 0) {
    setmsg(err, errlen, "cannot read %s: %s", r.name, strerror(errno));
    goto out;
  }
  if (S_ISDIR(st.st_mode)) {
    setmsg(err, errlen, "cannot read %s: %s", r.name, strerror(EISDIR));
    goto out;
  }
  if (!is_stdin && !S_ISREG(st.st_mode)) {
    setmsg(err, errlen, "cannot read %s: not a regular file (give a pipe as '-', on standard input)", r.name);
    goto out;
  }
  if (!is_stdin) {
    int fl = fcntl(r.fd, F_GETFL);
    if (fl >= 0) fcntl(r.fd, F_SETFL, fl & ~O_NONBLOCK);
  }
  r.buf = malloc(DNT_TRACE_CHUNK);
  r.zbuf = malloc(DNT_TRACE_CHUNK);
  if (!r.buf || !r.zbuf || ntr_parser_new(&r.p, cb, ud, NULL) != 0) {
    setmsg(err, errlen, "out of memory");
    goto out;
  }

  uint8_t magic[4];
  off_t here = S_ISREG(st.st_mode) ? lseek(r.fd, 0, SEEK_CUR) : -1;
  if (here >= 0 && st.st_size - here >= 4 && pread(r.fd, magic, 4, here) == 4 && memcmp(magic, "PK\3\4", 4) == 0)
    read_zip(&r, (uint64_t)here, (uint64_t)(st.st_size - here));
  else
    read_gz(&r);
  rc = verdict(&r, err, errlen);
  if (stats) ntr_parser_stats(r.p, stats);
out:
  ntr_parser_free(r.p);
  free(r.buf);
  free(r.zbuf);
  if (!is_stdin && r.fd >= 0) close(r.fd);
  return rc;
}
