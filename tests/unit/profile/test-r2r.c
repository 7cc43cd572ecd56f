/* profile/r2r.c and ecma-names.c on the ReadyToRun images of the installed shared framework (the
 * .NET SDK the tests need anyway): every MethodDef with precompiled code has a name at its entry,
 * two methods the sockets' epoll loop is known to be made of (dotnet/runtime's
 * SocketAsyncEngine.EventLoop and the P/Invoke it calls) are found once each; every cut of an
 * image, and every byte of its headers changed, reads as no image or as names, never as a crash
 * or an overread (ASan). */
#include <criterion/criterion.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../lib/target-cr.h"
#include "r2r-int.h"

/* The newest installed shared framework's file name, or NULL. */
static char *framework_file(const char *name) {
  glob_t g;
  char pattern[256];
  snprintf(pattern, sizeof pattern, "/usr/share/dotnet/shared/Microsoft.NETCore.App/*/%s", name);
  if (glob(pattern, 0, NULL, &g) != 0 || g.gl_pathc == 0) {
    snprintf(pattern, sizeof pattern, "/usr/lib/dotnet/shared/Microsoft.NETCore.App/*/%s", name);
    if (glob(pattern, 0, NULL, &g) != 0 || g.gl_pathc == 0) return NULL;
  }
  char *path = strdup(g.gl_pathv[g.gl_pathc - 1]);
  globfree(&g);
  return path;
}

static uint8_t *slurp_bytes(const char *path, size_t *len) {
  FILE *fp = fopen(path, "rb");
  cr_assert(fp, "%s", path);
  fseek(fp, 0, SEEK_END);
  *len = (size_t)ftell(fp);
  fseek(fp, 0, SEEK_SET);
  uint8_t *b = malloc(*len);
  cr_assert(b && fread(b, 1, *len, fp) == *len);
  fclose(fp);
  return b;
}

static struct dnt__r2r *open_copy(const uint8_t *b, size_t len) {
  uint8_t *copy = malloc(len ? len : 1);
  cr_assert(copy);
  memcpy(copy, b, len);
  return dnt__r2r_open(copy, len, 0);
}

static const uint8_t *sockets(size_t *len) {
  DNT_REQUIRE_TARGET(); /* the SDK, whose runtime has the images */
  char *path = framework_file("System.Net.Sockets.dll");
  cr_assert(path, "no System.Net.Sockets.dll in the installed shared framework");
  const uint8_t *b = slurp_bytes(path, len);
  free(path);
  return b;
}

Test(r2r, method_entry_points_name_their_methods) {
  size_t len;
  const uint8_t *b = sockets(&len);
  struct dnt__r2r *r = open_copy(b, len);
  cr_assert(r, "System.Net.Sockets.dll has ReadyToRun code");
  /* every MethodDef with precompiled code: the name at its entry is its own (the entry's method),
   * and the names are those of the assembly's methods; two known ones among them */
  int entries = 0, epoll = 0, loop = 0;
  char name[512];
  for (uint32_t rid = 1; rid < 100000; rid++) {
    uint32_t rva = dnt__r2r_method_rva(r, 0x06000000u | rid);
    if (!rva) continue;
    entries++;
    cr_assert(dnt__r2r_name(r, rva, name, sizeof name), "no name at the entry of 0x%08x", 0x06000000u | rid);
    epoll += strcmp(name, "Interop+Sys.WaitForSocketEvents") == 0;
    loop += strcmp(name, "System.Net.Sockets.SocketAsyncEngine.EventLoop") == 0;
  }
  cr_assert_gt(entries, 100);
  cr_assert_eq(epoll, 1, "the P/Invoke the epoll loop calls");
  cr_assert_eq(loop, 1, "the epoll loop itself");
  cr_assert_not(dnt__r2r_method_rva(r, 0x02000001), "a TypeDef token has no code");
  cr_assert_not(dnt__r2r_name(r, 0, name, sizeof name), "the headers are no method's");
  dnt__r2r_free(r);
  free((void *)b);
}

Test(r2r, every_cut_and_a_changed_header_byte_is_survived, .timeout = 600) {
  size_t len;
  const uint8_t *b = sockets(&len);
  char name[256];
  /* cuts: through the headers byte by byte, then across the file */
  for (size_t cut = 0; cut < len; cut += cut < 4096 ? 1 : len / 257 + 1) {
    struct dnt__r2r *r = open_copy(b, cut);
    if (!r) continue;
    for (uint32_t rid = 1; rid < 2000; rid += 7) {
      uint32_t rva = dnt__r2r_method_rva(r, 0x06000000u | rid);
      if (rva) (void)dnt__r2r_name(r, rva, name, sizeof name);
    }
    dnt__r2r_free(r);
  }
  /* each of the first 1024 bytes (the PE and section headers) set to 0xff, then 0x00 */
  uint8_t *copy = malloc(len);
  cr_assert(copy);
  for (size_t at = 0; at < 1024 && at < len; at++)
    for (int v = 0; v < 2; v++) {
      memcpy(copy, b, len);
      copy[at] = v ? 0x00 : 0xff;
      struct dnt__r2r *r = open_copy(copy, len);
      if (!r) continue;
      uint32_t rva = dnt__r2r_method_rva(r, 0x06000001);
      (void)dnt__r2r_name(r, rva, name, sizeof name);
      dnt__r2r_free(r);
    }
  free(copy);
  free((void *)b);
}
