/* SPDX-License-Identifier: MIT */
#include "qgen.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define QGEN_TEXT_MAX 512
#define QGEN_FACTS_PER_SESSION 3
#define QGEN_ROLE_USER 0
#define QGEN_ROLE_ASSISTANT 1
#define QGEN_BASE_TS_US 1767225600000000LL   /* 2026-01-01T00:00:00Z */
#define QGEN_SESSION_GAP_US 86400000000LL    /* a day between sessions */
#define QGEN_TURN_GAP_US 45000000LL          /* 45 s between turns */
#define QGEN_DISTRACT_PAIRS 2                /* small-talk pairs after a fact */
#define QGEN_GOLDEN 0x9E3779B97F4A7C15ULL
#define QGEN_NUM_BASE 1000                   /* {Y}: QGEN_NUM_BASE + k * QGEN_NUM_STEP */
#define QGEN_NUM_STEP 100
#define QGEN_NUM_STEPS 90
#define QGEN_YEAR_BASE 2027
#define QGEN_YEARS 5
#define QGEN_DAYS 28
#define QGEN_HOUR_BASE 7
#define QGEN_HOURS 12
#define QGEN_DIGITS 9
#define QGEN_EVENTS_MIN 1024                 /* first capacities */
#define QGEN_FACTS_MIN 64
#define QGEN_QUESTIONS_MIN 256

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

/* ---- PRNG (splitmix64; its published constants) ---------------------------- */

static uint64_t mix(uint64_t *s)
{
	uint64_t z = (*s += QGEN_GOLDEN);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

static uint32_t pick(uint64_t *s, uint32_t n)
{
	return (uint32_t)(mix(s) % n);
}

/* ---- vocabulary ------------------------------------------------------------ */

static const char *const names[] = {
	"Priya", "Marco", "Aiko", "Tomasz", "Fatima", "Lucas", "Ingrid", "Kwame", "Sofia",
	"Dmitri", "Leila", "Oscar", "Hannah", "Rafael", "Mei", "Jonas", "Amara", "Felix",
	"Nadia", "Theo", "Greta", "Mateo", "Yusuf", "Clara",
};
static const char *const cities[] = {
	"Lisbon", "Kyoto", "Reykjavik", "Marrakesh", "Vancouver", "Tallinn", "Oaxaca", "Hanoi",
	"Dubrovnik", "Porto", "Seville", "Krakow", "Edinburgh", "Valparaiso", "Bergen", "Tbilisi",
	"Ljubljana", "Cusco",
};
static const char *const months[] = {
	"January", "February", "March", "April", "May", "June", "July", "August", "September",
	"October", "November", "December",
};
static const char *const minutes[] = { "00", "15", "20", "30", "40", "45" };
static const char *const dishes[] = {
	"risotto", "lasagna", "ramen", "paella", "curry", "gnocchi", "tagine", "dumplings",
	"moussaka", "enchiladas", "goulash", "pho",
};
static const char *const allergens[] = {
	"peanuts", "shellfish", "sesame", "walnuts", "gluten", "lactose", "almonds", "soy",
};
static const char *const meds[] = {
	"ibuprofen", "metformin", "lisinopril", "amoxicillin", "melatonin", "atorvastatin",
	"levothyroxine", "omeprazole",
};
static const char *const proglangs[] = {
	"Rust", "Python", "Go", "TypeScript", "Kotlin", "Haskell", "Elixir", "Zig",
};
static const char *const databases[] = {
	"PostgreSQL", "Redis", "SQLite", "Cassandra", "MongoDB", "ClickHouse",
};
static const char *const pets[] = {
	"Biscuit", "Pepper", "Mochi", "Luna", "Rocket", "Waffles", "Ziggy", "Olive",
};
static const char *const tongues[] = {
	"Portuguese", "Japanese", "Icelandic", "Arabic", "Korean", "Polish", "Georgian", "Swahili",
};
static const char *const companies[] = {
	"Northwind", "Globex", "Initech", "Umbrella Labs", "Hooli", "Vandelay", "Stark Logistics",
	"Acme Robotics",
};
static const char *const shops[] = {
	"Kitchen Corner", "the flea market", "Lodge Outlet", "Harlow's", "the Sunday bazaar",
	"Copper Pot",
};
static const char *const restaurants[] = {
	"La Pergola", "the Blue Door", "Osteria Nonna", "Sakura House", "the Old Mill",
	"Casa Verde",
};
static const char *const schools[] = {
	"Maple Leaf", "Little Acorns", "Sunflower", "Riverside", "Bright Steps",
};
static const char *const books[] = {
	"The Overstory", "Piranesi", "Middlemarch", "The Dispossessed", "Klara and the Sun",
	"Station Eleven", "Pachinko", "Demon Copperhead",
};
static const char *const apps[] = { "Duolingo", "Babbel", "Memrise", "Busuu" };
static const char *const brokers[] = { "Vanguard", "Fidelity", "Schwab", "Nordnet" };
static const char *const museums[] = {
	"maritime", "modern art", "natural history", "textile", "railway", "photography",
};

typedef struct pool {
	char key;
	const char *const *words;
	size_t n;
} pool;

static const pool pools[] = {
	{ 'N', names, N_OF(names) },         { 'C', cities, N_OF(cities) },
	{ 'F', dishes, N_OF(dishes) },       { 'K', allergens, N_OF(allergens) },
	{ 'M', meds, N_OF(meds) },           { 'L', proglangs, N_OF(proglangs) },
	{ 'B', databases, N_OF(databases) }, { 'P', pets, N_OF(pets) },
	{ 'G', tongues, N_OF(tongues) },     { 'O', companies, N_OF(companies) },
	{ 'S', shops, N_OF(shops) },         { 'R', restaurants, N_OF(restaurants) },
	{ 'H', schools, N_OF(schools) },     { 'W', books, N_OF(books) },
	{ 'V', apps, N_OF(apps) },           { 'I', brokers, N_OF(brokers) },
	{ 'U', museums, N_OF(museums) },
};

/* A fact: one or two statements (the answering turns) and up to three
 * questions asking about it in other words. */
typedef struct fact {
	int role;                  /* of the first statement */
	const char *say;
	int role2;                 /* of the second, if any */
	const char *say2;          /* NULL: one answering turn */
	const char *ask[3];        /* NULL-terminated when fewer */
} fact;

#define U QGEN_ROLE_USER
#define A QGEN_ROLE_ASSISTANT
#define FACTS_MAX 8
#define SMALLTALK_MAX 8

typedef struct topic {
	const char *name;
	fact facts[FACTS_MAX];
	const char *smalltalk[SMALLTALK_MAX]; /* user turns without a fact */
} topic;

static const topic topics[] = {
	{ "travel",
	  { { U, "I finally booked the flights to {C}!", U, "We leave on {D} very early, around {T}.",
	      { "When do I fly out to {C}?", "what date is my flight booking", NULL } },
	    { U, "For the {C} trip we're staying at Hotel {N} near the harbour, room {X}{X}.", 0, NULL,
	      { "Which hotel will we stay at in {C}?", "where am I staying during the trip", NULL } },
	    { A, "Your passport expires on {D} {Z}, so renew it before you travel abroad again.", 0,
	      NULL, { "When does my passport expire?", "passport expiry date", NULL } },
	    { U, "My travel budget for {C} is {Y} euros including the train tickets.", 0, NULL,
	      { "How much money did I budget for travelling to {C}?", "what's my trip budget",
		NULL } },
	    { A, "The train from the airport into central {C} takes about {X}0 minutes and costs {X} euros.",
	      0, NULL, { "How long is the train ride from the {C} airport?",
			 "how do I get from the airport to the city centre", NULL } },
	    { U, "I definitely want to see the {U} museum in {C} on our second day.", 0, NULL,
	      { "Which museum did I want to visit in {C}?", "what museums are on my list", NULL } },
	    { 0 } },
	  { "Do you have any tips for packing light?", "I always forget my phone charger when I travel.",
	    "What's the weather usually like there in spring?", "Have you ever heard good things about {C}?",
	    "Let me check the flight prices again tomorrow.", "Should I get travel insurance this time?",
	    "I need a new suitcase before the next trip.", NULL } },
	{ "cooking",
	  { { U, "My grandmother's {F} recipe uses {X} cloves of garlic and a splash of white wine.", 0,
	      NULL, { "How many garlic cloves go into grandma's {F}?", "the secret of my grandmother's recipe",
		      NULL } },
	    { U, "I'm cooking {F} for {N}'s birthday dinner on {D}.", 0, NULL,
	      { "What will I cook for {N}'s birthday?", "which dish am I making for the birthday dinner",
		NULL } },
	    { U, "{N} is allergic to {K}, so nothing with {K} at the party please.", 0, NULL,
	      { "Who can't eat {K}?", "which guest has a food allergy", NULL } },
	    { A, "Bake the sourdough at 2{X}0 degrees for {X}5 minutes with the lid on, then uncover it.",
	      0, NULL, { "At what temperature should the sourdough be baked?",
			 "how long do I bake my bread", NULL } },
	    { U, "I bought a cast iron skillet at {S} for {X}{X} dollars.", 0, NULL,
	      { "Where did I buy the skillet?", "how much was the cast-iron pan", NULL } },
	    { U, "My favourite place for {F} is {R}, we go there every anniversary.", 0, NULL,
	      { "Which restaurant has my favorite {F}?", "where do we celebrate our anniversaries",
		NULL } },
	    { 0 } },
	  { "I need some ideas for a quick weeknight dinner.", "Is it worth buying a stand mixer?",
	    "What herbs go well with roasted vegetables?", "I burned the rice again yesterday.",
	    "Can I freeze leftover {F}?", "How do I keep my knives sharp?",
	    "Let me know some good vegetarian recipes.", NULL } },
	{ "code",
	  { { U, "Our service is written in {L} and talks to {B} through a pool of {X}{X} connections.",
	      0, NULL, { "How big is the database connection pool?", "what language is the service written in",
			 NULL } },
	    { U, "The deploy to production is scheduled for {D} at {T}.", 0, NULL,
	      { "When are we deploying to production?", "release date for prod", NULL } },
	    { U, "I keep getting a segfault in the parser when the input has more than {X}{X}{X} lines.",
	      0, NULL, { "What makes the parser crash?", "why does the parser segfault", NULL } },
	    { A, "Set the cache TTL to {X}{X} seconds in config.yaml under the {B} section.", 0, NULL,
	      { "What TTL should the cache use?", "how many seconds do cached entries live", NULL } },
	    { U, "My teammate {N} reviews all pull requests for the billing module.", 0, NULL,
	      { "Who reviewed the billing pull request?", "who does code review for billing", NULL } },
	    { U, "The API rate limit is {X}{X}{X} requests per minute per token.", 0, NULL,
	      { "What's the request limit of the API?", "how many API calls can a token make",
		NULL } },
	    { 0 } },
	  { "Can you explain how a mutex differs from a semaphore?", "I should write more unit tests.",
	    "The CI pipeline is slow again today.", "Do you prefer tabs or spaces?",
	    "I'm thinking about rewriting the service in {L}.", "Our logs are way too noisy.",
	    "How do I profile memory usage?", NULL } },
	{ "health",
	  { { U, "My doctor, Dr. {N}, put me on {X}{X}0 mg of {M} twice a day.", 0, NULL,
	      { "What dose of {M} did the doctor prescribe?", "which medication am I taking",
		NULL } },
	    { U, "I ran {X} kilometres this morning in {X}{X} minutes, my best time so far.", 0, NULL,
	      { "How many kilometres did I run this morning?", "my fastest running time", NULL } },
	    { U, "My dentist appointment is on {D} at {T} with Dr. {N}.", 0, NULL,
	      { "When do I see the dentist?", "date of the dental appointment", NULL } },
	    { U, "I've been sleeping only {X} hours a night since the new job started.", 0, NULL,
	      { "How much sleep am I getting?", "my sleeping hours lately", NULL } },
	    { A, "A blood pressure reading of 1{X}{X} over {X}0 is slightly elevated; check it again next week.",
	      0, NULL, { "What was my last blood pressure measurement?", "is my pressure too high",
			 NULL } },
	    { U, "I got the flu vaccine at the pharmacy on {D}.", 0, NULL,
	      { "When was I vaccinated against the flu?", "date of my flu shot", NULL } },
	    { 0 } },
	  { "I should drink more water during the day.", "My back hurts after sitting all day.",
	    "Is yoga good for stress?", "I want to start stretching every morning.",
	    "Any tips for eating less sugar?", "I skipped the gym again this week.",
	    "How many steps a day is healthy?", NULL } },
	{ "finance",
	  { { U, "I put {Y} dollars into an index fund at {I} last month.", 0, NULL,
	      { "How much did I invest in the index fund?", "which broker holds my investments",
		NULL } },
	    { U, "Our rent goes up to {Y} a month starting {D}.", 0, NULL,
	      { "What will the new rent be?", "when does the rent increase", NULL } },
	    { U, "I'm saving {X}00 a month for a down payment on a flat in {C}.", 0, NULL,
	      { "How much do I save each month for the flat?", "where do I want to buy an apartment",
		NULL } },
	    { A, "Your tax return is due on {D}, and you can deduct the {X}{X}00 home office costs.", 0,
	      NULL, { "When is my tax return deadline?", "what can I deduct from my taxes", NULL } },
	    { U, "The car loan has an interest rate of {X}.{X} percent over {X} years.", 0, NULL,
	      { "What interest rate does my car loan have?", "how long is the loan for the car",
		NULL } },
	    { U, "I split the electricity bill with {N}, it came to {X}{X}{X} euros.", 0, NULL,
	      { "Who did I share the electricity bill with?", "how much was the power bill", NULL } },
	    { 0 } },
	  { "I need to get better at tracking my spending.", "Are credit cards with cashback worth it?",
	    "Inflation is making groceries so expensive.", "Should I pay off debt or invest first?",
	    "I want to set up an emergency fund.", "My bank app keeps logging me out.",
	    "How do pensions work in {C}?", NULL } },
	{ "family",
	  { { U, "My sister {N} is getting married in {C}!", U, "The wedding is on {D}, I'm her maid of honour.",
	      { "When does my sister marry?", "where and when is {N}'s wedding", NULL } },
	    { U, "My son {N} starts kindergarten at {H} in September.", 0, NULL,
	      { "Which kindergarten will my son attend?", "when does {N} start school", NULL } },
	    { U, "Mom's {X}0th birthday party is at {R} on {D}.", 0, NULL,
	      { "Where are we celebrating my mother's birthday?", "date of mom's party", NULL } },
	    { U, "Our dog {P} needs his vaccinations at the vet on {D}.", 0, NULL,
	      { "When is {P}'s vet appointment?", "when does the dog get vaccinated", NULL } },
	    { U, "My nephew {N} is {X} years old and loves dinosaurs.", 0, NULL,
	      { "How old is my nephew?", "what does {N} love", NULL } },
	    { A, "The family reunion is planned for {D} at Uncle {N}'s farm near {C}.", 0, NULL,
	      { "Where will the family reunion take place?", "when is the reunion planned", NULL } },
	    { 0 } },
	  { "My parents are visiting next month.", "The kids have been arguing all week.",
	    "I need a gift idea for my brother.", "We should plan a family photo this year.",
	    "Grandpa keeps calling about his phone.", "How do I get toddlers to sleep earlier?",
	    "Family dinners are chaotic but fun.", NULL } },
	{ "hobbies",
	  { { U, "I'm learning {G} on {V} and I'm on a {X}{X}-day streak.", 0, NULL,
	      { "Which language am I learning?", "how long is my {V} streak", NULL } },
	    { U, "My guitar lesson with {N} is every Thursday at {T}.", 0, NULL,
	      { "When are my guitar lessons?", "who teaches me guitar", NULL } },
	    { U, "We're reading {W} for book club and we meet on {D}.", 0, NULL,
	      { "What book are we reading for the club?", "when is the next book club meeting",
		NULL } },
	    { U, "I planted {X} tomato plants and some basil in the garden.", 0, NULL,
	      { "How many tomatoes did I plant?", "what is growing in my garden", NULL } },
	    { U, "My pottery class at the community centre costs {X}{X}0 dollars for the term.", 0, NULL,
	      { "How much does the pottery course cost?", "price of the ceramics class", NULL } },
	    { A, "For your first marathon in {C}, build up to a {X}0-kilometre long run.", 0, NULL,
	      { "Which marathon am I training for?", "how far should my longest training run be",
		NULL } },
	    { 0 } },
	  { "I want to pick up a new hobby this winter.", "Photography seems fun but expensive.",
	    "I finished a jigsaw puzzle last night.", "Knitting is surprisingly relaxing.",
	    "Can you suggest some podcasts?", "I keep buying books I never read.",
	    "Board game night at my place on Friday.", NULL } },
	{ "work",
	  { { U, "My performance review with {N} is on {D}.", 0, NULL,
	      { "Who is doing my performance review?", "when is my review", NULL } },
	    { U, "I got an offer from {O} for {Y}00 a year.", 0, NULL,
	      { "How much was the job offer from {O}?", "which company made me an offer", NULL } },
	    { U, "Our team offsite is in {C} from {D}.", 0, NULL,
	      { "Where is the team offsite?", "dates of the offsite", NULL } },
	    { U, "The quarterly report has to be submitted by {D}.", 0, NULL,
	      { "What is the deadline for submitting the quarterly report?", "when is the report due",
		NULL } },
	    { A, "You have {X}{X} vacation days left this year, and {X} of them expire in March.", 0, NULL,
	      { "How many days of vacation do I have left?", "remaining holiday allowance", NULL } },
	    { U, "My new manager {N} used to work at {O}.", 0, NULL,
	      { "Where did my manager work before?", "who is my new boss", NULL } },
	    { 0 } },
	  { "Meetings are eating my whole week.", "I should ask for a standing desk.",
	    "How do I say no to extra projects politely?", "The office coffee machine broke again.",
	    "I'm thinking about learning to negotiate better.", "Remote work suits me well.",
	    "My inbox is out of control.", NULL } },
};

static const char *const acks[] = {
	"Sounds like a great plan.",
	"Noted, I'll keep that in mind.",
	"That's good to know, thanks for telling me.",
	"Got it. Let me know if you need anything else.",
	"Here are a few ideas you could consider.",
	"That makes sense. Anything else I can help with?",
	"Good question, it depends on your situation.",
	"I'd suggest writing that down somewhere safe.",
	"Happy to help with that whenever you like.",
	"Interesting! Tell me more when you have time.",
};

#undef U
#undef A

/* ---- expansion -------------------------------------------------------------- */

static const pool *pool_of(char key)
{
	for (size_t i = 0; i < N_OF(pools); i++)
		if (pools[i].key == key)
			return &pools[i];
	return NULL;
}

/* A slot's value depends only on the fact's seed and the slot key, so
 * the statement and the question of one fact agree. */
static uint64_t slot_hash(uint64_t fact_seed, char key)
{
	uint64_t s = fact_seed ^ ((uint64_t)(unsigned char)key * QGEN_GOLDEN);
	return mix(&s);
}

typedef struct out {
	char buf[QGEN_TEXT_MAX];
	size_t n;
} out;

static void put(out *o, const char *s)
{
	size_t l = strlen(s);
	if (o->n + l >= sizeof(o->buf))
		l = sizeof(o->buf) - 1 - o->n;
	memcpy(o->buf + o->n, s, l);
	o->n += l;
	o->buf[o->n] = '\0';
}

/* Expand tmpl: {X} is a fresh digit 1-9 (from *digits), {S} the
 * speaker and {O} another speaker (QGEN_STYLE_PARTY; NULL otherwise),
 * every other {key} a value fixed by fact_seed. Returns a malloc'd string
 * or NULL. */
static char *expand_as(const char *tmpl, uint64_t fact_seed, uint64_t *digits, const char *speaker,
		       const char *other)
{
	out o = { .n = 0 };
	char tmp[QGEN_TEXT_MAX];

	o.buf[0] = '\0';
	for (const char *p = tmpl; *p;) {
		if (p[0] == '{' && p[1] && p[2] == '}') {
			char key = p[1];
			uint64_t h = slot_hash(fact_seed, key);
			const pool *pl = pool_of(key);
			if (key == 'X') {
				snprintf(tmp, sizeof(tmp), "%u", 1 + pick(digits, QGEN_DIGITS));
			} else if ((key == 'S' && speaker) || (key == 'O' && other)) {
				snprintf(tmp, sizeof(tmp), "%s", key == 'S' ? speaker : other);
			} else if (key == 'D') {
				snprintf(tmp, sizeof(tmp), "%s %u", months[h % N_OF(months)],
					 (unsigned)(1 + (h >> 8) % QGEN_DAYS));
			} else if (key == 'T') {
				snprintf(tmp, sizeof(tmp), "%u:%s", (unsigned)(QGEN_HOUR_BASE + h % QGEN_HOURS),
					 minutes[(h >> 8) % N_OF(minutes)]);
			} else if (key == 'Y') {
				snprintf(tmp, sizeof(tmp), "%u",
					 (unsigned)(QGEN_NUM_BASE + (h % QGEN_NUM_STEPS) * QGEN_NUM_STEP));
			} else if (key == 'Z') {
				snprintf(tmp, sizeof(tmp), "%u", (unsigned)(QGEN_YEAR_BASE + h % QGEN_YEARS));
			} else if (pl) {
				snprintf(tmp, sizeof(tmp), "%s", pl->words[h % pl->n]);
			} else {
				snprintf(tmp, sizeof(tmp), "%.3s", p);
			}
			put(&o, tmp);
			p += 3;
		} else {
			tmp[0] = *p++;
			tmp[1] = '\0';
			put(&o, tmp);
		}
	}
	return strdup(o.buf);
}

static char *expand(const char *tmpl, uint64_t fact_seed, uint64_t *digits)
{
	return expand_as(tmpl, fact_seed, digits, NULL, NULL);
}

/* ---- the set ------------------------------------------------------------------ */

typedef struct fact_inst {
	const fact *f;
	const char *speaker;      /* QGEN_STYLE_PARTY: who told it; else NULL */
	uint64_t seed;
	size_t ev[QGEN_ANSWERS_MAX];
	uint32_t n_ev;
} fact_inst;

typedef struct builder {
	qgen_set *s;
	size_t cap_ev, cap_q;
	fact_inst *facts;         /* of the current user */
	size_t n_facts, cap_facts;
	int oom;
} builder;

static size_t add_event_by(builder *b, uint32_t u, uint32_t sess, int64_t seq, int role,
			   const char *author, char *text)
{
	qgen_set *s = b->s;
	if (!text) {
		b->oom = 1;
		return 0;
	}
	if (s->n_events == b->cap_ev) {
		size_t cap = b->cap_ev ? b->cap_ev * 2 : QGEN_EVENTS_MIN;
		qgen_event *e = realloc(s->events, cap * sizeof(*e));
		if (!e) {
			free(text);
			b->oom = 1;
			return 0;
		}
		s->events = e;
		b->cap_ev = cap;
	}
	s->events[s->n_events] = (qgen_event){
		.user = u,
		.session = sess,
		.seq = seq,
		.timestamp_us = QGEN_BASE_TS_US + (int64_t)sess * QGEN_SESSION_GAP_US +
				seq * QGEN_TURN_GAP_US,
		.role = role == QGEN_ROLE_USER ? "user" : "assistant",
		.author = author,
		.text = text,
	};
	return s->n_events++;
}

static size_t add_event(builder *b, uint32_t u, uint32_t sess, int64_t seq, int role, char *text)
{
	return add_event_by(b, u, sess, seq, role, NULL, text);
}

static fact_inst *add_fact(builder *b)
{
	if (b->n_facts == b->cap_facts) {
		size_t cap = b->cap_facts ? b->cap_facts * 2 : QGEN_FACTS_MIN;
		fact_inst *f = realloc(b->facts, cap * sizeof(*f));
		if (!f) {
			b->oom = 1;
			return NULL;
		}
		b->facts = f;
		b->cap_facts = cap;
	}
	return &b->facts[b->n_facts++];
}

static size_t n_facts_of(const topic *t)
{
	size_t n = 0;
	while (n < FACTS_MAX && t->facts[n].say)
		n++;
	return n;
}

static size_t n_smalltalk_of(const topic *t)
{
	size_t n = 0;
	while (n < SMALLTALK_MAX && t->smalltalk[n])
		n++;
	return n;
}

/* Which facts of each topic user has not been told yet, in the order
 * they will be: a user's facts never repeat a template, so every
 * question has one right answer. */
typedef struct user_topics {
	uint8_t order[N_OF(topics)][FACTS_MAX];
	uint8_t used[N_OF(topics)];
} user_topics;

static void user_topics_init(user_topics *ut, uint64_t *rng)
{
	for (size_t t = 0; t < N_OF(topics); t++) {
		size_t nf = n_facts_of(&topics[t]);
		for (size_t i = 0; i < nf; i++)
			ut->order[t][i] = (uint8_t)i;
		for (size_t i = nf; i > 1; i--) {
			size_t j = pick(rng, (uint32_t)i);
			uint8_t tmp = ut->order[t][i - 1];
			ut->order[t][i - 1] = ut->order[t][j];
			ut->order[t][j] = tmp;
		}
		ut->used[t] = 0;
	}
}

static void smalltalk_pair(builder *b, uint64_t *rng, const topic *t, uint32_t u, uint32_t sess,
			   int64_t *seq)
{
	size_t nt = n_smalltalk_of(t);
	add_event(b, u, sess, (*seq)++, QGEN_ROLE_USER,
		  expand(t->smalltalk[pick(rng, (uint32_t)nt)], mix(rng), rng));
	add_event(b, u, sess, (*seq)++, QGEN_ROLE_ASSISTANT, strdup(acks[pick(rng, N_OF(acks))]));
}

/* One session on a topic with QGEN_FACTS_PER_SESSION facts not yet told,
 * or small talk only once every topic is told. */
static void gen_session(builder *b, uint64_t *rng, user_topics *ut, uint32_t u, uint32_t sess)
{
	uint32_t open[N_OF(topics)], n_open = 0, ti;
	const topic *t;
	int64_t seq = 1;

	for (uint32_t i = 0; i < N_OF(topics); i++)
		if ((size_t)ut->used[i] + QGEN_FACTS_PER_SESSION <= n_facts_of(&topics[i]))
			open[n_open++] = i;
	ti = n_open ? open[pick(rng, n_open)] : pick(rng, N_OF(topics));
	t = &topics[ti];
	smalltalk_pair(b, rng, t, u, sess, &seq);
	for (size_t i = 0; i < QGEN_FACTS_PER_SESSION && !b->oom; i++) {
		const fact *f;
		fact_inst *fi;

		if (!n_open) {
			for (int k = 0; k <= QGEN_DISTRACT_PAIRS; k++)
				smalltalk_pair(b, rng, t, u, sess, &seq);
			continue;
		}
		f = &t->facts[ut->order[ti][ut->used[ti]++]];
		fi = add_fact(b);
		if (!fi)
			return;
		fi->f = f;
		fi->speaker = NULL;
		fi->seed = mix(rng);
		fi->n_ev = 0;
		fi->ev[fi->n_ev++] = add_event(b, u, sess, seq++, f->role, expand(f->say, fi->seed, rng));
		if (f->say2)
			fi->ev[fi->n_ev++] =
				add_event(b, u, sess, seq++, f->role2, expand(f->say2, fi->seed, rng));
		if (f->role == QGEN_ROLE_USER)
			add_event(b, u, sess, seq++, QGEN_ROLE_ASSISTANT, strdup(acks[pick(rng, N_OF(acks))]));
		for (int k = 0; k < QGEN_DISTRACT_PAIRS; k++)
			smalltalk_pair(b, rng, t, u, sess, &seq);
	}
}

static void gen_questions(builder *b, uint64_t *rng, uint32_t u, uint32_t n_q)
{
	qgen_set *s = b->s;

	if (n_q > b->n_facts)
		n_q = (uint32_t)b->n_facts;
	/* Partial Fisher-Yates: the first n_q facts, in random order. */
	for (uint32_t i = 0; i < n_q && !b->oom; i++) {
		uint32_t j = i + pick(rng, (uint32_t)(b->n_facts - i));
		fact_inst tmp = b->facts[i];
		const fact *f;
		size_t n_ask = 0;
		uint64_t unused = 0;

		b->facts[i] = b->facts[j];
		b->facts[j] = tmp;
		f = b->facts[i].f;
		while (n_ask < N_OF(f->ask) && f->ask[n_ask])
			n_ask++;
		if (s->n_questions == b->cap_q) {
			size_t cap = b->cap_q ? b->cap_q * 2 : QGEN_QUESTIONS_MIN;
			qgen_question *q = realloc(s->questions, cap * sizeof(*q));
			if (!q) {
				b->oom = 1;
				return;
			}
			s->questions = q;
			b->cap_q = cap;
		}
		qgen_question *q = &s->questions[s->n_questions];
		q->user = u;
		q->text = expand_as(f->ask[pick(rng, (uint32_t)n_ask)], b->facts[i].seed, &unused,
				    b->facts[i].speaker, NULL);
		if (!q->text) {
			b->oom = 1;
			return;
		}
		q->n_answers = b->facts[i].n_ev;
		memcpy(q->answers, b->facts[i].ev, sizeof(q->answers));
		s->n_questions++;
	}
}

/* ---- QGEN_STYLE_PARTY ------------------------------------------------------- */

static const char *const speakers[] = {
	"Melanie", "Caroline", "Jolene", "Deborah", "Andrew", "Audrey", "Nate", "Joanna",
	"Gina", "Calvin", "Evan", "Maria", "Jon", "Tim", "Sam", "Hilda",
};

/* A life event one speaker tells: the statement (fact.say, role user),
 * questions naming the speaker ({S}) in other words, and what another
 * speaker says on the same subject (echo: shares the questions' words,
 * answers nothing). */
typedef struct party_fact {
	fact f;
	const char *echo;
} party_fact;

#define U QGEN_ROLE_USER
static const party_fact party_facts[] = {
	{ { U, "I finally signed up for that ceramics workshop downtown, my first bowl came out lopsided!",
	    0, NULL, { "What did {S} say about the ceramics workshop?", "What happened to {S}'s first bowl?",
		       "Which craft did {S} start learning?" } },
	  "Classes are so pricey around here, I keep putting off signing up for a course." },
	{ { U, "We adopted a little rescue puppy last weekend and named her {P}.", 0, NULL,
	    { "What did {S} name the rescue puppy?", "When did {S} adopt a pet?",
	      "What did {S} say about getting a dog?" } },
	  "My neighbour's dog barks all night, it drives me crazy." },
	{ { U, "I just got back from {C}, the trails up in the mountains were breathtaking.", 0, NULL,
	    { "What did {S} say about the mountain trails?", "Where did {S} travel to see mountains?",
	      "Where did {S} go hiking recently?" } },
	  "I haven't taken a proper holiday in ages, work keeps me too busy to go anywhere." },
	{ { U, "I've been volunteering at the animal shelter every Saturday morning.", 0, NULL,
	    { "Where does {S} volunteer on Saturdays?", "What does {S} do at the animal shelter?",
	      "How does {S} help out on weekends?" } },
	  "Weekends are the only time I get to help my parents out with chores." },
	{ { U, "My little girl {N} took her first steps yesterday!", 0, NULL,
	    { "What did {S}'s little girl do for the first time?", "What milestone did {S}'s daughter reach?",
	      "What did {S} say about the baby walking?" } },
	  "Babies grow up so fast, every day there's something new." },
	{ { U, "I started a new position as a nurse in the children's ward at the clinic.", 0, NULL,
	    { "What new position did {S} start?", "Where does {S} work as a nurse?",
	      "What new job did {S} mention?" } },
	  "My job has been so stressful lately, I might look for something new." },
	{ { U, "I completed my first half marathon on Sunday, just under {X} hours!", 0, NULL,
	    { "When did {S} run the half marathon?", "How long did {S}'s first marathon take?",
	      "What race did {S} run?" } },
	  "I should really start running again, I've gotten so lazy." },
	{ { U, "I've been reading {W} and I honestly can't put it down.", 0, NULL,
	    { "Which book is {S} reading?", "What did {S} say about {W}?", "Which novel is {S} enjoying?" } },
	  "I never have time for a good book anymore, which novel would you recommend?" },
	{ { U, "We're repainting the lounge a soft sage green this weekend.", 0, NULL,
	    { "What colour is {S} repainting the lounge?", "What is {S} painting green?",
	      "What home project did {S} talk about?" } },
	  "Our living room is such a mess, the whole home needs a project like that." },
	{ { U, "Some of my photographs got picked for an exhibition at the {U} gallery!", 0, NULL,
	    { "Which gallery is showing {S}'s photographs?", "What did {S} say about the exhibition?",
	      "Where will {S}'s pictures be displayed?" } },
	  "I take so many pictures on my phone and never look at them again." },
	{ { U, "Grandma taught me to make {F} when I was little, it's still my comfort food.", 0, NULL,
	    { "What comfort food did {S}'s grandma teach her?", "Who taught {S} to make {F}?",
	      "What dish reminds {S} of her grandmother?" } },
	  "I can't cook to save my life, I burn everything." },
	{ { U, "I picked up the violin again after ten years, my fingers are so sore.", 0, NULL,
	    { "Why are {S}'s fingers sore?", "How long since {S} last played the violin?",
	      "Which instrument is {S} playing?" } },
	  "Music always cheers me up after a long day, I listen to it constantly." },
	{ { U, "The doctor told me I'm allergic to {K}, so no more of those for me.", 0, NULL,
	    { "What is {S} allergic to?", "What did the doctor tell {S}?", "What can't {S} eat anymore?" } },
	  "I'll eat anything, I'm not picky at all about food." },
	{ { U, "We're relocating to {C} in {D} because my partner got transferred.", 0, NULL,
	    { "Why is {S} relocating to {C}?", "Where is {S}'s partner transferred?",
	      "Where is {S} moving to?" } },
	  "Moving is the worst, I never want to pack boxes again." },
	{ { U, "I joined a community choir, we rehearse every Wednesday evening.", 0, NULL,
	    { "When does {S}'s choir rehearse?", "What community group did {S} join?",
	      "When does {S} sing with others?" } },
	  "I love singing in the shower but nobody should ever hear it." },
	{ { U, "My car broke down on the highway and the repair came to {Y} dollars.", 0, NULL,
	    { "How much was {S}'s car repair?", "Where did {S}'s car break down?",
	      "What happened to {S}'s vehicle?" } },
	  "My vehicle is old too, I worry it will break one day." },
	{ { U, "I'm throwing a surprise bash for my husband's {X}0th birthday.", 0, NULL,
	    { "What surprise is {S} planning for her husband?", "Whose birthday is {S} celebrating?",
	      "What celebration is {S} organising?" } },
	  "Parties are fun but planning one is exhausting." },
	{ { U, "I finally handed in my master's thesis on renewable energy.", 0, NULL,
	    { "What was {S}'s master's thesis about?", "What did {S} write on renewable energy?",
	      "What degree did {S} complete?" } },
	  "School was never really my thing, I couldn't wait to finish." },
	{ { U, "We camped by the lake last week and saw a family of otters.", 0, NULL,
	    { "Where did {S} see the otters?", "What did {S} see at the lake?", "Which wildlife did {S} spot?" } },
	  "I'd love to see more wildlife, the outdoors always makes me feel better." },
	{ { U, "I've been learning to surf, today I stood up on the board for the first time!", 0, NULL,
	    { "What is {S} learning to do on a board?", "When did {S} first stand up surfing?",
	      "What water sport is {S} picking up?" } },
	  "The beach is my happy place, even just sitting by the water." },
	{ { U, "My brother {N} is coming to stay with us for two weeks in {D}.", 0, NULL,
	    { "When is {S}'s brother coming to stay?", "How long will {N} stay with {S}?",
	      "Which relative is visiting {S}?" } },
	  "Family visits are lovely but two weeks is a long time to host anyone." },
	{ { U, "I started seeing a counsellor a few months ago and it has really helped my anxiety.", 0,
	    NULL, { "What helped {S} with her anxiety?", "When did {S} start seeing a counsellor?",
		    "How is {S} dealing with stress?" } },
	  "Stress at work is getting to me, I need to deal with it somehow." },
	{ { U, "I painted a sunset over the sea for my friend's new flat.", 0, NULL,
	    { "What did {S} paint for her friend?", "Where is {S}'s sunset painting going?",
	      "What artwork did {S} make?" } },
	  "My friend just got a new apartment and I have no idea what gift to bring." },
	{ { U, "Our team won the regional chess tournament in {C}!", 0, NULL,
	    { "Which tournament did {S}'s team win?", "Where was the regional chess tournament {S} won?",
	      "What competition did {S} win?" } },
	  "I'm terrible at board games, I lose every single time." },
};
#undef U

/* Another speaker's answer to a told fact: by name. */
static const char *const reactions[] = {
	"Wow, that's amazing, {S}!",
	"I'm so happy for you, {S}.",
	"That's awesome news, {S}, congrats!",
	"No way, {S}! Tell me more about it.",
	"Sounds lovely, {S}. I'm glad it went well.",
	"Oh {S}, that's wonderful to hear.",
};

/* Chat about nothing in particular. */
static const char *const chatter[] = {
	"Hey {O}! How has your week been?",
	"Haha, that's so true.",
	"I've been so busy lately with everything going on.",
	"We should grab a coffee soon, {O}!",
	"Thanks for asking, things are pretty good.",
	"That sounds like a lot of fun.",
	"I totally understand how you feel.",
	"Take care, talk soon!",
	"Honestly I just want a quiet weekend for once.",
	"Did you see the weather forecast? Rain all week again.",
};

/* The party facts user has not told yet, in the order they will be. */
typedef struct party_order {
	uint8_t order[N_OF(party_facts)];
	size_t used;
} party_order;

static void party_turn(builder *b, uint64_t *rng, uint32_t u, uint32_t sess, int64_t *seq,
		       const char *const *who, uint32_t speaker)
{
	const char *other = who[(speaker + 1 + pick(rng, QGEN_PARTY_SPEAKERS - 1)) % QGEN_PARTY_SPEAKERS];
	add_event_by(b, u, sess, (*seq)++, QGEN_ROLE_USER, who[speaker],
		     expand_as(chatter[pick(rng, N_OF(chatter))], mix(rng), rng, who[speaker], other));
}

/* One chat of user u's speakers: chatter, then QGEN_FACTS_PER_SESSION
 * facts (each told by one speaker, answered by another by name, an echo
 * by a third now and then, chatter after), or chatter only once every
 * fact is told. */
static void party_session(builder *b, uint64_t *rng, party_order *po, const char *const *who,
			  uint32_t u, uint32_t sess)
{
	int64_t seq = 1;
	uint32_t sp = pick(rng, QGEN_PARTY_SPEAKERS);

	party_turn(b, rng, u, sess, &seq, who, sp);
	party_turn(b, rng, u, sess, &seq, who, (sp + 1) % QGEN_PARTY_SPEAKERS);
	for (size_t i = 0; i < QGEN_FACTS_PER_SESSION && !b->oom; i++) {
		uint32_t teller = pick(rng, QGEN_PARTY_SPEAKERS), other, third;
		const party_fact *pf;
		fact_inst *fi;

		other = (teller + 1 + pick(rng, QGEN_PARTY_SPEAKERS - 1)) % QGEN_PARTY_SPEAKERS;
		third = QGEN_PARTY_SPEAKERS - teller - other;
		if (po->used == N_OF(party_facts)) {
			for (int k = 0; k <= QGEN_DISTRACT_PAIRS; k++)
				party_turn(b, rng, u, sess, &seq, who, pick(rng, QGEN_PARTY_SPEAKERS));
			continue;
		}
		pf = &party_facts[po->order[po->used++]];
		fi = add_fact(b);
		if (!fi)
			return;
		fi->f = &pf->f;
		fi->speaker = who[teller];
		fi->seed = mix(rng);
		fi->n_ev = 0;
		fi->ev[fi->n_ev++] = add_event_by(b, u, sess, seq++, QGEN_ROLE_USER, who[teller],
						  expand_as(pf->f.say, fi->seed, rng, who[teller],
							    who[other]));
		add_event_by(b, u, sess, seq++, QGEN_ROLE_USER, who[other],
			     expand_as(reactions[pick(rng, N_OF(reactions))], fi->seed, rng, who[teller],
				       who[other]));
		if (pick(rng, 2))
			add_event_by(b, u, sess, seq++, QGEN_ROLE_USER, who[third],
				     expand_as(pf->echo, fi->seed, rng, who[third], who[teller]));
		for (int k = 0; k < QGEN_DISTRACT_PAIRS; k++)
			party_turn(b, rng, u, sess, &seq, who, pick(rng, QGEN_PARTY_SPEAKERS));
	}
}

/* User u's speakers: QGEN_PARTY_SPEAKERS different names. */
static void party_speakers(uint64_t *rng, const char **who)
{
	for (uint32_t i = 0; i < QGEN_PARTY_SPEAKERS; i++) {
		uint32_t j;
		do {
			j = pick(rng, N_OF(speakers));
			for (uint32_t k = 0; k < i; k++)
				if (who[k] == speakers[j]) {
					j = N_OF(speakers);
					break;
				}
		} while (j == N_OF(speakers));
		who[i] = speakers[j];
	}
}

static void party_user(builder *b, uint64_t *rng, const qgen_params *p, uint32_t u)
{
	const char *who[QGEN_PARTY_SPEAKERS];
	party_order po = { .used = 0 };

	party_speakers(rng, who);
	for (size_t i = 0; i < N_OF(party_facts); i++)
		po.order[i] = (uint8_t)i;
	for (size_t i = N_OF(party_facts); i > 1; i--) {
		size_t j = pick(rng, (uint32_t)i);
		uint8_t tmp = po.order[i - 1];
		po.order[i - 1] = po.order[j];
		po.order[j] = tmp;
	}
	for (uint32_t s = 0; s < p->sessions && !b->oom; s++)
		party_session(b, rng, &po, who, u, s);
}

int qgen_make(const qgen_params *p, qgen_set **ret)
{
	builder b = { 0 };
	uint64_t rng = p->seed;

	if (!p->users || !p->sessions || p->style > QGEN_STYLE_PARTY)
		return -1;
	b.s = calloc(1, sizeof(*b.s));
	if (!b.s)
		return -1;
	b.s->users = p->users;
	b.s->sessions = p->sessions;
	for (uint32_t u = 0; u < p->users && !b.oom; u++) {
		user_topics ut;
		b.n_facts = 0;
		if (p->style == QGEN_STYLE_PARTY) {
			party_user(&b, &rng, p, u);
		} else {
			user_topics_init(&ut, &rng);
			for (uint32_t s = 0; s < p->sessions && !b.oom; s++)
				gen_session(&b, &rng, &ut, u, s);
		}
		if (!b.oom)
			gen_questions(&b, &rng, u, p->questions_per_user);
	}
	free(b.facts);
	if (b.oom) {
		qgen_free(b.s);
		return -1;
	}
	*ret = b.s;
	return 0;
}

void qgen_free(qgen_set *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->n_events; i++)
		free(s->events[i].text);
	for (size_t i = 0; i < s->n_questions; i++)
		free(s->questions[i].text);
	free(s->events);
	free(s->questions);
	free(s);
}

void qgen_user_id(uint32_t u, char buf[QGEN_ID_MAX])
{
	snprintf(buf, QGEN_ID_MAX, "u%05u", u);
}

void qgen_session_id(uint32_t u, uint32_t s, char buf[QGEN_ID_MAX])
{
	snprintf(buf, QGEN_ID_MAX, "u%05u-s%03u", u, s);
}

void qgen_event_id(const qgen_event *e, char buf[QGEN_ID_MAX])
{
	snprintf(buf, QGEN_ID_MAX, "u%05u-s%03u-e%03lld", e->user, e->session, (long long)e->seq);
}
