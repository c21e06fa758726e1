/* rope.h: RoPE angle tables on the host (the rotation itself is a backend
 * op, model/backend.h's eng_rope; YaRN tables: model/yarn.h). */
#ifndef FL_ROPE_H
#define FL_ROPE_H

/* (cos, sin) pairs, n_rot/2 of them per position, for positions pos[0 ..
 * n_pos-1] as ggml's rope cache with no YaRN:
 * theta_i = pos * freq_scale * base^(-2i/n_rot) (powers accumulated by
 * repeated float multiplication, as ggml). */
#include <stdint.h>

void eng_rope_cache(float *cs, int n_rot, float freq_base, float freq_scale, const int32_t *pos,
                    int n_pos);

#endif
