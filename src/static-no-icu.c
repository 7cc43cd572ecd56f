/* static-no-icu.c: linked into dntrace only by --enable-static-binary.
 *
 * Debian's libxml2.a is built with ICU, so a static link pulls in ICU's converters and, with
 * them, its 30 MB data archive: the binary grows from under 3 MB to 35 MB. dntrace's XML is UTF-8
 * (the runtime's event schema it reads, the flame graph SVG it writes), which libxml2 decodes and
 * encodes by itself; ICU would only serve documents declared in other legacy encodings (iconv
 * still offers those glibc converts without modules). So the converter entry points libxml2 calls
 * are defined here and say "no such converter": libxml2 then reports such a document's encoding
 * as unsupported, exactly as a libxml2 built without ICU does.
 *
 * ICU's headers rename every entry point with its version (ucnv_open becomes ucnv_open_72), so
 * including them gives these definitions the names libxml2.a refers to, whatever ICU is
 * installed. */
#include <unicode/ucnv.h>
#include <unicode/ucnv_err.h>

UConverter *ucnv_open(const char *name, UErrorCode *err) {
  (void)name;
  if (err) *err = U_FILE_ACCESS_ERROR; /* what ICU says for a converter it has no data for */
  return NULL;
}

void ucnv_close(UConverter *cnv) {
  (void)cnv; /* never opened */
}

/* Unreachable (no converter is ever opened), kept only to satisfy the link. */
void ucnv_convertEx(UConverter *to, UConverter *from, char **target, const char *target_limit,
                    const char **source, const char *source_limit, UChar *pivot_start,
                    UChar **pivot_source, UChar **pivot_target, const UChar *pivot_limit, UBool reset,
                    UBool flush, UErrorCode *err) {
  if (err) *err = U_INVALID_STATE_ERROR;
}

void ucnv_setToUCallBack(UConverter *cnv, UConverterToUCallback action, const void *ctx,
                         UConverterToUCallback *old_action, const void **old_ctx, UErrorCode *err) {
  if (err) *err = U_INVALID_STATE_ERROR;
}

void ucnv_setFromUCallBack(UConverter *cnv, UConverterFromUCallback action, const void *ctx,
                           UConverterFromUCallback *old_action, const void **old_ctx, UErrorCode *err) {
  if (err) *err = U_INVALID_STATE_ERROR;
}

void UCNV_FROM_U_CALLBACK_STOP(const void *ctx, UConverterFromUnicodeArgs *args, const UChar *units,
                               int32_t length, UChar32 cp, UConverterCallbackReason reason, UErrorCode *err) {
}

void UCNV_TO_U_CALLBACK_STOP(const void *ctx, UConverterToUnicodeArgs *args, const char *units,
                             int32_t length, UConverterCallbackReason reason, UErrorCode *err) {
}
