/* record-ipc.c: records a real runtime's diagnostics IPC replies as seeds for fuzz-ipc (each file
 * starts with fuzz-ipc's two bytes: the framer's split, then the kind of reply; see fuzz-ipc.c).
 * Not built by make; tests/fuzz/record-seeds.sh builds and runs it against the sample target:
 *   record-ipc connect SOCKET OUTDIR   the process commands, a collect session, error replies
 *   record-ipc listen SOCKET OUTDIR    waits for a runtime started with
 *                                      DOTNET_DiagnosticPorts=SOCKET: its advertise, then the
 *                                      reply to ResumeRuntime */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "dsipc.h"

#include "fuzz-ipc.h"

static int unix_socket(const char *path, int listening) {
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  if (listening) {
    unlink(path);
    if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 1) != 0) goto fail;
    int c = accept(fd, NULL, NULL);
    close(fd);
    return c;
  }
  if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0) return fd;
fail:
  close(fd);
  return -1;
}

/* Reads what comes within ms (or up to cap bytes, or to EOF). */
static size_t read_for(int fd, uint8_t *buf, size_t cap, int ms) {
  size_t have = 0;
  struct pollfd p = {.fd = fd, .events = POLLIN};
  while (have < cap && poll(&p, 1, ms) == 1) {
    ssize_t n = read(fd, buf + have, cap - have);
    if (n <= 0) break;
    have += (size_t)n;
  }
  return have;
}

static void save(const char *dir, const char *name, uint8_t split, uint8_t kind, const uint8_t *p, size_t n) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  if (!f) {
    perror(path);
    exit(1);
  }
  fputc(split, f);
  fputc(kind, f);
  fwrite(p, 1, n, f);
  fclose(f);
  printf("%s: %zu bytes\n", path, n);
}

/* One request on a fresh connection; what came back is saved. */
static void record(const char *sock, const char *dir, const char *name, const dsipc_buf *req, uint8_t split,
                   uint8_t kind, size_t cap, int ms) {
  int fd = unix_socket(sock, 0);
  if (fd < 0) {
    perror(sock);
    exit(1);
  }
  if (write(fd, req->data, req->len) != (ssize_t)req->len) {
    perror("write");
    exit(1);
  }
  uint8_t *buf = malloc(cap);
  size_t n = read_for(fd, buf, cap, ms);
  close(fd);
  save(dir, name, split, kind, buf, n);
  free(buf);
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: record-ipc connect|listen SOCKET OUTDIR\n");
    return 2;
  }
  const char *sock = argv[2], *dir = argv[3];
  dsipc_buf b;
  dsipc_buf_init(&b);
  if (strcmp(argv[1], "listen") == 0) {
    int fd = unix_socket(sock, 1);
    if (fd < 0) {
      perror(sock);
      return 1;
    }
    uint8_t adv[DSIPC_ADVERTISE_SIZE], reply[256];
    size_t n = read_for(fd, adv, sizeof adv, 10000);
    save(dir, "advertise", 0, FUZZ_IPC_ADVERTISE, adv, n);
    dsipc_encode_command(&b, DSIPC_SET_PROCESS, DSIPC_PROC_RESUME);
    if (write(fd, b.data, b.len) != (ssize_t)b.len) return 1;
    n = read_for(fd, reply, sizeof reply, 5000);
    save(dir, "resume-runtime", 7, FUZZ_IPC_STATUS, reply, n);
    close(fd);
    dsipc_buf_release(&b);
    return 0;
  }
  dsipc_encode_command(&b, DSIPC_SET_PROCESS, DSIPC_PROC_INFO);
  record(sock, dir, "process-info", &b, 0, FUZZ_IPC_INFO1, 65536, 5000);
  dsipc_encode_command(&b, DSIPC_SET_PROCESS, DSIPC_PROC_INFO2);
  record(sock, dir, "process-info2", &b, 13, FUZZ_IPC_INFO2, 65536, 5000);
  dsipc_encode_command(&b, DSIPC_SET_PROCESS, DSIPC_PROC_INFO3);
  record(sock, dir, "process-info3", &b, 1, FUZZ_IPC_INFO3, 65536, 5000);
  dsipc_encode_command(&b, DSIPC_SET_PROCESS, DSIPC_PROC_ENV);
  record(sock, dir, "process-env", &b, 0, FUZZ_IPC_ENV, 65536, 2000);
  dsipc_encode_command(&b, DSIPC_SET_PROCESS, 0x7f); /* not a command: an error reply */
  record(sock, dir, "unknown-command", &b, 0, FUZZ_IPC_STATUS, 4096, 5000);
  dsipc_encode_stop_tracing(&b, 0x1234); /* no such session: an error reply */
  record(sock, dir, "stop-unknown-session", &b, 3, FUZZ_IPC_STATUS, 4096, 5000);
  /* a session: the reply, then the start of its nettrace stream (closing ends the session) */
  static const dsipc_provider prov[] = {
      {"Microsoft-Windows-DotNETRuntime", 0x8001, 5, NULL, 0, NULL, 0},
      {"System.Runtime", 0, 5, "EventCounterIntervalSec=1", 0, NULL, 0},
  };
  dsipc_session_config cfg = {.buffer_mb = 16, .format = 1, .request_rundown = 0, .request_stackwalk = 1,
                              .providers = prov, .n_providers = 2};
  if (dsipc_encode_collect_tracing(&b, 2, &cfg) != 0) return 1;
  record(sock, dir, "collect2-session", &b, 0, FUZZ_IPC_SESSION, 24 * 1024, 1500);
  dsipc_buf_release(&b);
  return 0;
}
