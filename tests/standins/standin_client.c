/* SPDX-License-Identifier: MIT */
#include "standin_client.h"

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define SC_TIMEOUT_MS 20000L
#define SC_HTTP_OK 200

typedef struct sc_buf {
	char *data;
	size_t len;
} sc_buf;

const char *sc_env(const char *name)
{
	const char *v = getenv(name);

	cr_assert(v && v[0], "%s is not set: run this test under tests/standins/with_standins.py",
		  name);
	return v;
}

static size_t sc_write(char *ptr, size_t size, size_t nmemb, void *userdata)
{
	sc_buf *b = userdata;
	size_t n = size * nmemb;
	char *d = realloc(b->data, b->len + n + 1);

	cr_assert_not_null(d);
	memcpy(d + b->len, ptr, n);
	b->data = d;
	b->len += n;
	d[b->len] = '\0';
	return n;
}

json_t *sc_request(const char *method, const char *url, const char *body, const char *header,
		   long *ret_status)
{
	CURL *e = curl_easy_init();
	struct curl_slist *h = NULL;
	sc_buf b = { 0 };
	json_error_t jerr;
	json_t *j;
	CURLcode c;

	cr_assert_not_null(e);
	h = curl_slist_append(h, "Content-Type: application/json");
	if (header)
		h = curl_slist_append(h, header);
	curl_easy_setopt(e, CURLOPT_URL, url);
	curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, SC_TIMEOUT_MS);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, sc_write);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, &b);
	if (body)
		curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
	c = curl_easy_perform(e);
	cr_assert_eq(c, CURLE_OK, "%s %s: %s", method, url, curl_easy_strerror(c));
	curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, ret_status);
	curl_slist_free_all(h);
	curl_easy_cleanup(e);
	if (!b.data)
		return json_null();
	j = json_loads(b.data, JSON_DECODE_ANY, &jerr);
	cr_assert_not_null(j, "%s %s: answer is not JSON: %.200s", method, url, b.data);
	free(b.data);
	return j;
}

json_t *sc_get(const char *url)
{
	long status = 0;
	json_t *j = sc_request("GET", url, NULL, NULL, &status);

	cr_assert_eq(status, SC_HTTP_OK, "GET %s: HTTP %ld", url, status);
	return j;
}

json_t *sc_post(const char *url, const char *body)
{
	long status = 0;
	json_t *j = sc_request("POST", url, body, NULL, &status);

	cr_assert_eq(status, SC_HTTP_OK, "POST %s: HTTP %ld", url, status);
	return j;
}

int sc_closed_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t al = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	cr_assert(fd >= 0);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	cr_assert_eq(getsockname(fd, (struct sockaddr *)&a, &al), 0);
	close(fd);
	return ntohs(a.sin_port);
}
