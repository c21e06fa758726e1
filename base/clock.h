/* clock.h: the monotonic clock in seconds, for the timings the commands,
 * the scheduler and the server print and compare. */
#ifndef FL_CLOCK_H
#define FL_CLOCK_H

/* CLOCK_MONOTONIC as seconds (not wall time: it never steps back). */
double fl_clock_s(void);

#endif
