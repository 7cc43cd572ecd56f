/* A minimal ELF core file made by hand: elf-core.h. */
#include "elf-core.h"

#include <elf.h>
#include <string.h>

size_t dnt_test_elf_core(uint8_t *core, size_t cap, uint32_t pid) {
  memset(core, 0, cap);
  Elf64_Ehdr *eh = (Elf64_Ehdr *)core;
  memcpy(eh->e_ident, ELFMAG, SELFMAG);
  eh->e_ident[EI_CLASS] = ELFCLASS64;
  eh->e_ident[EI_DATA] = ELFDATA2LSB;
  eh->e_type = ET_CORE;
  eh->e_machine = EM_X86_64;
  eh->e_phoff = sizeof *eh;
  eh->e_phentsize = sizeof(Elf64_Phdr);
  eh->e_phnum = 1;
  Elf64_Phdr *ph = (Elf64_Phdr *)(core + sizeof *eh);
  ph->p_type = PT_NOTE;
  ph->p_offset = 256;
  size_t q = 256;
  for (uint32_t i = 0; i < 2; i++) {
    Elf64_Nhdr *nh = (Elf64_Nhdr *)(core + q);
    nh->n_namesz = 5;
    nh->n_descsz = 40;
    nh->n_type = NT_PRSTATUS;
    memcpy(core + q + sizeof *nh, "CORE", 5);
    uint32_t tid = pid + i;
    memcpy(core + q + sizeof *nh + 8 + 32, &tid, 4); /* pr_pid */
    q += sizeof *nh + 8 + 40;
  }
  ph->p_filesz = q - 256;
  return q;
}
