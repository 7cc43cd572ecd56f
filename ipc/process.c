/* The Process command set: ProcessInfo 1/2/3, the environment, ResumeRuntime,
 * SetEnvironmentVariable, Enable/DisablePerfMap. Decoders first, then the calls that use them. */
#include <string.h>

#include "dsipc-int.h"

/* A count above this is not an environment but an attack or a bug. */
#define MAX_ENV_ENTRIES (1u << 20)

void dsipc_process_info_release(dsipc_process_info *pi) {
  dsipc__free(pi->command_line);
  dsipc__free(pi->os);
  dsipc__free(pi->arch);
  dsipc__free(pi->managed_entrypoint_assembly_name);
  dsipc__free(pi->clr_product_version);
  dsipc__free(pi->runtime_identifier);
  memset(pi, 0, sizeof *pi);
}

int dsipc_decode_process_info(const uint8_t *payload, size_t n, int info_version, dsipc_process_info *out) {
  struct dsipc__reader r = {payload, n};
  memset(out, 0, sizeof *out);
  if (info_version < 1 || info_version > 3) return DSIPC_EINVAL;
  out->info_version = info_version;
  uint32_t inner_version = 0;
  int rc = 0;
  /* ProcessInfo3 leads with its own layout version; fields only ever get appended */
  if (info_version == 3 && (rc = dsipc__r_u32(&r, &inner_version))) goto fail;
  if ((rc = dsipc__r_u64(&r, &out->process_id))) goto fail;
  if ((rc = dsipc__r_bytes(&r, out->runtime_cookie, 16))) goto fail;
  if ((rc = dsipc__r_string(&r, &out->command_line))) goto fail;
  if ((rc = dsipc__r_string(&r, &out->os))) goto fail;
  if ((rc = dsipc__r_string(&r, &out->arch))) goto fail;
  if (info_version >= 2) {
    if ((rc = dsipc__r_string(&r, &out->managed_entrypoint_assembly_name))) goto fail;
    if ((rc = dsipc__r_string(&r, &out->clr_product_version))) goto fail;
  }
  if (info_version == 3 && inner_version >= 1 && (rc = dsipc__r_string(&r, &out->runtime_identifier)))
    goto fail;
  return 0;
fail:
  dsipc_process_info_release(out);
  return rc;
}

int dsipc_decode_env_reply(const uint8_t *payload, size_t n, uint32_t *continuation_len) {
  struct dsipc__reader r = {payload, n};
  uint16_t future;
  if (dsipc__r_u32(&r, continuation_len) || dsipc__r_u16(&r, &future)) return DSIPC_EPROTO;
  return *continuation_len > DSIPC_MAX_ENV_BLOCK ? DSIPC_ETOOBIG : 0;
}

void dsipc_env_free(char **env, size_t count) {
  if (!env) return;
  for (size_t i = 0; i < count; i++) dsipc__free(env[i]);
  dsipc__free(env);
}

int dsipc_decode_env_block(const uint8_t *p, size_t n, char ***env, size_t *count) {
  struct dsipc__reader r = {p, n};
  uint32_t k;
  *env = NULL;
  *count = 0;
  if (dsipc__r_u32(&r, &k)) return DSIPC_EPROTO;
  /* each entry takes at least its 4-byte count: a larger k cannot be true */
  if (k > MAX_ENV_ENTRIES || (size_t)k > r.left / 4) return DSIPC_EPROTO;
  char **list = dsipc__calloc(k ? k : 1, sizeof *list);
  if (!list) return DSIPC_ENOMEM;
  size_t i;
  for (i = 0; i < k; i++) {
    int rc = dsipc__r_string(&r, &list[i]);
    if (rc) {
      dsipc_env_free(list, i);
      return rc;
    }
    if (!list[i] && !(list[i] = dsipc__strdup(""))) {
      dsipc_env_free(list, i);
      return DSIPC_ENOMEM;
    }
  }
  *env = list;
  *count = k;
  return 0;
}

/* One exchange whose success reply carries nothing we need. */
static int simple_call(const char *path, dsipc_buf *req, uint64_t timeout_ms, dsipc_status *st) {
  dsipc_buf reply;
  dsipc_buf_init(&reply);
  int rc = dsipc_transact(path, req, timeout_ms, &reply, NULL, st);
  dsipc_buf_release(&reply);
  dsipc_buf_release(req);
  return rc;
}

int dsipc_process_info_get(const char *path, uint64_t timeout_ms, dsipc_process_info *out, dsipc_status *st) {
  static const struct {
    uint8_t id;
    int version;
  } tries[] = {{DSIPC_PROC_INFO3, 3}, {DSIPC_PROC_INFO2, 2}, {DSIPC_PROC_INFO, 1}};
  dsipc_buf req, reply;
  dsipc_buf_init(&req);
  dsipc_buf_init(&reply);
  memset(out, 0, sizeof *out);
  int rc = DSIPC_EUNKNOWNCMD;
  for (size_t i = 0; i < sizeof tries / sizeof tries[0] && rc == DSIPC_EUNKNOWNCMD; i++) {
    if ((rc = dsipc_encode_command(&req, DSIPC_SET_PROCESS, tries[i].id))) {
      dsipc__fail(st, rc, 0, "cannot encode ProcessInfo: %s", dsipc_strerror(rc));
      break;
    }
    rc = dsipc_transact(path, &req, timeout_ms, &reply, NULL, st);
    if (rc == 0) {
      rc = dsipc_decode_process_info(reply.data + DSIPC_HEADER_SIZE, reply.len - DSIPC_HEADER_SIZE,
                                     tries[i].version, out);
      if (rc) dsipc__fail(st, rc, 0, "malformed ProcessInfo%s reply: %s", i < 2 ? (i ? "2" : "3") : "",
                          dsipc_strerror(rc));
    }
  }
  dsipc_buf_release(&req);
  dsipc_buf_release(&reply);
  return rc;
}

int dsipc_process_env_get(const char *path, uint64_t timeout_ms, char ***env, size_t *count, dsipc_status *st) {
  dsipc_buf req, reply, cont;
  dsipc_buf_init(&req);
  dsipc_buf_init(&reply);
  dsipc_buf_init(&cont);
  *env = NULL;
  *count = 0;
  int rc = dsipc_encode_command(&req, DSIPC_SET_PROCESS, DSIPC_PROC_ENV);
  if (!rc) rc = dsipc_transact(path, &req, timeout_ms, &reply, &cont, st);
  if (!rc && (rc = dsipc_decode_env_block(cont.data, cont.len, env, count)))
    dsipc__fail(st, rc, 0, "malformed environment block: %s", dsipc_strerror(rc));
  dsipc_buf_release(&req);
  dsipc_buf_release(&reply);
  dsipc_buf_release(&cont);
  return rc;
}

int dsipc_resume_runtime(const char *path, uint64_t timeout_ms, dsipc_status *st) {
  dsipc_buf req;
  dsipc_buf_init(&req);
  int rc = dsipc_encode_command(&req, DSIPC_SET_PROCESS, DSIPC_PROC_RESUME);
  return rc ? dsipc__fail(st, rc, 0, "%s", dsipc_strerror(rc)) : simple_call(path, &req, timeout_ms, st);
}

int dsipc_set_env(const char *path, const char *name, const char *value, uint64_t timeout_ms, dsipc_status *st) {
  dsipc_buf req;
  dsipc_buf_init(&req);
  int rc = dsipc_encode_set_env(&req, name, value);
  return rc ? dsipc__fail(st, rc, 0, "cannot encode '%s': %s", name ? name : "", dsipc_strerror(rc))
            : simple_call(path, &req, timeout_ms, st);
}

int dsipc_perfmap_enable(const char *path, uint32_t perfmap_type, uint64_t timeout_ms, dsipc_status *st) {
  dsipc_buf req;
  dsipc_buf_init(&req);
  int rc = dsipc_encode_enable_perfmap(&req, perfmap_type);
  return rc ? dsipc__fail(st, rc, 0, "%s", dsipc_strerror(rc)) : simple_call(path, &req, timeout_ms, st);
}

int dsipc_perfmap_disable(const char *path, uint64_t timeout_ms, dsipc_status *st) {
  dsipc_buf req;
  dsipc_buf_init(&req);
  int rc = dsipc_encode_command(&req, DSIPC_SET_PROCESS, DSIPC_PROC_DISABLE_PERFMAP);
  return rc ? dsipc__fail(st, rc, 0, "%s", dsipc_strerror(rc)) : simple_call(path, &req, timeout_ms, st);
}
