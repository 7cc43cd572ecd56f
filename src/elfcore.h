/* Checking a core file without gdb: is it an ELF core, of which machine, with how many threads
 * (NT_PRSTATUS notes)? Reads through a callback so a file of any size is checked in constant
 * memory; every offset and size in the file is checked against the file's size. */
#ifndef DNT_ELFCORE_H
#define DNT_ELFCORE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct dnt_core_info {
  uint64_t size;          /* bytes in the file */
  unsigned threads;       /* NT_PRSTATUS notes */
  unsigned segments;      /* PT_LOAD program headers */
  uint16_t machine;       /* e_machine (62 = x86-64, 183 = aarch64) */
  uint32_t first_pid;     /* pr_pid of the first NT_PRSTATUS (the thread that is the process) */
};

/* Checks the core at fd. 0, or -1 with a reason in why (caller's buffer). */
int dnt_core_check(int fd, struct dnt_core_info *info, char *why, size_t whylen);

#endif
