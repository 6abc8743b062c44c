#include "cached_tls.h"

#include <string.h>

SSL_CTX *cached_tls_ctx_new(int server) {
    SSL_CTX *ctx = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method());
    if (!ctx) return NULL;
    SSL_CTX_set_options(ctx, SSL_OP_NO_SSLv2 | SSL_OP_NO_SSLv3 | SSL_OP_NO_COMPRESSION);
#ifdef SSL_OP_NO_CLIENT_RENEGOTIATION
    SSL_CTX_set_options(ctx, SSL_OP_NO_CLIENT_RENEGOTIATION);
#endif
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    if (server) {
        static const unsigned char context[] = "cached";
        SSL_CTX_set_session_id_context(ctx, context, sizeof context - 1);
    }
    return ctx;
}

int cached_tls_ctx_set_protocols(SSL_CTX *ctx, int versions) {
    if (versions == 0) return -1;
    SSL_CTX_clear_options(ctx, SSL_OP_NO_TLSv1 | SSL_OP_NO_TLSv1_1 | SSL_OP_NO_TLSv1_2 | SSL_OP_NO_TLSv1_3);
    long off = 0;
    if (!(versions & CACHED_TLS_V1)) off |= SSL_OP_NO_TLSv1;
    if (!(versions & CACHED_TLS_V1_1)) off |= SSL_OP_NO_TLSv1_1;
    if (!(versions & CACHED_TLS_V1_2)) off |= SSL_OP_NO_TLSv1_2;
    if (!(versions & CACHED_TLS_V1_3)) off |= SSL_OP_NO_TLSv1_3;
    SSL_CTX_set_options(ctx, off);
    // OpenSSL's default floor (TLS 1.2 at its default security level on Debian) would hide the older versions.
    int lowest = (versions & CACHED_TLS_V1) ? TLS1_VERSION
        : (versions & CACHED_TLS_V1_1) ? TLS1_1_VERSION
        : (versions & CACHED_TLS_V1_2) ? TLS1_2_VERSION : TLS1_3_VERSION;
    if (!SSL_CTX_set_min_proto_version(ctx, lowest)) return -1;
    return SSL_CTX_set_max_proto_version(ctx, 0) ? 0 : -1;
}

void cached_tls_ctx_prefer_server_ciphers(SSL_CTX *ctx, int prefer) {
    if (prefer) SSL_CTX_set_options(ctx, SSL_OP_CIPHER_SERVER_PREFERENCE);
    else SSL_CTX_clear_options(ctx, SSL_OP_CIPHER_SERVER_PREFERENCE);
}

void cached_tls_ctx_set_session_cache(SSL_CTX *ctx, int enabled, long size, long timeout) {
    if (enabled) {
        SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_SERVER);
        SSL_CTX_sess_set_cache_size(ctx, size);
        SSL_CTX_set_timeout(ctx, timeout);
    } else {
        SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
        // TLS 1.3 resumes through tickets rather than the cache: none are issued either.
        SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
        SSL_CTX_set_num_tickets(ctx, 0);
    }
}

static int password_callback(char *buffer, int size, int rwflag, void *userdata) {
    (void)rwflag;
    const char *password = userdata;
    if (!password) return -1;
    size_t length = strlen(password);
    if ((int)length > size) return -1;
    memcpy(buffer, password, length);
    return (int)length;
}

int cached_tls_ctx_use_certificate(SSL_CTX *ctx, const char *certificate, const char *key, const char *password) {
    SSL_CTX_set_default_passwd_cb(ctx, password_callback);
    SSL_CTX_set_default_passwd_cb_userdata(ctx, (void *)password);
    int ok = SSL_CTX_use_certificate_chain_file(ctx, certificate) == 1
        && SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) == 1
        && SSL_CTX_check_private_key(ctx) == 1;
    // The password is not kept past this call.
    SSL_CTX_set_default_passwd_cb_userdata(ctx, NULL);
    return ok ? 0 : -1;
}

int cached_tls_ctx_set_dh_params(SSL_CTX *ctx, const char *path) {
    if (!path) return SSL_CTX_set_dh_auto(ctx, 1) == 1 ? 0 : -1;
    BIO *file = BIO_new_file(path, "r");
    if (!file) return -1;
    EVP_PKEY *parameters = PEM_read_bio_Parameters(file, NULL);
    BIO_free(file);
    if (!parameters) return -1;
    if (SSL_CTX_set0_tmp_dh_pkey(ctx, parameters) != 1) {
        EVP_PKEY_free(parameters);
        return -1;
    }
    return 0;
}

void cached_tls_ctx_set_verify(SSL_CTX *ctx, int mode) {
    switch (mode) {
    case 1: SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL); break;
    case 2: SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL); break;
    default: SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL); break;
    }
}

SSL *cached_tls_new(SSL_CTX *ctx, int server) {
    SSL *ssl = SSL_new(ctx);
    if (!ssl) return NULL;
    BIO *in = BIO_new(BIO_s_mem());
    BIO *out = BIO_new(BIO_s_mem());
    if (!in || !out) {
        BIO_free(in);
        BIO_free(out);
        SSL_free(ssl);
        return NULL;
    }
    // An empty memory buffer reads as "try again", not as the end of the stream.
    BIO_set_mem_eof_return(in, -1);
    BIO_set_mem_eof_return(out, -1);
    SSL_set_bio(ssl, in, out);
    if (server) SSL_set_accept_state(ssl);
    else SSL_set_connect_state(ssl);
    return ssl;
}

int cached_tls_set_server_name(SSL *ssl, const char *name, int verify) {
    // SNI carries host names only, never an IP address (RFC 6066).
    ASN1_OCTET_STRING *address = a2i_IPADDRESS(name);
    if (address) {
        ASN1_OCTET_STRING_free(address);
        if (verify && X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), name) != 1) return -1;
        return 0;
    }
    if (SSL_set_tlsext_host_name(ssl, name) != 1) return -1;
    if (verify && SSL_set1_host(ssl, name) != 1) return -1;
    return 0;
}

void cached_tls_clear_errors(void) {
    // ERR_clear_error walks and frees every slot of the thread's queue; looking first is much cheaper, and the
    // queue is almost always empty.
    if (ERR_peek_error() != 0) ERR_clear_error();
}

int cached_tls_feed(SSL *ssl, const void *bytes, int length) {
    int written = BIO_write(SSL_get_rbio(ssl), bytes, length);
    return written < 0 ? 0 : written;
}

size_t cached_tls_pending_input(SSL *ssl) {
    return BIO_ctrl_pending(SSL_get_rbio(ssl));
}

size_t cached_tls_pending_output(SSL *ssl) {
    return BIO_ctrl_pending(SSL_get_wbio(ssl));
}

int cached_tls_take_output(SSL *ssl, void *buffer, int capacity) {
    int taken = BIO_read(SSL_get_wbio(ssl), buffer, capacity);
    return taken < 0 ? 0 : taken;
}

int cached_tls_error_text(char *buffer, size_t capacity) {
    unsigned long code = ERR_get_error();
    ERR_clear_error();
    if (code == 0 || capacity == 0) {
        if (capacity > 0) buffer[0] = 0;
        return 0;
    }
    ERR_error_string_n(code, buffer, capacity);
    return (int)strlen(buffer);
}

const char *cached_tls_verify_error(SSL *ssl) {
    long result = SSL_get_verify_result(ssl);
    return result == X509_V_OK ? "" : X509_verify_cert_error_string(result);
}
