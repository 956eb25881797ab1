#ifndef HG_CCURL_SHIM_H
#define HG_CCURL_SHIM_H
#include <curl/curl.h>

/* curl_easy_setopt and curl_easy_getinfo are variadic, so Swift cannot call them: one typed
   wrapper per argument kind. */
static inline CURLcode hg_curl_setopt_long(CURL *h, CURLoption o, long v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode hg_curl_setopt_str(CURL *h, CURLoption o, const char *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode hg_curl_setopt_ptr(CURL *h, CURLoption o, void *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode hg_curl_setopt_off(CURL *h, CURLoption o, curl_off_t v) { return curl_easy_setopt(h, o, v); }

typedef size_t (*hg_curl_data_cb)(char *, size_t, size_t, void *);
static inline CURLcode hg_curl_setopt_writefn(CURL *h, hg_curl_data_cb cb, void *ud) {
    CURLcode rc = curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, cb);
    return rc != CURLE_OK ? rc : curl_easy_setopt(h, CURLOPT_WRITEDATA, ud);
}
static inline CURLcode hg_curl_setopt_headerfn(CURL *h, hg_curl_data_cb cb, void *ud) {
    CURLcode rc = curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, cb);
    return rc != CURLE_OK ? rc : curl_easy_setopt(h, CURLOPT_HEADERDATA, ud);
}
static inline CURLcode hg_curl_getinfo_long(CURL *h, CURLINFO i, long *out) { return curl_easy_getinfo(h, i, out); }
#endif
