import CachedNetworking
/// Work a ``RESPConnectionPool`` connection does on its own thread besides carrying calls: a setup after it
/// connects and again whenever the hook's ``setupGeneration`` changes, and a notice when a connection that was
/// set up is lost. The near cache uses it to keep every data connection's `CLIENT TRACKING` pointed at the
/// current invalidation subscriber.
///
/// A connection compares its generation with ``setupGeneration`` after taking a batch of calls and before
/// writing it, so every call in a batch was made before the check: a caller that saw a generation knows that
/// its call goes out on a connection set up for that generation or a later one.
protocol RESPConnectionHook: AnyObject, Sendable {
    /// Changes whenever connections must run ``setUp(_:)`` again. Read by every connection before each batch:
    /// keep it cheap (an atomic load).
    var setupGeneration: UInt64 { get }

    /// Sets `connection` up; runs on the connection's thread and may block (round trips).
    /// - Returns: the generation the connection is now set up for (read before sending anything, so that a
    ///   change during the setup makes the connection set up again), or an error after which the connection is
    ///   discarded and the calls of its batch fail with it.
    func setUp(_ connection: HiredisConnection) -> Result<UInt64, CacheStoreError>

    /// How long a connection that was set up may stay idle before it sends `PING`, so that a connection the
    /// server closed (`CLIENT KILL`, its idle `timeout`) is discarded, and ``connectionClosed()`` called, within
    /// that time instead of at its next call; nil for no checks.
    var idleCheckInterval: Duration? { get }

    /// A connection that had been set up was discarded (an I/O error, a timeout, a failed setup or idle check).
    func connectionClosed()
}
