/* think-budget.c: the reasoning budget (think-budget.h), as llama.cpp's
 * reasoning-budget sampler. */
#include "text/think-budget.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/tokenizer.h"
#include "text/unicode.h"

int fl_think_budget_init(struct fl_think_budget *b, const struct fl_tokenizer *tok,
                         const struct fl_reasoning_tags *tags, bool opened, int budget,
                         const char *message)
{
    *b = (struct fl_think_budget){ .tags = tags ? tags : &fl_think_tags, .opened = opened,
                                   .budget = budget, .from = -1 };
    if (budget < 0)
        return -EINVAL;
    char *t = NULL;
    if (asprintf(&t, "%s%s", message ? message : "", b->tags->close) < 0)
        return -ENOMEM;
    const int n = fl_tokenize_alloc(tok, t, strlen(t), false, true, &b->force);
    free(t);
    if (n <= 0) {
        free(b->force);
        b->force = NULL;
        return n < 0 ? n : -EINVAL;
    }
    b->n_force = n;
    return 0;
}

void fl_think_budget_free(struct fl_think_budget *b)
{
    free(b->force);
    b->force = NULL;
    b->n_force = 0;
}

void fl_think_budget_reset(struct fl_think_budget *b)
{
    b->over = false;
    b->from = -1;
    b->forced = 0;
}

int32_t fl_think_budget_next(struct fl_think_budget *b, const char *text, size_t len,
                             int n_made)
{
    if (b->over || b->forced == b->n_force)
        return -1;
    if (b->forced > 0) /* the rest of the message, whatever the text says */
        return b->force[b->forced++];
    struct fl_reasoning_split sp;
    fl_reasoning_split_tags(b->tags, text, len, b->opened, false, &sp);
    b->over = sp.state == FL_REASONING_NONE || sp.state == FL_REASONING_CLOSED;
    if (sp.state != FL_REASONING_OPEN)
        return -1;
    if (b->from < 0)
        b->from = n_made;
    if (n_made - b->from < b->budget || fl_utf8_whole(text, len) != len)
        return -1;
    return b->force[b->forced++];
}
