/* fuzz-elfcore.c: libFuzzer target for the check `dntrace dump` runs on the core it receives
 * (dnt_core_check: ELF header, program headers, PT_NOTE notes). Seeds: tests/fuzz/seeds/elfcore,
 * real cores of `sleep` and of the sample target taken with gdb's gcore (coredump_filter 0: the
 * notes and program headers, no memory). */
#include <stdint.h>
#include <stdlib.h>

#include "elfcore.h"
#include "fuzz-file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char path[32], why[256];
  int fd = fuzz_file(data, size, path, sizeof path);
  struct dnt_core_info info;
  if (dnt_core_check(fd, &info, why, sizeof why) == 0 && info.size != size) abort();
  return 0;
}
