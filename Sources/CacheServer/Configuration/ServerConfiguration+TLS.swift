import CachedTLS

extension ServerConfiguration {
    /// The server's TLS settings, from the `tls-*` directives.
    package var tlsServerSettings: TLSConfiguration {
        var settings = TLSConfiguration(role: .server)
        settings.certificateFile = tlsCertFile
        settings.keyFile = tlsKeyFile
        settings.keyFilePassword = tlsKeyFilePass
        settings.caCertificateFile = tlsCaCertFile
        settings.caCertificateDirectory = tlsCaCertDir
        settings.protocols = tlsProtocols
        settings.ciphers = tlsCiphers
        settings.cipherSuites = tlsCiphersuites
        settings.preferServerCiphers = tlsPreferServerCiphers
        settings.sessionCaching = tlsSessionCaching
        settings.sessionCacheSize = tlsSessionCacheSize
        settings.sessionCacheTimeout = tlsSessionCacheTimeout
        settings.dhParamsFile = tlsDhParamsFile
        settings.peerVerification = tlsAuthClients
        return settings
    }

    /// Loads the TLS settings: the server's context, and the client certificate when one is configured (checked
    /// as Redis checks it, though this server makes no TLS connections of its own).
    /// - Throws: ``TLSError`` with the reason Redis logs.
    package func makeTLSContext() throws(TLSError) -> TLSContext {
        let context = try TLSContext(tlsServerSettings)
        if !tlsClientCertFile.isEmpty || !tlsClientKeyFile.isEmpty {
            var client = TLSConfiguration(role: .client)
            client.certificateFile = tlsClientCertFile
            client.keyFile = tlsClientKeyFile
            client.keyFilePassword = tlsClientKeyFilePass
            client.protocols = tlsProtocols
            client.peerVerification = .no
            _ = try TLSContext(client)
        }
        return context
    }
}
