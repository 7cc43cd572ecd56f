/* What `watch` and `serve` share on the command line: the rules of --rule and --rules read (and
 * what their sessions must ask for), and the agent's lines printed. Command-line glue: it prints. */
#ifndef DNT_AGENT_CLI_H
#define DNT_AGENT_CLI_H

#include <stddef.h>
#include <stdint.h>

#include "dnt-agent.h"
#include "dnt-counters.h"
#include "ntr.h"
#include "options.h"
#include "providers.h"

/* The agent's say (dnt_incident_opts, dnt_server_config): the log on stdout, a line each, flushed;
 * notes on stderr; warnings as warnings. ud unused. */
void dnt_agent_print(void *ud, enum dnt_say_kind kind, const char *line);

/* ---- the rules of a command line ---- */

/* Takes a rule that parsed (r, the callee's: added to an engine or released), with its text and
 * where it was given ("--rule '...'" or "FILE:N"). 0, or DNT_EXIT_USAGE with one error line printed. */
typedef int (*dnt_rule_take_fn)(void *ud, struct dnt_rule *r, const char *text, const char *where);

/* Each of texts (borrowed), then each line of file (NULL: none; blank and '#' lines skipped),
 * parsed; the counter of a counter rule added to specs, the events another rule wants to
 * providers (the runtime's keywords for exceptions, GC pauses and its named events; every event
 * of another provider); then given to take. The first that does not parse, whose counter specs
 * refuses, whose event cannot be asked for, or that take refuses stops the reading with one
 * error line ("WHERE, column N: expected ..."). 0 or DNT_EXIT_USAGE. */
int dnt_rules_read(const struct dnt_strlist *texts, const char *file, struct dnt_counter_specs *specs,
                   struct dnt_providers *providers, dnt_rule_take_fn take, void *ud);

#endif
