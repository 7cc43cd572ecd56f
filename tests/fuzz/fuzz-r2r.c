/* fuzz-r2r.c: libFuzzer target for the ReadyToRun images a trace names (profile/r2r.c and
 * ecma-names.c: PE headers, the CLI and ReadyToRun headers, NativeArray entries, metadata
 * tables, method signatures): dnt__r2r_open, every MethodDef token's RVA, names at RVAs across
 * the image, and (as `dump analyze` reads an assembly's file) methods' names and parameters and
 * types' names by row. Seeds:
 * small ReadyToRun assemblies of the installed shared framework, copied by run.sh at run time
 * (Microsoft's files are not the project's to commit). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dnt-profile.h"
#include "fuzz-file.h"
#include "r2r-int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uint8_t *bytes = malloc(size ? size : 1);
  if (!bytes) return 0;
  memcpy(bytes, data, size);
  struct dnt__r2r *r = dnt__r2r_open(bytes, size, 0);
  if (!r) return 0;
  char name[512];
  for (uint32_t rid = 1; rid <= 4096; rid++) {
    uint32_t rva = dnt__r2r_method_rva(r, 0x06000000u | rid);
    if (rva) (void)dnt__r2r_name(r, rva, name, sizeof name);
  }
  uint32_t size_of_image = dnt__r2r_image_size(r);
  for (uint32_t rva = 0; rva < size_of_image && rva < (1u << 24); rva += 97) (void)dnt__r2r_name(r, rva, name, sizeof name);
  (void)dnt__r2r_name(r, UINT32_MAX, name, sizeof name);
  (void)dnt__r2r_name(r, 0, name, 1);
  dnt__r2r_free(r);
  char path[32], small[8];
  fuzz_file(data, size, path, sizeof path);
  for (uint32_t rid = 1; rid <= 8; rid++) { /* each call reads the file: a few rows keep runs fast */
    if (!dnt_assembly_method_name(path, rid, name, sizeof name)) break;
    static const char *const t[] = {"Int32"}, *const m[] = {"System.String", "Double"};
    struct dnt_generic_names inst = {t, m, 1, 2};
    (void)dnt_assembly_method_params(path, rid, NULL, name, sizeof name);
    (void)dnt_assembly_method_params(path, rid, &inst, name, sizeof name);
    (void)dnt_assembly_method_params(path, rid, NULL, small, sizeof small); /* a buffer too small: cut, never past it */
    (void)dnt_assembly_type_name(path, rid, name, sizeof name);
  }
  return 0;
}
