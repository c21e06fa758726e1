/* run-generate.c: the token loop of `faultline run` (run.h). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/cli/interrupt.h"
#include "app/cli/run.h"
#include "app/draft-model.h"
#include "base/clock.h"
#include "model/model.h"
#include "text/constrain.h"
#include "text/grammar.h"
#include "text/json-mode.h"
#include "text/tokenizer.h"

int run_gen_init(struct run_gen *g, struct eng_session *s, const struct run_opts *o,
                 struct fl_err *err)
{
    *g = (struct run_gen){ .s = s, .o = o };
    const struct fl_tokenizer *tok = eng_session_tokenizer(s);
    g->n_vocab = (int)eng_session_model(s)->hp.n_vocab;
    g->logits = malloc(sizeof(float) * (size_t)g->n_vocab);
    g->eog = malloc(sizeof(int32_t) * 64);
    if (!g->logits || !g->eog)
        return fl_err_set(err, -ENOMEM, "out of memory");
    for (int32_t id = 0; id < g->n_vocab && id < fl_n_vocab(tok) && g->n_eog < 64; id++)
        if (fl_token_is_eog(tok, id))
            g->eog[g->n_eog++] = id;
    int rc = fl_sampler_new(&o->samp, g->n_vocab, tok, &g->smp);
    if (rc)
        return fl_err_set(err, rc, "cannot set up the sampler: %s", strerror(-rc));
    for (int i = 0; i < o->n_bias; i++)
        if (o->bias[i].id >= g->n_vocab)
            return fl_err_set(err, -EINVAL, "--logit-bias: token %d is not in the vocabulary "
                              "(%d tokens)", o->bias[i].id, g->n_vocab);
    if ((rc = fl_sampler_set_bias(g->smp, o->bias, o->n_bias)))
        return fl_err_set(err, rc, "--logit-bias: %s", strerror(-rc));
    if (o->cons.grammar_text && (rc = fl_grammar_compile(o->cons.grammar_text, o->cons.grammar_len,
                                                         tok, &g->grammar, err)))
        return rc;
    if ((o->schema || g->grammar) && (fl_mask_vocab_new(tok, g->n_vocab, &g->jv) ||
                                      !(g->masked = malloc(sizeof(float) * (size_t)g->n_vocab)) ||
                                      fl_constraint_new(o->schema, g->grammar, &g->cons)))
        return fl_err_set(err, -ENOMEM, "out of memory");
    if (o->spec.draft.named && !o->spec.draft.model)
        return fl_err_set(err, -EINVAL, "--spec-type draft-simple needs a draft model (-md FILE)");
    if (!eng_spec_on(&o->spec))
        return 0;
    if (eng_session_recurrent(s) && eng_session_gpu(s)) { /* its state is in VRAM */
        if (!o->compat.log_disable)
            fprintf(stderr, "faultline run: no speculative decoding: the model's recurrent state "
                    "is in VRAM, where a rejected draft cannot be taken back\n");
        return 0;
    }
    const size_t rows = (size_t)(1 + ENG_SPEC_DRAFT_MAX) * (size_t)g->n_vocab;
    if (!(g->rows = malloc(sizeof(float) * rows)))
        return fl_err_set(err, -ENOMEM, "out of memory for the drafts' logits rows");
    if (eng_session_recurrent(s) &&
        !(g->rs_snap = malloc(sizeof(float) * eng_session_rs_seq_floats(s))))
        return fl_err_set(err, -ENOMEM, "out of memory for the recurrent state's copy");
    if (o->spec.draft.model && (rc = eng_drafter_open(s, &o->spec.draft, &g->dr, err)))
        return rc;
    g->spec_on = true;
    return 0;
}

/* Positions the sequence holds that are checked (a draft's unchecked ones
 * are not). */
static int valid_past(const struct run_gen *g)
{
    return eng_session_n_past(g->s) - (g->n_draft - g->at);
}

/* The sequence's tokens, for drafts: those still in it (a chat may have
 * rewound it), then ids. -ENOMEM. */
static int hist_push(struct run_gen *g, const int32_t *ids, int n)
{
    const int past = valid_past(g) - n; /* ids are in the sequence now */
    g->n_hist = g->n_hist < past ? g->n_hist : past > 0 ? past : 0;
    if (g->n_hist + n > g->cap_hist) {
        const int cap = 2 * (g->n_hist + n) + 256;
        int32_t *h = realloc(g->hist, sizeof(int32_t) * (size_t)cap);
        if (!h)
            return -ENOMEM;
        g->hist = h, g->cap_hist = cap;
    }
    memcpy(g->hist + g->n_hist, ids, sizeof(int32_t) * (size_t)n);
    g->n_hist += n;
    return 0;
}

/* Whether id is the draft's next token: then its position and row are
 * there already. */
static bool draft_keeps(const struct run_gen *g, int32_t id)
{
    return g->at < g->n_draft && g->draft[g->at] == id;
}

/* A draft's unchecked positions leave the sequence: a recurrent model's
 * state goes back to the span's start and the checked positions are fed
 * again (a span of decode rows: the same bits as before). */
static int spec_drop(struct run_gen *g, struct fl_err *err)
{
    const int valid = valid_past(g);
    int rc = 0;
    if (g->at < g->n_draft && !g->rs_snap)
        eng_session_rewind(g->s, valid);
    else if (g->at < g->n_draft) {
        eng_session_rs_restore(g->s, 0, g->rs_snap, g->span_pos0);
        eng_session_rewind(g->s, g->span_pos0);
        rc = eng_session_eval(g->s, g->hist + g->span_pos0, valid - g->span_pos0, false, g->rows,
                              err);
    }
    g->n_draft = g->at = 0;
    return rc;
}

/* The logits after token id: the next row of a draft's span when id is
 * the draft's next token (already in the sequence), else a new span: id
 * and, with --spec-type, a draft of what follows it (at most what the
 * context and limit leave), checked a row at a time by the samples that
 * follow. */
static int next_logits(struct run_gen *g, int32_t id, int limit, struct fl_err *err)
{
    if (!g->spec_on)
        return eng_session_eval(g->s, &id, 1, false, g->logits, err);
    const size_t row = (size_t)g->n_vocab;
    if (draft_keeps(g, id)) {
        g->at++, g->kept++;
        memcpy(g->logits, g->rows + g->at * row, sizeof(float) * row);
        return hist_push(g, &id, 1) ? fl_err_set(err, -ENOMEM, "out of memory") : 0;
    }
    int rc = spec_drop(g, err);
    if (rc)
        return rc;
    int most = eng_session_n_ctx(g->s) - eng_session_n_past(g->s) - 1;
    most = most < ENG_SPEC_DRAFT_MAX ? most : ENG_SPEC_DRAFT_MAX;
    if (limit >= 0 && limit - g->n_made - 1 < most)
        most = limit - g->n_made - 1;
    int32_t span[1 + ENG_SPEC_DRAFT_MAX] = { id };
    int nd = most > 0 ? eng_spec_draft(&g->o->spec, g->hist, g->n_hist, &id, 1, span + 1, most) : 0;
    struct eng_draft_job job = { .seq = 0, .a = g->hist, .na = g->n_hist, .b = &id, .nb = 1,
                                 .max = most, .out = span + 1 };
    rc = nd == 0 && most > 0 && g->dr ? eng_drafter_draft(g->dr, &job, 1, 0, err) : 0;
    if (rc)
        return rc;
    nd = nd ? nd : job.n;
    g->span_pos0 = eng_session_n_past(g->s);
    if (nd && g->rs_snap) /* the state the span starts from, should the draft be rejected */
        eng_session_rs_save(g->s, 0, g->rs_snap);
    rc = eng_session_eval(g->s, span, 1 + nd, nd > 0, nd ? g->rows : g->logits, err);
    if (rc)
        return rc;
    if (nd) {
        memcpy(g->draft, span + 1, sizeof(int32_t) * (size_t)nd);
        memcpy(g->logits, g->rows, sizeof(float) * row);
        g->n_draft = nd, g->at = 0, g->drafted += (uint64_t)nd;
    }
    return hist_push(g, &id, 1) ? fl_err_set(err, -ENOMEM, "out of memory") : 0;
}

int run_gen_think(struct run_gen *g, enum fl_chat_format fmt, struct fl_err *err)
{
    if (g->o->think_budget < 0 || g->cons)
        return 0;
    const struct fl_chat_opts co = run_chat_opts(g->o);
    const bool opened = fl_chat_opens_reasoning(fmt, NULL, 0, &co); /* after the user's turn */
    const int rc = fl_think_budget_init(&g->think, eng_session_tokenizer(g->s),
                                        fl_chat_reasoning_tags(fmt), opened, g->o->think_budget,
                                        g->o->think_message);
    g->think_on = rc == 0;
    return rc ? fl_err_set(err, rc, "--reasoning-budget: %s", rc == -ENOMEM ? "out of memory"
                                                              : "nothing to force") : 0;
}

void run_gen_free(struct run_gen *g)
{
    fl_think_budget_free(&g->think);
    fl_sampler_free(g->smp);
    fl_mask_vocab_free(g->jv);
    fl_constraint_free(g->cons);
    fl_grammar_free(g->grammar);
    free(g->masked);
    free(g->logits);
    free(g->eog);
    free(g->answer);
    free(g->hist);
    free(g->rows);
    free(g->rs_snap);
    eng_drafter_close(g->dr);
    memset(g, 0, sizeof(*g));
}

int run_gen_feed(struct run_gen *g, const int32_t *ids, int n, struct fl_err *err)
{
    const int extra = g->unfed ? 1 : 0;
    if (eng_session_n_past(g->s) + n + extra > eng_session_n_ctx(g->s))
        return fl_err_set(err, -ENOSPC, "%d more tokens do not fit the context (%d of %d used, -c)",
                          n + extra, eng_session_n_past(g->s), eng_session_n_ctx(g->s));
    int32_t *all = malloc(sizeof(int32_t) * (size_t)(n + extra));
    if (!all)
        return fl_err_set(err, -ENOMEM, "out of memory");
    if (extra)
        all[0] = g->unfed_id;
    memcpy(all + extra, ids, sizeof(int32_t) * (size_t)n);
    for (int i = 0; i < n; i++)
        fl_sampler_accept(g->smp, ids[i]);
    double t0 = fl_clock_s();
    int rc = eng_session_eval(g->s, all, n + extra, false, g->logits, err);
    g->t_prompt = fl_clock_s() - t0;
    g->n_prompt = rc == -EINTR ? -1 : n + extra; /* -1: stopped part way */
    if (!rc)
        g->unfed = false;
    if (!rc && g->spec_on && hist_push(g, all, n + extra))
        rc = fl_err_set(err, -ENOMEM, "out of memory");
    free(all);
    return rc;
}

int run_gen_skip(struct run_gen *g, const int32_t *ids, int n, struct fl_err *err)
{
    for (int i = 0; i < n; i++)
        fl_sampler_accept(g->smp, ids[i]);
    if (n > 0 && g->spec_on && hist_push(g, ids, n))
        return fl_err_set(err, -ENOMEM, "out of memory");
    return 0;
}

static void append(struct run_gen *g, const char *s, size_t n)
{
    if (g->answer_len + n + 1 > g->answer_cap) {
        size_t cap = 2 * (g->answer_len + n + 1) + 256;
        char *a = realloc(g->answer, cap);
        if (!a)
            return; /* the reverse prompts then see a shorter text; the output is printed */
        g->answer = a;
        g->answer_cap = cap;
    }
    memcpy(g->answer + g->answer_len, s, n);
    g->answer_len += n;
    g->answer[g->answer_len] = '\0';
}

/* llama.cpp's check: a reverse prompt anywhere in the last len + 2 bytes
 * (a piece may carry characters after it). */
static bool reverse_seen(const struct run_gen *g)
{
    for (int i = 0; i < g->o->n_reverse; i++) {
        const size_t n = strlen(g->o->reverse[i]), back = n + 2;
        const size_t from = g->answer_len > back ? g->answer_len - back : 0;
        if (n && g->answer && strstr(g->answer + from, g->o->reverse[i]))
            return true;
    }
    return false;
}

static bool is_eog(const struct run_gen *g, int32_t id)
{
    for (int i = 0; i < g->n_eog; i++)
        if (g->eog[i] == id)
            return true;
    return false;
}

/* The next token: --ignore-eos takes the end-of-generation tokens out of
 * the draw, as llama.cpp's logit bias of -inf does; a JSON schema or a
 * grammar, every token that cannot continue the answer. -1: none. */
static int32_t sample(struct run_gen *g)
{
    if (g->o->ignore_eos)
        for (int i = 0; i < g->n_eog; i++)
            g->logits[g->eog[i]] = -INFINITY;
    if (g->cons && !fl_constraint_mask(g->cons, g->jv, g->logits, g->masked))
        return -1;
    return fl_sampler_sample(g->smp, g->cons ? g->masked : g->logits);
}

/* The answer keeps the text a chat's history and the stop strings read;
 * -sp also prints control tokens' text (the end of turn included). */
static void emit(struct run_gen *g, int32_t id, bool display)
{
    const struct fl_tokenizer *tok = eng_session_tokenizer(g->s);
    char buf[256];
    int n = fl_token_to_piece(tok, id, buf, sizeof(buf), false, false);
    if (n > 0 && (size_t)n <= sizeof(buf))
        append(g, buf, (size_t)n);
    if (display && g->o->special)
        n = fl_token_to_piece(tok, id, buf, sizeof(buf), false, true);
    if (display && n > 0 && (size_t)n <= sizeof(buf)) {
        fwrite(buf, 1, (size_t)n, stdout);
        fflush(stdout);
    }
}

int run_gen_answer(struct run_gen *g, int limit, bool display, enum run_stop *why,
                   struct fl_err *err)
{
    g->answer_len = 0;
    g->n_made = 0;
    if (g->answer)
        g->answer[0] = '\0';
    if (g->cons)
        fl_constraint_reset(g->cons);
    fl_think_budget_reset(&g->think);
    double t0 = fl_clock_s(), t1 = t0;
    int rc = 0;
    for (;;) {
        if (cli_interrupted()) {
            *why = RUN_STOP_INTERRUPT;
            break;
        }
        if (limit == 0) { /* -n 0: the prompt only */
            *why = RUN_STOP_LIMIT;
            break;
        }
        const int32_t forced = g->think_on ? fl_think_budget_next(&g->think, g->answer,
                                                                  g->answer_len, g->n_made)
                                           : -1;
        int32_t id = forced >= 0 ? forced : sample(g);
        if (id < 0) {
            rc = fl_err_set(err, -EINVAL, "no token can be drawn (the logits are not finite, "
                            "or --logit-bias%s left none)", g->o->schema    ? " or the JSON schema"
                                                       : g->grammar ? " or the grammar"
                                                                    : "");
            break;
        }
        if (g->cons && !fl_constraint_accept(g->cons, g->jv, id)) {
            rc = fl_err_set(err, -EINVAL, "a token the mask allowed does not continue the "
                            "answer");
            break;
        }
        if (is_eog(g, id) && !g->o->ignore_eos) {
            *why = RUN_STOP_EOG; /* not fed: the chat format's end-of-turn text says it */
            if (g->o->special)
                emit(g, id, display);
            break;
        }
        fl_sampler_accept(g->smp, id);
        emit(g, id, display);
        g->n_made++;
        g->unfed = true;
        g->unfed_id = id;
        if (reverse_seen(g)) {
            *why = RUN_STOP_REVERSE;
            break;
        }
        if (g->cons && fl_constraint_done(g->cons)) {
            *why = RUN_STOP_VALUE;
            break;
        }
        if (limit >= 0 && g->n_made >= limit) {
            *why = RUN_STOP_LIMIT;
            break;
        }
        if (!draft_keeps(g, id) && valid_past(g) + 1 > eng_session_n_ctx(g->s)) {
            *why = RUN_STOP_CONTEXT;
            break;
        }
        g->unfed = false;
        if ((rc = next_logits(g, id, limit, err)))
            break;
        t1 = fl_clock_s();
    }
    /* an answer that ended inside a draft: the rest was not said */
    const int dropped = spec_drop(g, rc ? NULL : err);
    rc = rc ? rc : dropped;
    g->t_gen = t1 - t0;
    return rc;
}

void run_gen_print_speed(const struct run_gen *g)
{
    if (g->o->compat.log_disable)
        return;
    /* the first answer token comes from the prompt's logits: n - 1 decodes */
    const int decodes = g->n_made > 1 ? g->n_made - 1 : 0;
    if (g->n_prompt < 0) {
        fprintf(stderr, "prompt: interrupted after %.3f s\n", g->t_prompt);
        return;
    }
    fprintf(stderr, "prompt: %d tokens in %.3f s (%.2f t/s); generation: %d tokens in %.3f s "
            "(%.2f t/s)\n", g->n_prompt, g->t_prompt,
            g->t_prompt > 0 ? g->n_prompt / g->t_prompt : 0.0, g->n_made, g->t_gen,
            decodes && g->t_gen > 0 ? decodes / g->t_gen : 0.0);
    if (g->drafted)
        fprintf(stderr, "speculative decoding: %llu draft tokens, %llu kept (%.1f %%)\n",
                (unsigned long long)g->drafted, (unsigned long long)g->kept,
                100.0 * (double)g->kept / (double)g->drafted);
}
