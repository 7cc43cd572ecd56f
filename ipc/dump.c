/* The Dump command set: GenerateCoreDump 1/2/3. The three share one layout (path, type, flags);
 * they differ in what the flags may say (v1: logging on/off only) and in the error reply (v3
 * adds the runtime's own message, which dsipc_decode_reply already folds into the status). */
#include <string.h>

#include "dsipc-int.h"

int dsipc_encode_dump(dsipc_buf *b, int version, const char *path, uint32_t dump_type, uint32_t flags) {
  static const uint8_t ids[] = {0, DSIPC_DUMP_GENERATE, DSIPC_DUMP_GENERATE2, DSIPC_DUMP_GENERATE3};
  if (version < 1 || version > 3 || !path || !*path || dump_type < 1 || dump_type > 4) return DSIPC_EINVAL;
  if (version == 1 && flags > 1) return DSIPC_EINVAL; /* v1 only knows "logging on/off" */
  struct dsipc__writer w;
  dsipc__w_begin(&w, b, DSIPC_SET_DUMP, ids[version]);
  dsipc__w_string(&w, path);
  dsipc__w_u32(&w, dump_type);
  dsipc__w_u32(&w, flags);
  return dsipc__w_end(&w);
}

int dsipc_dump_generate(const char *path, const char *dump_path, uint32_t dump_type, uint32_t flags,
                        uint64_t timeout_ms, dsipc_status *st) {
  dsipc_buf req, reply;
  dsipc_buf_init(&req);
  dsipc_buf_init(&reply);
  int rc = DSIPC_EUNKNOWNCMD;
  /* newest first, as the reference client does: only v3 explains its failures */
  for (int version = 3; version >= 1 && rc == DSIPC_EUNKNOWNCMD; version--) {
    uint32_t f = version == 1 ? (flags & DSIPC_DUMP_LOGGING) : flags;
    if ((rc = dsipc_encode_dump(&req, version, dump_path, dump_type, f)) != 0) {
      dsipc__fail(st, rc, 0, "cannot encode GenerateCoreDump for '%s': %s", dump_path ? dump_path : "",
                  dsipc_strerror(rc));
      break;
    }
    rc = dsipc_transact(path, &req, timeout_ms, &reply, NULL, st);
  }
  dsipc_buf_release(&req);
  dsipc_buf_release(&reply);
  return rc;
}
