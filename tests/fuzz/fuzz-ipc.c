/* fuzz-ipc.c: libFuzzer target for what a runtime (or anything listening where one should be)
 * sends back over the diagnostics IPC: the reply framer fed in any split, every reply decoder,
 * the ProcessEnvironment continuation, the advertise of a reverse connection, and the session
 * stream that follows a CollectTracing reply, into the nettrace parser as `collect` feeds it.
 * Input: [split][kind (fuzz-ipc.h)][the bytes as received]. Seeds: tests/fuzz/seeds/ipc,
 * recorded from the sample target by record-ipc.c. */
#include <stdint.h>
#include <string.h>

#include "dsipc.h"
#include "ntr.h"

#include "fuzz-ipc.h"
#include "fuzz-ntr.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static size_t sum;

static int on_event(void *ud, const ntr_event *e) {
  (void)ud;
  if (e->payload_size) sum += e->payload[e->payload_size - 1];
  return 0;
}

static void touch(const char *s) {
  if (s) sum += strlen(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2) return 0;
  size_t split = data[0] ? data[0] : size;
  int kind = data[1] % FUZZ_IPC_KINDS;
  data += 2;
  size -= 2;
  if (kind == FUZZ_IPC_ADVERTISE) {
    dsipc_advertise adv;
    char guid[37];
    if (dsipc_decode_advertise(data, size, &adv) == 0) {
      dsipc_format_guid(adv.cookie, guid);
      touch(guid);
    }
    return 0;
  }
  dsipc_framer f;
  dsipc_framer_init(&f);
  size_t off = 0;
  while (off < size && !f.complete) {
    size_t n = size - off < split ? size - off : split;
    long used = dsipc_framer_feed(&f, data + off, n);
    if (used < 0) goto out;
    if (used == 0 && !f.complete) break;
    off += (size_t)used;
  }
  if (!f.complete) goto out;
  const uint8_t *payload = f.buf + DSIPC_HEADER_SIZE;
  size_t plen = f.header.size - DSIPC_HEADER_SIZE;
  dsipc_status st;
  int ok = dsipc_decode_reply(&f.header, payload, plen, &st) == 0;
  touch(st.msg);
  if (!ok) goto out;
  switch (kind) {
  case FUZZ_IPC_INFO1:
  case FUZZ_IPC_INFO2:
  case FUZZ_IPC_INFO3: {
    dsipc_process_info pi;
    memset(&pi, 0, sizeof pi);
    if (dsipc_decode_process_info(payload, plen, kind - FUZZ_IPC_INFO1 + 1, &pi) == 0) {
      touch(pi.command_line), touch(pi.os), touch(pi.arch), touch(pi.managed_entrypoint_assembly_name);
      touch(pi.clr_product_version), touch(pi.runtime_identifier);
    }
    dsipc_process_info_release(&pi);
    break;
  }
  case FUZZ_IPC_ENV: {
    uint32_t cont;
    char **env = NULL;
    size_t count = 0;
    if (dsipc_decode_env_reply(payload, plen, &cont) != 0 || cont > DSIPC_MAX_ENV_BLOCK) break;
    size_t have = size - off < cont ? size - off : cont;
    if (dsipc_decode_env_block(data + off, have, &env, &count) == 0) {
      for (size_t i = 0; i < count; i++) touch(env[i]);
      dsipc_env_free(env, count);
    }
    break;
  }
  case FUZZ_IPC_SESSION: {
    uint64_t id;
    static const ntr_callbacks cb = {.on_event = on_event};
    if (dsipc_decode_session_id(payload, plen, &id) == 0) fuzz_ntr_run(data + off, size - off, split, &cb, NULL);
    break;
  }
  default: {
    uint64_t id;
    dsipc_decode_session_id(payload, plen, &id);
    break;
  }
  }
out:
  dsipc_framer_release(&f);
  return 0;
}
