/* think-budget.h: llama-server's reasoning budget. Once a thinking model's
 * reasoning (reasoning.h) holds `budget` tokens, a message and the close
 * tag are forced, one token a step, each once the answer ends on a whole
 * UTF-8 character, so the model answers instead of thinking on. One state
 * per answer, for the scheduler's requests and run's answers alike. */
#ifndef FL_TEXT_THINK_BUDGET_H
#define FL_TEXT_THINK_BUDGET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "text/reasoning.h"

struct fl_tokenizer;

struct fl_think_budget {
    const struct fl_reasoning_tags *tags;
    bool opened;    /* the prompt left the model inside its reasoning */
    bool over;      /* the reasoning closed, or there is none: nothing more to do */
    int budget;     /* tokens of reasoning */
    int from;       /* tokens made when the reasoning was first seen open (-1) */
    int32_t *force; /* the message and the close tag, tokenized */
    int n_force, forced;
};

/* budget >= 0 tokens of reasoning under tags (NULL: <think>), then message
 * (NULL: none) and the close tag. 0, -EINVAL (a negative budget, nothing
 * to force), -ENOMEM. */
int fl_think_budget_init(struct fl_think_budget *b, const struct fl_tokenizer *tok,
                         const struct fl_reasoning_tags *tags, bool opened, int budget,
                         const char *message);
void fl_think_budget_free(struct fl_think_budget *b);

/* Back to an empty answer (a restart). */
void fl_think_budget_reset(struct fl_think_budget *b);

/* The token to force after an answer of n_made tokens whose text is
 * text[0, len), or -1: none (the budget is not spent, the reasoning is
 * closed or was never opened, or a character is not whole yet). A forced
 * token counts as made. */
int32_t fl_think_budget_next(struct fl_think_budget *b, const char *text, size_t len,
                             int n_made);

#endif
