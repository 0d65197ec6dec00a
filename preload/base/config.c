/* SPDX-License-Identifier: MIT */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "config.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

enum var_kind { V_CHOICE, V_UINT, V_SIZE, V_BOOL, V_PATH, V_RULES };

struct var {
	const char *name;
	enum var_kind kind;
	size_t off; /* field in struct shim_config */
	unsigned int min,
	    max; /* V_UINT, V_SIZE (0 is always allowed for sizes) */
	const char *const *choices; /* V_CHOICE, NULL-terminated */
	const char *expect; /* how the error line describes a good value */
};

static const char *const modes[] = {"auto", "off", "require", NULL};
static const char *const levels[] = {"error", "warn", "info", "debug", NULL};

#define F(field) offsetof(struct shim_config, field)
static const struct var vars[] = {
    {"ERDMA_SHIM", V_CHOICE, F(mode), 0, 0, modes, "auto, off or require"},
    {"ERDMA_SHIM_LOG", V_CHOICE, F(log_level), 0, 0, levels,
     "error, warn, info or debug"},
    {"ERDMA_SHIM_LOG_FILE", V_PATH, F(log_file), 0, 0, NULL,
     "a file path shorter than 256 bytes (%p = pid)"},
    {"ERDMA_SHIM_ALLOW", V_RULES, F(allow), 0, 0, NULL,
     "comma-separated CIDR[:port[-port]] rules"},
    {"ERDMA_SHIM_DENY", V_RULES, F(deny), 0, 0, NULL,
     "comma-separated CIDR[:port[-port]] rules"},
    {"ERDMA_SHIM_ACCEPT_FROM", V_RULES, F(accept_from), 0, 0, NULL,
     "comma-separated CIDR[:port[-port]] rules"},
    {"ERDMA_SHIM_PORT_OFFSET", V_UINT, F(port_offset), 0, 65535, NULL,
     "an integer 0..65535"},
    {"ERDMA_SHIM_CONNECT_TIMEOUT_MS", V_UINT, F(connect_timeout_ms), 1, 600000,
     NULL, "milliseconds, 1..600000"},
    {"ERDMA_SHIM_NEGCACHE_TTL_S", V_UINT, F(negcache_ttl_s), 0, 86400, NULL,
     "seconds, 0..86400"},
    {"ERDMA_SHIM_SNDBUF", V_SIZE, F(sndbuf), 4096, 1u << 30, NULL,
     "0 or a size 4K..1G (suffix K, M or G allowed)"},
    {"ERDMA_SHIM_RCVBUF", V_SIZE, F(rcvbuf), 4096, 1u << 30, NULL,
     "0 or a size 4K..1G (suffix K, M or G allowed)"},
    {"ERDMA_SHIM_SQ_SIZE", V_UINT, F(sq_size), 0, 65536, NULL,
     "0 or a queue depth up to 65536"},
    {"ERDMA_SHIM_RQ_SIZE", V_UINT, F(rq_size), 0, 65536, NULL,
     "0 or a queue depth up to 65536"},
    {"ERDMA_SHIM_INLINE", V_UINT, F(inline_size), 0, 4096, NULL,
     "bytes, 0..4096"},
    {"ERDMA_SHIM_POLL_US", V_UINT, F(poll_us), 0, 1000000, NULL,
     "microseconds, 0..1000000"},
    {"ERDMA_SHIM_FD_SHARE", V_UINT, F(fd_share), 1, 100, NULL,
     "a percentage, 1..100"},
    {"ERDMA_SHIM_STATS", V_BOOL, F(stats), 0, 0, NULL, "0 or 1"},
    {"ERDMA_SHIM_STATS_SHM", V_BOOL, F(stats_shm), 0, 0, NULL, "0 or 1"},
};
#undef F

void shim_config_defaults(struct shim_config *c)
{
	memset(c, 0, sizeof(*c));
	c->mode = SHIM_MODE_AUTO;
	c->log_level = SHIM_LOG_WARN;
	c->connect_timeout_ms = 1000;
	c->negcache_ttl_s = 30;
	c->port_offset = SHIM_PORT_OFFSET_AUTO;
	/* The most a wait spins before it sleeps: a ceiling only.  The window
	 * follows what a sleep costs the thread (rsocket_glue/spin.c: about
	 * 4x its CPU time, tens of us on hardware, hundreds under emulation)
	 * and adapts to the peer's pace; 100 us, the old fixed value, was
	 * shorter than an emulated round trip (issue 41). */
	c->poll_us = 2000;
	/* RDMA connections' own fds (rsocket_glue/limits.c) may take half
	 * of RLIMIT_NOFILE: the program keeps the other half, as over TCP. */
	c->fd_share = 50;
	c->stats_shm = true; /* erdma-shim stat can see the process */
	/* rsockets sends only into the peer's advertised window (half its
	 * receive buffer): with its 128 KiB default a writer that is 64 KiB
	 * ahead of its reader blocks, where kernel TCP would have buffered.
	 * 256 KiB (rsockets doubles it) keeps such programs moving. */
	c->sndbuf = 256 * 1024;
	c->rcvbuf = 256 * 1024;
}

static int parse_choice(const char *s, const char *const *choices)
{
	for (int i = 0; choices[i]; i++)
		if (!strcmp(s, choices[i]))
			return i;
	return -1;
}

/* Strict decimal: digits only, no sign, no blanks, no overflow. */
static int parse_ulong(const char **sp, unsigned long long *out)
{
	const char *s = *sp;
	unsigned long long v = 0;

	if (*s < '0' || *s > '9')
		return -1;
	for (; *s >= '0' && *s <= '9'; s++) {
		if (v > (~0ULL - 9) / 10)
			return -1;
		v = v * 10 + (unsigned long long)(*s - '0');
	}
	*sp = s;
	*out = v;
	return 0;
}

static int parse_number(const char *s, bool size, unsigned long long *out)
{
	unsigned long long v;

	if (parse_ulong(&s, &v))
		return -1;
	if (size && *s) {
		unsigned int shift = 0;

		switch (*s) {
		case 'k':
		case 'K':
			shift = 10;
			break;
		case 'm':
		case 'M':
			shift = 20;
			break;
		case 'g':
		case 'G':
			shift = 30;
			break;
		default:
			return -1;
		}
		s++;
		if (v > (~0ULL >> shift))
			return -1;
		v <<= shift;
	}
	if (*s)
		return -1;
	*out = v;
	return 0;
}

static int parse_port_range(const char *s, struct shim_rule *r)
{
	unsigned long long lo, hi;

	if (parse_ulong(&s, &lo) || lo > 65535)
		return -1;
	hi = lo;
	if (*s == '-') {
		s++;
		if (parse_ulong(&s, &hi) || hi > 65535 || hi < lo)
			return -1;
	}
	if (*s)
		return -1;
	r->port_lo = (uint16_t)lo;
	r->port_hi = (uint16_t)hi;
	return 0;
}

/*
 * One rule: ADDR[/PREFIX][:PORTS], [V6ADDR][/PREFIX][:PORTS] or *[:PORTS].
 * An unbracketed IPv6 address carries a port only after a /prefix (its last
 * colon would otherwise be ambiguous).
 */
static int parse_rule(char *s, struct shim_rule *r)
{
	char *addr = s, *rest, *prefix = NULL, *ports = NULL;
	unsigned long long plen;
	unsigned int maxp;

	memset(r, 0, sizeof(*r));
	r->port_hi = 65535;
	if (*s == '[') {
		rest = strchr(s, ']');
		if (!rest)
			return -1;
		*rest++ = '\0';
		addr = s + 1;
	} else {
		rest = s + strcspn(s, "/");
		if (!*rest) {
			char *c = strchr(s, ':');

			if (c && !strchr(c + 1, ':'))
				rest = c; /* v4 or '*' with a port */
		}
	}
	if (*rest == '/') {
		*rest++ = '\0';
		prefix = rest;
		rest += strcspn(rest, ":");
	}
	if (*rest == ':') {
		*rest++ = '\0';
		ports = rest;
	} else if (*rest) {
		return -1;
	}

	if (!strcmp(addr, "*"))
		r->family = 0;
	else if (inet_pton(AF_INET, addr, r->addr) == 1)
		r->family = AF_INET;
	else if (inet_pton(AF_INET6, addr, r->addr) == 1)
		r->family = AF_INET6;
	else
		return -1;
	maxp = r->family == AF_INET ? 32 : r->family == AF_INET6 ? 128 : 0;
	r->prefix = maxp;
	if (prefix) {
		const char *p = prefix;

		if (!r->family || parse_ulong(&p, &plen) || *p || plen > maxp)
			return -1;
		r->prefix = (unsigned int)plen;
	}
	if (ports && parse_port_range(ports, r))
		return -1;
	return 0;
}

static int parse_rules(const char *val, struct shim_rule *rules,
		       unsigned int *n)
{
	char buf[2048], *save = NULL, *tok;

	if (strlen(val) >= sizeof(buf))
		return -1;
	strcpy(buf, val);
	*n = 0;
	for (tok = strtok_r(buf, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		if (*n >= SHIM_MAX_RULES || parse_rule(tok, &rules[*n]))
			return -1;
		(*n)++;
	}
	return *n ? 0 : -1;
}

/* How many rules a V_RULES variable holds: the count beside its table. */
static unsigned int *rule_count(const struct shim_config *c,
				const struct var *v)
{
	struct shim_config *w = (struct shim_config *)c;

	if (v->off == offsetof(struct shim_config, allow))
		return &w->n_allow;
	if (v->off == offsetof(struct shim_config, deny))
		return &w->n_deny;
	return &w->n_accept_from;
}

static int apply(struct shim_config *c, const struct var *v, const char *val)
{
	char *field = (char *)c + v->off;
	unsigned long long num;
	int i;

	switch (v->kind) {
	case V_CHOICE:
		i = parse_choice(val, v->choices);
		if (i < 0)
			return -1;
		*(int *)field = i;
		return 0;
	case V_BOOL:
		if (strcmp(val, "0") && strcmp(val, "1"))
			return -1;
		*(bool *)field = val[0] == '1';
		return 0;
	case V_UINT:
	case V_SIZE:
		if (parse_number(val, v->kind == V_SIZE, &num))
			return -1;
		if (!(v->kind == V_SIZE && num == 0) &&
		    (num < v->min || num > v->max))
			return -1;
		*(unsigned int *)field = (unsigned int)num;
		return 0;
	case V_PATH:
		if (!*val || strlen(val) >= SHIM_PATH_MAX)
			return -1;
		strcpy(field, val);
		return 0;
	case V_RULES:
		if (v->off == offsetof(struct shim_config, allow))
			c->allow_set = true;
		return parse_rules(val, (struct shim_rule *)field,
				   rule_count(c, v));
	}
	return -1;
}

static void say(shim_report_fn report, void *arg, const char *msg, bool invalid)
{
	if (report)
		report(msg, invalid, arg);
}

/* A value shown in a message: printable bytes as they are, others escaped,
 * so a value can never split or forge a log line; at most 64 bytes shown. */
static void shown(const char *v, char *out, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	size_t o = 0, i;

	for (i = 0; v[i] && i < 64 && o + 5 < len; i++) {
		unsigned char c = (unsigned char)v[i];

		if (c >= 0x20 && c < 0x7f && c != '\\') {
			out[o++] = (char)c;
		} else {
			out[o++] = '\\';
			out[o++] = 'x';
			out[o++] = hex[c >> 4];
			out[o++] = hex[c & 15];
		}
	}
	if (v[i] && o + 4 <= len) {
		memcpy(out + o, "...", 3);
		o += 3;
	}
	out[o] = '\0';
}

static const struct var *find_var(const char *name, size_t nlen)
{
	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
		if (strlen(vars[i].name) == nlen &&
		    !strncmp(vars[i].name, name, nlen))
			return &vars[i];
	return NULL;
}

int shim_config_parse(struct shim_config *c, char *const *envp,
		      shim_report_fn report, void *arg)
{
	int problems = 0;
	char msg[512];

	for (; envp && *envp; envp++) {
		const char *e = *envp, *eq = strchr(e, '=');
		const struct var *v;
		int nlen;

		if (strncmp(e, "ERDMA_SHIM", 10) || !eq)
			continue;
		nlen = (int)(eq - e);
		v = find_var(e, (size_t)nlen);
		if (!v) {
			char name[80], raw[65];

			/* A typo must not pass silently, but it is harmless. */
			snprintf(raw, sizeof(raw), "%.*s",
				 nlen > 64 ? 64 : nlen, e);
			shown(raw, name, sizeof(name));
			snprintf(msg, sizeof(msg),
				 "unknown variable %s ignored", name);
			say(report, arg, msg, false);
			problems++;
			continue;
		}
		if (apply(c, v, eq + 1)) {
			char val[96];

			shown(eq + 1, val, sizeof(val));
			snprintf(msg, sizeof(msg),
				 "%s='%s' is invalid (expected %s); running on "
				 "TCP only",
				 v->name, val, v->expect);
			say(report, arg, msg, true);
			c->invalid = true;
			problems++;
		}
	}
	if (c->invalid)
		c->mode = SHIM_MODE_OFF;
	return problems;
}

static bool prefix_match(const uint8_t *a, const uint8_t *b, unsigned int bits)
{
	unsigned int bytes = bits / 8, rem = bits % 8;

	if (memcmp(a, b, bytes))
		return false;
	if (!rem)
		return true;
	return ((a[bytes] ^ b[bytes]) & (uint8_t)(0xff << (8 - rem))) == 0;
}

static bool rule_match(const struct shim_rule *r, int family,
		       const uint8_t *addr, uint16_t port)
{
	if (port < r->port_lo || port > r->port_hi)
		return false;
	if (r->family == 0)
		return true;
	return r->family == family && prefix_match(r->addr, addr, r->prefix);
}

static bool any_match(const struct shim_rule *rules, unsigned int n, int family,
		      const uint8_t *addr, uint16_t port)
{
	for (unsigned int i = 0; i < n; i++)
		if (rule_match(&rules[i], family, addr, port))
			return true;
	return false;
}

static bool is_loopback(int family, const uint8_t *a)
{
	static const uint8_t v6lo[16] = {[15] = 1};

	if (family == AF_INET)
		return a[0] == 127;
	return !memcmp(a, v6lo, 16);
}

/* A v4-mapped IPv6 address as the IPv4 one it maps. */
static const uint8_t *unmapped(int *family, const uint8_t *a)
{
	static const uint8_t mapped[12] = {[10] = 0xff, [11] = 0xff};

	if (*family == AF_INET6 && !memcmp(a, mapped, 12)) {
		*family = AF_INET;
		return a + 12;
	}
	return a;
}

bool shim_config_allows(const struct shim_config *c, int family,
			const void *addr, uint16_t port)
{
	const uint8_t *a = unmapped(&family, addr);

	if (any_match(c->deny, c->n_deny, family, a, port))
		return false;
	if (c->allow_set)
		return any_match(c->allow, c->n_allow, family, a, port);
	return !is_loopback(family, a);
}

bool shim_config_accepts(const struct shim_config *c, int family,
			 const void *addr, uint16_t port)
{
	const uint8_t *a;

	if (!c->n_accept_from)
		return true; /* unset: everyone, as before */
	if (family != AF_INET && family != AF_INET6)
		family = 0; /* only a '*' rule can match it */
	a = family ? unmapped(&family, addr) : addr;
	return any_match(c->accept_from, c->n_accept_from, family, a, port);
}

const char *shim_mode_name(int mode)
{
	return mode >= 0 && mode <= SHIM_MODE_REQUIRE ? modes[mode] : "?";
}

size_t shim_config_describe(const struct shim_config *c, char *buf, size_t len)
{
	struct shim_config d;
	size_t used = 0;

	shim_config_defaults(&d);
	buf[0] = '\0';
	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
		const struct var *v = &vars[i];
		const char *a = (const char *)c + v->off;
		const char *b = (const char *)&d + v->off;
		char val[64];
		int n;

		switch (v->kind) {
		case V_CHOICE:
			if (*(const int *)a == *(const int *)b)
				continue;
			snprintf(val, sizeof(val), "%s",
				 v->choices[*(const int *)a]);
			break;
		case V_BOOL:
			if (*(const bool *)a == *(const bool *)b)
				continue;
			snprintf(val, sizeof(val), "%d", *(const bool *)a);
			break;
		case V_UINT:
		case V_SIZE:
			if (*(const unsigned int *)a ==
			    *(const unsigned int *)b)
				continue;
			snprintf(val, sizeof(val), "%u",
				 *(const unsigned int *)a);
			break;
		case V_PATH:
			if (!strcmp(a, b))
				continue;
			snprintf(val, sizeof(val), "%.60s", a);
			break;
		case V_RULES:
			if (!*rule_count(c, v))
				continue;
			snprintf(val, sizeof(val), "%u rule(s)",
				 *rule_count(c, v));
			break;
		}
		n = snprintf(buf + used, len - used, "%s%s=%s", used ? " " : "",
			     v->name, val);
		if (n < 0 || (size_t)n >= len - used)
			break;
		used += (size_t)n;
	}
	return used;
}
