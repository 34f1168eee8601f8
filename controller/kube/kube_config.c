/* kube_config.c — kubeconfig (common/yamljson -> cJSON tree) and in-cluster config. */
#include "kube.h"
#include "kube_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "yamljson.h"

#define KUBECONFIG_MAX (4u << 20)

void kube_config_init(struct kube_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
}

void kube_config_release(struct kube_config *cfg)
{
    if (!cfg)
        return;
    free(cfg->server);
    free(cfg->ca_file);
    free(cfg->ca_data);
    free(cfg->cert_file);
    free(cfg->cert_data);
    free(cfg->key_file);
    free(cfg->key_data);
    free(cfg->token);
    free(cfg->token_file);
    free(cfg->namespace_);
    free(cfg->context);
    memset(cfg, 0, sizeof *cfg);
}

/* ---- base64 ---- */

static int b64val(int c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+' || c == '-')
        return 62;
    if (c == '/' || c == '_')
        return 63;
    return -1;
}

int kube_base64_decode(const char *in, char **out, size_t *outlen)
{
    size_t n = strlen(in), o = 0;
    unsigned acc = 0;
    int bits = 0;
    char *p = malloc(n / 4 * 3 + 4);
    if (!p)
        return GQ_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        int c = (unsigned char)in[i], v;
        if (c == '=' || c == '\n' || c == '\r' || c == ' ' || c == '\t')
            continue;
        v = b64val(c);
        if (v < 0) {
            free(p);
            return GQ_EINVAL;
        }
        acc = (acc << 6) | (unsigned)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            p[o++] = (char)((acc >> bits) & 0xff);
        }
    }
    p[o] = '\0';
    *out = p;
    *outlen = o;
    return GQ_OK;
}

/* ---- file helpers ---- */

static char *dupstr(const char *s)
{
    return s ? strdup(s) : NULL;
}

/* Trim trailing whitespace/newlines in place (token and namespace files). */
static void rtrim(char *s)
{
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == ' ' || s[n - 1] == '\t'))
        s[--n] = '\0';
}

/* Resolve p against base_dir (when relative); caller frees. */
static char *resolve_path(const char *base_dir, const char *p)
{
    struct gq_buf b;
    if (p[0] == '/' || !base_dir || !*base_dir)
        return strdup(p);
    gq_buf_init(&b, 8192);
    if (gq_buf_printf(&b, "%s/%s", base_dir, p) != 0) {
        gq_buf_release(&b);
        return NULL;
    }
    return gq_buf_detach(&b);
}

static const cJSON *find_named(const cJSON *list, const char *name, const char *inner)
{
    const cJSON *it;
    cJSON_ArrayForEach(it, list) {
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(it, "name");
        if (cJSON_IsString(n) && strcmp(n->valuestring, name) == 0)
            return cJSON_GetObjectItemCaseSensitive(it, inner);
    }
    return NULL;
}

static const char *get_str(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) && v->valuestring[0] ? v->valuestring : NULL;
}

/* A file reference or inline base64 data; at most one is set. */
static int load_pair(const cJSON *o, const char *file_key, const char *data_key,
                     const char *origin, const char *base_dir, char **file_out, char **data_out,
                     size_t *data_len, char *err, size_t errlen)
{
    const char *f = get_str(o, file_key), *d = get_str(o, data_key);
    if (d) {
        if (kube_base64_decode(d, data_out, data_len) != 0) {
            gq_errf(err, errlen, "%s: field %s is not valid base64", origin, data_key);
            return GQ_EINVAL;
        }
        return GQ_OK;
    }
    if (f) {
        *file_out = resolve_path(base_dir, f);
        return *file_out ? GQ_OK : GQ_ENOMEM;
    }
    return GQ_OK;
}

int kube_config_parse_kubeconfig(struct kube_config *cfg, const char *yaml, size_t len,
                                 const char *origin, const char *base_dir, const char *context,
                                 char *err, size_t errlen)
{
    cJSON *root = NULL;
    const cJSON *ctx, *cluster, *user;
    const char *ctxname, *cname, *uname, *s;
    int rc;
    kube_config_init(cfg);
    rc = gq_yaml_parse_doc(yaml, len, origin, &root, err, errlen);
    if (rc)
        goto out;
    if (!cJSON_IsObject(root)) {
        gq_errf(err, errlen, "%s: not a kubeconfig (top level is not a mapping)", origin);
        rc = GQ_EINVAL;
        goto out;
    }
    ctxname = context ? context : get_str(root, "current-context");
    if (!ctxname) {
        gq_errf(err, errlen, "%s: missing field current-context (and no context given)", origin);
        rc = GQ_EINVAL;
        goto out;
    }
    ctx = find_named(cJSON_GetObjectItemCaseSensitive(root, "contexts"), ctxname, "context");
    if (!cJSON_IsObject(ctx)) {
        gq_errf(err, errlen, "%s: contexts has no entry named \"%s\"", origin, ctxname);
        rc = GQ_EINVAL;
        goto out;
    }
    cname = get_str(ctx, "cluster");
    if (!cname) {
        gq_errf(err, errlen, "%s: missing field contexts[%s].context.cluster", origin, ctxname);
        rc = GQ_EINVAL;
        goto out;
    }
    cluster = find_named(cJSON_GetObjectItemCaseSensitive(root, "clusters"), cname, "cluster");
    if (!cJSON_IsObject(cluster)) {
        gq_errf(err, errlen, "%s: clusters has no entry named \"%s\"", origin, cname);
        rc = GQ_EINVAL;
        goto out;
    }
    s = get_str(cluster, "server");
    if (!s) {
        gq_errf(err, errlen, "%s: missing field clusters[%s].cluster.server", origin, cname);
        rc = GQ_EINVAL;
        goto out;
    }
    cfg->server = strdup(s);
    cfg->context = strdup(ctxname);
    cfg->namespace_ = strdup(get_str(ctx, "namespace") ? get_str(ctx, "namespace") : "default");
    if (!cfg->server || !cfg->context || !cfg->namespace_) {
        rc = GQ_ENOMEM;
        goto out;
    }
    {
        size_t n = strlen(cfg->server);
        while (n > 0 && cfg->server[n - 1] == '/')
            cfg->server[--n] = '\0';
    }
    {
        const cJSON *ins = cJSON_GetObjectItemCaseSensitive(cluster, "insecure-skip-tls-verify");
        cfg->insecure = cJSON_IsTrue(ins) ||
                        (cJSON_IsString(ins) && strcmp(ins->valuestring, "true") == 0);
    }
    rc = load_pair(cluster, "certificate-authority", "certificate-authority-data", origin,
                   base_dir, &cfg->ca_file, &cfg->ca_data, &cfg->ca_data_len, err, errlen);
    if (rc)
        goto out;
    if (!cfg->ca_file && !cfg->ca_data && !cfg->insecure && strncmp(cfg->server, "https:", 6) == 0) {
        gq_errf(err, errlen,
                "%s: missing field clusters[%s].cluster.certificate-authority(-data) for an "
                "https server",
                origin, cname);
        rc = GQ_EINVAL;
        goto out;
    }
    uname = get_str(ctx, "user");
    if (uname) {
        user = find_named(cJSON_GetObjectItemCaseSensitive(root, "users"), uname, "user");
        if (!cJSON_IsObject(user)) {
            gq_errf(err, errlen, "%s: users has no entry named \"%s\"", origin, uname);
            rc = GQ_EINVAL;
            goto out;
        }
        rc = load_pair(user, "client-certificate", "client-certificate-data", origin, base_dir,
                       &cfg->cert_file, &cfg->cert_data, &cfg->cert_data_len, err, errlen);
        if (rc)
            goto out;
        rc = load_pair(user, "client-key", "client-key-data", origin, base_dir, &cfg->key_file,
                       &cfg->key_data, &cfg->key_data_len, err, errlen);
        if (rc)
            goto out;
        if ((cfg->cert_file || cfg->cert_data) != (cfg->key_file || cfg->key_data)) {
            gq_errf(err, errlen, "%s: users[%s].user has a client %s but no client %s", origin,
                    uname, (cfg->cert_file || cfg->cert_data) ? "certificate" : "key",
                    (cfg->cert_file || cfg->cert_data) ? "key (client-key or client-key-data)"
                                                       : "certificate");
            rc = GQ_EINVAL;
            goto out;
        }
        if (!get_str(user, "token") && !get_str(user, "tokenFile") && !cfg->cert_file &&
            !cfg->cert_data) {
            const char *plugin = cJSON_GetObjectItemCaseSensitive(user, "exec") ? "exec"
                                 : cJSON_GetObjectItemCaseSensitive(user, "auth-provider")
                                     ? "auth-provider"
                                     : NULL;
            if (plugin) {
                gq_errf(err, errlen,
                        "%s: users[%s].user.%s credential plugins are not supported; use a "
                        "token, tokenFile or client certificate",
                        origin, uname, plugin);
                rc = GQ_EINVAL;
                goto out;
            }
        }
        if ((s = get_str(user, "token")) != NULL) {
            if (!(cfg->token = strdup(s))) {
                rc = GQ_ENOMEM;
                goto out;
            }
        } else if ((s = get_str(user, "tokenFile")) != NULL) {
            char *text = NULL;
            size_t tlen = 0;
            if (!(cfg->token_file = resolve_path(base_dir, s))) {
                rc = GQ_ENOMEM;
                goto out;
            }
            rc = gq_read_file(cfg->token_file, 64 * 1024, &text, &tlen, err, errlen);
            if (rc)
                goto out;
            rtrim(text);
            cfg->token = text;
        }
    }
out:
    cJSON_Delete(root);
    if (rc)
        kube_config_release(cfg);
    return rc;
}

int kube_config_load_kubeconfig(struct kube_config *cfg, const char *path, const char *context,
                                char *err, size_t errlen)
{
    char *text = NULL, *dir = NULL, *slash;
    size_t len = 0;
    int rc;
    kube_config_init(cfg);
    rc = gq_read_file(path, KUBECONFIG_MAX, &text, &len, err, errlen);
    if (rc)
        return rc;
    dir = strdup(path);
    if (!dir) {
        free(text);
        return GQ_ENOMEM;
    }
    slash = strrchr(dir, '/');
    if (slash)
        *slash = '\0';
    else
        dir[0] = '\0';
    rc = kube_config_parse_kubeconfig(cfg, text, len, path, slash ? (dir[0] ? dir : "/") : NULL,
                                      context, err, errlen);
    free(dir);
    free(text);
    return rc;
}

#define SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount/"

int kube_config_load_incluster(struct kube_config *cfg, const struct kube_incluster_paths *p,
                               char *err, size_t errlen)
{
    struct kube_incluster_paths d = {0};
    const char *host, *port;
    char *ns = NULL;
    size_t flen = 0;
    struct gq_buf b;
    int rc = GQ_OK;
    if (p)
        d = *p;
    kube_config_init(cfg);
    gq_buf_init(&b, 1024);
    host = d.host ? d.host : getenv("KUBERNETES_SERVICE_HOST");
    port = d.port ? d.port : getenv("KUBERNETES_SERVICE_PORT");
    if (!host || !*host || !port || !*port) {
        gq_errf(err, errlen,
                "in-cluster config: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be "
                "set (not running in a pod?)");
        rc = GQ_ENOTFOUND;
        goto out;
    }
    /* IPv6 literals need brackets. */
    rc = strchr(host, ':') ? gq_buf_printf(&b, "https://[%s]:%s", host, port)
                           : gq_buf_printf(&b, "https://%s:%s", host, port);
    if (rc)
        goto out;
    cfg->server = gq_buf_detach(&b);
    cfg->token_file = dupstr(d.token_file ? d.token_file : SA_DIR "token");
    cfg->ca_file = dupstr(d.ca_file ? d.ca_file : SA_DIR "ca.crt");
    cfg->context = dupstr("in-cluster");
    if (!cfg->server || !cfg->token_file || !cfg->ca_file || !cfg->context) {
        rc = GQ_ENOMEM;
        goto out;
    }
    rc = gq_read_file(cfg->token_file, 64 * 1024, &cfg->token, &flen, err, errlen);
    if (rc)
        goto out;
    rtrim(cfg->token);
    {
        FILE *f = fopen(cfg->ca_file, "rb");
        if (!f) {
            gq_errf(err, errlen, "in-cluster config: CA file %s: %s", cfg->ca_file,
                    strerror(errno));
            rc = GQ_ENOTFOUND;
            goto out;
        }
        fclose(f);
    }
    if (gq_read_file(d.namespace_file ? d.namespace_file : SA_DIR "namespace", 1024, &ns, &flen,
                       NULL, 0) == GQ_OK) {
        rtrim(ns);
        cfg->namespace_ = ns;
    } else {
        cfg->namespace_ = strdup("default");
        if (!cfg->namespace_)
            rc = GQ_ENOMEM;
    }
out:
    gq_buf_release(&b);
    if (rc)
        kube_config_release(cfg);
    return rc;
}
