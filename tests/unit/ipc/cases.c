/* The fake server itself: every case file parses, a malformed one is refused naming its line,
 * the bytes a case sends are the ones written out here by hand (wire-formats.md A.2), and the
 * fake notices a conversation that differs from its case (else every test above could pass
 * against a fake that checks nothing). */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "dsipc.h"
#include "ipc-test.h"

Test(cases, every_case_file_parses) {
  DIR *d = opendir(fake_case_dir());
  cr_assert(d, "%s", fake_case_dir());
  struct dirent *de;
  int n = 0;
  while ((de = readdir(d))) {
    size_t len = strlen(de->d_name);
    if (len < 5 || strcmp(de->d_name + len - 5, ".case") != 0) continue;
    fake_case *c;
    char err[800];
    cr_expect_eq(fake_case_load(&c, de->d_name, err, sizeof err), 0, "%s", err);
    fake_case_free(c);
    n++;
  }
  closedir(d);
  cr_assert_geq(n, 20, "the case files are there (%d)", n);
}

/* Every prefix of every case file, and every third one with its middle byte turned into a quote,
 * a '#', a NUL, a newline, a backslash or a star: parsed or refused with "FILE:LINE: ...", never
 * a crash or an overrun (ASan). */
Test(cases, damaged_cases_are_parsed_or_refused) {
  DIR *d = opendir(fake_case_dir());
  cr_assert(d);
  struct dirent *de;
  size_t tried = 0;
  while ((de = readdir(d))) {
    size_t len = strlen(de->d_name);
    if (len < 5 || (strcmp(de->d_name + len - 5, ".case") && strcmp(de->d_name + len - 4, ".inc"))) continue;
    char path[4300], text[4096];
    snprintf(path, sizeof path, "%s/%s", fake_case_dir(), de->d_name);
    FILE *fp = fopen(path, "rb");
    cr_assert(fp);
    size_t n = fread(text, 1, sizeof text - 1, fp);
    fclose(fp);
    cr_assert_lt(n, sizeof text - 1, "%s fits the test's buffer", path);
    static const char flips[] = {'"', '#', '\0', '\n', '\\', '*'};
    for (size_t cut = 0; cut <= n; cut++) {
      for (size_t k = cut % 3 ? sizeof flips : 0; k <= sizeof flips; k++) {
        char *t = malloc(cut + 1); /* exactly the text: an overrun is ASan's */
        memcpy(t, text, cut);
        t[cut] = '\0';
        if (k < sizeof flips && cut) t[cut / 2] = flips[k];
        fake_case *c;
        char err[800] = "";
        int rc = fake_case_parse(&c, t, "damaged.case", NULL, err, sizeof err);
        cr_assert(rc == 0 || (rc == -1 && !c && strchr(err, ':')), "%s cut at %zu: rc %d, '%s'", de->d_name, cut, rc,
                  err);
        fake_case_free(c);
        free(t);
        tried++;
      }
    }
  }
  closedir(d);
  cr_assert_gt(tried, 1000);
}

static void refused(const char *text, const char *says) {
  fake_case *c = (fake_case *)1;
  char err[800];
  cr_assert_eq(fake_case_parse(&c, text, "bad.case", NULL, err, sizeof err), -1, "accepted:\n%s", text);
  cr_assert_null(c);
  cr_assert(strstr(err, says), "'%s' says '%s':\n%s", err, says, text);
}

Test(cases, malformed_cases_are_refused_with_their_line) {
  refused("", "bad.case:0: no 'connection' or 'on' section");
  refused("# only a comment\n", "no 'connection' or 'on' section");
  refused("expect 04 08\n", "bad.case:1: an action before any 'connection'");
  refused("connection\nexpect 4 08\n", "bad.case:2: set '4' is not a byte in hex");
  refused("connection\nexpect 04 0x8\n", "id '0x8' is not a byte in hex");
  refused("connection\nexpect 04\n", "expect SET ID");
  refused("connection\nexpect 04 08 03 00\n", "after expect SET ID comes 'payload'");
  refused("connection\nreply hex\n", "'hex' with no bytes after it");
  refused("connection\nreply hex 00 0\n", "'0' is no data form");
  refused("connection\nreply hex zz\n", "'hex' with no bytes");
  refused("connection\nreply text abc\n", "text wants a \"quoted string\"");
  refused("connection\nreply text \"abc\n", "a string without its closing quote");
  refused("connection\nreply text \"a\\q\"\n", "unknown escape '\\q'");
  refused("connection\nreply text \"\\x4\"\n", "\\x wants two hex digits");
  refused("connection\nreply u32 4294967296\n", "u32 4294967296 is more than 4294967295");
  refused("connection\nreply u16 -1\n", "u16 '-1' is not a number");
  refused("connection\nreply u8 pid\n", "pid wants u32 or u64");
  refused("connection\nreply u32\n", "'u32' wants a value after it");
  refused("connection\npayload u32 1\n", "'payload' follows a 'reply' or 'send' line");
  refused("connection\nreply header ff 00 65536\n", "size 65536 is more than 65535");
  refused("connection\nreply header ff 00\npayload file no-such-file\n", "cannot open");
  refused("connection\nclose\npause 1\n", "bad.case:3: nothing can follow 'close'");
  refused("connection\nhang\nreply u32 0\n", "nothing can follow");
  refused("connection\non 04 08\n", "'connection' sections or 'on' sections, not both");
  refused("on 04\n", "on SET ID");
  refused("connection\nfrobnicate\n", "bad.case:2: unknown line 'frobnicate'");
  refused("connection\nexpect 02 * payload hex 01 ... 02\n", "'...' only ends");
  refused("connection\nreply hex 01 ...\n", "'...' only ends");
  refused("connection\nsend-in-pieces\n", "send-in-pieces N");
  refused("connection\ncall\n", "call NAME");
  refused("include ../etc/passwd\n", "include wants a case file's name");
  refused("include no-such.inc\n", "cannot open");
  refused("connection\ngarbage 67108865\n", "more than 67108864");
  /* a message grown past the header's u16 size */
  char big[] = "/tmp/dnt-bigcase-XXXXXX", text[128];
  int fd = mkstemp(big);
  cr_assert_geq(fd, 0);
  static uint8_t zeros[70000];
  cr_assert_eq(write(fd, zeros, sizeof zeros), (ssize_t)sizeof zeros);
  close(fd);
  snprintf(text, sizeof text, "connection\nreply header ff 00\npayload file %s\n", big);
  refused(text, "bad.case:2: a message of 70020 bytes: the header's size is a u16");
  unlink(big);
}

/* The bytes of each data form, written out by hand. */
Test(cases, data_forms_make_the_bytes_written_here) {
  char file[] = "/tmp/dnt-casefile-XXXXXX", text[1024];
  int fd = mkstemp(file);
  cr_assert_geq(fd, 0);
  cr_assert_eq(write(fd, "\x01\x02\x03", 3), 3);
  close(fd);
  snprintf(text, sizeof text,
           "# a comment\n"
           "on 04 *   # ProcessInfo, any version\n"
           "reply header ff 00\n"
           "payload u8 1 u16 0x0203 u32 4 u64 0x0102030405060708\n"
           "payload hex 0a0b 0c utf16 \"A\\x9b\" text \"q\\\"\\0\"\n"
           "payload u32 pid\n"
           "payload file %s\n"
           "on * *\n"
           "garbage 70\n",
           file);
  fake_case *c;
  char err[800];
  cr_assert_eq(fake_case_parse(&c, text, "forms.case", NULL, err, sizeof err), 0, "%s", err);
  cr_assert(c->on);
  cr_assert_eq(c->nsecs, 2);
  cr_assert_eq(c->secs[0].set, 0x04);
  cr_assert_eq(c->secs[0].id, FAKE_ANY);
  cr_assert_eq(c->secs[1].set, FAKE_ANY);
  cr_assert_eq(c->secs[0].nacts, 1, "payload lines extend their reply");
  const struct fake_action *a = &c->secs[0].acts[0];
  unlink(file);
  const uint8_t want[] = {HDR(20 + 1 + 2 + 4 + 8 + 3 + 10 + 3 + 4 + 3, 0xff, 0x00),
                          1,
                          0x03, 0x02,
                          4, 0, 0, 0,
                          8, 7, 6, 5, 4, 3, 2, 1,
                          0x0a, 0x0b, 0x0c,
                          3, 0, 0, 0, 'A', 0, 0x9b, 0, 0, 0, /* count 3 with the NUL; U+009B */
                          'q', '"', 0,
                          0, 0, 0, 0,  /* the pid, filled in when played */
                          1, 2, 3};    /* the file */
  cr_assert_eq(a->op, FAKE_SEND);
  cr_assert_eq(a->n, sizeof want, "%zu bytes", a->n);
  cr_assert_eq(memcmp(a->bytes, want, sizeof want), 0);
  cr_assert_eq(a->npatch, 1);
  cr_assert_eq(a->patch[0].at, sizeof want - 7);
  const struct fake_action *g = &c->secs[1].acts[0];
  cr_assert_eq(g->n, 70);
  cr_assert_eq(memcmp(g->bytes, "HTTP/1.1 200 OK\r\n\r\n", 19), 0);
  cr_assert_eq(memcmp(g->bytes + 67, "HTT", 3), 0, "the text repeats");
  fake_case_free(c);
}

/* ---- the fake notices ---- */

static const char *verdict(const char *case_name, int (*client)(const char *path)) {
  static char err[800];
  fake_ipc *f = fake_play(case_name, NULL);
  client(fake_ipc_socket(f));
  int rc = fake_ipc_stop(f, err, sizeof err);
  fake_ipc_free(f);
  return rc ? err : NULL;
}

static int ask_info2(const char *path) {
  dsipc_buf req, reply;
  dsipc_buf_init(&req);
  dsipc_buf_init(&reply);
  dsipc_encode_command(&req, DSIPC_SET_PROCESS, DSIPC_PROC_INFO2);
  dsipc_status st;
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
  int rc = connect(fd, (struct sockaddr *)&sa, sizeof sa);
  if (rc == 0) rc = dsipc_transact_fd(fd, &req, IPC_HANG_MS, &reply, NULL, &st);
  dsipc_buf_release(&req);
  dsipc_buf_release(&reply);
  return rc;
}

static int resume(const char *path) {
  dsipc_status st;
  return dsipc_resume_runtime(path, IPC_HANG_MS, &st);
}

static int dump_d(const char *path) {
  dsipc_status st;
  return dsipc_dump_generate(path, "/e", DSIPC_DUMP_FULL, DSIPC_DUMP_CRASHREPORT, IPC_HANG_MS, &st);
}

static int nothing(const char *path) {
  (void)path;
  return 0;
}

Test(cases, the_fake_notices_what_differs, .timeout = 120) {
  const char *why;
  /* ProcessInfo2 where the case expects ProcessInfo3 */
  why = verdict("transport-info-cut.case", ask_info2);
  cr_assert(why && strstr(why, "transport-info-cut.case:4: connection 1: request 04 04, expected 04 08"), "%s", why);
  /* a dump of "/e" where the case expects "/d": the first payload byte that differs */
  why = verdict("transport-dump3-error.case", dump_d);
  cr_assert(why && strstr(why, "connection 1: payload byte 6 is 0x65, expected 0x64"), "%s", why);
  /* ResumeRuntime where the case expects ProcessInfo3 */
  why = verdict("transport-info-v3-unknown.case", resume);
  cr_assert(why && strstr(why, "request 04 01, expected 04 08"), "%s", why);
  /* no connection at all, where the case has three */
  why = verdict("transport-dump-v1.case", nothing);
  cr_assert(why && strstr(why, "transport-dump-v1.case:4: connection 1 of 3 never came"), "%s", why);
  /* and a conversation as written passes */
  why = verdict("transport-resume-fails.case", resume);
  cr_assert_null(why, "%s", why);
}

/* Connects to path, sends n bytes and hangs up at once, as a client whose deadline ended. */
static void send_and_hang_up(const char *path, const uint8_t *bytes, size_t n) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  cr_assert_geq(fd, 0);
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
  cr_assert_eq(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0, "%s", path);
  cr_assert_eq(write(fd, bytes, n), (ssize_t)n);
  close(fd);
}

/* A connection made and given up on before the fake's thread could accept it (a busy machine, a
 * client's deadline) still came, and what it sent is still checked: a verdict never depends on
 * which thread ran first. Each round stops the fake right after the client hung up, so that some
 * rounds stop it before its thread accepted. */
Test(cases, a_connection_queued_at_the_stop_came, .timeout = 120) {
  const uint8_t resume[] = {HDR(20, 0x04, 0x01)}, info3[] = {HDR(20, 0x04, 0x08)};
  for (int round = 0; round < 20; round++) {
    char err[800];
    fake_ipc *f = fake_play("transport-resume-hangs.case", NULL); /* expects ResumeRuntime, then hangs */
    send_and_hang_up(fake_ipc_socket(f), resume, sizeof resume);
    cr_assert_eq(fake_ipc_stop(f, err, sizeof err), 0, "round %d: %s", round, err);
    fake_ipc_free(f);
    f = fake_play("transport-resume-hangs.case", NULL);
    send_and_hang_up(fake_ipc_socket(f), info3, sizeof info3);
    cr_assert_eq(fake_ipc_stop(f, err, sizeof err), -1, "round %d: ProcessInfo3 where ResumeRuntime is expected",
                 round);
    cr_assert(strstr(err, "connection 1: request 04 08, expected 04 01"), "round %d: %s", round, err);
    fake_ipc_free(f);
  }
}

/* what the hook saw (it runs in the fake's thread: asserted in the test's) */
static int dump_hook_calls;
static char dump_hook_name[32], dump_hook_path[64];

static uint32_t refuse_dump(const char *name, const uint8_t *req, size_t len, void *ud) {
  (void)ud;
  dump_hook_calls++;
  snprintf(dump_hook_name, sizeof dump_hook_name, "%s", name);
  if (len >= 20) fake_ipc_first_string(req + 20, len - 20, dump_hook_path, sizeof dump_hook_path);
  return 0x80070070u; /* ERROR_DISK_FULL as an HRESULT */
}

/* An `on` case dispatches by the first request; `call` hands the request to the test's hook,
 * whose HRESULT becomes the error reply. */
Test(cases, on_sections_and_hooks) {
  fake_ipc_opts o = {.hook = refuse_dump};
  fake_ipc *f = fake_play("dump-plant.case", &o);
  dsipc_status st;
  cr_assert_eq(dsipc_dump_generate(fake_ipc_socket(f), "/d", DSIPC_DUMP_FULL, 0, IPC_HANG_MS, &st), DSIPC_ESERVER, "%s",
               st.msg);
  cr_assert_eq(st.hresult, 0x80070070u);
  cr_assert_eq(dump_hook_calls, 1);
  cr_assert_str_eq(dump_hook_name, "plant");
  cr_assert_str_eq(dump_hook_path, "/d", "the hook is given the request");
  dsipc_process_info pi;
  cr_assert_eq(dsipc_process_info_get(fake_ipc_socket(f), IPC_HANG_MS, &pi, &st), 0, "%s", st.msg);
  cr_assert_eq(pi.process_id, (uint64_t)getpid(), "u64 pid: the fake's (this process's, for a thread)");
  cr_assert_str_eq(pi.command_line, "fake");
  dsipc_process_info_release(&pi);
  cr_assert_eq(dsipc_resume_runtime(fake_ipc_socket(f), IPC_HANG_MS, &st), DSIPC_EUNKNOWNCMD, "the catch-all section");
  cr_assert_eq(st.hresult, 0x80131385u);
  fake_done(f);
}
