/* fuzz-pdb.c: libFuzzer target for the portable PDB reader (profile/pdb.c: the metadata root,
 * the #Pdb and #~ streams, Document and MethodDebugInformation rows, document names, sequence
 * points): the input is a PDB file, asked for the lines of its first methods at a few IL offsets.
 * Seeds: the sample's own PDB, copied by run.sh from a build that made it. */
#include <stdint.h>
#include <stdlib.h>

#include "dnt-profile.h"
#include "fuzz-file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char path[32], file[256], tiny[4];
  fuzz_file(data, size, path, sizeof path);
  static const uint32_t offsets[] = {0, 7, 1000, UINT32_MAX};
  for (uint32_t rid = 0; rid <= 6; rid++) /* each call reads the file: a few keep runs fast */
    for (size_t i = 0; i < sizeof offsets / sizeof offsets[0]; i++) {
      uint32_t line = 0;
      if (dnt_pdb_line(path, rid, offsets[i], file, sizeof file, &line) && line == 0) abort(); /* a line is never 0 */
      (void)dnt_pdb_line(path, rid, offsets[i], tiny, sizeof tiny, &line); /* a name longer than the room: refused */
    }
  return 0;
}
