/* SPDX-License-Identifier: MIT */
/*
 * Slow and greedy clients against a `memd serve` process this program
 * starts (any memd executable, so that two builds can be compared):
 *
 *   slowclient_bench MEMD slowloris N
 *     N connections from 127.0.0.1 each sending a request head a byte at a
 *     time; once every connect has finished (or SETTLE_MS passed), the
 *     time a request from 127.0.0.2 on a new connection takes (up to
 *     NORMAL_WAIT_MS).
 *   slowclient_bench MEMD readers MIB R
 *     a session of MIB MiB (EVENT_KIB KiB events appended in batches),
 *     then R clients reading it whole at once (GET ...?events=0; with
 *     "paged" after R, page by page with GET .../events; with "newest",
 *     GET ...?events=1000000); memd's peak RSS
 *     (VmHWM) after the append and after the reads.
 *
 * memd runs in a temp directory with a config listening on a free port and
 * the zero-config sqlite store; MEMD_PLUGIN_PATH as for memd itself.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NS_PER_MS 1000000LL
#define MS_PER_SEC 1000
#define SETTLE_MS 3000
#define NORMAL_WAIT_MS 120000
#define START_WAIT_MS 20000
#define TRICKLE_NS 200000000L
#define EVENT_KIB 64
#define BATCH_EVENTS 100
#define MAX_READERS 64
#define SLOW_HEAD "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define SESSION "/v1/apps/bench/users/u/sessions/big"

static int port;
static pid_t pid;
static char dir[] = "/tmp/memd-slowbench-XXXXXX";

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * MS_PER_SEC + ts.tv_nsec / NS_PER_MS;
}

static int connect_from(const char *addr, int nb)
{
	struct sockaddr_in local = { .sin_family = AF_INET };
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	int fd = socket(AF_INET, SOCK_STREAM | (nb ? SOCK_NONBLOCK : 0), 0);

	if (fd < 0) {
		perror("socket");
		exit(1);
	}
	inet_pton(AF_INET, addr, &local.sin_addr);
	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	if (bind(fd, (struct sockaddr *)&local, sizeof(local)) != 0) {
		perror("bind");
		exit(1);
	}
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0 && !(nb && errno == EINPROGRESS)) {
		close(fd);
		return -1;
	}
	return fd;
}

static void send_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w <= 0)
			return;
		p += w;
		n -= (size_t)w;
	}
}

/* One request with Connection: close; the status, the bytes of the
 * response (discarded), -1 status when nothing came within wait_ms. */
static int request(const char *from, const char *method, const char *path, const char *body,
		   size_t len, int wait_ms, size_t *ret_bytes)
{
	char head[512], buf[65536];
	int fd = connect_from(from, 0), status = -1;
	size_t total = 0;
	int64_t until = now_ms() + wait_ms;
	int n;

	if (fd < 0)
		return -1;
	n = snprintf(head, sizeof(head),
		     "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Type: application/json\r\n"
		     "Content-Length: %zu\r\n\r\n", method, path, len);
	send_all(fd, head, (size_t)n);
	if (len)
		send_all(fd, body, len);
	for (;;) {
		struct pollfd p = { fd, POLLIN, 0 };
		int64_t left = until - now_ms();
		ssize_t r;
		if (left <= 0 || poll(&p, 1, (int)left) <= 0)
			break;
		r = recv(fd, buf, sizeof(buf), 0);
		if (r <= 0)
			break;
		if (total == 0)
			sscanf(buf, "HTTP/1.%*d %d", &status);
		total += (size_t)r;
	}
	close(fd);
	if (ret_bytes)
		*ret_bytes = total;
	return status;
}

static int free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0), p;
	bind(fd, (struct sockaddr *)&a, sizeof(a));
	getsockname(fd, (struct sockaddr *)&a, &len);
	p = ntohs(a.sin_port);
	close(fd);
	return p;
}

static void start(const char *exe)
{
	char path[256];
	FILE *f;
	int64_t until;

	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		exit(1);
	}
	port = free_port();
	snprintf(path, sizeof(path), "%s/memd.yaml", dir);
	f = fopen(path, "w");
	fprintf(f, "server:\n  listen: 127.0.0.1:%d\n  log_level: warn\n  max_body_bytes: 16777216\n",
		port);
	fclose(f);
	pid = fork();
	if (pid == 0) {
		int log;
		snprintf(path, sizeof(path), "%s/memd.log", dir);
		log = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (chdir(dir) != 0 || log < 0)
			_exit(127);
		dup2(log, STDERR_FILENO);
		execl(exe, "memd", "serve", "--config", "memd.yaml", (char *)NULL);
		_exit(127);
	}
	until = now_ms() + START_WAIT_MS;
	while (request("127.0.0.1", "GET", "/healthz", NULL, 0, 1000, NULL) != 200) {
		if (now_ms() > until) {
			fprintf(stderr, "slowclient_bench: memd did not start (see %s/memd.log)\n", dir);
			exit(1);
		}
		usleep(50000);
	}
}

static void stop(void)
{
	char cmd[128];
	kill(pid, SIGTERM);
	waitpid(pid, NULL, 0);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "slowclient_bench: could not remove %s\n", dir);
}

static long vm_hwm_kib(void)
{
	char path[64], line[256];
	long kib = -1;
	FILE *f;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmHWM: %ld kB", &kib) == 1)
			break;
	fclose(f);
	return kib;
}

/* ---- slowloris ------------------------------------------------------------ */

typedef struct slow {
	int *fd;
	size_t *sent;
	int n;
	atomic_int stop;
} slow;

static void *trickle(void *arg)
{
	slow *s = arg;
	struct timespec pause = { 0, TRICKLE_NS };
	while (!atomic_load(&s->stop)) {
		for (int i = 0; i < s->n; i++)
			if (s->fd[i] >= 0 && s->sent[i] < sizeof(SLOW_HEAD) - 1 &&
			    send(s->fd[i], SLOW_HEAD + s->sent[i], 1, MSG_NOSIGNAL | MSG_DONTWAIT) == 1)
				s->sent[i]++;
		nanosleep(&pause, NULL);
	}
	return NULL;
}

static void slowloris(int n)
{
	slow s = { .n = n };
	struct rlimit rl;
	pthread_t t;
	int64_t t0, until;
	int status, pending = n;

	getrlimit(RLIMIT_NOFILE, &rl);
	rl.rlim_cur = rl.rlim_max;
	setrlimit(RLIMIT_NOFILE, &rl);
	s.fd = calloc((size_t)n, sizeof(*s.fd));
	s.sent = calloc((size_t)n, sizeof(*s.sent));
	for (int i = 0; i < n; i++)
		s.fd[i] = connect_from("127.0.0.1", 1);
	pthread_create(&t, NULL, trickle, &s);
	/* Until every connect finished (taken by memd or its backlog). */
	until = now_ms() + SETTLE_MS;
	while (pending && now_ms() < until) {
		pending = 0;
		for (int i = 0; i < n; i++) {
			struct pollfd p = { s.fd[i], POLLOUT, 0 };
			if (s.fd[i] >= 0 && poll(&p, 1, 0) == 0)
				pending++;
		}
		usleep(20000);
	}
	t0 = now_ms();
	status = request("127.0.0.2", "GET", "/healthz", NULL, 0, NORMAL_WAIT_MS, NULL);
	printf("slowloris: %d slow connections (%d connects unfinished): a client on another "
	       "address got %d after %" PRId64 " ms\n", n, pending, status, now_ms() - t0);
	atomic_store(&s.stop, 1);
	pthread_join(t, NULL);
	for (int i = 0; i < n; i++)
		if (s.fd[i] >= 0)
			close(s.fd[i]);
	free(s.fd);
	free(s.sent);
}

/* ---- greedy readers ----------------------------------------------------------- */

static void fill(int mib)
{
	size_t text_len = EVENT_KIB * 1024 - 64;
	char *text = malloc(text_len + 1);
	size_t cap = (size_t)BATCH_EVENTS * (text_len + 128) + 64;
	char *body = malloc(cap);
	int events = mib * 1024 / EVENT_KIB, done = 0, b = 0;

	for (size_t i = 0; i < text_len; i++)
		text[i] = (char)('a' + (i * 7 + i / 13) % 26);
	for (size_t i = 80; i < text_len; i += 80)
		text[i] = ' ';
	text[text_len] = '\0';
	request("127.0.0.1", "POST", "/v1/apps/bench/users/u/sessions", "{\"id\":\"big\"}", 12, 10000,
		NULL);
	while (done < events) {
		size_t len = 0;
		int k;
		len += (size_t)snprintf(body + len, cap - len, "{\"events\":[");
		for (k = 0; k < BATCH_EVENTS && done + k < events; k++)
			len += (size_t)snprintf(body + len, cap - len,
						"%s{\"role\":\"user\",\"content\":\"%d %s\"}", k ? "," : "",
						done + k, text);
		len += (size_t)snprintf(body + len, cap - len, "]}");
		if (request("127.0.0.1", "POST", SESSION "/events", body, len, 60000, NULL) != 200) {
			fprintf(stderr, "slowclient_bench: append batch %d failed\n", b);
			exit(1);
		}
		done += k;
		b++;
	}
	free(text);
	free(body);
}

typedef struct reader {
	pthread_t t;
	int status;
	size_t bytes;
} reader;

static int paged;  /* read GET events page by page instead of ?events=0 */
static int newest; /* ?events=1000000 (the newest million) instead of ?events=0 */

/* The next_after_seq of a page read into buf, or -1 at the last page. */
static long long next_after(const char *buf, size_t len)
{
	const char key[] = "\"next_after_seq\":";
	const char *p = memmem(buf, len, key, sizeof(key) - 1);
	return p && p[sizeof(key) - 1] != 'n' ? atoll(p + sizeof(key) - 1) : -1;
}

static void *read_all(void *arg)
{
	reader *r = arg;
	char path[256];
	long long after = 0;

	if (!paged) {
		r->status = request("127.0.0.1", "GET",
				    newest ? SESSION "?events=1000000" : SESSION "?events=0", NULL, 0,
				    NORMAL_WAIT_MS, &r->bytes);
		return NULL;
	}
	/* Pages read whole into memory: the bench's own side of the copy. */
	while (after >= 0) {
		char head[512], *buf = NULL;
		size_t len = 0, cap = 0;
		int fd = connect_from("127.0.0.1", 0), n;
		ssize_t got;
		snprintf(path, sizeof(path), SESSION "/events?after_seq=%lld&limit=1000", after);
		n = snprintf(head, sizeof(head), "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", path);
		send_all(fd, head, (size_t)n);
		do {
			if (cap - len < 65536) {
				cap = cap ? cap * 2 : 1 << 20;
				buf = realloc(buf, cap);
			}
			got = recv(fd, buf + len, cap - len, 0);
			if (got > 0)
				len += (size_t)got;
		} while (got > 0);
		close(fd);
		if (len > 12)
			sscanf(buf, "HTTP/1.%*d %d", &r->status);
		r->bytes += len;
		after = r->status == 200 ? next_after(buf, len) : -1;
		free(buf);
	}
	return NULL;
}

static void readers(int mib, int n)
{
	reader r[MAX_READERS];
	long before;
	int64_t t0;

	if (n > MAX_READERS)
		n = MAX_READERS;
	fill(mib);
	before = vm_hwm_kib();
	t0 = now_ms();
	for (int i = 0; i < n; i++)
		pthread_create(&r[i].t, NULL, read_all, &r[i]);
	for (int i = 0; i < n; i++)
		pthread_join(r[i].t, NULL);
	printf("readers%s%s: %d MiB session, %d readers: status %d, %zu bytes each, %" PRId64
	       " ms; memd VmHWM %ld MiB after the appends, %ld MiB after the reads\n",
	       paged ? " (paged)" : "", newest ? " (newest)" : "", mib, n, r[0].status, r[0].bytes, now_ms() - t0, before / 1024, vm_hwm_kib() / 1024);
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: slowclient_bench MEMD slowloris N | MEMD readers MIB R [paged|newest]\n");
		return 2;
	}
	start(argv[1]);
	if (strcmp(argv[2], "slowloris") == 0)
		slowloris(atoi(argv[3]));
	else if (strcmp(argv[2], "readers") == 0 && argc >= 5) {
		paged = argc >= 6 && strcmp(argv[5], "paged") == 0;
		newest = argc >= 6 && strcmp(argv[5], "newest") == 0;
		readers(atoi(argv[3]), atoi(argv[4]));
	}
	stop();
	return 0;
}
