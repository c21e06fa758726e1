/* sampler-fields.h: inside the api module, llama-server's request fields
 * for the samplers OpenAI's API lacks: dry_multiplier, dry_base,
 * dry_allowed_length, dry_penalty_last_n, dry_sequence_breakers,
 * top_n_sigma, xtc_probability, xtc_threshold, dynatemp_range,
 * dynatemp_exponent, mirostat, mirostat_tau and mirostat_eta (text/sampler.h
 * says what they do). Not part of the module's interface. */
#ifndef FL_API_SAMPLER_FIELDS_H
#define FL_API_SAMPLER_FIELDS_H

#include <stdint.h>

#include "base/error.h"
#include "base/json.h"

struct fl_sampler_params;

/* Reads the fields b gives into s, a bit of *given for each (the breakers
 * point into b). As llama-server: a dry_base below 1 keeps the server's,
 * dry_sequence_breakers is a non-empty array of strings (at most
 * FL_DRY_MAX_BREAKERS). 0, or -EINVAL naming the field. */
int api_sampler_fields_parse(const json_t *b, struct fl_sampler_params *s, uint32_t *given,
                             struct fl_err *err);

/* Copies the given fields of s onto out (the server's settings). */
void api_sampler_fields_apply(const struct fl_sampler_params *s, uint32_t given,
                              struct fl_sampler_params *out);

/* Sets the fields' values (breakers too, while they point anywhere) in a
 * generation_settings object o, as llama-server reports them. */
void api_sampler_fields_report(const struct fl_sampler_params *p, json_t *o);

#endif
