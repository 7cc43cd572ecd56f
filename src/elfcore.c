#include <elf.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "elfcore.h"

#define MAX_NOTES_BYTES (64u << 20) /* a core's note segment is a few MB even for thousands of threads */

static int read_at(int fd, void *buf, size_t n, uint64_t off) {
  size_t done = 0;
  while (done < n) {
    ssize_t r = pread(fd, (char *)buf + done, n - done, (off_t)(off + done));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return -1;
    done += (size_t)r;
  }
  return 0;
}

/* Walks one PT_NOTE segment in chunks; counts NT_PRSTATUS. */
static int count_notes(int fd, uint64_t off, uint64_t size, struct dnt_core_info *info, char *why, size_t whylen) {
  uint64_t pos = 0;
  while (pos + sizeof(Elf64_Nhdr) <= size) {
    Elf64_Nhdr nh;
    if (read_at(fd, &nh, sizeof nh, off + pos) < 0) {
      snprintf(why, whylen, "cannot read a note header at offset %llu", (unsigned long long)(off + pos));
      return -1;
    }
    uint64_t namesz = ((uint64_t)nh.n_namesz + 3) & ~3ull, descsz = ((uint64_t)nh.n_descsz + 3) & ~3ull;
    uint64_t next = pos + sizeof nh + namesz + descsz;
    if (next > size) {
      snprintf(why, whylen, "a note runs past its segment (at offset %llu)", (unsigned long long)(off + pos));
      return -1;
    }
    if (nh.n_type == NT_PRSTATUS) {
      if (info->threads == 0 && nh.n_descsz >= 36) {
        /* pr_pid sits after pr_info (12), pr_cursig (2 + 2 padding), pr_sigpend and pr_sighold (8 each) */
        uint32_t pid;
        if (read_at(fd, &pid, sizeof pid, off + pos + sizeof nh + namesz + 32) == 0) info->first_pid = pid;
      }
      info->threads++;
    }
    pos = next;
  }
  return 0;
}

int dnt_core_check(int fd, struct dnt_core_info *info, char *why, size_t whylen) {
  memset(info, 0, sizeof *info);
  struct stat st;
  if (fstat(fd, &st) < 0) {
    snprintf(why, whylen, "cannot stat it: %s", strerror(errno));
    return -1;
  }
  info->size = (uint64_t)st.st_size;
  Elf64_Ehdr eh;
  if (info->size < sizeof eh || read_at(fd, &eh, sizeof eh, 0) < 0) {
    snprintf(why, whylen, "it is too short to be an ELF file (%llu bytes)", (unsigned long long)info->size);
    return -1;
  }
  if (memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0) {
    snprintf(why, whylen, "it is not an ELF file");
    return -1;
  }
  if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB) {
    snprintf(why, whylen, "it is not a 64-bit little-endian ELF file");
    return -1;
  }
  if (eh.e_type != ET_CORE) {
    snprintf(why, whylen, "it is an ELF file but not a core (type %u)", eh.e_type);
    return -1;
  }
  info->machine = eh.e_machine;
  if (eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum == 0 ||
      eh.e_phoff > info->size || (uint64_t)eh.e_phnum * sizeof(Elf64_Phdr) > info->size - eh.e_phoff) {
    snprintf(why, whylen, "its program headers do not fit in the file");
    return -1;
  }
  for (unsigned i = 0; i < eh.e_phnum; i++) {
    Elf64_Phdr ph;
    if (read_at(fd, &ph, sizeof ph, eh.e_phoff + (uint64_t)i * sizeof ph) < 0) {
      snprintf(why, whylen, "cannot read program header %u", i);
      return -1;
    }
    if (ph.p_type == PT_LOAD) info->segments++;
    if (ph.p_type != PT_NOTE) continue;
    if (ph.p_offset > info->size || ph.p_filesz > info->size - ph.p_offset || ph.p_filesz > MAX_NOTES_BYTES) {
      snprintf(why, whylen, "its note segment does not fit in the file (truncated?)");
      return -1;
    }
    if (count_notes(fd, ph.p_offset, ph.p_filesz, info, why, whylen) < 0) return -1;
  }
  if (info->threads == 0) {
    snprintf(why, whylen, "it has no thread (NT_PRSTATUS) notes");
    return -1;
  }
  return 0;
}
