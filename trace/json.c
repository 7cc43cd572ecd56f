/* JSON string literals for the streaming writers (events, speedscope, counters): no DOM, the
 * output can be gigabytes. */
#include <stdio.h>

#include "dnt-trace.h"

/* A C1 control (U+0080..U+009F, some terminals' 8-bit CSI and OSC) as UTF-8 at p. */
static int is_c1(const unsigned char *p) { return p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f; }

void dnt_json_string(FILE *fp, const char *s) {
  fputc('"', fp);
  for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
    switch (*p) {
    case '"': fputs("\\\"", fp); break;
    case '\\': fputs("\\\\", fp); break;
    case '\n': fputs("\\n", fp); break;
    case '\r': fputs("\\r", fp); break;
    case '\t': fputs("\\t", fp); break;
    default:
      /* DEL and C1 are legal raw in JSON, but `--json` is read on terminals too */
      if (*p < 0x20 || *p == 0x7f)
        fprintf(fp, "\\u%04x", *p);
      else if (is_c1(p))
        fprintf(fp, "\\u%04x", *++p);
      else
        fputc(*p, fp);
    }
  }
  fputc('"', fp);
}

