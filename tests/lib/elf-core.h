/* A minimal ELF core file made by hand, for the tests of `dntrace dump`'s core check. */
#ifndef DNT_TEST_ELF_CORE_H
#define DNT_TEST_ELF_CORE_H

#include <stddef.h>
#include <stdint.h>

/* Writes into core (cap bytes, at least 512; zeroed first) an x86-64 little-endian ELF core with
 * one PT_NOTE at offset 256 holding two NT_PRSTATUS notes, their pr_pid pid and pid + 1. Returns
 * its size in bytes. */
size_t dnt_test_elf_core(uint8_t *core, size_t cap, uint32_t pid);

#endif
