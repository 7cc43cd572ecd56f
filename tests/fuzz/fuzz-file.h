/* fuzz-file.h: for fuzz targets whose library function reads a path or a descriptor: the input is
 * put in a memfd (no disk, seekable, as a zip needs) named /proc/self/fd/N. One per process. */
#ifndef DNT_FUZZ_FILE_H
#define DNT_FUZZ_FILE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

/* The memfd holding exactly data[0..size); its path in path (at least 32 bytes). Aborts (the
 * fuzzer reports it) when no memfd can be made: a fuzz run without its input is no run. */
static inline int fuzz_file(const uint8_t *data, size_t size, char *path, size_t cap) {
  static int fd = -1;
  if (fd < 0) fd = memfd_create("fuzz-input", 0);
  if (fd < 0 || ftruncate(fd, 0) != 0) abort();
  size_t off = 0;
  while (off < size) {
    ssize_t n = pwrite(fd, data + off, size - off, (off_t)off);
    if (n <= 0) abort();
    off += (size_t)n;
  }
  if (lseek(fd, 0, SEEK_SET) != 0) abort();
  snprintf(path, cap, "/proc/self/fd/%d", fd);
  return fd;
}

#endif
