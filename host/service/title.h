/* SPDX-License-Identifier: MIT */
/* title: automatic session titles from the first user message. */
#ifndef MEMD_HOST_TITLE_H
#define MEMD_HOST_TITLE_H

#define TITLE_MAX_CHARS 60

/* A title for text: white space collapsed to single spaces and trimmed,
 * cut to at most TITLE_MAX_CHARS code points on a word boundary; when cut,
 * it ends with "…" (counted in the limit). A first word longer than the
 * limit is cut inside the word. Returns a malloc'd string, or NULL when
 * text has nothing visible or on ENOMEM. */
char *title_from_text(const char *text);

#endif
