/* run-chat.c: `faultline run`'s conversation mode (run.h).
 *
 * The history stays in the KV cache: each turn renders the whole
 * conversation in the chat format and feeds only what follows the text
 * the cache already holds (the last render plus the answer as made). When
 * a format renders an earlier turn differently once later turns exist (a
 * thinking model's answer loses its reasoning once the user speaks again;
 * GLM-4.5 writes an answer inside its <think></think> turn), the text no
 * longer extends what was fed: the cache goes back to the end of the last
 * feed that the new text still begins with (before that turn's answer), and
 * what follows is fed from there (a recurrent model's state cannot go
 * back: from the start). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <unistd.h>

#include "app/cli/interrupt.h"
#include "app/cli/run.h"
#include "text/reasoning.h"
#include "text/tokenizer.h"

struct chat {
    struct run_gen g;
    enum fl_chat_format fmt;
    struct fl_chat_msg *msgs; /* contents owned */
    size_t n_msgs, cap;
    char *fed;                /* the text the KV cache holds */
    size_t fed_len;
    /* where each feed ended (before its answer): its offset in fed and the
     * cache's n_past then */
    struct mark {
        size_t text;
        int pos;
    } *marks;
    int n_marks, cap_marks;
    /* --prompt-cache: the first turn (the system prompt's) is read from and
     * kept in the file, as llama-completion keeps a conversation's first
     * prompt */
    struct run_cache cache;
    bool cache_open;
};

static int add_msg(struct chat *c, const char *role, const char *content, size_t len)
{
    if (c->n_msgs == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 8;
        struct fl_chat_msg *m = realloc(c->msgs, cap * sizeof(*m));
        if (!m)
            return -ENOMEM;
        c->msgs = m;
        c->cap = cap;
    }
    char *copy = strndup(content ? content : "", len);
    if (!copy)
        return -ENOMEM;
    c->msgs[c->n_msgs++] = (struct fl_chat_msg){ .role = role, .content = copy };
    return 0;
}

/* The answer as the next turn's render takes it: in gpt-oss's format, its
 * final channel as content and its analysis as reasoning (the template
 * refuses channel tags in content); as written in the others, whose
 * templates split a <think> themselves. */
static int add_answer(struct chat *c, const char *text, size_t len)
{
    if (c->fmt != FL_CHAT_GPT_OSS)
        return add_msg(c, "assistant", text, len);
    struct fl_reasoning_split sp;
    fl_reasoning_split_tags(fl_chat_reasoning_tags(c->fmt), text, len, false, true, &sp);
    if (add_msg(c, "assistant", text + sp.c_off, sp.c_len))
        return -ENOMEM;
    if (sp.r_len && !(c->msgs[c->n_msgs - 1].reasoning = strndup(text + sp.r_off, sp.r_len)))
        return -ENOMEM;
    return 0;
}

static void chat_free(struct chat *c)
{
    for (size_t i = 0; i < c->n_msgs; i++) {
        free((char *)c->msgs[i].content);
        free((char *)c->msgs[i].reasoning);
    }
    free(c->msgs);
    free(c->fed);
    free(c->marks);
    run_gen_free(&c->g);
}

/* The cache back to the end of the last feed that r (n bytes) still
 * begins with; the text offset to feed r from. */
static size_t rewind_to(struct chat *c, const char *r, size_t n)
{
    int k = c->n_marks;
    while (k > 0 && (c->marks[k - 1].text > n || memcmp(r, c->fed, c->marks[k - 1].text)))
        k--;
    c->g.unfed = false; /* the last answer's token goes with the rest */
    if (k > 0 && eng_session_rewind(c->g.s, c->marks[k - 1].pos) == 0) {
        c->n_marks = k;
        return c->marks[k - 1].text;
    }
    eng_session_reset(c->g.s);
    c->n_marks = 0;
    return 0;
}

static int mark(struct chat *c, size_t from)
{
    if (c->n_marks == c->cap_marks) {
        const int cap = c->cap_marks ? 2 * c->cap_marks : 16;
        struct mark *m = realloc(c->marks, sizeof(*m) * (size_t)cap);
        if (!m)
            return -ENOMEM;
        c->marks = m;
        c->cap_marks = cap;
    }
    c->marks[c->n_marks++] = (struct mark){ from, eng_session_n_past(c->g.s) };
    return 0;
}

/* Feeds what the rendered conversation adds to what the cache holds. */
static int feed_turn(struct chat *c, struct fl_err *err)
{
    char *r = NULL;
    int n = run_chat_render(c->g.o, c->fmt, c->msgs, c->n_msgs, &r);
    if (n < 0)
        return fl_err_set(err, n, "cannot apply the chat format: %s", strerror(-n));
    size_t from = c->fed_len;
    if (c->fed_len && (c->fed_len > (size_t)n || memcmp(r, c->fed, c->fed_len)))
        from = rewind_to(c, r, (size_t)n); /* see the top of the file */
    int32_t *ids = NULL;
    const struct fl_tokenizer *tok = eng_session_tokenizer(c->g.s);
    int k = fl_tokenize_alloc(tok, r + from, (size_t)n - from, from == 0, true, &ids);
    int rc = k < 0 ? fl_err_set(err, k, "cannot tokenize the turn: %s", strerror(-k)) : 0;
    if (!rc && c->cache_open) {
        if (!(rc = run_cache_read(&c->g, &c->cache, ids, k, err)))
            rc = run_cache_feed(&c->g, &c->cache, ids, k, err);
        run_cache_end(&c->cache);
        c->cache_open = false;
        if (rc == -EINTR) /* rows read or whole units fed: start the turn again from nothing */
            eng_session_reset(c->g.s);
    } else if (!rc) {
        rc = run_gen_feed(&c->g, ids, k, err);
    }
    if (rc == -EINTR && cli_interrupted()) {
        /* Ctrl-C while the turn was read in: the turn is dropped; the cache
         * still holds exactly what was fed before (n_past did not move) */
        c->n_msgs--;
        free((char *)c->msgs[c->n_msgs].content);
        free(r);
        c->fed_len = from;  /* what a rewind left (from = fed_len without one) */
        if (c->fed)
            c->fed[from] = '\0';
        return -EINTR;
    }
    free(ids);
    free(c->fed);
    c->fed = rc ? NULL : r;
    c->fed_len = rc ? 0 : (size_t)n;
    if (rc)
        free(r);
    else if (mark(c, (size_t)n)) /* a later render may start again here */
        return fl_err_set(err, -ENOMEM, "out of memory");
    return rc;
}

/* The answer, printed as it comes, then added to the history. */
static int answer(struct chat *c, struct fl_err *err)
{
    enum run_stop why = RUN_STOP_LIMIT;
    const struct run_opts *o = c->g.o;
    int rc = run_gen_answer(&c->g, o->n_gen, true, &why, err);
    printf("\n");
    fflush(stdout);
    if (rc)
        return rc;
    if (why == RUN_STOP_INTERRUPT)
        cli_interrupt_clear(); /* the answer stopped; the conversation goes on */
    if (why == RUN_STOP_CONTEXT && !o->compat.log_disable)
        fprintf(stderr, "[context of %d tokens is full]\n", eng_session_n_ctx(c->g.s));
    run_gen_print_speed(&c->g);
    char *fed = realloc(c->fed, c->fed_len + c->g.answer_len + 1);
    if (!fed)
        return fl_err_set(err, -ENOMEM, "out of memory");
    memcpy(fed + c->fed_len, c->g.answer ? c->g.answer : "", c->g.answer_len);
    c->fed = fed;
    c->fed_len += c->g.answer_len;
    c->fed[c->fed_len] = '\0';
    return add_answer(c, c->g.answer, c->g.answer_len) ? -ENOMEM : 0;
}

enum read_result { READ_LINE, READ_EXIT, READ_INTERRUPT };

/* One byte of input, waiting in slices: the signal may land in any of the
 * engine's threads, so a blocked read would not see EINTR. 1 a byte, 0 end
 * of input, -1 interrupted. */
static int read_byte(char *c)
{
    for (;;) {
        if (cli_interrupted())
            return -1;
        struct pollfd p = { .fd = STDIN_FILENO, .events = POLLIN };
        int r = poll(&p, 1, 100);
        if (r < 0 && errno != EINTR)
            return 0;
        if (r <= 0)
            continue;
        ssize_t n = read(STDIN_FILENO, c, 1);
        if (n == 1)
            return 1;
        if (n == 0 || errno != EINTR)
            return 0;
    }
}

/* One user turn: lines ending in a backslash continue. */
static enum read_result read_turn(char **text, size_t *len)
{
    size_t cap = 0;
    *len = 0;
    *text = NULL;
    fputs("\n> ", stdout);
    fflush(stdout);
    for (;;) {
        char c;
        int r = read_byte(&c);
        if (r < 0)
            return READ_INTERRUPT;
        if (r == 0 && !*len)
            return READ_EXIT;
        if (r == 0 || c == '\n') {
            if (*len && (*text)[*len - 1] == '\\' && r) {
                (*text)[*len - 1] = '\n';
                continue;
            }
            break;
        }
        if (*len + 2 > cap) {
            cap = 2 * cap + 64;
            char *t = realloc(*text, cap);
            if (!t)
                break;
            *text = t;
        }
        (*text)[(*len)++] = c;
        (*text)[*len] = '\0';
    }
    if (*len && !strcmp(*text, "/exit"))
        return READ_EXIT;
    return READ_LINE;
}

static int turns(struct chat *c, struct fl_err *err)
{
    const struct run_opts *o = c->g.o;
    bool first = o->prompt != NULL; /* -p pre-starts the conversation, as in llama.cpp */
    for (;;) {
        char *text = NULL;
        size_t len = 0;
        enum read_result r = READ_LINE;
        if (first)
            len = strlen(o->prompt);
        else
            r = read_turn(&text, &len);
        if (r == READ_EXIT || r == READ_INTERRUPT) {
            free(text);
            if (r == READ_INTERRUPT)
                printf("\n");
            return r == READ_INTERRUPT ? cli_interrupt_status(cli_interrupted()) : 0;
        }
        int rc = len ? add_msg(c, "user", first ? o->prompt : text, len) : 0;
        free(text);
        first = false;
        if (!len)
            continue;
        if (!rc && (rc = feed_turn(c, err)) == -EINTR) {
            cli_interrupt_clear();
            printf("\n");
            continue;
        }
        if (rc || (rc = answer(c, err)))
            return rc == -ENOMEM ? fl_err_set(err, rc, "out of memory") : rc;
    }
}

int run_chat(struct eng_session *s, const struct run_opts *o, struct fl_err *err)
{
    struct chat c = { .fmt = run_chat_format(s, o) };
    if (c.fmt == FL_CHAT_UNKNOWN)
        return fl_err_set(err, -EINVAL, "a conversation needs a chat format: this model names "
                          "none faultline knows (--chat-template NAME, or -no-cnv)");
    int rc = run_gen_init(&c.g, s, o, err);
    if (!rc)
        rc = run_gen_think(&c.g, c.fmt, err);
    if (!rc && o->system_prompt && add_msg(&c, "system", o->system_prompt, strlen(o->system_prompt)))
        rc = fl_err_set(err, -ENOMEM, "out of memory");
    /* a file that cannot be used fails before the first turn is asked for */
    c.cache = (struct run_cache){ .out = FL_OUT_NONE };
    if (!rc && o->prompt_cache && !(rc = run_cache_begin(&c.g, &c.cache, NULL, 0, err)))
        c.cache_open = true;
    if (!rc && !o->compat.log_disable)
        fprintf(stderr, "faultline run: a conversation in the %s format; /exit or Ctrl-C at the "
                "prompt ends it, Ctrl-C stops an answer\n", fl_chat_format_name(c.fmt));
    if (!rc)
        rc = turns(&c, err);
    run_cache_end(&c.cache); /* (a no-op after the first turn's) */
    chat_free(&c);
    return rc;
}
