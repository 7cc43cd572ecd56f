/* Event names as TraceEvent makes them of EventPipe metadata (dnt-trace.h). */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "dnt-trace.h"

static int ends_with_ci(const char *s, size_t len, const char *tail) {
  size_t n = strlen(tail);
  return len >= n && strncasecmp(s + len - n, tail, n) == 0;
}

/* TraceEvent's names of the standard opcodes (its TraceEventOpcode). */
static const char *opcode_name(uint32_t op, char *num, size_t cap) {
  static const char *const names[] = {"",       "Start",  "Stop",    "DataCollectionStart", "DataCollectionStop",
                                      "Extension", "Reply", "Resume", "Suspend",             "Transfer"};
  if (op < sizeof names / sizeof names[0]) return names[op];
  snprintf(num, cap, "%u", op);
  return num;
}

char *dnt_event_te_name(const ntr_metadata *md, char *buf, size_t cap, uint32_t *opcode) {
  const char *name = md->event_name;
  size_t len = strlen(name);
  uint32_t op = md->has_opcode ? md->opcode : 0;
  if (!md->has_opcode && len) /* the name says it: an EventSource's Start/Stop pair */
    op = ends_with_ci(name, len, "Start") ? 1 : ends_with_ci(name, len, "Stop") ? 2 : 0;
  if (opcode) *opcode = op;
  if (cap == 0) return buf;
  if (!len || op == 0) {
    snprintf(buf, cap, "%s", name);
    return buf;
  }
  if (op == 1 && ends_with_ci(name, len, "Start")) len -= 5;
  else if (op == 2 && ends_with_ci(name, len, "Stop")) len -= 4;
  char num[16];
  snprintf(buf, cap, "%.*s/%s", (int)len, name, opcode_name(op, num, sizeof num));
  return buf;
}
