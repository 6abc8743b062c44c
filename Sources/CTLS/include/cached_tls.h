#ifndef CACHED_TLS_H
#define CACHED_TLS_H

// OpenSSL (Debian: libssl-dev), for TLS on the server's connections and the SDK's. The functions here wrap what
// OpenSSL offers as macros, which Swift cannot call, and hold the few steps that are clearer in C.

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <stddef.h>

/// Protocol versions, as bits for `cached_tls_ctx_set_protocols`.
enum {
    CACHED_TLS_V1 = 1 << 0,
    CACHED_TLS_V1_1 = 1 << 1,
    CACHED_TLS_V1_2 = 1 << 2,
    CACHED_TLS_V1_3 = 1 << 3,
};

/// A new context for a server (`server` 1) or a client, with the options Redis sets on its own: no SSLv2/3,
/// no compression, no client-initiated renegotiation, partial writes and moving write buffers allowed. NULL on
/// failure.
SSL_CTX *cached_tls_ctx_new(int server);

/// Allows exactly the protocol versions in `versions` (CACHED_TLS_* bits). 0 on success.
int cached_tls_ctx_set_protocols(SSL_CTX *ctx, int versions);

/// Prefers the server's cipher order (tls-prefer-server-ciphers).
void cached_tls_ctx_prefer_server_ciphers(SSL_CTX *ctx, int prefer);

/// Server session caching: off, or on with `size` sessions kept for `timeout` seconds.
void cached_tls_ctx_set_session_cache(SSL_CTX *ctx, int enabled, long size, long timeout);

/// Loads the certificate chain and private key (PEM files), the key decrypted with `password` when not NULL,
/// and checks that they match. 0 on success, else -1 with the reason in OpenSSL's error queue.
int cached_tls_ctx_use_certificate(SSL_CTX *ctx, const char *certificate, const char *key, const char *password);

/// Loads Diffie-Hellman parameters from a PEM file; with NULL, lets OpenSSL choose them. 0 on success.
int cached_tls_ctx_set_dh_params(SSL_CTX *ctx, const char *path);

/// Which peers are accepted: 0 none asked for a certificate; 1 a certificate is required; 2 one is checked if
/// given (tls-auth-clients optional). For a client context, 1 verifies the server's certificate.
void cached_tls_ctx_set_verify(SSL_CTX *ctx, int mode);

/// A new connection on `ctx` with memory buffers for its encrypted bytes in both directions, in the server
/// (`server` 1) or the client role. NULL on failure.
SSL *cached_tls_new(SSL_CTX *ctx, int server);

/// Sets the server name a client sends (SNI) and, when `verify` is 1, the name (or IP address) the server's
/// certificate must be for. 0 on success.
int cached_tls_set_server_name(SSL *ssl, const char *name, int verify);

/// Empties this thread's OpenSSL error queue, so that a stale error of another connection is not read as the
/// next call's; cheap when it is empty.
void cached_tls_clear_errors(void);

/// Hands `length` encrypted bytes received from the peer to the connection. Returns the bytes taken.
int cached_tls_feed(SSL *ssl, const void *bytes, int length);

/// Encrypted bytes received and not yet taken by OpenSSL.
size_t cached_tls_pending_input(SSL *ssl);

/// Encrypted bytes waiting to be sent to the peer.
size_t cached_tls_pending_output(SSL *ssl);

/// Takes up to `capacity` encrypted bytes to send. Returns the count taken (0 if none).
int cached_tls_take_output(SSL *ssl, void *buffer, int capacity);

/// The first error in OpenSSL's queue as text (up to `capacity` bytes, NUL-terminated), and clears the queue.
/// Returns the length, 0 when the queue was empty.
int cached_tls_error_text(char *buffer, size_t capacity);

/// The reason the peer's certificate was refused, if it was (an empty string otherwise).
const char *cached_tls_verify_error(SSL *ssl);

#endif
