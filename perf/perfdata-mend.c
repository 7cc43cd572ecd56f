/* A perf.data cut short (a full disk, a copy stopped, a machine that went down while perf wrote):
 * its header claims records past the end of the file, and perf script then reads zeros as records
 * and fails without printing one sample. The mended copy keeps every whole record, says so in its
 * header, and leaves out the feature sections (they followed the data, and are gone). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dnt-perf.h"

#define HEADER_SIZE 104
#define WINDOW (1u << 20)

static uint64_t u64_at(const uint8_t *p) {
  uint64_t v;
  memcpy(&v, p, 8);
  return v;
}

/* Up to n bytes at off; how many were read (fewer at the end of the file), -1 on an error. */
static ssize_t read_some(int fd, uint8_t *b, size_t n, uint64_t off) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = pread(fd, b + got, n - got, (off_t)(off + got));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -1;
    if (r == 0) break;
    got += (size_t)r;
  }
  return (ssize_t)got;
}

/* Where the whole records of [off, len) end: each begins with its perf_event_header (type u32,
 * misc u16, size u16), size counting the header. -1 when the file cannot be read. */
static int64_t whole_records_end(int fd, uint8_t *win, uint64_t off, uint64_t len) {
  uint64_t at = off, base = 0;
  ssize_t have = 0;
  while (at + 8 <= len) {
    if (at < base || at + 8 > base + (uint64_t)have) { /* the next header is not in the window */
      base = at;
      if ((have = read_some(fd, win, WINDOW, base)) < 0) return -1;
      if ((uint64_t)have < 8) break;
    }
    uint16_t size;
    memcpy(&size, win + (at - base) + 6, 2);
    if (size < 8 || size > len - at) break; /* a record cut, or zeros past what was written */
    at += size;
  }
  return (int64_t)at;
}

static int copy_range(int in, int out, uint8_t *win, uint64_t from, uint64_t to) {
  for (uint64_t at = from; at < to;) {
    size_t n = to - at < WINDOW ? (size_t)(to - at) : WINDOW;
    ssize_t got = read_some(in, win, n, at);
    if (got <= 0) return -1;
    for (ssize_t w = 0; w < got;) {
      ssize_t put = write(out, win + w, (size_t)(got - w));
      if (put < 0 && errno == EINTR) continue;
      if (put <= 0) return -1;
      w += put;
    }
    at += (uint64_t)got;
  }
  return 0;
}

int dnt_perfdata_mend(int fd, int out, uint64_t *kept, uint64_t *claimed, char *msg, size_t cap) {
  struct stat st;
  uint8_t h[HEADER_SIZE];
  *kept = *claimed = 0;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size < HEADER_SIZE ||
      read_some(fd, h, HEADER_SIZE, 0) != HEADER_SIZE || memcmp(h, "PERFILE2", 8) != 0 || u64_at(h + 8) != HEADER_SIZE)
    return 1; /* not a file in this form: perf script says what it is */
  uint64_t len = (uint64_t)st.st_size, attrs_off = u64_at(h + 24), attrs_size = u64_at(h + 32);
  uint64_t data_off = u64_at(h + 40), data_size = u64_at(h + 48);
  /* size 0: perf did not finish the file, and perf script reads to its end anyway */
  if (!data_size || (data_off <= len && data_size <= len - data_off)) return 1;
  *claimed = data_size;
  if (data_off < HEADER_SIZE || data_off > len || attrs_off > data_off || attrs_size > data_off - attrs_off) {
    snprintf(msg, cap, "it is cut before its first record");
    return -EINVAL;
  }
  uint8_t *win = malloc(WINDOW);
  if (!win) {
    snprintf(msg, cap, "out of memory");
    return -ENOMEM;
  }
  int rc = 0;
  int64_t end = whole_records_end(fd, win, data_off, len);
  if (end < 0) {
    rc = -errno;
    snprintf(msg, cap, "cannot read it: %s", strerror(errno));
    goto done;
  }
  *kept = (uint64_t)end - data_off;
  memcpy(win, h, HEADER_SIZE);
  memcpy(win + 48, kept, 8);   /* the data section: the whole records */
  memset(win + 72, 0, 32);     /* no feature sections: they were past the cut */
  errno = 0;
  if (write(out, win, HEADER_SIZE) != HEADER_SIZE || copy_range(fd, out, win, HEADER_SIZE, (uint64_t)end) != 0) {
    rc = errno ? -errno : -EIO;
    snprintf(msg, cap, "cannot write its mended copy: %s", strerror(-rc));
  }
done:
  free(win);
  return rc;
}
